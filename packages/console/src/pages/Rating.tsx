import { useEffect, useState } from 'preact/hooks';
import { call, newIdempotencyKey, type Member } from '../api';
import { useLocations } from '../filters';
import type { MessageKey } from '../i18n';
import { useAction } from '../parts';
import { formatWhen, zoneOf } from '../time';
import { canChange, ErrorNote, ReadOnlyNote, type PageProps } from '../widgets';
import { RatingStatus, type Rating } from './Ratings';

interface HistoryEntry {
  at: string;
  memberId: string | null;
  kind: 'feedback' | 'alerted' | 'assigned' | 'unassigned' | 'resolved' | 'reopened' | 'noted' | 'replied';
  text: string | null;
  target: string | null;
}
interface RatingDetail {
  rating: Rating;
  history: HistoryEntry[];
  canReply: boolean;
  replyRefusal: 'customer_has_no_email' | 'customer_opted_out' | null;
}

/**
 * One rating of the inbox as a workflow item: the rating and feedback, its status and response target,
 * the actions (take it or give it to a member, a note, resolve with a note, reopen), a reply to the
 * customer by email, and its history — every change with who and when. A viewer sees it all and acts on
 * nothing (the API refuses anyway).
 */
export function RatingPage({ t, session, id }: PageProps & { id: string }) {
  const [detail, setDetail] = useState<RatingDetail | null>(null);
  const [members, setMembers] = useState<Member[]>([]);
  const [assignee, setAssignee] = useState('');
  const [note, setNote] = useState('');
  const [resolution, setResolution] = useState('');
  const [subject, setSubject] = useState('');
  const [reply, setReply] = useState('');
  const [replyKey, setReplyKey] = useState(newIdempotencyKey);
  const [done, setDone] = useState<MessageKey | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const act = useAction();
  const { nameOf } = useLocations();
  const writable = canChange(session);
  const path = `/ratings/${encodeURIComponent(id)}`;

  const load = () => call<RatingDetail>('GET', path).then(setDetail, setLoadError);
  useEffect(() => {
    void load();
    call<{ members: Member[] }>('GET', '/members').then((r) => setMembers(r.members), () => setMembers([]));
  }, [id]);
  const memberName = (memberId: string | null) => (memberId ? (members.find((m) => m.id === memberId)?.name || members.find((m) => m.id === memberId)?.email || memberId) : t('theService'));
  const run = (action: () => Promise<unknown>, said: MessageKey) =>
    act.run(async () => {
      setDone(null);
      await action();
      await load();
      setDone(said);
    });

  if (!detail) {
    return (
      <section>
        <p>
          <a href="#/ratings">← {t('ratings')}</a>
        </p>
        <ErrorNote error={loadError} t={t} />
        {!loadError && <p role="status">{t('loading')}</p>}
      </section>
    );
  }
  const r = detail.rating;
  const open = r.status !== 'resolved';
  return (
    <section>
      <p>
        <a href="#/ratings">← {t('ratings')}</a>
      </p>
      <h1>
        {t('ratingOf', { name: r.customerName || r.contact || '—' })} · {r.rating} / 5
      </h1>
      <ReadOnlyNote t={t} session={session} />
      <p class="hint">{t('timesIn', { zone: zoneOf(session) })}</p>
      <div class="card wide">
        <p>
          <span aria-hidden="true">{'★'.repeat(r.rating) + '☆'.repeat(5 - r.rating)}</span> {r.rating} / 5 · {formatWhen(session, r.ratedAt)} · {nameOf(r.locationId)}
          {r.cascadeId && (
            <>
              {' · '}
              <a href={`#/cascades/${encodeURIComponent(r.cascadeId)}`}>
                {t('cascade')} {r.externalId ?? ''}
              </a>
            </>
          )}
        </p>
        <p>
          {t('customer')}: {[r.customerName, r.contact].filter(Boolean).join(' · ') || '—'}
        </p>
        {r.feedback ? <blockquote data-testid="feedback">{r.feedback}</blockquote> : <p class="hint">{t('noFeedback')}</p>}
        <p>
          {t('status')}: <RatingStatus t={t} session={session} rating={r} />
          {r.assignedTo && ` · ${t('assignedTo')}: ${memberName(r.assignedTo)}`}
        </p>
        {r.resolutionNote && (
          <p>
            {t('resolutionNote')}: {r.resolutionNote}
          </p>
        )}
      </div>
      <ErrorNote error={act.error} t={t} />
      {done && (
        <p class="ok" role="status">
          {t(done)}
        </p>
      )}
      {writable && (
        <>
          {open && (
            <form
              class="card"
              aria-label={t('assign')}
              onSubmit={(e) => {
                e.preventDefault();
                const to = assignee || session.member.id;
                void run(() => call('PUT', `${path}/assignee`, { body: { memberId: to } }), 'assignedDone');
              }}
            >
              <h2>{t('assign')}</h2>
              <label for="assignee">{t('member')}</label>
              <select id="assignee" value={assignee || session.member.id} onChange={(e) => setAssignee(e.currentTarget.value)}>
                {members.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.name || m.email}
                    {m.id === session.member.id ? ` (${t('me')})` : ''}
                  </option>
                ))}
              </select>
              <button type="submit" disabled={act.busy}>
                {t('assign')}
              </button>{' '}
              {r.assignedTo && (
                <button type="button" class="link" disabled={act.busy} onClick={() => void run(() => call('DELETE', `${path}/assignee`), 'unassignedDone')}>
                  {t('unassign')}
                </button>
              )}
            </form>
          )}
          <form
            class="card"
            aria-label={t('addNote')}
            onSubmit={(e) => {
              e.preventDefault();
              void run(() => call('POST', `${path}/notes`, { body: { note } }).then(() => setNote('')), 'noteAdded');
            }}
          >
            <h2>{t('addNote')}</h2>
            <label for="note">{t('note')}</label>
            <textarea id="note" rows={3} maxLength={2000} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
            <button type="submit" disabled={act.busy}>
              {t('addNote')}
            </button>
          </form>
          {open ? (
            <form
              class="card"
              aria-label={t('resolve')}
              onSubmit={(e) => {
                e.preventDefault();
                void run(() => call('POST', `${path}/resolve`, { body: { note: resolution } }).then(() => setResolution('')), 'resolvedDone');
              }}
            >
              <h2>{t('resolve')}</h2>
              <label for="resolution">{t('resolutionNote')}</label>
              <textarea id="resolution" rows={3} maxLength={2000} value={resolution} onInput={(e) => setResolution(e.currentTarget.value)} />
              <button type="submit" disabled={act.busy}>
                {t('resolve')}
              </button>
            </form>
          ) : (
            <p>
              <button type="button" disabled={act.busy} onClick={() => void run(() => call('POST', `${path}/reopen`), 'reopenedDone')}>
                {t('reopen')}
              </button>
            </p>
          )}
          <form
            class="card"
            aria-label={t('replyToCustomer')}
            onSubmit={(e) => {
              e.preventDefault();
              void run(
                () =>
                  call('POST', `${path}/replies`, { body: { subject: subject || undefined, text: reply }, idempotencyKey: replyKey }).then(() => {
                    setReply('');
                    setSubject('');
                    setReplyKey(newIdempotencyKey());
                  }),
                'replySent',
              );
            }}
          >
            <h2>{t('replyToCustomer')}</h2>
            {detail.canReply ? (
              <>
                <p class="hint">{t('replyHint', { to: r.contact ?? '' })}</p>
                <label for="reply-subject">{t('subject')}</label>
                <input id="reply-subject" maxLength={200} value={subject} onInput={(e) => setSubject(e.currentTarget.value)} />
                <label for="reply-text">{t('message')}</label>
                <textarea id="reply-text" rows={5} maxLength={5000} value={reply} onInput={(e) => setReply(e.currentTarget.value)} />
                <button type="submit" disabled={act.busy}>
                  {t('sendReply')}
                </button>
              </>
            ) : (
              <p class="hint" data-testid="reply-refusal">
                {t(detail.replyRefusal === 'customer_opted_out' ? 'replyOptedOut' : 'replyNoEmail')}
              </p>
            )}
          </form>
        </>
      )}
      <h2>{t('history')}</h2>
      <ol class="history" data-testid="history">
        {detail.history.map((h, i) => (
          <li key={i}>
            <strong>{formatWhen(session, h.at)}</strong> · {memberName(h.memberId)}: {t(`history_${h.kind}` as MessageKey, { target: h.kind === 'assigned' ? memberName(h.target) : (h.target ?? '') })}
            {h.text && <blockquote>{h.text}</blockquote>}
          </li>
        ))}
      </ol>
    </section>
  );
}
