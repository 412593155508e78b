import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, Scroll, type PageProps } from '../App';
import type { MessageKey } from '../i18n';

interface Funnel {
  requests: number;
  sent: number;
  delivered: number;
  opened: number;
  rated: number;
  publicLinksShown: number;
}
interface Overview {
  from: string;
  to: string;
  total: Funnel;
  byLocation: Array<{ locationId: string; counts: Funnel }>;
  byChannel: Array<{ channel: string; sent: number; delivered: number }>;
  ratings: { counts: number[]; average: number | null; byDay: Array<{ day: string; ratings: number; average: number }> };
}

const STAGES: Array<[keyof Funnel, MessageKey]> = [
  ['requests', 'stageRequests'],
  ['sent', 'stageSent'],
  ['delivered', 'stageDelivered'],
  ['opened', 'stageOpened'],
  ['rated', 'stageRated'],
  ['publicLinksShown', 'stageShown'],
];

/** A bar as wide as its share of the largest value; the number beside it is what a screen reader reads. */
function Bar({ value, of }: { value: number; of: number }) {
  const width = of === 0 ? 0 : Math.round((value / of) * 100);
  return (
    <div class="bar-cell">
      <span class="bar" style={{ width: `${width}%` }} aria-hidden="true" />
      <span>{value}</span>
    </div>
  );
}

/** The funnel and the ratings over a date range, as bar charts that are also tables. */
export function OverviewPage({ t }: PageProps) {
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [data, setData] = useState<Overview | null>(null);
  const [locations, setLocations] = useState<Array<{ id: string; name: string }>>([]);
  const [error, setError] = useState<unknown>(null);

  const load = async (range: { from?: string; to?: string } = {}) => {
    setError(null);
    try {
      const r = await call<Overview>('GET', '/overview', { query: range });
      setData(r);
      setFrom(r.from);
      setTo(r.to);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void load();
    call<{ locations: Array<{ id: string; name: string }> }>('GET', '/locations').then((r) => setLocations(r.locations), setError);
  }, []);
  const pct = (n: number, of: number) => (of === 0 ? '—' : `${Math.round((n / of) * 100)}%`);
  const maxRating = data ? Math.max(...data.ratings.counts, 0) : 0;

  return (
    <section>
      <h1>{t('overview')}</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          void load({ from, to });
        }}
      >
        <div>
          <label for="from">{t('from')}</label>
          <input id="from" type="date" required value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
        </div>
        <div>
          <label for="to">{t('to')}</label>
          <input id="to" type="date" required value={to} onInput={(e) => setTo(e.currentTarget.value)} />
        </div>
        <button type="submit">{t('show')}</button>
      </form>
      <ErrorNote error={error} t={t} />
      {data === null ? (
        <p role="status">{t('loading')}</p>
      ) : (
        <>
          <h2>{t('funnel')}</h2>
          <Scroll label={t('funnel')}>
            <table class="chart">
              <caption>
                {t('funnel')}, {data.from} — {data.to}
              </caption>
              <thead>
                <tr>
                  <th scope="col">{t('stage')}</th>
                  <th scope="col">{t('count')}</th>
                  <th scope="col">{t('ofRequests')}</th>
                </tr>
              </thead>
              <tbody>
                {STAGES.map(([key, label]) => (
                  <tr key={key} data-stage={key}>
                    <th scope="row">{t(label)}</th>
                    <td>
                      <Bar value={data.total[key]} of={data.total.requests} />
                    </td>
                    <td>{pct(data.total[key], data.total.requests)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('byLocation')}</h2>
          <Scroll label={t('byLocation')}>
            <table>
              <caption>{t('byLocation')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('location')}</th>
                  {STAGES.map(([key, label]) => (
                    <th key={key} scope="col">
                      {t(label)}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {data.byLocation.map((l) => (
                  <tr key={l.locationId}>
                    <th scope="row">{locations.find((x) => x.id === l.locationId)?.name ?? l.locationId}</th>
                    {STAGES.map(([key]) => (
                      <td key={key}>{l.counts[key]}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('byChannel')}</h2>
          <Scroll label={t('byChannel')}>
            <table>
              <caption>{t('byChannel')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('channel')}</th>
                  <th scope="col">{t('stageSent')}</th>
                  <th scope="col">{t('stageDelivered')}</th>
                </tr>
              </thead>
              <tbody>
                {data.byChannel.map((c) => (
                  <tr key={c.channel}>
                    <th scope="row">{c.channel}</th>
                    <td>{c.sent}</td>
                    <td>{c.delivered}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('ratings')}</h2>
          <p data-testid="rating-average">
            {t('average')}: {data.ratings.average ?? '—'}
          </p>
          <Scroll label={t('distribution')}>
            <table class="chart">
              <caption>{t('distribution')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('maxRating')}</th>
                  <th scope="col">{t('count')}</th>
                </tr>
              </thead>
              <tbody>
                {data.ratings.counts.map((n, i) => (
                  <tr key={i} data-rating={i + 1}>
                    <th scope="row">{i + 1}</th>
                    <td>
                      <Bar value={n} of={maxRating} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          {data.ratings.byDay.length > 0 && (
            <Scroll label={t('averageByDay')}>
              <table>
                <caption>{t('averageByDay')}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t('day')}</th>
                    <th scope="col">{t('count')}</th>
                    <th scope="col">{t('average')}</th>
                  </tr>
                </thead>
                <tbody>
                  {data.ratings.byDay.map((d) => (
                    <tr key={d.day}>
                      <th scope="row">{d.day}</th>
                      <td>{d.ratings}</td>
                      <td>{d.average}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </Scroll>
          )}
        </>
      )}
    </section>
  );
}
