import { useEffect, useState } from 'preact/hooks';
import { formatDay, formatWhen } from '../time';
import type { PageProps } from '../widgets';
import { DayRangeFilter, LocationFilter, useLocations } from '../filters';
import { PagedTable, SearchForm, usePaged } from '../parts';
import { CASCADE_STATUSES } from '../rules';

interface CascadeRow {
  id: string;
  status: (typeof CASCADE_STATUSES)[number];
  externalId: string | null;
  name: string;
  recipients: number;
  skipped: number;
  locationId: string;
  createdAt: string;
}

/** Cascades, newest first: search by externalId, filter by status, location and the days they were made, one page at a time. */
export function CascadesPage({ t, session }: PageProps) {
  const [externalId, setExternalId] = useState('');
  const [status, setStatus] = useState('');
  const [locationId, setLocationId] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const paged = usePaged<CascadeRow>('/cascades', 'cascades');
  const search = () => paged.load({ externalId: externalId.trim(), status, locationId, from, to });
  useEffect(() => {
    void search();
  }, []);
  const { locations, nameOf } = useLocations();

  return (
    <section>
      <h1>{t('cascades')}</h1>
      <SearchForm t={t} onSearch={search}>
        <div>
          <label for="external-id">{t('searchExternalId')}</label>
          <input id="external-id" type="search" value={externalId} onInput={(e) => setExternalId(e.currentTarget.value)} />
        </div>
        <div>
          <label for="status">{t('filterStatus')}</label>
          <select id="status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            <option value="">{t('anyStatus')}</option>
            {CASCADE_STATUSES.map((s) => (
              <option key={s} value={s}>
                {t(`status_${s}`)}
              </option>
            ))}
          </select>
        </div>
        <LocationFilter t={t} id="cascade-location" locations={locations} value={locationId} onChange={setLocationId} />
        <DayRangeFilter t={t} id="cascades" from={from} to={to} onFrom={setFrom} onTo={setTo} />
      </SearchForm>
      <PagedTable
        t={t}
        paged={paged}
        caption="cascades"
        empty="noCascades"
        head={
          <>
            <th scope="col">{t('created')}</th>
            <th scope="col">{t('searchExternalId')}</th>
            <th scope="col">{t('status')}</th>
            <th scope="col">{t('location')}</th>
            <th scope="col">{t('recipients')}</th>
            <th scope="col">{t('skipped')}</th>
            <th scope="col">
              <span class="visually-hidden">{t('open')}</span>
            </th>
          </>
        }
        row={(c) => (
          <tr key={c.id} data-cascade-id={c.id}>
            <td>{formatWhen(session, c.createdAt)}</td>
            <td>{c.externalId ?? '—'}</td>
            <td>{t(`status_${c.status}`)}</td>
            <td>{nameOf(c.locationId)}</td>
            <td>{c.recipients}</td>
            <td>{c.skipped}</td>
            <td>
              <a href={`#/cascades/${encodeURIComponent(c.id)}`} aria-label={`${t('open')} ${c.externalId ?? c.id}`}>
                {t('open')}
              </a>
            </td>
          </tr>
        )}
      />
    </section>
  );
}
