import { LINK_LIFETIME_DAYS } from '@rrs/proto';
import { waitFor } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/**
 * Links expire (LINK_LIFETIME_DAYS of @rrs/proto, applied by the scheduler): a review link works for
 * 30 days after the last message to its recipient, an unsubscribe link (page and RFC 8058 one-click) for
 * 365; then 410 with a page in the form's language, and nothing is recorded.
 */
describe('review and unsubscribe links expire', () => {
  let stack: CascadeStack;

  beforeAll(async () => {
    stack = await startCascadeStack({ locale: 'ru' });
  });
  afterAll(() => stack.close());

  /** A one-step cascade's link (a channel send): once its step is sent the recipient waits for a rating, and nothing saves it meanwhile. */
  async function cascadeToken(email: string): Promise<string> {
    const res = await fetch(`${stack.base}/api/v1/channels/email/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' },
      body: JSON.stringify({ locationId: stack.locationId, recipients: [{ name: 'Anna', email }] }),
    });
    const { id } = (await res.json()) as { id: string };
    const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === id), { what: 'email step sent' });
    // The scheduler records the step as sent once the sender's result is back.
    const token = step.reviewUrl.split('/r/')[1];
    // Settled: the send recorded and the recipient waiting for its next step (no save of it in flight).
    await waitFor(
      async () => ((await stack.pool.query(`SELECT 1 FROM recipient_steps rs JOIN review_requests rr ON rr.recipient_id = rs.recipient_id JOIN recipients r ON r.id = rs.recipient_id WHERE rr.token = $1 AND rs.sent_at IS NOT NULL AND r.status = 'waiting'`, [token])).rowCount ?? 0) > 0,
      { what: 'step recorded as sent' },
    );
    return token;
  }

  /**
   * Puts the link's making and its recipient's sends `days` in the past. Under the recipient's row lock,
   * as the scheduler saves a recipient: a save that loaded the steps before would write the old send
   * time back.
   */
  async function age(token: string, days: number, path: string, expected: number): Promise<void> {
    const client = await stack.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT 1 FROM recipients WHERE id = (SELECT recipient_id FROM review_requests WHERE token = $1) FOR UPDATE', [token]);
      await client.query(`UPDATE review_requests SET created_at = now() - make_interval(days => $2) WHERE token = $1`, [token, days]);
      await client.query(
        `UPDATE recipient_steps SET sent_at = now() - make_interval(days => $2) WHERE recipient_id = (SELECT recipient_id FROM review_requests WHERE token = $1) AND sent_at IS NOT NULL`,
        [token, days],
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await fetch(`${stack.base}${path}`)).status).toBe(expected);
  }

  const count = async (sql: string, token: string) => Number((await stack.pool.query(sql, [token])).rows[0].n);
  const ratings = (token: string) => count('SELECT count(*) AS n FROM ratings ra JOIN review_requests rr ON rr.id = ra.review_request_id WHERE rr.token = $1', token);
  const suppressions = (token: string) => count(`SELECT count(*) AS n FROM suppressions su JOIN review_requests rr ON rr.organization_id = su.organization_id JOIN recipients r ON r.id = rr.recipient_id WHERE rr.token = $1 AND su.address = r.email`, token);
  const form = async (path: string) => {
    const page = await fetch(`${stack.base}${path}`);
    return { page, cookie: page.headers.get('set-cookie')?.split(';')[0] ?? '', csrf: /name="csrf" value="([0-9a-f]+)"/.exec(await page.clone().text())?.[1] ?? '' };
  };

  it('keeps a review link working within its lifetime, counted from the last message', async () => {
    const token = await cascadeToken('fresh@example.com');
    await age(token, LINK_LIFETIME_DAYS.review - 1, `/r/${token}`, 200);
    expect((await fetch(`${stack.base}/r/${token}`)).status).toBe(200);
  });

  it('answers an expired review link 410 with a page in the form’s language, and records no rating', async () => {
    const token = await cascadeToken('late@example.com');
    const { cookie, csrf } = await form(`/r/${token}`);
    await age(token, LINK_LIFETIME_DAYS.review + 1, `/r/${token}`, 410);
    const page = await fetch(`${stack.base}/r/${token}`);
    expect(page.status).toBe(410);
    const html = await page.text();
    expect(html).toContain('<html lang="ru">');
    expect(html).toContain('Срок действия этой ссылки истёк');
    const rated = await fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, rating: '5' }) });
    expect(rated.status).toBe(410);
    expect(await ratings(token)).toBe(0);
    // The unsubscribe link lives longer: an old email still lets its reader opt out.
    expect((await fetch(`${stack.base}/u/${token}`)).status).toBe(200);
  });

  it('answers an unsubscribe link 410 after its longer lifetime, page and one-click alike, recording nothing', async () => {
    const token = await cascadeToken('gone@example.com');
    await age(token, LINK_LIFETIME_DAYS.unsubscribe + 1, `/u/${token}`, 410);
    const page = await fetch(`${stack.base}/u/${token}`);
    expect(page.status).toBe(410);
    expect(await page.text()).toContain('Срок действия ссылки истёк');
    const oneClick = await fetch(`${stack.base}/u/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(oneClick.status).toBe(410);
    expect(await suppressions(token)).toBe(0);
  });

  it('expires a link made by POST /review-requests from when it was made', async () => {
    const res = await fetch(`${stack.base}/api/v1/review-requests`, {
      method: 'POST', headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' }, body: JSON.stringify({ locationId: stack.locationId, customerName: 'Ivan' }),
    });
    const { token } = (await res.json()) as { token: string };
    expect((await fetch(`${stack.base}/r/${token}`)).status).toBe(200);
    await age(token, LINK_LIFETIME_DAYS.review + 1, `/r/${token}`, 410);
    expect((await fetch(`${stack.base}/r/${token}`)).status).toBe(410);
  });
});
