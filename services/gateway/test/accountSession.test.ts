import pg from 'pg';
import { SESSION_IDLE_MS } from '@rrs/proto';
import { startDirectoryStack, type DirectoryStack } from './directoryStack';

/** The console's session cookie and its life, on the gateway in front of the real contacts service. */
describe('account session', () => {
  let trusting: DirectoryStack;
  let direct: DirectoryStack;
  let organizationId: string;
  const PASSWORD = 'session-password-1';

  beforeAll(async () => {
    // Behind one proxy that terminates TLS (TRUST_PROXY=1), and reached directly.
    trusting = await startDirectoryStack('account-session-proxy', { trustProxy: 1 });
    direct = await startDirectoryStack('account-session-direct');
    for (const stack of [trusting, direct]) {
      const org = await stack.contacts.directory.createOrganization({ name: 'Session Org', plan: 'standard', emailConfirmed: true });
      organizationId = org.id;
      await stack.contacts.members.ensureMember({ organizationId, email: 'owner@session.example', role: 'owner', password: PASSWORD });
    }
  });
  afterAll(async () => {
    await trusting?.close();
    await direct?.close();
  });

  const signIn = (base: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ email: 'owner@session.example', password: PASSWORD }) });

  it('marks the cookie Secure when a trusted proxy says the request came over https, and not otherwise', async () => {
    const overTls = await signIn(trusting.base, { 'x-forwarded-proto': 'https' });
    expect(overTls.status).toBe(200);
    expect(overTls.headers.get('set-cookie')).toMatch(/; HttpOnly; SameSite=Lax; Max-Age=\d+; Secure$/);
    const plain = await signIn(trusting.base);
    expect(plain.headers.get('set-cookie')).not.toMatch(/Secure/);
    // A client that is not a trusted proxy cannot claim https.
    const claimed = await signIn(direct.base, { 'x-forwarded-proto': 'https' });
    expect(claimed.headers.get('set-cookie')).not.toMatch(/Secure/);
  });

  it('stores the password as an argon2id hash, never as given', async () => {
    const client = new pg.Client({ connectionString: direct.db.url });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT password_hash FROM contacts.members WHERE email = 'owner@session.example'`);
      expect(rows[0].password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      expect(rows[0].password_hash).not.toContain(PASSWORD);
    } finally {
      await client.end();
    }
  });

  it('ends a session left idle past its idle limit: 401 invalid_session', async () => {
    const res = await signIn(direct.base);
    const cookie = res.headers.get('set-cookie')!.split(';')[0];
    expect((await fetch(`${direct.base}/account/v1/session`, { headers: { cookie } })).status).toBe(200);
    const client = new pg.Client({ connectionString: direct.db.url });
    await client.connect();
    try {
      await client.query(`UPDATE contacts.member_sessions SET last_seen_at = now() - $1 * interval '1 millisecond'`, [SESSION_IDLE_MS + 1000]);
    } finally {
      await client.end();
    }
    const idle = await fetch(`${direct.base}/account/v1/session`, { headers: { cookie } });
    expect([idle.status, ((await idle.json()) as { code: string }).code]).toEqual([401, 'invalid_session']);
  });
});
