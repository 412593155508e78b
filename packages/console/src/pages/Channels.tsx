import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, type PageProps, Scroll } from '../widgets';

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
}

/** One channel's providers in failover order: the state in words (not colour alone), since when, the last fault. */
function ProvidersTable({ channel, t }: { channel: ChannelStatus; t: PageProps['t'] }) {
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
                <span class={`circuit circuit-${p.state}`}>{t(`circuit_${p.state}`)}</span>
                {p.replicas > 1 && <> ({t('circuitReplicas', { n: p.replicasInState, total: p.replicas })})</>}
              </td>
              <td>{new Date(p.since).toLocaleString()}</td>
              <td>
                {p.lastFailureCode ? (
                  <>
                    <code>{p.lastFailureCode}</code>
                    {p.lastFailureAt && <>, {new Date(p.lastFailureAt).toLocaleString()}</>}
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

/** Channels as the organization has them: configured (by the operator), the sender running and able to send, and the SMS balance. Read-only for every role. */
export function ChannelsPage({ t }: PageProps) {
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
            <ProvidersTable key={c.channel} channel={c} t={t} />
          ))}
          <p class="hint">{t('providersNone')}</p>
        </>
      )}
    </section>
  );
}
