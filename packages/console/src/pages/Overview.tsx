import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, Scroll, type PageProps } from '../widgets';
import { barDataset, ChartView, SERIES_COLORS } from '../charts';
import { useLocations } from '../filters';
import type { MessageKey } from '../i18n';

interface Funnel {
  requests: number;
  sent: number;
  /** null: not reported (a channel without delivery receipts sent in the range). */
  delivered: number | null;
  opened: number;
  rated: number;
  publicLinksShown: number;
  publicLinkClicked: number;
}
interface ChannelCounts {
  channel: string;
  sent: number;
  delivered: number | null;
  receipts: boolean;
  opened: number;
  rated: number;
  clicked: number;
}
interface Overview {
  from: string;
  to: string;
  total: Funnel;
  byLocation: Array<{ locationId: string; counts: Funnel }>;
  byChannel: ChannelCounts[];
  kpis: { requests: number; responseRate: number | null; averageRating: number | null; openItems: number; overdueItems: number };
  ratings: { counts: number[]; average: number | null; byDay: Array<{ day: string; ratings: number; average: number }> };
}

const STAGES: Array<[keyof Funnel, MessageKey]> = [
  ['requests', 'stageRequests'],
  ['sent', 'stageSent'],
  ['delivered', 'stageDelivered'],
  ['opened', 'stageOpened'],
  ['rated', 'stageRated'],
  ['publicLinksShown', 'stageShown'],
  ['publicLinkClicked', 'stageClicked'],
];
const CHANNEL_STAGES: Array<[Exclude<keyof ChannelCounts, 'channel' | 'receipts'>, MessageKey]> = [
  ['sent', 'stageSent'],
  ['delivered', 'stageDelivered'],
  ['opened', 'stageOpened'],
  ['rated', 'stageRated'],
  ['clicked', 'stageClicked'],
];

/** The funnel, by location and channel, and the ratings over a date range: Chart.js charts, each with its table of numbers. */
export function OverviewPage({ t, session }: PageProps) {
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [data, setData] = useState<Overview | null>(null);
  const { nameOf } = useLocations();
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
  }, []);
  const pct = (n: number | null, of: number) => (n === null ? t('notReported') : of === 0 ? '—' : `${Math.round((n / of) * 100)}%`);
  const count = (n: number | null) => (n === null ? t('notReported') : n);
  // A stage nobody reported is left out of the chart: a funnel never rises again after a missing stage.
  const charted = data ? STAGES.filter(([key]) => data.total[key] !== null) : STAGES;
  const horizontal = { indexAxis: 'y' as const, plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } };

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
          <ul class="kpis" aria-label={t('keyFigures')} data-testid="kpis">
            <li>
              <span class="figure">{data.kpis.requests}</span> {t('kpiRequests')}
            </li>
            <li>
              <span class="figure">{data.kpis.responseRate === null ? '—' : `${Math.round(data.kpis.responseRate * 100)}%`}</span> {t('kpiResponseRate')}
            </li>
            <li>
              <span class="figure">{data.kpis.averageRating ?? '—'}</span> {t('kpiAverage')}
            </li>
            <li>
              <a href="#/ratings?status=open">
                <span class="figure">{data.kpis.openItems}</span> {t('kpiOpen')}
              </a>
            </li>
            <li class={data.kpis.overdueItems > 0 ? 'alert' : ''}>
              <a href="#/ratings?status=overdue">
                <span class="figure">{data.kpis.overdueItems}</span> {t('kpiOverdue')}
              </a>
            </li>
          </ul>
          <p class="hint">{t('kpiNote', { zone: session.organization.timeZone || 'UTC' })}</p>
          <h2>{t('funnel')}</h2>
          <ChartView
            label={`${t('funnel')}: ${t('chartNote')}`}
            config={{ type: 'bar', data: { labels: charted.map(([, label]) => t(label)), datasets: [barDataset(t('count'), charted.map(([key]) => data.total[key] ?? 0))] }, options: horizontal }}
          />
          {data.total.delivered === null && <p class="hint">{t('deliveredNotReported')}</p>}
          <Scroll label={t('funnel')}>
            <table data-testid="funnel">
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
                    <td>{count(data.total[key])}</td>
                    <td>{data.total[key] === null ? '—' : pct(data.total[key], data.total.requests)}</td>
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
                    <th scope="row">{nameOf(l.locationId)}</th>
                    {STAGES.map(([key]) => (
                      <td key={key}>{count(l.counts[key])}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('byChannel')}</h2>
          <p class="hint">{t('channelRule')}</p>
          {data.byChannel.length > 0 && (
            <ChartView
              label={`${t('byChannel')}: ${t('chartNote')}`}
              config={{
                type: 'bar',
                data: { labels: data.byChannel.map((c) => c.channel), datasets: CHANNEL_STAGES.map(([key, label], i) => barDataset(t(label), data.byChannel.map((c) => c[key]) as number[], SERIES_COLORS[i])) },
                options: { scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
              }}
            />
          )}
          <Scroll label={t('byChannel')}>
            <table data-testid="by-channel">
              <caption>{t('byChannel')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('channel')}</th>
                  {CHANNEL_STAGES.map(([key, label]) => (
                    <th key={key} scope="col">
                      {t(label)}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {data.byChannel.map((c) => (
                  <tr key={c.channel} data-channel={c.channel}>
                    <th scope="row">{c.channel}</th>
                    {CHANNEL_STAGES.map(([key]) => (
                      <td key={key} data-stage={key}>
                        {count(c[key])}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('ratings')}</h2>
          <p data-testid="rating-average">
            {t('average')}: {data.ratings.average ?? '—'}
          </p>
          <ChartView
            label={`${t('distribution')}: ${t('chartNote')}`}
            config={{ type: 'bar', data: { labels: ['1', '2', '3', '4', '5'], datasets: [barDataset(t('count'), data.ratings.counts)] }, options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } } }}
          />
          <Scroll label={t('distribution')}>
            <table>
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
                    <td>{n}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          {data.ratings.byDay.length > 0 && (
            <>
              <h2>{t('averageOverTime')}</h2>
              <ChartView
                label={`${t('averageOverTime')}: ${t('chartNote')}`}
                config={{
                  type: 'line',
                  data: { labels: data.ratings.byDay.map((d) => d.day), datasets: [{ label: t('average'), data: data.ratings.byDay.map((d) => d.average), borderColor: SERIES_COLORS[0], backgroundColor: SERIES_COLORS[0] }] },
                  options: { plugins: { legend: { display: false } }, scales: { y: { min: 1, max: 5 } } },
                }}
              />
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
            </>
          )}
        </>
      )}
    </section>
  );
}
