import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { useLocations } from '../filters';
import { useAction } from '../parts';
import { formatWhen } from '../time';
import { canChange, ErrorNote, ReadOnlyNote, type PageProps } from '../widgets';

interface Status {
  lastEventAt: string | null;
  lastError: string | null;
  lastErrorCode: string | null;
  lastErrorAt: string | null;
  lastSuccessAt: string | null;
  lastCascadeAt: string | null;
  lastWriteBackAt: string | null;
  cascadesStarted: number;
  pendingEvents: number;
  failedEvents: number;
  writeBacksDone: number;
}
interface Connector {
  id: string;
  kind: 'amocrm' | 'bitrix24';
  name: string;
  enabled: boolean;
  crmUrl: string;
  authMode: string;
  status: Status;
}

/** amoCRM sent the browser back to the console (its Redirect URI) with these: the console finishes the connection. */
export function amoCrmReturn(): { state: string; code: string; referer: string } | null {
  const query = new URLSearchParams(location.search);
  const [state, code, referer] = [query.get('state'), query.get('code'), query.get('referer')];
  return state && code && referer ? { state, code, referer } : null;
}

/** An error is past once things worked after it (the connectors service's `lastSuccessAt`). */
const errorIsPast = (s: Status) => s.lastErrorAt !== null && s.lastSuccessAt !== null && s.lastSuccessAt > s.lastErrorAt;

/**
 * CRM connectors: each with its status (the last event, cascade and write-back; the last error, shown as
 * past once things worked again); connecting amoCRM through its consent page and Bitrix24 with its
 * webhooks; the inbound URL to copy, shown once; a Bitrix24 connector's application token.
 */
