import { useEffect, useState } from 'preact/hooks';
import { formatWhen, zoneOf } from '../time';
import { call } from '../api';
import { canChange, ErrorNote, type PageProps, Scroll } from '../widgets';
import { useAction } from '../parts';

interface Step {
  order: number;
  channel: string;
  status: string;
  dueAt: string | null;
  sentAt: string | null;
  skippedAt: string | null;
  deliveredAt: string | null;
  provider: string | null;
  reason: string | null;
  reroute: { to: string; hops: Array<{ from: string; to: string; reason: string }> } | null;
}
interface Recipient {
  id: string;
  name: string | null;
  email: string | null;
  phone: string | null;
  status: string;
  finishReason: string | null;
  rating: number | null;
  feedback: string | null;
  openedAt: string | null;
  ratedAt: string | null;
  steps: Step[];
}
interface Cascade {
  id: string;
  status: string;
  externalId: string | null;
  recipients: Recipient[];
}


/** One cascade: each recipient (when it opened the form and rated) with its steps' timeline (due, sent, delivered and by which provider, skipped and why, rerouted). */
export function CascadePage({ t, session, id }: PageProps & { id: string }) {
  const [cascade, setCascade] = useState<Cascade | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [confirming, setConfirming] = useState(false);
  const [stopped, setStopped] = useState<number | null>(null);
  const stop = useAction();
  const when = (iso: string | null) => formatWhen(session, iso);
  const load = () => call<Cascade>('GET', `/cascades/${encodeURIComponent(id)}`).then(setCascade, setError);
  useEffect(() => {
    void load();
  }, [id]);
  // Stopping takes a second click: nothing more goes to its running recipients, and it cannot be undone.
  const stopCascade = () =>
    stop.run(async () => {
      const r = await call<{ canceled: number }>('POST', `/cascades/${encodeURIComponent(id)}/cancel`);
      setConfirming(false);
      setStopped(r.canceled);
      await load();
    });
  return (
    <section>
      <p>
        <a href="#/cascades">← {t('cascades')}</a>
      </p>
      <h1>
        {t('cascade')} {cascade?.externalId ?? id}
      </h1>
      <ErrorNote error={error} t={t} />
      {cascade && (
        <>
          <p>
            {t('status')}: {t(`status_${cascade.status}` as 'status_running')}
          </p>
          <ErrorNote error={stop.error} t={t} />
          {stopped !== null && (
            <p class="ok" role="status">
              {t('cascadeStopped', { count: stopped })}
            </p>
          )}
          {canChange(session) && cascade.status === 'running' && (
            <p class="inline">
              {confirming ? (
                <>
                  <span>{t('stopConfirm')}</span>
                  <button type="button" class="danger" disabled={stop.busy} onClick={() => void stopCascade()}>
                    {t('stopCascadeConfirm')}
                  </button>
                  <button type="button" class="link" onClick={() => setConfirming(false)}>
                    {t('cancel')}
                  </button>
                </>
              ) : (
                <button type="button" class="danger" onClick={() => setConfirming(true)}>
                  {t('stopCascade')}
                </button>
              )}
            </p>
          )}
          <p class="hint">{t('timesIn', { zone: zoneOf(session) })}</p>
          {cascade.recipients.map((r) => (
            <article key={r.id} class="card wide">
              <h2>{[r.name, r.email, r.phone].filter(Boolean).join(' · ') || r.id}</h2>
              <p>
                {t('status')}: {r.status}
                {r.finishReason ? ` (${r.finishReason})` : ''}
                {r.rating ? ` · ${t('rating')}: ${r.rating}` : ''}
              </p>
              {(r.openedAt || r.ratedAt) && (
                <p data-testid="recipient-times">
                  {t('openedAt')}: {when(r.openedAt)} · {t('ratedAtTime')}: {when(r.ratedAt)}
                </p>
              )}
              {r.feedback && <blockquote>{r.feedback}</blockquote>}
              <Scroll label={t('steps')}>
<table>
                <caption>{t('steps')}</caption>
                <thead>
                  <tr>
                    <th scope="col">#</th>
                    <th scope="col">{t('channel')}</th>
                    <th scope="col">{t('status')}</th>
                    <th scope="col">{t('due')}</th>
                    <th scope="col">{t('sentAt')}</th>
                    <th scope="col">{t('reason')}</th>
                    <th scope="col">{t('deliveredAt')}</th>
                    <th scope="col">{t('provider')}</th>
                  </tr>
                </thead>
                <tbody>
                  {r.steps.map((s) => (
                    <tr key={s.order}>
                      <td>{s.order}</td>
                      <td>{s.reroute ? `${s.channel} → ${s.reroute.to}` : s.channel}</td>
                      <td>{s.status}</td>
                      <td>{when(s.dueAt)}</td>
                      <td>{when(s.sentAt ?? s.skippedAt)}</td>
                      <td>{s.reason ?? (s.reroute ? s.reroute.hops.map((h) => h.reason).join(', ') : '—')}</td>
                      <td>{when(s.deliveredAt)}</td>
                      <td>{s.provider ?? '—'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
</Scroll>
            </article>
          ))}
        </>
      )}
    </section>
  );
}
