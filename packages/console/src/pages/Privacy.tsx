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
    </section>
  );
}