export function IntegrationsPage({ t, session }: PageProps) {
  const [connectors, setConnectors] = useState<Connector[] | null>(null);
  const [inbound, setInbound] = useState<{ name: string; url: string } | null>(null);
  const [amo, setAmo] = useState({ name: '', locationId: '' });
  const [bitrix, setBitrix] = useState({ name: '', locationId: '', webhookUrl: '' });
  const [tokens, setTokens] = useState<Record<string, string>>({});
  const action = useAction();
  const { locations } = useLocations();
  const writable = canChange(session);

  const load = () => call<{ connectors: Connector[] }>('GET', '/connectors').then((r) => setConnectors(r.connectors), action.setError);
  useEffect(() => {
    const back = amoCrmReturn();
    if (back) {
      // The code is used once: it leaves the address bar (and the history) at once.
      history.replaceState(null, '', `${location.pathname}#/integrations`);
      void action.run(async () => {
        const r = await call<{ connector: Connector; inboundUrl: string }>('POST', '/connectors/amocrm/complete', { body: back });
        setInbound({ name: r.connector.name, url: r.inboundUrl });
        await load();
      });
    } else void load();
  }, []);
  useEffect(() => {
    if (locations.length > 0) {
      setAmo((a) => ({ ...a, locationId: a.locationId || locations[0].id }));
      setBitrix((b) => ({ ...b, locationId: b.locationId || locations[0].id }));
    }
  }, [locations]);

  const connectAmo = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      const r = await call<{ authorizeUrl: string }>('POST', '/connectors/amocrm/authorize', { body: { name: amo.name || undefined, locationId: amo.locationId } });
      location.assign(r.authorizeUrl);
    });
  };
  const connectBitrix = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      const r = await call<{ connector: Connector; inboundUrl: string }>('POST', '/connectors/bitrix24', { body: { name: bitrix.name || undefined, locationId: bitrix.locationId, webhookUrl: bitrix.webhookUrl.trim() } });
      setInbound({ name: r.connector.name, url: r.inboundUrl });
      await load();
    });
  };
  const saveToken = (c: Connector) =>
    action.run(async () => {
      await call('PUT', `/connectors/${encodeURIComponent(c.id)}/application-token`, { body: { applicationToken: (tokens[c.id] ?? '').trim() } });
      setTokens({ ...tokens, [c.id]: '' });
      await load();
    });
  const newInboundUrl = (c: Connector) =>
    action.run(async () => {
      const r = await call<{ inboundUrl: string }>('POST', `/connectors/${encodeURIComponent(c.id)}/inbound-url`);
      setInbound({ name: c.name, url: r.inboundUrl });
    });

  return (
    <section>
      <h1>{t('integrations')}</h1>
      <p class="hint">{t('integrationsIntro')}</p>
      <ReadOnlyNote t={t} session={session} />
      <ErrorNote error={action.error} t={t} />
      {inbound && (
        <div class="secret" role="status" data-testid="inbound-url">
          <p>{t('inboundUrlOnce', { name: inbound.name })}</p>
          <label for="inbound-url">{t('inboundUrl')}</label>
          <input id="inbound-url" readOnly value={inbound.url} />
        </div>
      )}
      {connectors === null ? (
        <p role="status">{t('loading')}</p>
      ) : connectors.length === 0 ? (
        <p>{t('noConnectors')}</p>
      ) : (
        connectors.map((c) => (
          <article key={c.id} class="card wide" data-connector={c.id}>
            <h2>
              {c.name} · {c.kind === 'amocrm' ? 'amoCRM' : 'Bitrix24'}
            </h2>
            <p>
              {c.crmUrl} · {c.enabled ? t('connectorOn') : t('connectorOff')}
            </p>
            <dl class="facts">
              <dt>{t('lastEvent')}</dt>
              <dd>{formatWhen(session, c.status.lastEventAt)}</dd>
              <dt>{t('lastCascade')}</dt>
              <dd>
                {formatWhen(session, c.status.lastCascadeAt)} ({t('cascadesStartedCount', { count: c.status.cascadesStarted })})
              </dd>
              <dt>{t('lastWriteBack')}</dt>
              <dd>{formatWhen(session, c.status.lastWriteBackAt)}</dd>
              <dt>{t('lastErrorTitle')}</dt>
              <dd data-testid="connector-error">
                {c.status.lastErrorCode ? (
                  <>
                    <code>{c.status.lastErrorCode}</code> {c.status.lastError} ({formatWhen(session, c.status.lastErrorAt)})
                    {errorIsPast(c.status) && <strong> — {t('errorPast', { when: formatWhen(session, c.status.lastSuccessAt) })}</strong>}
                  </>
                ) : (
                  t('noError')
                )}
              </dd>
            </dl>
            {writable && (
              <div class="inline">
                {c.kind === 'bitrix24' && (
                  <>
                    <label for={`token-${c.id}`}>{t('applicationToken')}</label>
                    <input id={`token-${c.id}`} autocomplete="off" value={tokens[c.id] ?? ''} onInput={(e) => setTokens({ ...tokens, [c.id]: e.currentTarget.value })} />
                    <button type="button" disabled={action.busy || !(tokens[c.id] ?? '').trim()} onClick={() => void saveToken(c)}>
                      {t('saveToken')}
                    </button>
                  </>
                )}
                <button type="button" class="link" disabled={action.busy} onClick={() => void newInboundUrl(c)}>
                  {t('newInboundUrl')}
                </button>
              </div>
            )}
          </article>
        ))
      )}
      {writable && (
        <>
          <form class="card" aria-label={t('connectAmoCrm')} onSubmit={connectAmo}>
            <h2>{t('connectAmoCrm')}</h2>
            <p class="hint">{t('connectAmoCrmHint')}</p>
            <label for="amo-name">{t('connectorName')}</label>
            <input id="amo-name" maxLength={200} value={amo.name} onInput={(e) => setAmo({ ...amo, name: e.currentTarget.value })} />
            <label for="amo-location">{t('location')}</label>
            <select id="amo-location" value={amo.locationId} onChange={(e) => setAmo({ ...amo, locationId: e.currentTarget.value })}>
              {locations.map((l) => (
                <option key={l.id} value={l.id}>
                  {l.name}
                </option>
              ))}
            </select>
            <button type="submit" disabled={action.busy}>
              {t('connectAmoCrmButton')}
            </button>
          </form>
          <form class="card" aria-label={t('connectBitrix24')} onSubmit={connectBitrix}>
            <h2>{t('connectBitrix24')}</h2>
            <p class="hint">{t('connectBitrix24Hint')}</p>
            <label for="b24-name">{t('connectorName')}</label>
            <input id="b24-name" maxLength={200} value={bitrix.name} onInput={(e) => setBitrix({ ...bitrix, name: e.currentTarget.value })} />
            <label for="b24-webhook">{t('bitrixWebhookUrl')}</label>
            <input id="b24-webhook" required type="url" placeholder="https://example.bitrix24.ru/rest/1/…/" value={bitrix.webhookUrl} onInput={(e) => setBitrix({ ...bitrix, webhookUrl: e.currentTarget.value })} />
            <label for="b24-location">{t('location')}</label>
            <select id="b24-location" value={bitrix.locationId} onChange={(e) => setBitrix({ ...bitrix, locationId: e.currentTarget.value })}>
              {locations.map((l) => (
                <option key={l.id} value={l.id}>
                  {l.name}
                </option>
              ))}
            </select>
            <button type="submit" disabled={action.busy}>
              {t('connect')}
            </button>
          </form>
        </>
      )}
    </section>
  );
}
