import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, waitFor } from '@rrs/testkit';
import { screenshotSizes, seriousViolations } from './browserChecks';
import { addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/** The pages saved at desktop and phone sizes when CONSOLE_SCREENSHOTS_DIR is set (docs/console.md shows them). */
const SCREENSHOTS: Record<string, string> = {
  overview: 'overview',
  'cascades (a location)': 'cascades',
  'a cascade': 'cascade',
  'ratings (handled)': 'ratings',
  'send by hand: CSV of 600 rows sent': 'send',
};

/**
 * The console's data pages in headless Chromium (Debian's, through playwright-core) on the real
 * all-in-one: a public link clicked after rating shows in the funnel; cascades filtered by location and
 * days; a rating marked handled and the inbox filtered by it (a viewer cannot mark); a CSV of 600 rows
 * checked part by part before any is sent. axe-core on each page.
 */
describe('the console data pages in a browser', () => {
  let stack: ConsoleStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let owner: Signed;
  let secondLocationId: string;
  const siteVisits: Array<{ url: string; referer: string | undefined; from: string | undefined }> = [];
  const checked: string[] = [];
  const base = () => stack.aio.url;
  const today = () => new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Moscow', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());

  const expectAccessible = async (name: string) => {
    expect(await seriousViolations(page)).toEqual([]);
    checked.push(name);
    if (SCREENSHOTS[name]) await screenshotSizes(page, SCREENSHOTS[name]);
  };
  const cascades = async () => (await owner.call('GET', '/cascades?limit=100')).body.cascades as Array<{ id: string; externalId: string | null; recipients: number }>;

  beforeAll(async () => {
    stack = await startConsoleStack('console-data-e2e');
    browser = await launchBrowser();
    context = await browser.newContext({ locale: 'en-US' });
    // The public review sites are not reachable from a test: what the browser asks of them is recorded (and then fails).
    context.on('request', (request) => {
      if (/^https:\/\/(maps\.google\.com|yandex\.ru|2gis\.ru)\//.test(request.url())) siteVisits.push({ url: request.url(), referer: request.headers().referer, from: request.redirectedFrom()?.url() });
    });
    page = await context.newPage();
    owner = await signIn(base(), 'demo@example.com', DEMO_PASSWORD);
    const location = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/locations`, { name: 'Demo Coffee on Arbat', city: 'Moscow', timeZone: 'Europe/Moscow' });
    secondLocationId = location.body.location?.id ?? location.body.id;
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('signs in', async () => {
    await page.goto(`${base()}/app/`);
    await page.getByLabel('Email', { exact: true }).fill('demo@example.com');
    await page.getByLabel('Password', { exact: true }).fill(DEMO_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
  });

  it('a customer rates on /r/<token> and clicks a public link: the site gets no Referer, and the funnel shows the click', async () => {
    const [first] = (await owner.call('GET', '/locations')).body.locations;
    const sent = await owner.call('POST', '/cascades', { body: { locationId: first.id, externalId: 'order-click-1', recipients: [{ name: 'Clara', email: 'clara@example.com' }] } });
    expect(sent.status).toBe(202);
    const arbat = await owner.call('POST', '/cascades', { body: { locationId: secondLocationId, externalId: 'order-arbat-1', recipients: [{ name: 'Ivan', email: 'ivan@example.com' }] } });
    expect(arbat.status).toBe(202);
    const link = await waitFor(async () => {
      const { messages } = (await (await fetch(`${base()}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; link: string }> };
      return messages.find((m) => m.channel === 'EMAIL' && m.to === 'clara@example.com')?.link;
    }, { what: "the review request's email in the dev inbox" });
    const customer = await context.newPage();
    await customer.goto(`${base()}${new URL(link).pathname}`);
    await customer.locator('label[for="star5"]').click();
    await customer.locator('button[type="submit"]').click();
    const google = customer.getByTestId('public-links').locator('a').first();
    expect(await google.getAttribute('href')).toMatch(/^\/r\/[0-9A-Za-z]{22}\/go\/0$/);
    expect(await google.getAttribute('rel')).toBe('noopener noreferrer');
    const [site] = await Promise.all([context.waitForEvent('page'), google.click()]);
    await waitFor(() => siteVisits[0], { what: 'the public site asked for' });
    expect(siteVisits).toEqual([{ url: 'https://maps.google.com/?cid=0', referer: undefined, from: expect.stringMatching(/\/r\/[0-9A-Za-z]{22}\/go\/0$/) }]);
    await site.close();
    await customer.close();

    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('heading', { name: 'Funnel' }).waitFor();
    const stage = async (key: string) => (await page.getByTestId('funnel').locator(`tr[data-stage="${key}"] td`).first().textContent())!.trim();
    expect([await stage('requests'), await stage('rated'), await stage('publicLinksShown'), await stage('publicLinkClicked')]).toEqual(['2', '1', '1', '1']);
    expect(await page.getByTestId('funnel').getByRole('row', { name: /Clicked a public link/ }).count()).toBe(1);
    const email = page.getByTestId('by-channel').locator('tr[data-channel="EMAIL"]');
    expect((await email.locator('td[data-stage="clicked"]').textContent())!.trim()).toBe('1');
    expect((await email.locator('td[data-stage="rated"]').textContent())!.trim()).toBe('1');
    // The charts: funnel, by channel, distribution, average over time; each a named image beside its table.
    expect(await page.getByRole('img', { name: /Chart; the table below has the same numbers/ }).count()).toBe(4);
    await expectAccessible('overview');
  });

  it('filters cascades by location and by date, and shows a step\'s delivery and the form\'s opened time', async () => {
    await page.getByRole('link', { name: 'Cascades' }).click();
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
    await page.getByRole('row').filter({ hasText: 'order-click-1' }).waitFor();
    await page.getByLabel('Location').selectOption({ label: 'Demo Coffee on Arbat' });
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('row').filter({ hasText: 'order-click-1' }).waitFor({ state: 'detached' });
    const rows = page.getByRole('table', { name: 'Cascades' }).locator('tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('order-arbat-1');
    await expectAccessible('cascades (a location)');
    await page.getByLabel('Location').selectOption({ label: 'Any' });
    await page.getByLabel('From').fill('2020-01-01');
    await page.getByLabel('To').fill('2020-01-31');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No cascades found.').waitFor();
    await page.getByLabel('From').fill(today());
    await page.getByLabel('To').fill(today());
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('row').filter({ hasText: 'order-click-1' }).waitFor();
    expect(await rows.count()).toBe(2);
    await expectAccessible('cascades (today)');

    await page.getByRole('link', { name: 'Open order-click-1' }).click();
    await page.getByRole('heading', { name: 'Cascade order-click-1' }).waitFor();
    expect(await page.getByTestId('recipient-times').textContent()).toMatch(/^Form opened: .+ · Rated: .+$/);
    const steps = page.getByRole('table', { name: 'Steps' });
    expect(await steps.getByRole('columnheader').allTextContents()).toEqual(expect.arrayContaining(['Delivered', 'Provider']));
    const firstStep = steps.getByRole('row').nth(1);
    expect(await firstStep.getByRole('cell').nth(1).textContent()).toBe('EMAIL');
    expect(await firstStep.getByRole('cell').last().textContent()).not.toBe('');
    await expectAccessible('a cascade');
  });

  it('marks a rating handled and filters the inbox by the mark; a viewer sees the mark and cannot set it', async () => {
    await page.getByRole('link', { name: 'Ratings' }).click();
    await page.getByRole('heading', { name: 'Ratings' }).waitFor();
    const row = page.getByRole('row').filter({ hasText: 'clara@example.com' });
    await row.waitFor();
    // A click, not check(): the box shows the mark once the API has answered.
    await row.getByRole('checkbox', { name: /Handled: Clara/ }).click();
    await row.getByTestId('handled').waitFor();
    await page.getByLabel('Handled', { exact: true }).selectOption('unhandled');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No ratings found.').waitFor();
    await page.getByLabel('Handled', { exact: true }).selectOption('handled');
    await page.getByLabel('From').fill(today());
    await page.getByRole('button', { name: 'Search' }).click();
    await row.getByTestId('handled').waitFor();
    expect(await row.getByRole('checkbox').isChecked()).toBe(true);
    await expectAccessible('ratings (handled)');
    expect((await owner.call('GET', '/ratings?handled=handled')).body.ratings).toHaveLength(1);

    const viewer = await addMember(stack, stack.aio.demo.organizationId, 'data-viewer-e2e@example.com', 'viewer');
    const viewerContext = await browser.newContext({ locale: 'en-US' });
    const ownerPage = page;
    try {
      await viewerContext.addCookies([{ name: 'rrs_session', value: viewer.cookie.split('=')[1], url: base() }]);
      page = await viewerContext.newPage();
      await page.goto(`${base()}/app/#/ratings`);
      const seen = page.getByRole('row').filter({ hasText: 'clara@example.com' });
      await seen.getByTestId('handled').waitFor();
      expect(await seen.getByRole('checkbox').count()).toBe(0);
      await expectAccessible('ratings (viewer)');
      const reviewRequestId = (await seen.getAttribute('data-review-request-id'))!;
      const refused = await page.evaluate(async (id) => {
        const { csrfToken } = (await (await fetch('/account/v1/session')).json()) as { csrfToken: string };
        const res = await fetch(`/account/v1/ratings/${id}/handled`, { method: 'DELETE', headers: { 'x-csrf-token': csrfToken } });
        return { status: res.status, code: ((await res.json()) as { code: string }).code };
      }, reviewRequestId);
      expect(refused).toEqual({ status: 403, code: 'read_only_role' });
      expect((await owner.call('GET', '/ratings?handled=handled')).body.ratings).toHaveLength(1);
    } finally {
      page = ownerPage;
      await viewerContext.close();
    }
  });

  it('a CSV of 600 rows with a bad row at line 550: its error is shown and nothing is sent; fixed, all 600 go in two parts', async () => {
    await page.getByRole('link', { name: 'Send by hand' }).click();
    await page.getByRole('heading', { name: 'Many customers from a CSV file' }).waitFor();
    const before = await cascades();
    const csv = (bad: boolean) =>
      `name,email,phone,consentAt\n${Array.from({ length: 600 }, (_, i) => `Guest ${i},${bad && i === 548 ? 'not-an-email' : `guest${i}@example.com`},,2026-05-01T12:00:00+03:00`).join('\n')}\n`;
    const upload = (text: string) => page.getByLabel('CSV file').setInputFiles({ name: 'guests.csv', mimeType: 'text/csv', buffer: Buffer.from(text) });

    await upload(csv(true));
    await page.getByRole('button', { name: 'Send to every row' }).click();
    const errors = page.getByRole('table', { name: 'Rows with errors' });
    await errors.locator('tr[data-line="550"]').waitFor();
    expect(await errors.locator('tbody tr').count()).toBe(1);
    expect(await errors.locator('tr[data-line="550"]').getByRole('cell').nth(1).textContent()).toBe('email');
    await expectAccessible('send by hand: CSV row errors at line 550');
    expect(await cascades()).toEqual(before);

    await upload(csv(false));
    await page.getByRole('button', { name: 'Send to every row' }).click();
    const note = page.getByTestId('csv-sent-parts');
    expect(await note.locator('p').textContent()).toBe('Sent to 600 customer(s) in 2 cascade(s): 600 queued, 0 skipped.');
    const after = await cascades();
    const added = after.filter((c) => !before.some((b) => b.id === c.id));
    expect(added.map((c) => c.recipients).sort()).toEqual([100, 500]);
    // Each part links to the cascade it made, named by its lines in the file.
    const links = await note.getByRole('link').evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute('href')]));
    expect(links.map(([text]) => text)).toEqual(['Open the cascade lines 2–501', 'Open the cascade lines 502–601']);
    expect(links.map(([, href]) => href).sort()).toEqual(added.map((c) => `#/cascades/${c.id}`).sort());
    await expectAccessible('send by hand: CSV of 600 rows sent');

    // The same file again replays both parts (their Idempotency-Keys come from their content): nothing more is sent.
    await page.getByRole('button', { name: 'Send to every row' }).click();
    await note.filter({ hasText: 'already sent' }).waitFor();
    expect(await note.locator('p').textContent()).toBe('This file was already sent (2 cascade(s)): nothing was sent again.');
    expect((await cascades()).length).toBe(after.length);
  });

  it('groups a CSV by its externalId column: one cascade per order', async () => {
    const before = await cascades();
    await page.getByLabel('CSV file').setInputFiles({
      name: 'orders.csv', mimeType: 'text/csv',
      buffer: Buffer.from('name,email,externalId\nOlga,olga@example.com,order-a\nPetr,petr@example.com,order-b\nOlga 2,olga2@example.com,order-a\n'),
    });
    await page.getByRole('button', { name: 'Send to every row' }).click();
    await page.getByTestId('csv-sent-parts').waitFor();
    const added = (await cascades()).filter((c) => !before.some((b) => b.id === c.id));
    expect(added.map((c) => [c.externalId, c.recipients]).sort()).toEqual([['order-a', 2], ['order-b', 1]]);
    // Said in customers and cascades (one per order), not in "parts", with a link to each order's cascade.
    expect(await page.getByTestId('csv-sent-parts').locator('p').textContent()).toBe('Sent to 3 customer(s) in 2 cascade(s): 3 queued, 0 skipped.');
    expect(await page.getByTestId('csv-sent-parts').getByRole('link').allTextContents()).toEqual(['Open the cascade order-a', 'Open the cascade order-b']);
  });

  it('checked every page it changed', () => {
    expect(checked).toEqual(['overview', 'cascades (a location)', 'cascades (today)', 'a cascade', 'ratings (handled)', 'ratings (viewer)', 'send by hand: CSV row errors at line 550', 'send by hand: CSV of 600 rows sent']);
  });
});
