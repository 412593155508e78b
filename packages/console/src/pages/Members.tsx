import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote, Scroll, type PageProps } from '../App';
import { useAction } from '../parts';
import { MEMBER_ROLES } from '../rules';

interface Member {
  id: string;
  email: string;
  name: string;
  role: (typeof MEMBER_ROLES)[number];
  createdAt: string;
}

/** The organization's people; an owner invites more (the link is shown once, to hand over). */
export function MembersPage({ t, session }: PageProps) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<string>('admin');
  const [link, setLink] = useState<string | null>(null);
  const action = useAction();
  const isOwner = session.member.role === 'owner';

  const load = () => call<{ members: Member[] }>('GET', '/members').then((r) => setMembers(r.members), action.setError);
  useEffect(() => {
    void load();
  }, []);
  const invite = (e: Event) => {
    e.preventDefault();
    setLink(null);
    void action.run(async () => {
      const r = await call<{ acceptUrl: string }>('POST', '/members/invitations', { body: { email, role } });
      setLink(r.acceptUrl);
      setEmail('');
    });
  };

  return (
    <section>
      <h1>{t('members')}</h1>
      {!isOwner && <p class="note">{t('ownersInvite')}</p>}
      <ErrorNote error={action.error} t={t} />
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
              </tr>
            </thead>
            <tbody>
              {members.map((m) => (
                <tr key={m.id}>
                  <td>{m.name || '—'}</td>
                  <td>{m.email}</td>
                  <td>{t(`role_${m.role}`)}</td>
                  <td>{new Date(m.createdAt).toLocaleDateString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      {isOwner && (
        <form onSubmit={invite} class="card">
          <h2>{t('invite')}</h2>
          <label for="invite-email">{t('email')}</label>
          <input id="invite-email" type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          <label for="invite-role">{t('role')}</label>
          <select id="invite-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            {MEMBER_ROLES.map((r) => (
              <option key={r} value={r}>
                {t(`role_${r}`)}
              </option>
            ))}
          </select>
          {link && (
            <div class="secret" role="status">
              <p>{t('inviteLinkOnce')}</p>
              <label for="invite-link">{t('inviteLink')}</label>
              <input id="invite-link" readOnly value={link} onFocus={(e) => e.currentTarget.select()} />
            </div>
          )}
          <button type="submit" disabled={action.busy}>
            {t('invite')}
          </button>
        </form>
      )}
    </section>
  );
}
