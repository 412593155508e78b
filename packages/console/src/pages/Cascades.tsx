import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, type PageProps, Scroll } from '../App';
import { CASCADE_STATUSES } from '../rules';

interface CascadeRow {
  id: string;
  status: (typeof CASCADE_STATUSES)[number];
  externalId: string | null;
  name: string;
  recipients: number;
  skipped: number;
  createdAt: string;
}

/** Cascades, newest first: search by externalId, filter by status, one page at a time. */
export function CascadesPage({ t }: PageProps) {
  const [externalId, setExternalId] = useState('');
  const [status, setStatus] = useState('');
  const [rows, setRows] = useState<CascadeRow[] | null>(null);
  const [nextAfter, setNextAfter] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  const load = async (after?: string) => {
    setError(null);
    try {
      const r = await call<{ cascades: CascadeRow[]; nextAfter: string | null }>('GET', '/cascades', { query: { externalId: externalId.trim(), status, after } });
      setRows(after ? [...(rows ?? []), ...r.cascades] : r.cascades);
      setNextAfter(r.nextAfter);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void load();
  }, []);

  return (
    <section>
      <h1>{t('cascades')}</h1>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          void load();
        }}
      >
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
        <button type="submit">{t('search')}</button>
      </form>
      <ErrorNote error={error} t={t} />
      {rows === null ? (
        <p role="status">{t('loading')}</p>
      ) : rows.length === 0 ? (
        <p>{t('noCascades')}</p>
      ) : (
        <Scroll label={t('cascades')}>
<table>
          <caption>{t('cascades')}</caption>
          <thead>
            <tr>
              <th scope="col">{t('created')}</th>
              <th scope="col">{t('searchExternalId')}</th>
              <th scope="col">{t('status')}</th>
              <th scope="col">{t('recipients')}</th>
              <th scope="col">{t('skipped')}</th>
              <th scope="col">
                <span class="visually-hidden">{t('open')}</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((c) => (
              <tr key={c.id} data-cascade-id={c.id}>
                <td>{new Date(c.createdAt).toLocaleString()}</td>
                <td>{c.externalId ?? '—'}</td>
                <td>{t(`status_${c.status}`)}</td>
                <td>{c.recipients}</td>
                <td>{c.skipped}</td>
                <td>
                  <a href={`#/cascades/${encodeURIComponent(c.id)}`} aria-label={`${t('open')} ${c.externalId ?? c.id}`}>
                    {t('open')}
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
</Scroll>
      )}
      {nextAfter && (
        <button type="button" onClick={() => load(nextAfter)}>
          {t('more')}
        </button>
      )}
    </section>
  );
}
