import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, type PageProps, Scroll } from '../widgets';
import { useAction } from '../parts';
import { formatWhen } from '../time';

type CircuitState = 'closed' | 'open' | 'half_open';

interface ProviderHealth {
  name: string;
  state: CircuitState;
  since: string;
  lastFailureCode: string | null;
  lastFailureAt: string | null;
  replicas: number;
  replicasInState: number;
}

interface ChannelStatus {
  channel: string;
  label: string;
  configured: boolean;
  running: boolean;
  available: boolean;
  unavailableReason: string | null;
  sender: string | null;
  capabilities: string[];
  ready: boolean;
  providers: ProviderHealth[];
  /** False when no sender runs it, or its sender uses the sink: messages are recorded, not delivered. */
  delivers: boolean;
}

/** One channel's providers in failover order: the state in words (not colour alone), since when, the last fault. */
function ProvidersTable({ channel, t, session }: { channel: ChannelStatus } & PageProps) {
  const caption = t('providersOf', { channel: channel.label });
  return (
    <Scroll label={caption}>
      <table data-providers={channel.channel}>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">{t('providerOrder')}</th>
            <th scope="col">{t('provider')}</th>
            <th scope="col">{t('providerState')}</th>
            <th scope="col">{t('providerSince')}</th>
            <th scope="col">{t('providerLastFailure')}</th>
          </tr>
        </thead>
        <tbody>
          {channel.providers.map((p, index) => (
            <tr key={p.name} data-provider={p.name} data-state={p.state}>
              <td>{index + 1}</td>
              <th scope="row">
                <code>{p.name}</code>
              </th>
              <td>
                {p.name === 'sink' ? (
                  <strong class="not-delivered">{t('sinkState')}</strong>
                ) : (
                  <span class={`circuit circuit-${p.state}`}>{t(`circuit_${p.state}`)}</span>
                )}
                {p.replicas > 1 && <> ({t('circuitReplicas', { n: p.replicasInState, total: p.replicas })})</>}
              </td>
              <td>{formatWhen(session, p.since)}</td>
              <td>
                {p.lastFailureCode ? (
                  <>
                    <code>{p.lastFailureCode}</code>
                    {p.lastFailureAt && <>, {formatWhen(session, p.lastFailureAt)}</>}
                  </>
                ) : (
                  '—'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Scroll>
  );
}

type CheckStatus = 'pass' | 'fail' | 'not_checked' | 'dns_error';

interface RecordCheck {
  check: 'spf' | 'dkim' | 'dmarc';
  selector: string | null;
  status: CheckStatus;
  name: string;
  found: string[];
  detail: string;
  record: string | null;
}

interface Deliverability {
  domain: string;
  checkedAt: string;
  passed: boolean;
  checks: RecordCheck[];
}

/**
 * The email sender domain's SPF, DKIM (each selector) and DMARC, looked up in DNS when asked: each check
 * in words (not colour alone) with the record to publish. The operator publishes them; every role reads.
 */
function DeliverabilityCheck({ t }: { t: PageProps['t'] }) {
  const [report, setReport] = useState<Deliverability | null>(null);
  const action = useAction();
  const check = () => action.run(async () => setReport(await call<Deliverability>('GET', '/channels/email/deliverability')));
  const caption = report ? t('deliverabilityOf', { domain: report.domain }) : '';
  return (
    <section aria-labelledby="deliverability-title">
      <h2 id="deliverability-title">{t('deliverability')}</h2>
      <p class="hint">{t('deliverabilityHint')}</p>
      <button type="button" onClick={() => void check()} disabled={action.busy}>
        {t('checkDeliverability')}
      </button>
      <ErrorNote error={action.error} t={t} />
      {report && (
        <>
          <p role="status" class={report.passed ? 'ok' : 'error'} data-passed={String(report.passed)}>
            {t(report.passed ? 'deliverabilityPassed' : 'deliverabilityFailed', { domain: report.domain })}
          </p>
          <Scroll label={caption}>
            <table data-deliverability={report.domain}>
              <caption>{caption}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('deliverabilityCheck')}</th>
                  <th scope="col">{t('deliverabilityStatus')}</th>
                  <th scope="col">{t('deliverabilityName')}</th>
                  <th scope="col">{t('deliverabilityDetail')}</th>
                  <th scope="col">{t('deliverabilityRecord')}</th>
                </tr>
              </thead>
              <tbody>
                {report.checks.map((c) => (
                  <tr key={`${c.check}-${c.selector ?? ''}`} data-check={c.check} data-status={c.status}>
                    <th scope="row">{c.check === 'dkim' && c.selector ? `DKIM (${c.selector})` : c.check.toUpperCase()}</th>
                    <td>
                      <strong class={`check check-${c.status}`}>{t(`check_${c.status}`)}</strong>
                    </td>
                    <td>
                      <code>{c.name}</code>
                    </td>
                    <td>{c.detail}</td>
                    <td>{c.record ? <code class="record">{c.record}</code> : '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        </>
      )}
    </section>
  );
}

/** Channels as the organization has them: configured (by the operator), the sender running and able to send, and the SMS balance. Read-only for every role. */
export function ChannelsPage({ t, session }: PageProps) {
  const [status, setStatus] = useState<{ channels: ChannelStatus[]; smsBalance: number } | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    call<{ channels: ChannelStatus[]; smsBalance: number }>('GET', '/channels').then(setStatus, setError);
  }, []);
  const yesNo = (value: boolean) => (value ? t('yes') : t('no'));

  return (
    <section>
      <h1>{t('channels')}</h1>
      <p class="hint">{t('channelsHint')}</p>
      <ErrorNote error={error} t={t} />
      {status === null ? (
        <p role="status">{t('loading')}</p>
      ) : (
        <>
          {status.channels.some((c) => c.running && !c.delivers) && (
            <p role="alert" class="error" id="sink-warning">
              {t('sinkWarning', { channels: status.channels.filter((c) => c.running && !c.delivers).map((c) => c.label).join(', ') })}
            </p>
          )}
          <h2>{t('smsBalance')}</h2>
          <p id="sms-balance">{t('smsBalanceParts', { n: status.smsBalance })}</p>
          <Scroll label={t('channelStatus')}>
            <table>
              <caption>{t('channelStatus')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('channel')}</th>
                  <th scope="col">{t('configured')}</th>
                  <th scope="col">{t('running')}</th>
                  <th scope="col">{t('available')}</th>
                  <th scope="col">{t('ready')}</th>
                  <th scope="col">{t('sender')}</th>
                  <th scope="col">{t('capabilities')}</th>
                </tr>
              </thead>
              <tbody>
                {status.channels.map((c) => (
                  <tr key={c.channel} data-channel={c.channel}>
                    <th scope="row">{c.label}</th>
                    <td>{yesNo(c.configured)}</td>
                    <td>{yesNo(c.running)}</td>
                    <td>
                      {yesNo(c.available)}
                      {c.unavailableReason && (
                        <>
                          {' '}
                          (<code>{c.unavailableReason}</code>)
                        </>
                      )}
                    </td>
                    <td>
                      <strong>{yesNo(c.ready)}</strong>
                      {c.running && !c.delivers && (
                        <>
                          {' '}
                          <strong class="not-delivered" data-not-delivered={c.channel}>{t('notDelivered')}</strong>
                        </>
                      )}
                    </td>
                    <td>{c.sender ?? '—'}</td>
                    <td>{c.capabilities.join(', ') || '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
          <h2>{t('providersTitle')}</h2>
          {status.channels.filter((c) => c.providers.length > 0).map((c) => (
            <ProvidersTable key={c.channel} channel={c} t={t} session={session} />
          ))}
          <p class="hint">{t('providersNone')}</p>
          <DeliverabilityCheck t={t} />
        </>
      )}
    </section>
  );
}
