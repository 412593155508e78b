import { useEffect, useState } from 'preact/hooks';
import { call, callReplayable, newIdempotencyKey } from '../api';
import { canChange, ErrorNote, ReadOnlyNote, type PageProps } from '../widgets';
import { useAction } from '../parts';
import { CsvUpload } from './CsvUpload';

interface Location {
  id: string;
  name: string;
}
interface Flow {
  id: string;
  name: string;
  isDefault: boolean;
}
export interface Started {
  id: string;
  queued: number;
  skipped: number;
  /** The answer of an earlier identical send (its Idempotency-Key): nothing was sent again. */
  replayed?: boolean;
}

/** What a send did, with a link to the cascade it made (or had made, when nothing was sent again). */
export function SentNote({ t, started, label }: { t: PageProps['t']; started: Started; label: string }) {
  return (
    <p role="status" class="ok" data-testid="sent-note">
      {started.replayed ? t('sentBefore') : t('sentNow', { queued: started.queued, skipped: started.skipped })}{' '}
      <a href={`#/cascades/${encodeURIComponent(started.id)}`}>{t('openCascadeNamed', { name: label })}</a>
    </p>
  );
}

/**
 * One customer into a chosen location and flow, through POST /account/v1/cascades: the public API's
 * rules (sending rule, quota, skips), and one Idempotency-Key per filled-in form, so a double submit
 * starts one cascade.
 */
export function SendPage({ t, session }: PageProps) {
  const [locations, setLocations] = useState<Location[]>([]);
  const [flows, setFlows] = useState<Flow[]>([]);
  const [form, setForm] = useState({ locationId: '', flowId: '', name: '', email: '', phone: '', externalId: '', ignoreCooldown: false });
  const [idempotencyKey, setIdempotencyKey] = useState(newIdempotencyKey);
  const [started, setStarted] = useState<Started | null>(null);
  const action = useAction();

  useEffect(() => {
    Promise.all([call<{ locations: Location[] }>('GET', '/locations'), call<{ flows: Flow[] }>('GET', '/flows')]).then(([l, f]) => {
      setLocations(l.locations);
      setFlows(f.flows);
      setForm((old) => ({ ...old, locationId: old.locationId || (l.locations[0]?.id ?? ''), flowId: old.flowId || (f.flows.find((x) => x.isDefault)?.id ?? f.flows[0]?.id ?? '') }));
    }, action.setError);
  }, []);

  const set = (field: keyof typeof form) => (e: Event) => {
    const target = e.currentTarget as HTMLInputElement;
    setForm({ ...form, [field]: target.type === 'checkbox' ? target.checked : target.value });
    // A changed form is another request: it gets a key of its own.
    setIdempotencyKey(newIdempotencyKey());
  };

  const submit = (e: Event) => {
    e.preventDefault();
    setStarted(null);
    void action.run(async () => {
      if (!form.email.trim() && !form.phone.trim()) throw new Error(t('needContact'));
      const recipient = { name: form.name.trim() || undefined, email: form.email.trim() || undefined, phone: form.phone.trim() || undefined };
      const body = { locationId: form.locationId, flowId: form.flowId || undefined, externalId: form.externalId.trim() || undefined, recipients: [recipient], ignoreCooldown: form.ignoreCooldown || undefined };
      const r = await callReplayable<Started>('POST', '/cascades', { body, idempotencyKey });
      setStarted({ ...r.body, replayed: r.replayed });
    });
  };

  return (
    <section class="narrow">
      <h1>{t('send')}</h1>
      <ReadOnlyNote t={t} session={session} />
      {canChange(session) && (
        <form onSubmit={submit}>
          <label for="location">{t('location')}</label>
          <select id="location" required value={form.locationId} onChange={set('locationId')}>
            {locations.map((l) => (
              <option key={l.id} value={l.id}>
                {l.name}
              </option>
            ))}
          </select>
          <label for="flow">{t('flow')}</label>
          <select id="flow" value={form.flowId} onChange={set('flowId')}>
            {flows.map((f) => (
              <option key={f.id} value={f.id}>
                {f.name}
                {f.isDefault ? ` (${t('defaultFlow')})` : ''}
              </option>
            ))}
          </select>
          <label for="customer-name">{t('customerName')}</label>
          <input id="customer-name" autocomplete="off" value={form.name} onInput={set('name')} />
          <label for="customer-email">{t('email')}</label>
          <input id="customer-email" type="email" autocomplete="off" value={form.email} onInput={set('email')} />
          <label for="customer-phone">{t('phone')}</label>
          <input id="customer-phone" type="tel" autocomplete="off" value={form.phone} onInput={set('phone')} />
          <label for="external-id">{t('externalId')}</label>
          <input id="external-id" autocomplete="off" value={form.externalId} onInput={set('externalId')} />
          <label class="check">
            <input type="checkbox" checked={form.ignoreCooldown} onChange={set('ignoreCooldown')} /> {t('ignoreCooldown')}
          </label>
          <ErrorNote error={action.error} t={t} />
          {started && <SentNote t={t} started={started} label={form.externalId.trim() || form.name.trim() || form.email.trim() || form.phone.trim()} />}
          <button type="submit" disabled={action.busy}>
            {t('sendRequest')}
          </button>
        </form>
      )}
      {canChange(session) && <CsvUpload t={t} target={form} />}
    </section>
  );
}
