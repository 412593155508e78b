import { createServer, type AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { FakeAmoCrm, launchBrowser, waitFor } from '@rrs/testkit';
import { screenshotSizes, seriousViolations } from './browserChecks';
import { customerRates, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/** The pages saved at desktop and phone sizes when CONSOLE_SCREENSHOTS_DIR is set (docs/console.md shows them). */
const SCREENSHOTS: Record<string, string> = {
  'ratings inbox (open)': 'inbox',
  'a rating (resolved, replied)': 'rating',
  alerts: 'alerts',
  'overview (KPIs, deliveries not reported)': 'overview-kpis',
  'a cascade at 1280 px': 'cascade-wide',
  'integrations (amoCRM connected)': 'integrations',
};

interface DevMessage {
  channel: string;
  to: string;
  subject: string;
  text: string;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * The business acts on every rating, in headless Chromium on the real all-in-one: a low rating with
 * feedback alerts the owner in the dev inbox and a staff chat linked through the stand-in bot; the inbox
 * item is taken, noted, replied to (the reply in the dev inbox) and resolved, with its history; overdue
 * items are counted on the overview, whose funnel says "not reported" for deliveries the email sink does
 * not report; a cascade shows every column at 1280 px and is stopped from its page; amoCRM is connected
 * through its consent page (the testkit fake). axe-core on every page, screenshots for the docs.
 */
describe('the ratings inbox, alerts and integrations in a browser', () => {
  let stack: ConsoleStack;
  let amo: FakeAmoCrm;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let owner: Signed;
  let locationId: string;
  const checked: string[] = [];
  const base = () => stack.aio.url;
  const devMessages = async () => ((await (await fetch(`${base()}/dev/messages`)).json()) as { messages: DevMessage[] }).messages;

  const expectAccessible = async (name: string) => {
    expect(await seriousViolations(page)).toEqual([]);
    checked.push(name);
    if (SCREENSHOTS[name]) await screenshotSizes(page, SCREENSHOTS[name]);
  };
  const open = async (link: string, heading = link) => {
    await page.getByRole('navigation').getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
  };

  beforeAll(async () => {
    amo = await FakeAmoCrm.start();
    const port = await freePort();
    const redirectUri = `http://localhost:${port}/app/`;
    amo.oauthClient.redirectUri = redirectUri;
    stack = await startConsoleStack('inbox-e2e', {
      port,
      publicBaseUrl: `http://localhost:${port}`,
      allowHttpCrm: true,
      amoCrmOAuth: { clientId: amo.oauthClient.clientId, clientSecret: amo.oauthClient.clientSecret, redirectUri, authorizeUrl: `${amo.url}/oauth` },
    });
    browser = await launchBrowser();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    owner = await signIn(base(), 'demo@example.com', DEMO_PASSWORD);
    locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
    // The demo organization writes English here, so the alerts and the page are in one language.
    await owner.call('PATCH', '/settings', { body: { locale: 'en' } });
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
    await amo?.close();
  });

  it('signs in', async () => {
    await page.goto(`${base()}/app/`);
    await page.getByLabel('Email', { exact: true }).fill('demo@example.com');
    await page.getByLabel('Password', { exact: true }).fill(DEMO_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
  });

  it('links a staff chat on the alerts page through the bot’s deep link (the stand-in bot)', async () => {
    await open('Alerts');
    // Owners and admins get each alert by email from the first day.
    const choice = page.getByLabel('Alerts by email: demo@example.com');
    await choice.waitFor();
    expect(await choice.inputValue()).toBe('instant');
    await page.getByRole('button', { name: 'Link a Telegram chat' }).click();
    const link = await page.getByRole('status').getByRole('link').getAttribute('href');
    expect(link).toMatch(/\/dev\/bots\/telegram\?start=[A-Za-z0-9_-]{22}$/);
    // The messenger: the stand-in chat page and its Start button, as a member would press it.
    const chat = await context.newPage();
    await chat.goto(link!);
    await chat.getByRole('button', { name: 'Start' }).click();
    await chat.waitForURL(/\/dev\/inbox$/);
    await chat.close();
    await page.getByRole('button', { name: 'I pressed Start: show the chats' }).click();
    await page.getByRole('table', { name: 'Staff chats' }).getByRole('cell', { name: '4242', exact: true }).waitFor();
    await expectAccessible('alerts');
  });

  it('a low rating with feedback reaches the owner by email and the staff chat through the bot, in the dev inbox; never the customer', async () => {
    const { reviewRequestId } = await customerRates(base(), owner, { email: 'rude@example.com', rating: 1, feedback: 'The waiter was rude', locationId });
    const email = await waitFor(async () => (await devMessages()).find((m) => m.to === 'demo@example.com' && m.text.includes('The waiter was rude')), { what: 'the alert email' });
    expect(email.subject).toBe('1★ at Demo Coffee on Tverskaya: act on it');
    expect(email.text).toContain(`/app/#/ratings/${reviewRequestId}`);
    const chat = await waitFor(async () => (await devMessages()).find((m) => m.to === 'bot:4242' && m.text.includes('The waiter was rude')), { what: 'the alert in the staff chat' });
    expect(chat.text).toContain('★☆☆☆☆ 1/5');
    expect((await devMessages()).filter((m) => m.to === 'rude@example.com' && m.text.includes('The waiter was rude'))).toEqual([]);
    // The dev inbox page shows both.
    const inbox = await context.newPage();
    await inbox.goto(`${base()}/dev/inbox`);
    await inbox.getByText('bot:4242').first().waitFor();
    await inbox.close();
  });

  it('the inbox as a workflow: open the item, take it, note it, reply to the customer, resolve it with a note; the history says who and when', async () => {
    await open('Ratings');
    await page.getByLabel('Status').selectOption('open');
    await page.getByRole('button', { name: 'Search' }).click();
    const row = page.getByRole('row').filter({ hasText: 'The waiter was rude' });
    await row.getByTestId('rating-status').filter({ hasText: /^New/ }).waitFor();
    await expectAccessible('ratings inbox (open)');
    await row.getByRole('link', { name: /^Open the rating/ }).click();
    await page.getByRole('heading', { name: 'Rating from Rita · 1 / 5' }).waitFor();
    await page.getByTestId('feedback').filter({ hasText: 'The waiter was rude' }).waitFor();

    const assign = page.getByRole('form', { name: 'Assign' });
    await assign.getByRole('button', { name: 'Assign' }).click();
    await page.getByRole('status').filter({ hasText: 'Assigned.' }).waitFor();
    await page.getByTestId('rating-status').filter({ hasText: /^In progress/ }).waitFor();
    await page.getByRole('form', { name: 'Add a note' }).getByLabel('Note').fill('Called the customer');
    await page.getByRole('form', { name: 'Add a note' }).getByRole('button', { name: 'Add a note' }).click();
    await page.getByRole('status').filter({ hasText: 'Note added.' }).waitFor();

    const reply = page.getByRole('form', { name: 'Reply to the customer' });
    await reply.getByLabel('Subject').fill('About your visit');
    await reply.getByLabel('Message').fill('We are sorry. Your next coffee is on us.');
    await reply.getByRole('button', { name: 'Send the reply' }).click();
    await page.getByRole('status').filter({ hasText: 'Reply sent.' }).waitFor();
    const sent = await waitFor(async () => (await devMessages()).find((m) => m.to === 'rude@example.com' && m.subject === 'About your visit'), { what: 'the reply in the dev inbox' });
    expect(sent.text).toContain('Your next coffee is on us.');

    const resolve = page.getByRole('form', { name: 'Resolve' });
    await resolve.getByLabel('Resolution note').fill('Apologised; a free coffee next visit');
    await resolve.getByRole('button', { name: 'Resolve' }).click();
    await page.getByRole('status').filter({ hasText: 'Resolved.' }).waitFor();
    const history = page.getByTestId('history');
    await history.getByText('resolved it').waitFor();
    const entries = await history.locator('li').allTextContents();
    expect(entries.map((e) => e.replace(/^.*? · /, ''))).toEqual([
      'the service: private feedback receivedThe waiter was rude',
      'the service: alert sent to email:demo@example.com',
      'the service: alert sent to TELEGRAM:4242',
      'Demo: assigned to Demo',
      'Demo: added a noteCalled the customer',
      'Demo: replied to rude@example.comWe are sorry. Your next coffee is on us.',
      'Demo: resolved itApologised; a free coffee next visit',
    ]);
    await page.getByRole('button', { name: 'Reopen' }).waitFor();
    await expectAccessible('a rating (resolved, replied)');
  });

  it('the overview: KPI cards with the open and overdue items, and the funnel says deliveries are not reported (the email sink has no receipts)', async () => {
    const { reviewRequestId } = await customerRates(base(), owner, { email: 'late@example.com', rating: 2, feedback: 'Slow', locationId });
    await waitFor(async () => (await owner.call('GET', `/ratings/${reviewRequestId}`)).body.rating.respondBy || undefined, { what: 'the response target' });
    await stack.schedulerSql(`UPDATE ratings SET respond_by = now() - interval '1 hour' WHERE review_request_id = $1`, [reviewRequestId]);
    await open('Overview');
    const kpis = page.getByRole('list', { name: 'Key figures' });
    await kpis.getByRole('link', { name: '1 overdue' }).waitFor();
    await kpis.getByRole('link', { name: '1 open low ratings and feedback' }).waitFor();
    expect(await kpis.getByRole('listitem').allTextContents()).toEqual(expect.arrayContaining(['2 review requests', '100% response rate', '1.5 average rating']));
    const funnel = page.getByTestId('funnel');
    expect(await funnel.locator('tr[data-stage="delivered"] td').allTextContents()).toEqual(['not reported', '—']);
    expect(await funnel.locator('tr[data-stage="opened"] td').first().textContent()).toBe('2');
    await page.getByText('Delivered: not reported').waitFor();
    expect(await page.getByTestId('by-channel').locator('tr[data-channel="EMAIL"] td[data-stage="delivered"]').textContent()).toBe('not reported');
    await expectAccessible('overview (KPIs, deliveries not reported)');
    // The overdue figure opens the inbox filtered to it.
    await kpis.getByRole('link', { name: '1 overdue' }).click();
    await page.getByRole('row').filter({ hasText: 'Slow' }).getByText('overdue').waitFor();
    expect(await page.getByRole('row').filter({ hasText: 'The waiter was rude' }).count()).toBe(0);
  });

  it('a cascade shows every step column at 1280 px without scrolling, and is stopped from its page', async () => {
    const started = await owner.call('POST', '/cascades', { body: { locationId, externalId: 'order-wide-1', recipients: [{ name: 'Wide Wanda', email: 'wanda@example.com', phone: '+7 916 555-00-11' }] } });
    await page.goto(`${base()}/app/#/cascades/${started.body.id}`);
    await page.getByRole('heading', { name: 'Cascade order-wide-1' }).waitFor();
    const table = page.getByRole('table', { name: 'Steps' });
    await table.waitFor();
    const headers = await table.locator('th').evaluateAll((cells) => cells.map((c) => ({ text: c.textContent, right: c.getBoundingClientRect().right })));
    expect(headers.map((h) => h.text)).toEqual(['#', 'Channel', 'Status', 'Due', 'Sent or skipped', 'Reason', 'Delivered', 'Provider']);
    for (const h of headers) expect([h.text, h.right <= 1280]).toEqual([h.text, true]);
    const region = page.getByRole('region', { name: 'Steps' });
    expect(await region.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
    await expectAccessible('a cascade at 1280 px');

    await page.getByRole('button', { name: 'Stop this cascade' }).click();
    await page.getByRole('button', { name: 'Yes, stop it' }).click();
    await page.getByRole('status').filter({ hasText: 'Stopped: 1 recipient(s) will get nothing more.' }).waitFor();
    expect((await owner.call('GET', `/cascades/${started.body.id}`)).body.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'canceled' });
  });

  it('connects amoCRM through its consent page (the fake) and shows the connector with its inbound URL once', async () => {
    await open('Integrations');
    const form = page.getByRole('form', { name: 'Connect amoCRM' });
    await form.getByLabel('Name').fill('Sales pipeline');
    await form.getByRole('button', { name: 'Continue to amoCRM' }).click();
    // amoCRM's authorization page (the testkit fake), then back to the console with the code.
    await page.getByRole('heading', { name: /Allow access to test[0-9a-f]+\.amocrm\.ru\?/ }).waitFor();
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();
    const inbound = page.getByTestId('inbound-url');
    await inbound.waitFor();
    expect(await inbound.getByLabel('Inbound URL').inputValue()).toMatch(/\/hooks\/crm\/[0-9a-f-]{36}\/[A-Za-z0-9_-]{43}$/);
    // The code left the address bar at once.
    expect(new URL(page.url()).search).toBe('');
    const card = page.getByRole('article').filter({ hasText: 'Sales pipeline · amoCRM' });
    await card.getByTestId('connector-error').filter({ hasText: 'none' }).waitFor();
    expect(amo.codeExchanges).toBe(1);
    expect((await owner.call('GET', '/connectors')).body.connectors).toEqual([expect.objectContaining({ kind: 'amocrm', authMode: 'oauth', name: 'Sales pipeline' })]);
    await expectAccessible('integrations (amoCRM connected)');
  });

  it('checked every page it built', () => {
    expect([...checked].sort()).toEqual(Object.keys(SCREENSHOTS).sort());
  });
});
