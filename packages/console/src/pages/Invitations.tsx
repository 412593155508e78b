import { useEffect, useState } from 'preact/hooks';
import { formatDay, formatWhen } from '../time';
import { call, newIdempotencyKey } from '../api';
import { ErrorNote, type PageProps } from '../widgets';
import { useAction } from '../parts';
import { MEMBER_ROLES } from '../rules';
import { ListTable } from './ListTable';

interface Invitation {
  id: string;
  email: string;
  role: (typeof MEMBER_ROLES)[number];
  expiresAt: string;
  createdAt: string;
}

/**
 * Pending invitations (owners revoke them) and, for owners, the invite form. The link goes only to the
 * person's mailbox (the answer never holds it); one Idempotency-Key per filled-in form, so a double
 * submit or a retry after "could not be queued" makes one invitation and sends its email once.
 */
export function InvitationsSection({ t, session }: PageProps) {
  const [invitations, setInvitations] = useState<Invitation[] | null>(null);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<string>('admin');
  const [sent, setSent] = useState<{ email: string; emailed: boolean } | null>(null);
  const [idempotencyKey, setIdempotencyKey] = useState(newIdempotencyKey);
  const action = useAction();
  const isOwner = session.member.role === 'owner';

  const load = () => call<{ invitations: Invitation[] }>('GET', '/members/invitations').then((r) => setInvitations(r.invitations), action.setError);
  useEffect(() => {
    void load();
  }, []);
  const invite = (e: Event) => {
    e.preventDefault();
    setSent(null);
    void action.run(async () => {
      const r = await call<{ emailed: boolean }>('POST', '/members/invitations', { body: { email, role }, idempotencyKey });
      setSent({ email, emailed: r.emailed });
      // Not queued: the same form sent again repeats this invitation (same key) and queues its email.
      if (r.emailed) {
        setEmail('');
        setIdempotencyKey(newIdempotencyKey());
      }
      await load();
    });
  };
  const revoke = (invitation: Invitation) =>
    action.run(async () => {
      await call('DELETE', `/invitations/${encodeURIComponent(invitation.id)}`);
      await load();
    });

  return (
    <>
      <h2>{t('pendingInvitations')}</h2>
      <ErrorNote error={action.error} t={t} />
      <ListTable
        t={t}
        rows={invitations}
        caption={t('pendingInvitations')}
        empty="noInvitations"
        head={
          <>
            <th scope="col">{t('email')}</th>
            <th scope="col">{t('role')}</th>
            <th scope="col">{t('expires')}</th>
            {isOwner && <th scope="col">{t('actions')}</th>}
          </>
        }
        row={(i) => (
          <tr key={i.id}>
            <td>{i.email}</td>
            <td>{t(`role_${i.role}`)}</td>
            <td>{formatWhen(session, i.expiresAt)}</td>
            {isOwner && (
              <td>
                <button type="button" class="danger" onClick={() => void revoke(i)}>
                  {t('revokeInvitation')}
                </button>
              </td>
            )}
          </tr>
        )}
      />
      {isOwner && (
        <form onSubmit={invite} class="card">
          <h2>{t('invite')}</h2>
          <label for="invite-email">{t('email')}</label>
          <input id="invite-email" type="email" required value={email} onInput={(e) => {
              setEmail(e.currentTarget.value);
              setIdempotencyKey(newIdempotencyKey());
            }} />
          <label for="invite-role">{t('role')}</label>
          <select id="invite-role" value={role} onChange={(e) => {
            setRole(e.currentTarget.value);
            setIdempotencyKey(newIdempotencyKey());
          }}>
            {MEMBER_ROLES.map((r) => (
              <option key={r} value={r}>
                {t(`role_${r}`)}
              </option>
            ))}
          </select>
          {sent && (
            <div class="secret" role="status">
              <p>{sent.emailed ? t('invitationEmailed', { email: sent.email }) : t('notQueued')}</p>
            </div>
          )}
          <button type="submit" disabled={action.busy}>
            {t('invite')}
          </button>
        </form>
      )}
    </>
  );
}
