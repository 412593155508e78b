import type { Browser } from 'playwright-core';
import { launchBrowser, waitFor } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/**
 * The public review form driven in headless Chromium at a phone-sized viewport, against the real
 * gateway → cascade-scheduler → Postgres, plus its CSRF, rate-limit and unknown-link behaviour.
 */
describe('review form /r/<token> in headless Chromium', () => {
  let stack: CascadeStack;
  let browser: Browser;

  beforeAll(async () => {
    stack = await startCascadeStack();
    browser = await launchBrowser();
  }, 30_000);
  afterAll(async () => {
    await browser?.close();
    await stack.close();
  });

  async function cascadeToken(email: string): Promise<{ token: string; cascadeId: string }> {
    const res = await fetch(`${stack.base}/api/v1/cascades`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' },
      body: JSON.stringify({ locationId: stack.locationId, recipients: [{ name: 'Anna', email, phone: '+79161234567' }] }),
    });
    const { id } = (await res.json()) as { id: string };
    const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === id), { what: 'email step sent' });
    return { token: step.reviewUrl.split('/r/')[1], cascadeId: id };
  }

  const phone = () => browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true, locale: 'en-US' });

  it('a low rating: stars → private feedback form + public links → feedback recorded; the recipient is finished and its SMS canceled', async () => {
    const { token, cascadeId } = await cascadeToken('low-form@example.com');
    const context = await phone();
    const page = await context.newPage();
    const res = await page.goto(`${stack.base}/r/${token}`);
    expect(res?.status()).toBe(200);
    await expect(page.locator('h1').textContent()).resolves.toContain('How would you rate Tverskaya?');
    // Nothing overflows the phone's width.
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await page.locator('label[for="star2"]').tap();
    await page.getByRole('button', { name: 'Send rating' }).tap();
    await page.waitForURL(`${stack.base}/r/${token}`);
    await expect(page.getByTestId('your-rating').textContent()).resolves.toBe('Your rating: 2 of 5');
    // Every rater, low or high, is shown the public review links.
    // …through the redirect that records the click (publicLinkClicks.test.ts).
    await expect(page.getByTestId('public-links').locator('a').getAttribute('href')).resolves.toBe(`/r/${token}/go/0`);
    await page.locator('textarea[name="text"]').fill('Coffee was cold');
    await page.getByRole('button', { name: 'Send to the team' }).tap();
    await page.getByTestId('feedback-thanks').waitFor();
    await context.close();

    const { rows } = await stack.pool.query(
      `SELECT rr.status, rr.opened_at IS NOT NULL AS opened, rr.public_links_shown_at IS NOT NULL AS shown, r.rating, r.feedback, r.finish_reason
         FROM review_requests rr JOIN recipients r ON r.id = rr.recipient_id WHERE rr.token = $1`,
      [token],
    );
    expect(rows[0]).toEqual({ status: 'feedback', opened: true, shown: true, rating: 2, feedback: 'Coffee was cold', finish_reason: 'rated' });
    const api = await fetch(`${stack.base}/api/v1/cascades/${cascadeId}`, { headers: { authorization: `Bearer ${stack.keys.paid}` } });
    const body = (await api.json()) as { recipients: Array<{ rating: number; feedback: string; steps: Array<{ status: string }> }> };
    expect(body.recipients[0]).toMatchObject({ rating: 2, feedback: 'Coffee was cold' });
    expect(body.recipients[0].steps.map((s) => s.status)).toEqual(['sent', 'canceled']);
  });

  it('a high rating shows the public links and no feedback form; going back shows the recorded rating, once', async () => {
    const { token } = await cascadeToken('high-form@example.com');
    const context = await phone();
    const page = await context.newPage();
    await page.goto(`${stack.base}/r/${token}`);
    await page.locator('label[for="star5"]').tap();
    await page.getByRole('button', { name: 'Send rating' }).tap();
    await page.getByTestId('public-links').waitFor();
    expect(await page.locator('textarea').count()).toBe(0);
    // Back to the old form and submit again: the first rating stands.
    await page.goBack();
    await page.reload();
    await expect(page.getByTestId('your-rating').textContent()).resolves.toBe('Your rating: 5 of 5');
    await context.close();
    const { rows } = await stack.pool.query('SELECT count(*)::int AS n FROM ratings ra JOIN review_requests rr ON rr.id = ra.review_request_id WHERE rr.token = $1', [token]);
    expect(rows[0].n).toBe(1);
  });

  it('a review-request link behaves like a cascade link', async () => {
    const res = await fetch(`${stack.base}/api/v1/review-requests`, {
      method: 'POST', headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' }, body: JSON.stringify({ locationId: stack.locationId, customerName: 'Ivan' }),
    });
    const { token } = (await res.json()) as { token: string };
    const context = await phone();
    const page = await context.newPage();
    await page.goto(`${stack.base}/r/${token}`);
    await page.locator('label[for="star1"]').tap();
    await page.getByRole('button', { name: 'Send rating' }).tap();
    await page.locator('textarea[name="text"]').waitFor();
    await page.getByTestId('public-links').waitFor();
    await context.close();
  });

  it('an unknown or malformed token gets a friendly 404 page', async () => {
    const context = await phone();
    const page = await context.newPage();
    for (const path of ['/r/AAAAAAAAAAAAAAAAAAAAAA', '/r/bad', '/u/AAAAAAAAAAAAAAAAAAAAAA']) {
      const res = await page.goto(`${stack.base}${path}`);
      expect(res?.status()).toBe(404);
      expect(res?.headers()['content-type']).toContain('text/html');
      await expect(page.locator('h1').textContent()).resolves.toMatch(/Ссылка не найдена|Link not found/);
    }
    await context.close();
  });

  it('refuses a POST without the CSRF cookie and value, recording nothing', async () => {
    const { token } = await cascadeToken('csrf@example.com');
    const forged = await fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' }, body: 'rating=1&csrf=abc', redirect: 'manual' });
    expect(forged.status).toBe(403);
    const page = await fetch(`${stack.base}/r/${token}`);
    const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]{32})"/.exec(await page.text())?.[1];
    const crossSite = await fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' }, body: `rating=1&csrf=${csrf}`, redirect: 'manual' });
    expect(crossSite.status).toBe(403);
    const { rows } = await stack.pool.query('SELECT count(*)::int AS n FROM ratings ra JOIN review_requests rr ON rr.id = ra.review_request_id WHERE rr.token = $1', [token]);
    expect(rows[0].n).toBe(0);
    const ok = await fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `rating=4&csrf=${csrf}`, redirect: 'manual' });
    expect(ok.status).toBe(303);
  });

  it('rate-limits submits per token and IP', async () => {
    const { token } = await cascadeToken('flood@example.com');
    const statuses: number[] = [];
    for (let i = 0; i < 22; i++) {
      const r = await fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'rating=9', redirect: 'manual' });
      statuses.push(r.status);
    }
    expect(statuses.slice(0, 20).every((s) => s === 403)).toBe(true);
    expect(statuses.slice(20)).toEqual([429, 429]);
  });

  it('unsubscribe: the GET only asks; the POST opts the email out and finishes the recipient', async () => {
    const { token, cascadeId } = await cascadeToken('leave@example.com');
    const context = await phone();
    const page = await context.newPage();
    await page.goto(`${stack.base}/u/${token}`);
    // The address is masked (docs/security.md, "Links expire"): the page tells its owner which one, not a link holder.
    const text = await page.locator('body').textContent();
    expect(text).toContain('l•••@e•••.com');
    expect(text).not.toContain('leave@example.com');
    const before = await stack.pool.query('SELECT count(*)::int AS n FROM suppressions');
    expect(before.rows[0].n).toBe(0);
    await page.getByRole('button', { name: 'Unsubscribe' }).tap();
    await page.getByTestId('unsubscribed').waitFor();
    await context.close();
    // The person's phone is theirs too: the opt-out covers every channel (docs/customer-respect.md).
    const { rows } = await stack.pool.query(`SELECT address, channel, source FROM suppressions ORDER BY address`);
    expect(rows).toEqual([
      { address: '+79161234567', channel: 'EMAIL', source: 'unsubscribe_page' },
      { address: 'leave@example.com', channel: 'EMAIL', source: 'unsubscribe_page' },
    ]);
    const c = await stack.scheduler.cascades.get(stack.orgIds.paid, cascadeId);
    expect(c.recipients[0].finishReason).toBe('unsubscribed');
  });
});
