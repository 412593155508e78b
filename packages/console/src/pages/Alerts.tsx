import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { DurationInput } from '../duration';
import { useLocations } from '../filters';
import { useAction } from '../parts';
import { formatWhen } from '../time';
import { canChange, ErrorNote, ReadOnlyNote, Scroll, type PageProps } from '../widgets';

type Choice = 'instant' | 'digest' | 'off';
type BotChannel = 'MAX' | 'TELEGRAM';
interface Settings {
  threshold: number;
  locationThresholds: Array<{ locationId: string; threshold: number }>;
  responseTargetMinutes: number;
  workingHours: { start: string; end: string; days: number[] };
  replyTo: string;
}
interface Alerts {
  settings: Settings;
  members: Array<{ memberId: string; name: string; email: string; role: string; alerts: Choice; chosen: boolean }>;
  chats: Array<{ channel: BotChannel; chatId: string; linkedBy: string; linkedAt: string }>;
  bots: BotChannel[];
}

const DAYS = [1, 2, 3, 4, 5, 6, 7];
const BOT_NAMES: Record<BotChannel, string> = { TELEGRAM: 'Telegram', MAX: 'MAX' };

/**
 * Rating alerts: which ratings alert (the threshold, and locations of their own), the response target and
 * the working hours it counts in, the Reply-To of replies; who gets each alert by email (or a daily
 * digest); and the staff chats that get them through the official bots, linked with a deep link.
 */
