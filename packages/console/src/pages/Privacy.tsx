import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { numberOf } from '../configParts';
import { useAction } from '../parts';
import { canChange, ErrorNote, type PageProps } from '../widgets';

const MIN_RETENTION_DAYS = 30;
const MAX_RETENTION_DAYS = 3650;

/**
 * The organization's privacy setting on the Settings page: how long the personal data of a finished
 * recipient is kept before it is anonymized (docs/customer-respect.md, "Data lifecycle"). Every member
 * sees it; owners and admins change it.
 */
export function PrivacySettings({ t, session }: PageProps) {
  const [days, setDays] = useState<number | null>(null);
  const [input, setInput] = useState('');
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const writable = canChange(session);
  const show = (r: { personalDataRetentionDays: number }) => {
    setDays(r.personalDataRetentionDays);
    setInput(String(r.personalDataRetentionDays));
  };
  useEffect(() => {
    call<{ personalDataRetentionDays: number }>('GET', '/data-retention').then(show, action.setError);
  }, []);
  const submit = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    void action.run(async () => {
      show(await call<{ personalDataRetentionDays: number }>('PUT', '/data-retention', { body: { personalDataRetentionDays: numberOf(input) } }));
      setSaved(true);
    });
  };
  return (
    <section aria-label={t('privacy')}>
      <h2>{t('privacy')}</h2>
      <ErrorNote error={action.error} t={t} />
      {saved && <p role="status">{t('saved')}</p>}
      {days === null ? null : writable ? (
        <form onSubmit={submit} class="card" aria-label={t('privacy')}>
          <label for="org-retention">{t('retentionDays')}</label>
          <input id="org-retention" inputMode="numeric" required aria-describedby="org-retention-hint" value={input} onInput={(e) => setInput(e.currentTarget.value)} />
          <p id="org-retention-hint" class="hint">
            {t('retentionHint')} ({MIN_RETENTION_DAYS}–{MAX_RETENTION_DAYS})
          </p>
          <button type="submit" disabled={action.busy}>
            {t('save')}
          </button>
        </form>
      ) : (
        <dl>
          <dt>{t('retentionDays')}</dt>
          <dd id="retention-days">{days}</dd>
        </dl>
      )}
      {writable && <ErasePerson t={t} session={session} />}
    </section>
  );
}

interface Erasure {
  id: string;
  status: 'pending' | 'done';
}

/**
 * Erasing one person (POST /account/v1/people/erase; docs/customer-respect.md, "Erasure of a person"),
 * for owners and admins: by email, phone and/or CRM id, after a confirmation. What it does not yet reach
 * is said on the page, as in the docs.
 */
function ErasePerson({ t }: PageProps) {
  const [fields, setFields] = useState({ email: '', phone: '', contactExternalId: '' });
  const [erasure, setErasure] = useState<Erasure | null>(null);
  const [confirming, setConfirming] = useState(false);
  const action = useAction();
  const set = (field: keyof typeof fields) => (e: Event) => setFields({ ...fields, [field]: (e.currentTarget as HTMLInputElement).value });
  const submit = (e: Event) => {
    e.preventDefault();
    setErasure(null);
    if (!confirming) {
      setConfirming(true);
      return;
    }
    setConfirming(false);
    const body = Object.fromEntries(Object.entries(fields).filter(([, value]) => value.trim() !== ''));
    void action.run(async () => {
      setErasure(await call<Erasure>('POST', '/people/erase', { body }));
      setFields({ email: '', phone: '', contactExternalId: '' });
    });
  };
  return (
    <form onSubmit={submit} class="card" aria-label={t('erasePerson')}>
      <h3>{t('erasePerson')}</h3>
      <p class="hint" id="erase-hint">{t('eraseHint')}</p>
      <ErrorNote error={action.error} t={t} />
      {erasure && <p role="status">{erasure.status === 'done' ? t('erasureDone') : t('erasurePending')}</p>}
      <label for="erase-email">{t('email')}</label>
      <input id="erase-email" type="email" value={fields.email} onInput={set('email')} aria-describedby="erase-hint" />
      <label for="erase-phone">{t('phone')}</label>
      <input id="erase-phone" type="tel" value={fields.phone} onInput={set('phone')} />
      <label for="erase-external-id">{t('contactExternalId')}</label>
      <input id="erase-external-id" value={fields.contactExternalId} onInput={set('contactExternalId')} />
      {confirming ? (
        <p class="inline">
          <span>{t('eraseConfirm')}</span>
          <button type="submit" class="danger" disabled={action.busy}>
            {t('eraseConfirmButton')}
          </button>
          <button type="button" class="link" onClick={() => setConfirming(false)}>
            {t('cancel')}
          </button>
        </p>
      ) : (
        <button type="submit" class="danger" disabled={action.busy}>
          {t('erasePerson')}
        </button>
      )}
    </form>
  );
}
