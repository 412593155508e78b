import { useEffect, useState } from 'preact/hooks';
import { formatDay, formatWhen } from '../time';
import { call } from '../api';
import { ErrorNote, Scroll, type PageProps } from '../widgets';
import { useAction } from '../parts';
import { MEMBER_ROLES } from '../rules';
import { InvitationsSection } from './Invitations';

interface Member {
  id: string;
  email: string;
  name: string;
  role: (typeof MEMBER_ROLES)[number];
  createdAt: string;
}

/*
 * Row buttons are named by their text alone (the row says whose they are), so no control on the page
 * other than the invite form's fields is named "Role" or "Email".
 */
/**
 * One person's row: their role to change, a reset link to email, removal after a confirming second click
 * (owners only). The note about a change is shown once the list shows it.
 */
function MemberRow({ t, session, member, isOwner, onChanged, run, say }: PageProps & { member: Member; isOwner: boolean; onChanged: () => Promise<void>; run: (action: () => Promise<unknown>) => Promise<void>; say: (note: string) => void }) {
  const [role, setRole] = useState<string>(member.role);
  const [confirming, setConfirming] = useState(false);
  const base = `/members/${encodeURIComponent(member.id)}`;
  const changeRole = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      await call('PATCH', base, { body: { role } });
      await onChanged();
      say(t('roleChanged', { email: member.email, role: t(`role_${role as Member['role']}`) }));
    });
  };
  const remove = () =>
    run(async () => {
      await call('DELETE', base);
      await onChanged();
      say(t('memberRemoved', { email: member.email }));
    });
  const reset = () =>
    run(async () => {
      const r = await call<{ emailed: boolean }>('POST', `${base}/password-reset`);
      say(r.emailed ? t('resetSent', { email: member.email }) : t('notQueued'));
    });
  return (
    <tr>
      <td>{member.name || '—'}</td>
      <td>{member.email}</td>
      <td>
        {isOwner ? (
          <form class="inline" onSubmit={changeRole}>
            <label class="visually-hidden" for={`role-${member.id}`}>
              {t('accessOf', { email: member.email })}
            </label>
            <select id={`role-${member.id}`} value={role} onChange={(e) => setRole(e.currentTarget.value)}>
              {MEMBER_ROLES.map((r) => (
                <option key={r} value={r}>
                  {t(`role_${r}`)}
                </option>
              ))}
            </select>
            <button type="submit" class="link" disabled={role === member.role}>
              {t('changeRole')}
            </button>
          </form>
        ) : (
          t(`role_${member.role}`)
        )}
      </td>
      <td>{formatDay(session, member.createdAt)}</td>
      {isOwner && (
        <td>
          <button type="button" class="link" onClick={() => void reset()}>
            {t('sendReset')}
          </button>{' '}
          {confirming ? (
            <>
              <button type="button" class="danger" onClick={() => void remove()}>
                {t('confirmRemove', { email: member.email })}
              </button>{' '}
              <button type="button" class="link" onClick={() => setConfirming(false)}>
                {t('cancel')}
              </button>
            </>
          ) : (
            <button type="button" class="danger" onClick={() => setConfirming(true)}>
              {t('removeMember')}
            </button>
          )}
        </td>
      )}
    </tr>
  );
}

/** The organization's people; an owner changes roles, removes people, emails reset links and invites (./Invitations.tsx). */
export function MembersPage({ t, session }: PageProps) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const action = useAction();
  const isOwner = session.member.role === 'owner';

  const load = () => call<{ members: Member[] }>('GET', '/members').then((r) => setMembers(r.members), action.setError);
  useEffect(() => {
    void load();
  }, []);
  const run = (work: () => Promise<unknown>) => {
    setNote(null);
    return action.run(work);
  };

  return (
    <section>
      <h1>{t('members')}</h1>
      {!isOwner && <p class="note">{t('ownersInvite')}</p>}
      <ErrorNote error={action.error} t={t} />
      {note && (
        <p role="status" class="ok">
          {note}
        </p>
      )}
      {members === null ? (
        <p role="status">{t('loading')}</p>
      ) : (
        <Scroll label={t('members')}>
          <table>
            <caption>{t('members')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('name')}</th>
                <th scope="col">{t('email')}</th>
                <th scope="col">{t('role')}</th>
                <th scope="col">{t('since')}</th>
                {isOwner && <th scope="col">{t('actions')}</th>}
              </tr>
            </thead>
            <tbody>
              {members.map((m) => (
                <MemberRow key={`${m.id}:${m.role}`} t={t} session={session} member={m} isOwner={isOwner} onChanged={load} run={run} say={setNote} />
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <InvitationsSection t={t} session={session} />
    </section>
  );
}
