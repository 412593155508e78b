import { waitFor } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/**
 * The thank-you page's public review links go through `/r/<token>/go/<index>`: the click is recorded
 * once per review request and site, and the customer is redirected (302) to the site without the token
 * leaking in a Referer. Against the real gateway → cascade-scheduler → Postgres.
 */
describe('public review link clicks /r/<token>/go/<index>', () => {
  let stack: CascadeStack;

  beforeAll(async () => {
    stack = await startCascadeStack();
  }, 30_000);
  afterAll(async () => {
    await stack.close();
  });

  async function cascadeToken(email: string): Promise<string> {
    const res = await fetch(`${stack.base}/api/v1/cascades`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' },
      body: JSON.stringify({ locationId: stack.locationId, recipients: [{ name: 'Anna', email }] }),
    });
    const { id } = (await res.json()) as { id: string };
    const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === id), { what: 'email step sent' });
    return step.reviewUrl.split('/r/')[1];
  }

  const clicks = async (token: string) =>
    (await stack.pool.query(`SELECT c.provider, c.url FROM public_link_clicks c JOIN review_requests rr ON rr.id = c.review_request_id WHERE rr.token = $1`, [token])).rows;
  const go = (path: string) => fetch(`${stack.base}${path}`, { redirect: 'manual' });

  it('redirects a rated link to the site (302, no Referer), recording the click once', async () => {
    const token = await cascadeToken('clicker@example.com');
    await stack.scheduler.reviews.submitRating(token, 5);
    for (let i = 0; i < 2; i++) {
      const res = await go(`/r/${token}/go/0`);
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('https://g.example/r');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    expect(await clicks(token)).toEqual([{ provider: 'google', url: 'https://g.example/r' }]);
  });

  it('an unknown token, index or a link not rated yet: the not-found page, nothing recorded', async () => {
    const token = await cascadeToken('not-clicker@example.com');
    // Not rated: the page has shown no links yet.
    const unrated = await go(`/r/${token}/go/0`);
    expect(unrated.status).toBe(404);
    expect(unrated.headers.get('location')).toBeNull();
    await stack.scheduler.reviews.submitRating(token, 4);
    for (const path of [`/r/${token}/go/1`, `/r/${token}/go/x`, `/r/${token}/go/-1`, `/r/AAAAAAAAAAAAAAAAAAAAAA/go/0`]) {
      const res = await go(path);
      expect({ path, status: res.status, location: res.headers.get('location') }).toEqual({ path, status: 404, location: null });
      await expect(res.text()).resolves.toContain('<html');
    }
    expect(await clicks(token)).toEqual([]);
    const { rows } = await stack.pool.query('SELECT count(*)::int AS n FROM public_link_clicks');
    expect(rows[0].n).toBe(1);
  });

  it('an expired link: the expired page (410), nothing recorded', async () => {
    const token = await cascadeToken('late-clicker@example.com');
    // The send recorded first: a result still on its way (results linger up to 20 ms to share a batch)
    // would write a fresh send time over the aged one below.
    await waitFor(
      async () => ((await stack.pool.query(`SELECT 1 FROM recipient_steps rs JOIN review_requests rr ON rr.recipient_id = rs.recipient_id WHERE rr.token = $1 AND rs.status = 'sent'`, [token])).rowCount ?? 0) > 0,
      { what: 'step recorded as sent' },
    );
    await stack.scheduler.reviews.submitRating(token, 5);
    await stack.pool.query(`UPDATE review_requests SET created_at = now() - interval '400 days' WHERE token = $1`, [token]);
    await stack.pool.query(`UPDATE recipient_steps SET sent_at = now() - interval '400 days' WHERE recipient_id = (SELECT recipient_id FROM review_requests WHERE token = $1)`, [token]);
    const res = await go(`/r/${token}/go/0`);
    expect(res.status).toBe(410);
    expect(await clicks(token)).toEqual([]);
  });
});
