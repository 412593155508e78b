import { useEffect, useState } from 'preact/hooks';
import { formatDay, formatWhen } from '../time';
import { call, type SessionInfo } from '../api';
import { ErrorNote } from '../widgets';
import type { MessageKey, Translate } from '../i18n';
import { useAction } from '../parts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../rules';
import { ListTable } from './ListTable';

interface Webhook {
  id: string;
  url: string;
  events: string[];
  disabled: boolean;
  disabledReason: string | null;
  createdAt: string;
}

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'delivered' | 'failed';
  attemptCount: number;
  createdAt: string;
  attempts: Array<{ statusCode: number | null; error: string | null }>;
}

/** Checkboxes of the event types an endpoint can subscribe to. */
function EventChoice({ legend, chosen, onChange }: { legend: string; chosen: string[]; onChange: (events: string[]) => void }) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      {SUBSCRIBABLE_EVENT_TYPES.map((type) => (
        <label key={type} class="check">
          <input type="checkbox" checked={chosen.includes(type)} onChange={() => onChange(chosen.includes(type) ? chosen.filter((e) => e !== type) : [...chosen, type])} /> <code>{type}</code>
        </label>
      ))}
    </fieldset>
  );
}

/** A secret the API answers once (a new endpoint's, a rotated one), in a read-only field to copy. */
function SecretOnce({ t, secret, note }: { t: Translate; secret: string; note?: MessageKey }) {
  return (
    <div class="secret" role="status">
      <p>{t('webhookSecretOnce')}</p>
      {note && <p>{t(note)}</p>}
      <label for="webhook-secret">{t('webhookSecret')}</label>
      <input id="webhook-secret" readOnly value={secret} onFocus={(e) => e.currentTarget.select()} />
    </div>
  );
}

/** One endpoint's delivery log, newest first, with replay for those who may change things. */
function DeliveryLog({ t, webhook, writable, session }: { t: Translate; webhook: Webhook; writable: boolean; session: SessionInfo }) {
  const [deliveries, setDeliveries] = useState<Delivery[] | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const action = useAction();
  const load = () => action.run(async () => setDeliveries((await call<{ deliveries: Delivery[] }>('GET', `/webhooks/${encodeURIComponent(webhook.id)}/deliveries`, { query: { limit: '20' } })).deliveries));
  useEffect(() => {
    setDeliveries(null);
    void load();
  }, [webhook.id]);
  const replay = (delivery: Delivery) =>
    action.run(async () => {
      await call('POST', `/webhooks/${encodeURIComponent(webhook.id)}/deliveries/${encodeURIComponent(delivery.id)}/replay`);
      setNote(t('replayed'));
      await load();
    });
  const caption = t('deliveryLogOf', { url: webhook.url });
  return (
    <section aria-label={caption}>
      <h3>{caption}</h3>
      <ErrorNote error={action.error} t={t} />
      {note && (
        <p role="status" class="ok">
          {note}
        </p>
      )}
      <button type="button" onClick={() => void load()} disabled={action.busy}>
        {t('refresh')}
      </button>
      <ListTable
        t={t}
        rows={deliveries}
        caption={caption}
        empty="noDeliveries"
        head={
          <>
            <th scope="col">{t('eventType')}</th>
            <th scope="col">{t('status')}</th>
            <th scope="col">{t('attempts')}</th>
            <th scope="col">{t('lastResponse')}</th>
            <th scope="col">{t('created')}</th>
            {writable && <th scope="col">{t('actions')}</th>}
          </>
        }
        row={(d) => {
          const last = d.attempts[d.attempts.length - 1];
          return (
            <tr key={d.id}>
              <td>
                <code>{d.eventType}</code>
              </td>
              <td>{t(`delivery_${d.status}`)}</td>
              <td>{d.attemptCount}</td>
              <td>{last ? (last.statusCode ?? last.error ?? '—') : '—'}</td>
              <td>{formatWhen(session, d.createdAt)}</td>
              {writable && (
                <td>
                  <button type="button" class="link" aria-label={`${t('replay')} ${d.eventType} ${formatWhen(session, d.createdAt)}`} onClick={() => void replay(d)}>
                    {t('replay')}
                  </button>
                </td>
              )}
            </tr>
          );
        }}
      />
    </section>
  );
}

