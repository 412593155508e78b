import { useEffect, useState } from 'preact/hooks';
import { DurationInput } from '../duration';
import { call } from '../api';
import { canChange, type PageProps } from '../widgets';
import { ConfigHeader, numberOf } from '../configParts';
import { useAction } from '../parts';
import { MAX_COOLDOWN_DAYS } from '../rules';
import { PrivacySettings } from './Privacy';

interface SendWindow {
  start: string;
  end: string;
  days: number[];
  channels: string[];
}
interface Organization {
  name: string;
  plan: string;
  locale: string;
  timeZone: string;
  smsBalance: number;
  sendWindow: SendWindow | null;
  responseWindowMinutes: number;
  cooldownDays: number;
  requireConsent: boolean;
}

const WEEKDAYS = [1, 2, 3, 4, 5, 6, 7] as const;
const LOCALES = ['en', 'ru'] as const;
const DEFAULT_WINDOW: SendWindow = { start: '09:00', end: '21:00', days: [], channels: [] };

/** The organization's own settings: name, language, time zone, send window, response window, cooldown, consent; the plan is shown, not changed. */
export function SettingsPage({ t, session }: PageProps) {
  const [organization, setOrganization] = useState<Organization | null>(null);
  const [form, setForm] = useState({ name: '', locale: 'en', timeZone: '', windowOn: false, window: DEFAULT_WINDOW, responseWindowMinutes: 0 as number | string | null, cooldownDays: '', requireConsent: false });
  // Remounts the response window's field when the organization is (re)loaded.
  const [loads, setLoads] = useState(0);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const writable = canChange(session);

  const show = (o: Organization) => {
    setOrganization(o);
    setForm({
      name: o.name, locale: o.locale, timeZone: o.timeZone, windowOn: o.sendWindow !== null, window: o.sendWindow ?? DEFAULT_WINDOW,
      responseWindowMinutes: o.responseWindowMinutes, cooldownDays: String(o.cooldownDays), requireConsent: o.requireConsent,
    });
    setLoads((n) => n + 1);
  };
  useEffect(() => {
    call<{ organization: Organization }>('GET', '/settings').then((r) => show(r.organization), action.setError);
  }, []);

  const submit = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    void action.run(async () => {
      const body = {
        name: form.name.trim(), locale: form.locale, timeZone: form.timeZone.trim(),
        sendWindow: form.windowOn ? form.window : null,
        responseWindowMinutes: form.responseWindowMinutes ?? '', cooldownDays: numberOf(form.cooldownDays), requireConsent: form.requireConsent,
      };
      show((await call<{ organization: Organization }>('PATCH', '/settings', { body })).organization);
      setSaved(true);
    });
  };
  const toggleDay = (day: number) => {
    const days = form.window.days.includes(day) ? form.window.days.filter((d) => d !== day) : [...form.window.days, day].sort();
    setForm({ ...form, window: { ...form.window, days } });
  };

  const current = organization?.sendWindow;
  return (
    <section>
      <ConfigHeader t={t} session={session} title="settings" error={action.error} saved={saved} />
      {organization === null ? (
        <p role="status">{t('loading')}</p>
      ) : (
        <>
          <dl>
            <dt>{t('plan')}</dt>
            <dd id="plan">
              {organization.plan} <span class="hint">({t('planHint')})</span>
            </dd>
            <dt>{t('smsBalance')}</dt>
            <dd>{t('smsBalanceParts', { n: organization.smsBalance })}</dd>
            {!writable && (
              <>
                <dt>{t('sendWindow')}</dt>
                <dd>{current ? `${current.start}–${current.end}${current.days.length ? ` (${current.days.map((d) => t(`weekday_${d as 1}`)).join(', ')})` : ''}` : '—'}</dd>
                <dt>{t('cooldownDays')}</dt>
                <dd>{organization.cooldownDays}</dd>
                <dt>{t('requireConsent')}</dt>
                <dd>{organization.requireConsent ? t('yes') : t('no')}</dd>
              </>
            )}
          </dl>
          {writable && (
            <form onSubmit={submit} class="card" aria-label={t('settings')}>
              <label for="org-name">{t('organizationName')}</label>
              <input id="org-name" required maxLength={200} value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
              <label for="org-locale">{t('messageLocale')}</label>
              <select id="org-locale" value={form.locale} onChange={(e) => setForm({ ...form, locale: e.currentTarget.value })}>
                {LOCALES.map((l) => (
                  <option key={l} value={l}>
                    {t(`locale_${l}`)}
                  </option>
                ))}
              </select>
              <label for="org-tz">{t('timeZone')}</label>
              <input id="org-tz" required maxLength={64} value={form.timeZone} onInput={(e) => setForm({ ...form, timeZone: e.currentTarget.value })} />
              <fieldset>
                <legend>{t('sendWindow')}</legend>
                <p class="hint">{t('sendWindowHint')}</p>
                <label class="check">
                  <input type="checkbox" checked={form.windowOn} onChange={(e) => setForm({ ...form, windowOn: e.currentTarget.checked })} /> {t('sendWindowOn')}
                </label>
                {form.windowOn && (
                  <>
                    <label for="window-start">{t('opens')}</label>
                    <input id="window-start" required pattern="\d\d:\d\d" value={form.window.start} onInput={(e) => setForm({ ...form, window: { ...form.window, start: e.currentTarget.value } })} />
                    <label for="window-end">{t('closes')}</label>
                    <input id="window-end" required pattern="\d\d:\d\d" value={form.window.end} onInput={(e) => setForm({ ...form, window: { ...form.window, end: e.currentTarget.value } })} />
                    <fieldset>
                      <legend>{t('weekdays')}</legend>
                      {WEEKDAYS.map((day) => (
                        <label key={day} class="check">
                          <input type="checkbox" checked={form.window.days.includes(day)} onChange={() => toggleDay(day)} /> {t(`weekday_${day}`)}
                        </label>
                      ))}
                    </fieldset>
                  </>
                )}
              </fieldset>
              <DurationInput key={loads} t={t} id="org-response-window" label={t('responseWindow')} minutes={form.responseWindowMinutes} onChange={(v) => setForm((f) => ({ ...f, responseWindowMinutes: v }))} />
              <label for="org-cooldown">{t('cooldownDays')}</label>
              <input id="org-cooldown" inputMode="numeric" required aria-describedby="org-cooldown-hint" value={form.cooldownDays} onInput={(e) => setForm({ ...form, cooldownDays: e.currentTarget.value })} />
              <p id="org-cooldown-hint" class="hint">
                {t('cooldownHint')} (0–{MAX_COOLDOWN_DAYS})
              </p>
              <label class="check">
                <input type="checkbox" checked={form.requireConsent} onChange={(e) => setForm({ ...form, requireConsent: e.currentTarget.checked })} /> {t('requireConsent')}
              </label>
              <button type="submit" disabled={action.busy}>
                {t('save')}
              </button>
            </form>
          )}
        </>
      )}
      {organization !== null && <PrivacySettings t={t} session={session} />}
      <p>
        <a href="#/members">{t('membersLink')}</a>
      </p>
    </section>
  );
}
