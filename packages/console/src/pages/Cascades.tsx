import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import type { PageProps } from '../App';
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
export function CascadesPage({ t }: PageProps) {
  const [externalId, setExternalId] = useState('');
  const [status, setStatus] = useState('');
  const [locationId, setLocationId] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [locations, setLocations] = useState<Array<{ id: string; name: string }>>([]);
  const paged = usePaged<CascadeRow>('/cascades', 'cascades');
  const search = () => paged.load({ externalId: externalId.trim(), status, locationId, from, to });
  useEffect(() => {
    void search();
    call<{ locations: Array<{ id: string; name: string }> }>('GET', '/locations').then((r) => setLocations(r.locations), () => setLocations([]));
  }, []);
  const locationName = (id: string) => locations.find((l) => l.id === id)?.name ?? id;

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
        <div>
          <label for="cascade-location">{t('location')}</label>
          <select id="cascade-location" value={locationId} onChange={(e) => setLocationId(e.currentTarget.value)}>
            <option value="">{t('anyLocation')}</option>
            {locations.map((l) => (
              <option key={l.id} value={l.id}>
                {l.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="cascades-from">{t('from')}</label>
          <input id="cascades-from" type="date" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
        </div>
        <div>
          <label for="cascades-to">{t('to')}</label>
          <input id="cascades-to" type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} />
        </div>
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
            <td>{new Date(c.createdAt).toLocaleString()}</td>
            <td>{c.externalId ?? '—'}</td>
            <td>{t(`status_${c.status}`)}</td>
            <td>{locationName(c.locationId)}</td>
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