export function AlertsPage({ t, session }: PageProps) {
  const [alerts, setAlerts] = useState<Alerts | null>(null);
  const [draft, setDraft] = useState<Settings | null>(null);
  const [target, setTarget] = useState<number | string | null>(120);
  const [loads, setLoads] = useState(0);
  const [saved, setSaved] = useState(false);
  const [link, setLink] = useState<{ channel: BotChannel; link: string } | null>(null);
  const action = useAction();
  const { locations, nameOf } = useLocations();
  const writable = canChange(session);

  const show = (a: Alerts) => {
    setAlerts(a);
    setDraft(a.settings);
    setTarget(a.settings.responseTargetMinutes);
    setLoads((n) => n + 1);
  };
  const load = () => call<Alerts>('GET', '/alerts').then(show, action.setError);
  useEffect(() => {
    void load();
  }, []);

  const save = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    void action.run(async () => {
      show(await call<Alerts>('PUT', '/alerts/settings', { body: { ...draft!, responseTargetMinutes: target ?? '' } }));
      setSaved(true);
    });
  };
  const choose = (memberId: string, choice: Choice) =>
    action.run(async () => {
      setSaved(false);
      show(await call<Alerts>('PUT', `/alerts/members/${encodeURIComponent(memberId)}`, { body: { alerts: choice } }));
      setSaved(true);
    });
  const linkChat = (channel: BotChannel) =>
    action.run(async () => {
      const r = await call<{ channel: BotChannel; link: string }>('POST', '/alerts/chats', { body: { channel } });
      setLink(r);
    });
  const unlink = (channel: BotChannel, chatId: string) =>
    action.run(async () => {
      await call('DELETE', `/alerts/chats/${channel}/${encodeURIComponent(chatId)}`);
      await load();
    });
  const memberName = (id: string) => alerts?.members.find((m) => m.memberId === id)?.name || alerts?.members.find((m) => m.memberId === id)?.email || id;

  if (!alerts || !draft) {
    return (
      <section>
        <h1>{t('alerts')}</h1>
        <ErrorNote error={action.error} t={t} />
        <p role="status">{t('loading')}</p>
      </section>
    );
  }
  const setThreshold = (locationId: string, value: string) =>
    setDraft({
      ...draft,
      locationThresholds: value === '' ? draft.locationThresholds.filter((l) => l.locationId !== locationId) : [...draft.locationThresholds.filter((l) => l.locationId !== locationId), { locationId, threshold: Number(value) }],
    });
  const thresholdOptions = (
    <>
      <option value="0">{t('thresholdFeedbackOnly')}</option>
      {[1, 2, 3, 4, 5].map((n) => (
        <option key={n} value={String(n)}>
          ≤ {n}★
        </option>
      ))}
    </>
  );
  return (
    <section>
      <h1>{t('alerts')}</h1>
      <p class="hint">{t('alertsIntro')}</p>
      <ReadOnlyNote t={t} session={session} />
      <ErrorNote error={action.error} t={t} />
      {saved && (
        <p class="ok" role="status">
          {t('saved')}
        </p>
      )}
      <form class="card wide" aria-label={t('alertRules')} onSubmit={save}>
        <h2>{t('alertRules')}</h2>
        <fieldset disabled={!writable}>
          <label for="alert-threshold">{t('alertThreshold')}</label>
          <select id="alert-threshold" value={String(draft.threshold)} onChange={(e) => setDraft({ ...draft, threshold: Number(e.currentTarget.value) })}>
            {thresholdOptions}
          </select>
          <details>
            <summary>{t('locationThresholds')}</summary>
            {locations.map((l) => (
              <div key={l.id}>
                <label for={`threshold-${l.id}`}>{l.name}</label>
                <select id={`threshold-${l.id}`} value={String(draft.locationThresholds.find((x) => x.locationId === l.id)?.threshold ?? '')} onChange={(e) => setThreshold(l.id, e.currentTarget.value)}>
                  <option value="">{t('asOrganization')}</option>
                  {thresholdOptions}
                </select>
              </div>
            ))}
          </details>
          <DurationInput key={loads} t={t} id="response-target" label={t('responseTarget')} minutes={target} onChange={setTarget} />
          <fieldset>
            <legend>{t('workingHours')}</legend>
            <div class="inline">
              <label for="work-start">{t('opens')}</label>
              <input id="work-start" type="time" value={draft.workingHours.start} onInput={(e) => setDraft({ ...draft, workingHours: { ...draft.workingHours, start: e.currentTarget.value } })} />
              <label for="work-end">{t('closes')}</label>
              <input id="work-end" type="time" value={draft.workingHours.end} onInput={(e) => setDraft({ ...draft, workingHours: { ...draft.workingHours, end: e.currentTarget.value } })} />
            </div>
            <fieldset>
              <legend>{t('workDays')}</legend>
              {DAYS.map((day) => (
                <label key={day} class="check">
                  <input
                    type="checkbox"
                    checked={draft.workingHours.days.length === 0 || draft.workingHours.days.includes(day)}
                    onChange={(e) => {
                      const current = draft.workingHours.days.length === 0 ? DAYS : draft.workingHours.days;
                      const days = e.currentTarget.checked ? [...new Set([...current, day])].sort() : current.filter((d) => d !== day);
                      setDraft({ ...draft, workingHours: { ...draft.workingHours, days: days.length === 7 ? [] : days } });
                    }}
                  />{' '}
                  {t(`day_${day}` as 'day_1')}
                </label>
              ))}
            </fieldset>
          </fieldset>
          <label for="reply-to">{t('replyTo')}</label>
          <input id="reply-to" type="email" aria-describedby="reply-to-hint" value={draft.replyTo} onInput={(e) => setDraft({ ...draft, replyTo: e.currentTarget.value })} />
          <p id="reply-to-hint" class="hint">
            {t('replyToHint')}
          </p>
          {writable && (
            <button type="submit" disabled={action.busy}>
              {t('save')}
            </button>
          )}
        </fieldset>
      </form>

      <h2>{t('whoGetsAlerts')}</h2>
      <Scroll label={t('whoGetsAlerts')}>
        <table data-testid="alert-members">
          <caption>{t('whoGetsAlerts')}</caption>
          <thead>
            <tr>
              <th scope="col">{t('name')}</th>
              <th scope="col">{t('email')}</th>
              <th scope="col">{t('role')}</th>
              <th scope="col">{t('alertsByEmail')}</th>
            </tr>
          </thead>
          <tbody>
            {alerts.members.map((m) => (
              <tr key={m.memberId} data-member={m.email}>
                <td>{m.name || '—'}</td>
                <td>{m.email}</td>
                <td>{t(`role_${m.role}` as 'role_owner')}</td>
                <td>
                  {writable ? (
                    <select aria-label={`${t('alertsByEmail')}: ${m.email}`} value={m.alerts} disabled={action.busy} onChange={(e) => void choose(m.memberId, e.currentTarget.value as Choice)}>
                      {(['instant', 'digest', 'off'] as const).map((c) => (
                        <option key={c} value={c}>
                          {t(`alert_${c}`)}
                        </option>
                      ))}
                    </select>
                  ) : (
                    t(`alert_${m.alerts}`)
                  )}
                  {!m.chosen && <span class="hint"> ({t('byRole')})</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>

      <h2>{t('staffChats')}</h2>
      <p class="hint">{t('staffChatsHint')}</p>
      {alerts.chats.length === 0 ? (
        <p>{t('noStaffChats')}</p>
      ) : (
        <Scroll label={t('staffChats')}>
          <table data-testid="staff-chats">
            <caption>{t('staffChats')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('messenger')}</th>
                <th scope="col">{t('chat')}</th>
                <th scope="col">{t('linkedBy')}</th>
                <th scope="col">{t('linkedAt')}</th>
                {writable && <td />}
              </tr>
            </thead>
            <tbody>
              {alerts.chats.map((c) => (
                <tr key={`${c.channel}:${c.chatId}`}>
                  <td>{BOT_NAMES[c.channel]}</td>
                  <td>{c.chatId}</td>
                  <td>{memberName(c.linkedBy)}</td>
                  <td>{formatWhen(session, c.linkedAt)}</td>
                  {writable && (
                    <td>
                      <button type="button" class="danger" aria-label={`${t('unlink')}: ${BOT_NAMES[c.channel]} ${c.chatId}`} onClick={() => void unlink(c.channel, c.chatId)}>
                        {t('unlink')}
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      {writable &&
        (alerts.bots.length === 0 ? (
          <p class="hint">{t('noBots')}</p>
        ) : (
          <p class="inline">
            {alerts.bots.map((channel) => (
              <button key={channel} type="button" disabled={action.busy} onClick={() => void linkChat(channel)}>
                {t('linkChat', { messenger: BOT_NAMES[channel] })}
              </button>
            ))}
          </p>
        ))}
      {link && (
        <p class="secret" role="status">
          {t('openToLink', { messenger: BOT_NAMES[link.channel] })}{' '}
          <a href={link.link} target="_blank" rel="noopener noreferrer">
            {link.link}
          </a>
          <br />
          <button type="button" class="link" onClick={() => void load()}>
            {t('refreshChats')}
          </button>
        </p>
      )}
      <p class="hint">{t('thresholdNote', { locations: draft.locationThresholds.map((l) => `${nameOf(l.locationId)} ≤ ${l.threshold}`).join(', ') || '—' })}</p>
    </section>
  );
}