/** The developer section's webhook endpoints: list, create (the secret once), events, test, rotate, delete, and each one's delivery log. */
export function WebhooksSection({ t, writable, session }: { t: Translate; writable: boolean; session: SessionInfo }) {
  const [webhooks, setWebhooks] = useState<Webhook[] | null>(null);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>([SUBSCRIBABLE_EVENT_TYPES[0]]);
  const [secret, setSecret] = useState<{ value: string; rotated: boolean } | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [editing, setEditing] = useState<string[]>([]);
  const [note, setNote] = useState<string | null>(null);
  const action = useAction();

  const load = () => call<{ webhooks: Webhook[] }>('GET', '/webhooks').then((r) => setWebhooks(r.webhooks), action.setError);
  useEffect(() => {
    void load();
  }, []);
  const chosen = webhooks?.find((w) => w.id === selected) ?? null;
  const select = (webhook: Webhook) => {
    setSelected(webhook.id);
    setEditing(webhook.events);
    setNote(null);
  };
  const create = (e: Event) => {
    e.preventDefault();
    setSecret(null);
    void action.run(async () => {
      const r = await call<Webhook & { secret: string }>('POST', '/webhooks', { body: { url, events } });
      setSecret({ value: r.secret, rotated: false });
      setUrl('');
      await load();
      select(r);
    });
  };
  const saveEvents = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      await call('PATCH', `/webhooks/${encodeURIComponent(selected!)}`, { body: { events: editing } });
      setNote(t('eventsSaved'));
      await load();
    });
  };
  const onSelected = (path: string, then: (r: Webhook & { secret?: string }) => void) =>
    action.run(async () => {
      setSecret(null);
      then(await call<Webhook & { secret?: string }>('POST', `/webhooks/${encodeURIComponent(selected!)}${path}`));
      await load();
    });
  const remove = (webhook: Webhook) =>
    action.run(async () => {
      await call('DELETE', `/webhooks/${encodeURIComponent(webhook.id)}`);
      if (selected === webhook.id) setSelected(null);
      await load();
    });

  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">{t('webhooks')}</h2>
      <ErrorNote error={action.error} t={t} />
      {secret && <SecretOnce t={t} secret={secret.value} note={secret.rotated ? 'rotatedNote' : undefined} />}
      <ListTable
        t={t}
        rows={webhooks}
        caption={t('webhooks')}
        empty="noWebhooks"
        head={
          <>
            <th scope="col">{t('webhookUrl')}</th>
            <th scope="col">{t('webhookEvents')}</th>
            <th scope="col">{t('webhookState')}</th>
            <th scope="col">{t('actions')}</th>
          </>
        }
        row={(w) => (
          <tr key={w.id}>
            <td>
              <code>{w.url}</code>
            </td>
            <td>{w.events.join(', ')}</td>
            <td>{w.disabled ? t('webhookDisabled', { reason: w.disabledReason ?? '' }) : t('webhookEnabled')}</td>
            <td>
              <button type="button" class="link" aria-pressed={selected === w.id} aria-label={`${t('showLog')} ${w.url}`} onClick={() => select(w)}>
                {t('showLog')}
              </button>{' '}
              {writable && (
                <button type="button" class="danger" aria-label={`${t('deleteWebhook')} ${w.url}`} onClick={() => void remove(w)}>
                  {t('deleteWebhook')}
                </button>
              )}
            </td>
          </tr>
        )}
      />
      {chosen && writable && (
        <div class="card">
          <form onSubmit={saveEvents}>
            <EventChoice legend={t('editEvents', { url: chosen.url })} chosen={editing} onChange={setEditing} />
            <button type="submit" disabled={action.busy || editing.length === 0}>
              {t('saveEvents')}
            </button>
          </form>
          {note && (
            <p role="status" class="ok">
              {note}
            </p>
          )}
          <button type="button" disabled={action.busy} onClick={() => void onSelected('/test', () => setNote(t('testQueued')))}>
            {t('sendTest')}
          </button>{' '}
          <button type="button" disabled={action.busy} onClick={() => void onSelected('/rotate-secret', (r) => setSecret({ value: r.secret!, rotated: true }))}>
            {t('rotateSecret')}
          </button>
        </div>
      )}
      {chosen && <DeliveryLog key={`${chosen.id}:${note ?? ''}`} t={t} webhook={chosen} writable={writable} session={session} />}
      {writable && (
        <form onSubmit={create} class="card">
          <h3>{t('newWebhook')}</h3>
          <label for="webhook-url">{t('webhookUrl')}</label>
          <input id="webhook-url" type="url" required maxLength={2048} value={url} aria-describedby="webhook-url-hint" onInput={(e) => setUrl(e.currentTarget.value)} />
          <p id="webhook-url-hint" class="hint">
            {t('webhookUrlHint')}
          </p>
          <EventChoice legend={t('webhookEvents')} chosen={events} onChange={setEvents} />
          <button type="submit" disabled={action.busy || events.length === 0}>
            {t('createWebhook')}
          </button>
        </form>
      )}
    </section>
  );
}
