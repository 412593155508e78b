import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, startFakeDnsServer, type FakeDnsServer } from '@rrs/testkit';
import { screenshotSizes, seriousViolations } from './browserChecks';
import { addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/** Pages saved at desktop and phone sizes when CONSOLE_SCREENSHOTS_DIR is set (docs/console.md shows them). */
const SCREENSHOTS: Record<string, string> = {
  locations: 'locations',
  flows: 'flows',
  templates: 'templates',
  channels: 'channels',
  settings: 'settings',
  'settings (viewer)': 'settings-viewer',
};

const PLACE_ID = 'ChIJLU7jZClu5kcR4PcOOO6p3I0';

/**
 * The console's configuration pages (locations, flows, templates, channels, settings) in headless
 * Chromium against the real all-in-one, with axe-core on each and a viewer who gets no forms.
 */
describe('the configuration pages in a browser', () => {
  let stack: ConsoleStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let api: Signed;
  const checked: string[] = [];
  const expectAccessible = async (name: string) => {
    expect(await seriousViolations(page)).toEqual([]);
    checked.push(name);
    if (SCREENSHOTS[name]) await screenshotSizes(page, SCREENSHOTS[name]);
  };
  const open = async (link: string) => {
    await page.getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: link }).waitFor();
  };

  let dns: FakeDnsServer;

  beforeAll(async () => {
    // The all-in-one's email sender is the demo sink, From no-reply@localhost: the check looks up its domain here.
    dns = await startFakeDnsServer({ '_dmarc.localhost': { TXT: ['v=DMARC1; p=none'] } });
    stack = await startConsoleStack('config-e2e', { dnsServers: [dns.address] });
    api = await signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
    browser = await launchBrowser();
    context = await browser.newContext({ locale: 'en-US' });
    page = await context.newPage();
    await page.goto(`${stack.aio.url}/app/`);
    await page.getByLabel('Email', { exact: true }).fill('demo@example.com');
    await page.getByLabel('Password', { exact: true }).fill(DEMO_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
    await dns?.close();
  });

  it('creates a location whose Google review link is built from its Place ID', async () => {
    await open('Locations');
    const form = page.getByRole('form', { name: 'New location' });
    await form.getByLabel('Name', { exact: true }).fill('Arbat');
    await form.getByLabel('Address').fill('Arbat st. 10');
    await form.getByLabel('City').fill('Moscow');
    await form.getByLabel('Time zone').fill('Europe/Moscow');
    await form.getByLabel('Platform', { exact: true }).selectOption('google');
    await form.getByLabel('Google Place ID').fill('not an id');
    await form.getByText('This is not a Google Place ID.').waitFor();
    expect(await form.getByRole('button', { name: 'Add the link' }).isDisabled()).toBe(true);
    await form.getByLabel('Google Place ID').fill(PLACE_ID);
    const link = `https://search.google.com/local/writereview?placeid=${PLACE_ID}`;
    await form.getByText(link).waitFor();
    await form.getByRole('button', { name: 'Add the link' }).click();
    expect(await form.getByLabel('Link 1').inputValue()).toBe(link);
    expect(await form.getByLabel('Platform 1').inputValue()).toBe('google');
    await expectAccessible('locations');
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const row = page.getByRole('row').filter({ hasText: 'Arbat st. 10' });
    expect(await row.getByRole('link', { name: 'google' }).getAttribute('href')).toBe(link);
    const stored = (await api.call('GET', '/locations')).body.locations.find((l: { name: string }) => l.name === 'Arbat');
    expect(stored).toMatchObject({ city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: link }] });

    // Edit it: the form fills with the location, and a change is saved.
    await row.getByRole('button', { name: 'Edit Arbat' }).click();
    const edit = page.getByRole('form', { name: 'Edit location Arbat' });
    await edit.getByLabel('City').fill('Moskva');
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('row').filter({ hasText: 'Moskva' }).waitFor();
  });

  it('creates a flow with two steps and makes it the default', async () => {
    await open('Flows');
    const form = page.getByRole('form', { name: 'New flow' });
    await form.getByLabel('Flow name').fill('E2E email, then SMS');
    await form.getByLabel('Step 1: Channel').selectOption('EMAIL');
    await form.getByRole('button', { name: 'Add a step' }).click();
    await form.getByLabel('Step 2: Channel').selectOption('SMS');
    // Delays and windows in the unit chosen: 2 hours, 2 days.
    await form.getByLabel('Step 2: Delay', { exact: true }).fill('2');
    await form.getByLabel('Step 2: Delay: unit').selectOption('hours');
    await form.getByLabel('Response window', { exact: true }).fill('2');
    await form.getByLabel('Response window: unit').selectOption('days');
    await form.getByRole('button', { name: 'Save' }).click();
    const row = page.getByRole('row').filter({ hasText: 'E2E email, then SMS' });
    await row.waitFor();
    expect(await row.getByRole('listitem').allTextContents()).toEqual(['EMAIL (+0 minutes)', 'SMS (+2 hours)']);
    await row.getByRole('cell', { name: '2 days', exact: true }).waitFor();
    await row.getByRole('button', { name: 'Make default: E2E email, then SMS' }).click();
    await row.getByRole('cell', { name: 'yes', exact: true }).waitFor();
    const flows = (await api.call('GET', '/flows')).body.flows as Array<{ name: string; isDefault: boolean; steps: unknown[]; responseWindowMinutes: number | null }>;
    expect(flows.filter((f) => f.isDefault).map((f) => f.name)).toEqual(['E2E email, then SMS']);
    expect(flows.find((f) => f.name === 'E2E email, then SMS')).toMatchObject({ steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 120 }], responseWindowMinutes: 2880 });

    // A refusal is shown by field, and nothing is saved.
    await form.getByLabel('Flow name').fill('Bad delay');
    await form.getByLabel('Step 1: Delay', { exact: true }).fill('-5');
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('alert').filter({ hasText: 'invalid_request' }).waitFor();
    expect((await api.call('GET', '/flows')).body.flows.some((f: { name: string }) => f.name === 'Bad delay')).toBe(false);
    await expectAccessible('flows');
  });

  it('shows the SMS as sent for each location with a real link, its counter and cost on that text; the email preview is the sent email', async () => {
    await open('Templates');
    const sms = page.getByRole('form', { name: 'Templates: SMS' });
    const counter = page.locator('#sms-counter');
    // The demo's own template, with a link as long as the real one (PUBLIC_BASE_URL): sent whole, "визит" kept.
    await page.locator('#sms-counter[data-encoding="UCS-2"][data-parts="1"][data-cut="false"]').waitFor();
    await page.locator('.sms-preview pre').filter({ hasText: /^Demo Coffee: оцените визит localhost:8080\/r\/AbCdEf0123456789GhIjKl$/ }).first().waitFor();
    await sms.getByLabel('Text').fill('Hello! Please rate your visit to {{location}}: {{link}}');
    await page.locator('#sms-counter[data-encoding="GSM-7"][data-parts="1"][data-cut="false"]').waitFor();
    expect(await counter.textContent()).toMatch(/^GSM-7: \d+ of 160 characters — 1 SMS part\(s\), the cost of each message\.$/);
    await page.locator('.sms-preview pre').filter({ hasText: 'http://localhost:8080/r/AbCdEf0123456789GhIjKl' }).first().waitFor();
    await sms.getByLabel('Text').fill('Здравствуйте! Пожалуйста, оцените ваш визит в {{location}}: {{link}}');
    // Too long for one part: what is sent is cut (and says so), and the counter counts what is sent: one part, one cost.
    await page.locator('#sms-counter[data-encoding="UCS-2"][data-parts="1"][data-cut="true"]').waitFor();
    expect(await counter.textContent()).toMatch(/^UCS-2: (\d+) of 70 characters — 1 SMS part\(s\), the cost of each message\.$/);
    expect(Number(/UCS-2: (\d+)/.exec((await counter.textContent())!)![1])).toBeLessThanOrEqual(70);
    await page.getByText('Cut to one part: the words before the link that do not fit are left out.', { exact: false }).first().waitFor();
    expect(await page.getByText(/part\(s\)/).count()).toBe(await page.locator('.sms-preview').count());
    // MAX and Telegram: the location's name on the first line, then the SMS text.
    await page.getByText(/^Demo Coffee.*\nЗдравствуйте!/).waitFor();
    await sms.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('article', { name: 'SMS' }).getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await api.call('GET', '/templates')).body.templates.find((x: { channel: string }) => x.channel === 'SMS')).toMatchObject({ body: 'Здравствуйте! Пожалуйста, оцените ваш визит в {{location}}: {{link}}', isDefault: false });

    const email = page.getByRole('form', { name: 'Templates: EMAIL' });
    await email.getByLabel('Subject').fill('How was {{location}}, {{name}}?');
    // The email as renderEmail makes it: the button to the personal link, laid out by its style attributes.
    const preview = page.frameLocator('iframe.email-preview');
    await preview.locator('a[href$="/r/AbCdEf0123456789GhIjKl"]').nth(1).waitFor({ state: 'attached' });
    expect(await preview.locator('body').evaluate((body) => body.ownerDocument.defaultView!.getComputedStyle(body).backgroundColor)).toBe('rgb(244, 244, 245)');
    await page.getByText(/^Subject: How was .+, Anna\?$/).waitFor();
    await expectAccessible('templates');
  });

  it('shows each channel configured and ready, and the SMS balance', async () => {
    await open('Channels');
    const balance = (await api.call('GET', '/settings')).body.organization.smsBalance as number;
    await page.getByText(`${balance} SMS parts left.`).waitFor();
    const email = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'Email' }) });
    // npm start without provider variables sends through the sink: ready, and said in red that nothing is delivered.
    expect(await email.getByRole('cell').allTextContents()).toEqual(['yes', 'yes', 'yes', 'yes messages are not delivered', 'channel-email', expect.stringContaining('send')]);
    await page.getByRole('rowheader', { name: 'SMS' }).waitFor();
    const alert = page.getByRole('alert').filter({ hasText: 'Messages are not delivered:' });
    expect(await alert.textContent()).toMatch(/^Messages are not delivered: Email, SMS, MAX, Telegram sends through the sink/);
    // The theme's danger colour, as the browser computes it (the page has no DOM types here: a string runs in it).
    const probe = await page.evaluate<string>(
      "(() => { const el = document.createElement('span'); el.style.color = getComputedStyle(document.documentElement).getPropertyValue('--danger').trim(); document.body.append(el); const c = getComputedStyle(el).color; el.remove(); return c; })()",
    );
    const colorOf = (selector: string) => page.evaluate<string>(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).color`);
    expect(await colorOf('[data-not-delivered="EMAIL"]')).toBe(probe);
    expect(await colorOf('#sink-warning')).toBe(probe);
    // The providers in failover order, the state in words: npm start's email goes through the sink.
    const emailProviders = page.getByRole('table', { name: 'Email: providers in failover order' });
    const sink = emailProviders.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'sink' }) });
    expect(await sink.getByRole('cell').allTextContents()).toEqual(['1', 'Sink: messages are not delivered', expect.any(String), '—']);
    // "Since" in the organization's time zone (the session's), not the browser's.
    const { channels } = (await api.call('GET', '/channels')).body as { channels: Array<{ channel: string; providers: Array<{ since: string }> }> };
    const zone = (await api.call('GET', '/settings')).body.organization.timeZone as string;
    const since = new Intl.DateTimeFormat('en-GB', { timeZone: zone, dateStyle: 'medium', timeStyle: 'short', hourCycle: 'h23' }).format(new Date(channels.find((c) => c.channel === 'EMAIL')!.providers[0].since));
    expect(await sink.getByRole('cell').nth(2).textContent()).toBe(since);
    // The sender domain's SPF, DKIM and DMARC, looked up in DNS on request, each in words with why.
    await page.getByRole('button', { name: 'Check SPF, DKIM and DMARC' }).click();
    const checks = page.getByRole('table', { name: 'Sender domain localhost' });
    await checks.waitFor();
    const row = (name: string) => checks.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) });
    expect(await row('SPF').getByRole('cell').nth(0).textContent()).toBe('Not ours to check');
    expect(await row('DKIM').getByRole('cell').nth(0).textContent()).toBe('Fails');
    expect(await row('DKIM').getByRole('cell').nth(2).textContent()).toMatch(/Nothing signs/);
    expect(await row('DMARC').getByRole('cell').allTextContents()).toEqual(['Passes', '_dmarc.localhost', expect.stringMatching(/^Policy p=none/), 'v=DMARC1; p=none']);
    await page.getByText('localhost: some records are missing or wrong; publish the ones below.').waitFor();
    expect(dns.questions).toContain('TXT _dmarc.localhost');
    await expectAccessible('channels');
  });

  it('changes the send window and the cooldown; the plan is shown, not changed', async () => {
    await open('Settings');
    await page.getByText('The plan is changed by the operator.').waitFor();
    const form = page.getByRole('form', { name: 'Settings' });
    await form.getByLabel('Hold steps to a send window').check();
    await form.getByLabel('Opens (HH:MM)').fill('10:00');
    await form.getByLabel('Closes (HH:MM)').fill('20:30');
    await form.getByLabel('Sat').check();
    await form.getByLabel('Cooldown, days').fill('14');
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await api.call('GET', '/settings')).body.organization).toMatchObject({ sendWindow: { start: '10:00', end: '20:30', days: [6] }, cooldownDays: 14 });
    await form.getByLabel('Cooldown, days').fill('9999');
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('alert').filter({ hasText: 'invalid_request' }).waitFor();
    expect((await api.call('GET', '/settings')).body.organization.cooldownDays).toBe(14);
    expect(await page.getByRole('link', { name: "The organization's people: Members" }).getAttribute('href')).toBe('#/members');
    // Privacy: how long personal data is kept (docs/customer-respect.md, "Data lifecycle").
    const privacy = page.getByRole('region', { name: 'Privacy' });
    await privacy.getByLabel('Keep personal data, days').fill('180');
    await privacy.getByRole('button', { name: 'Save' }).click();
    await privacy.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await api.call('GET', '/data-retention')).body).toEqual({ personalDataRetentionDays: 180 });
    await privacy.getByLabel('Keep personal data, days').fill('10');
    await privacy.getByRole('button', { name: 'Save' }).click();
    await privacy.getByRole('alert').filter({ hasText: 'invalid_request' }).waitFor();
    expect((await api.call('GET', '/data-retention')).body).toEqual({ personalDataRetentionDays: 180 });
    // Erasing a person: a confirming second click, then the answer (docs/customer-respect.md, "Erasure of a person").
    const erase = page.getByRole('form', { name: 'Erase a person' });
    await erase.getByLabel('Email').fill('gone.person@example.com');
    await erase.getByRole('button', { name: 'Erase a person' }).click();
    await erase.getByText('Erase everything about this person? This cannot be undone.').waitFor();
    await expectAccessible('settings');
    await erase.getByRole('button', { name: 'Yes, erase' }).click();
    await erase.getByRole('status').filter({ hasText: 'The person is erased.' }).waitFor();
    expect(await erase.getByLabel('Email').inputValue()).toBe('');
  });

  it('shows a viewer every configuration page without a form', async () => {
    await addMember(stack, stack.aio.demo.organizationId, 'config-viewer-e2e@example.com', 'viewer', 'viewer-password-9');
    const viewerContext = await browser.newContext({ locale: 'en-US' });
    const ownerPage = page;
    try {
      page = await viewerContext.newPage();
      await page.goto(`${stack.aio.url}/app/`);
      await page.getByLabel('Email', { exact: true }).fill('config-viewer-e2e@example.com');
      await page.getByLabel('Password', { exact: true }).fill('viewer-password-9');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Cascades' }).waitFor();
      for (const [link, shows] of [['Locations', 'Arbat st. 10'], ['Flows', 'E2E email, then SMS'], ['Templates', 'Здравствуйте! Пожалуйста'], ['Channels', 'SMS parts left.'], ['Settings', '10:00–20:30']] as const) {
        await open(link);
        await page.getByText(shows).first().waitFor();
        expect([link, await page.locator('form').count(), await page.getByRole('button', { name: /Save|Edit|Make|Add/ }).count()]).toEqual([link, 0, 0]);
        if (link !== 'Channels') await page.getByText('Your role (viewer) can look but not change anything.').waitFor();
        await expectAccessible(link === 'Settings' ? 'settings (viewer)' : `${link.toLowerCase()} (viewer)`);
      }
    } finally {
      page = ownerPage;
      await viewerContext.close();
    }
  });

  it('checked every page it built', () => {
    expect(checked).toEqual(expect.arrayContaining(['locations', 'flows', 'templates', 'channels', 'settings', 'locations (viewer)', 'flows (viewer)', 'templates (viewer)', 'channels (viewer)', 'settings (viewer)']));
  });
});
