import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, waitFor } from '@rrs/testkit';
import { screenshotSizes, seriousViolations } from './browserChecks';
import { addMember, DEMO_PASSWORD, emailedLink, signIn, startConsoleStack, type ConsoleStack } from './consoleStack';

const SCREENSHOTS: Record<string, string> = {
  'sign-in (ru)': 'sign-in-ru',
  developer: 'developer',
  'send by hand': 'send',
  'a cascade': 'cascade',
  ratings: 'ratings',
  overview: 'overview',
  members: 'members',
  'cascades (ru, viewer)': 'cascades-ru',
};

/**
 * The console in headless Chromium (Debian's, through playwright-core) against the real all-in-one:
 * what a business does in it, and an accessibility check of every page on the way.
 */
describe('the console in a browser', () => {
  let stack: ConsoleStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const checked: string[] = [];
  const signInAsDemo = () => signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
  const expectAccessible = async (name: string) => {
    expect(await seriousViolations(page)).toEqual([]);
    checked.push(name);
    await screenshot(name);
  };
  /** With CONSOLE_SCREENSHOTS_DIR set, the main pages are saved at desktop and phone sizes (docs/console.md shows them). */
  const screenshot = async (name: string) => {
    if (SCREENSHOTS[name]) await screenshotSizes(page, SCREENSHOTS[name]);
  };

  beforeAll(async () => {
    stack = await startConsoleStack('console-e2e');
    browser = await launchBrowser();
    context = await browser.newContext({ locale: 'en-US' });
    page = await context.newPage();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('serves the page and its assets from the gateway under a CSP that allows nothing from elsewhere', async () => {
    const res = await page.goto(`${stack.aio.url}/app/`);
    expect(res!.status()).toBe(200);
    expect(res!.headers()['content-security-policy']).toContain("default-src 'none'; script-src 'self'");
    const redirect = await fetch(`${stack.aio.url}/app`, { redirect: 'manual' });
    expect([redirect.status, redirect.headers.get('location')]).toEqual([301, '/app/']);
  });

  it('shows the sign-in form with fields named "Email" and "Password" in English, "Email" and "Пароль" in Russian', async () => {
    await page.goto(`${stack.aio.url}/app/`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.getByLabel('Email', { exact: true }).count()).toBe(1);
    expect(await page.getByLabel('Password', { exact: true }).count()).toBe(1);
    await expectAccessible('sign-in (en)');
    // <html lang> as it is when the Russian text first appears (a MutationObserver's callback runs right
    // after the render that changed the text): the language changes in the same commit, not a paint later.
    await page.evaluate(`new MutationObserver((records, observer) => {
      if (!document.body.textContent.includes('Вход')) return;
      window.langWhenRussianShown = document.documentElement.lang;
      observer.disconnect();
    }).observe(document.body, { subtree: true, childList: true, characterData: true })`);
    await page.getByRole('button', { name: 'Русский' }).click();
    await page.getByRole('heading', { name: 'Вход' }).waitFor();
    expect(await page.evaluate('window.langWhenRussianShown')).toBe('ru');
    expect(await page.locator('html').getAttribute('lang')).toBe('ru');
    expect(await page.getByLabel('Email', { exact: true }).count()).toBe(1);
    expect(await page.getByLabel('Пароль', { exact: true }).count()).toBe(1);
    expect(await page.getByLabel('Password', { exact: true }).count()).toBe(0);
    await expectAccessible('sign-in (ru)');
    await page.getByRole('button', { name: 'English' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  });

  it('says so when the password is wrong, and signs the demo person in', async () => {
    await page.getByLabel('Email', { exact: true }).fill('demo@example.com');
    await page.getByLabel('Password', { exact: true }).fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'invalid_credentials' }).waitFor();
    await expectAccessible('sign-in with an error');
    await page.getByLabel('Password', { exact: true }).fill(DEMO_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
    await page.getByText('demo@example.com').waitFor();
    await expectAccessible('cascades (empty)');
  });

  it('creates an API key in the developer section, shows its secret once, and the key works on GET /api/v1/ping', async () => {
    await page.getByRole('link', { name: 'Developer' }).click();
    await page.getByRole('heading', { name: 'Developer' }).waitFor();
    await page.getByLabel('Key name').fill('crm from the console');
    await page.getByRole('checkbox', { name: 'webhooks:write' }).uncheck();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.getByLabel('New key').inputValue();
    expect(secret).toMatch(/^rrs_[0-9A-Za-z]{36}$/);
    const ping = await fetch(`${stack.aio.url}/api/v1/ping`, { headers: { authorization: `Bearer ${secret}` } });
    expect(ping.status).toBe(200);
    await page.getByRole('cell', { name: 'crm from the console', exact: true }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: 'crm from the console' }).textContent()).not.toContain('webhooks:write');
    await expectAccessible('developer');
    // After a reload the secret is gone for good: the list shows the prefix and the last 4 only.
    await page.reload();
    await page.getByRole('cell', { name: 'crm from the console', exact: true }).waitFor();
    expect(await page.content()).not.toContain(secret);
    await page.getByRole('button', { name: 'Revoke crm from the console' }).click();
    await page.getByRole('row').filter({ hasText: 'crm from the console' }).filter({ hasText: 'revoked' }).waitFor();
    expect((await stack.contactsSql<{ revoked: boolean }>("SELECT revoked_at IS NOT NULL AS revoked FROM api_keys WHERE name = 'crm from the console'"))[0].revoked).toBe(true);
  });

  it('sends a review request to one customer by hand and finds it in the cascades list by externalId', async () => {
    await page.getByRole('link', { name: 'Send by hand' }).click();
    await page.getByRole('heading', { name: 'Send by hand' }).waitFor();
    await page.getByLabel('Location').selectOption({ label: 'Demo Coffee on Tverskaya' });
    await page.getByLabel('Customer name').fill('Anna');
    await page.getByLabel('Email', { exact: true }).fill('anna@example.com');
    await page.getByLabel('External id (order, deal)').fill('order-e2e-7');
    await expectAccessible('send by hand');
    await page.getByRole('button', { name: 'Send review request' }).click();
    const sent = page.getByTestId('sent-note');
    expect(await sent.textContent()).toMatch(/^Sent: 1 queued, 0 skipped\. Open the cascade order-e2e-7$/);
    const cascadeLink = await sent.getByRole('link', { name: 'Open the cascade order-e2e-7' }).getAttribute('href');
    expect(cascadeLink).toMatch(/^#\/cascades\/[0-9a-f-]{36}$/);
    // A second click on the same form is the same request: its Idempotency-Key replays the cascade, and the page says so.
    await page.getByRole('button', { name: 'Send review request' }).click();
    await sent.filter({ hasText: 'already sent' }).waitFor();
    expect(await sent.textContent()).toBe('This form was already sent: nothing was sent again. Open the cascade order-e2e-7');
    expect(await sent.getByRole('link').getAttribute('href')).toBe(cascadeLink);

    await page.getByRole('link', { name: 'Cascades' }).click();
    await page.getByRole('searchbox', { name: 'External id' }).fill('order-e2e-7');
    await page.getByRole('button', { name: 'Search' }).click();
    const row = page.getByRole('row').filter({ hasText: 'order-e2e-7' });
    await row.waitFor();
    expect(await row.count()).toBe(1);
    expect(cascadeLink).toBe(`#/cascades/${await row.getAttribute('data-cascade-id')}`);
    await page.getByRole('link', { name: 'Open order-e2e-7' }).click();
    await page.getByRole('heading', { name: 'Cascade order-e2e-7' }).waitFor();
    await page.getByRole('heading', { name: 'Anna · anna@example.com' }).waitFor();
    const firstStep = page.getByRole('table', { name: 'Steps' }).getByRole('row').nth(1);
    expect(await firstStep.getByRole('cell').nth(1).textContent()).toBe('EMAIL');
    await expectAccessible('a cascade');
    await page.getByRole('link', { name: '← Cascades' }).click();
    await page.getByRole('searchbox', { name: 'External id' }).fill('order-e2e-7');
    await page.getByLabel('Status').selectOption('finished');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No cascades found.').waitFor();
    await expectAccessible('cascades (a search)');
  });

  it('uploads a CSV: a bad row is shown with its line and nothing is sent; the fixed file sends to every row', async () => {
    await page.getByRole('link', { name: 'Send by hand' }).click();
    await page.getByRole('heading', { name: 'Many customers from a CSV file' }).waitFor();
    const before = (await signInAsDemo().then((s) => s.call('GET', '/cascades?limit=100'))).body.cascades.length;
    const upload = (text: string) => page.getByLabel('CSV file').setInputFiles({ name: 'customers.csv', mimeType: 'text/csv', buffer: Buffer.from(text) });
    await upload('name,email,phone\nBoris,boris@example.com,\nVera,not-an-email,\nGleb,,+7 916 000-00-01\n');
    await page.getByRole('button', { name: 'Send to every row' }).click();
    const bad = page.getByRole('table', { name: 'Rows with errors' }).locator('tr[data-line="3"]');
    await bad.waitFor();
    expect(await bad.getByRole('cell').nth(1).textContent()).toBe('email');
    expect(await page.getByRole('table', { name: 'Rows with errors' }).locator('tbody tr').count()).toBe(1);
    await expectAccessible('send by hand: CSV row errors');
    expect((await signInAsDemo().then((s) => s.call('GET', '/cascades?limit=100'))).body.cascades.length).toBe(before);

    await upload('name,email,phone\nBoris,boris@example.com,\nVera,vera@example.com,\nGleb,,+7 916 000-00-01\n');
    await page.getByRole('button', { name: 'Send to every row' }).click();
    expect(await page.getByTestId('csv-sent-parts').locator('p').textContent()).toBe('Sent to 3 customer(s) in 1 cascade(s): 3 queued, 0 skipped.');
    expect((await signInAsDemo().then((s) => s.call('GET', '/cascades?limit=100'))).body.cascades.length).toBe(before + 1);
  });

  it('shows the rating and private feedback the customer left on /r/<token> in the ratings inbox and the overview', async () => {
    const link = await waitFor(async () => {
      const { messages } = (await (await fetch(`${stack.aio.url}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; link: string }> };
      return messages.find((m) => m.channel === 'EMAIL' && m.to === 'anna@example.com')?.link;
    }, { what: "the review request's email in the dev inbox" });
    const customer = await context.newPage();
    await customer.goto(`${stack.aio.url}${new URL(link).pathname}`);
    await customer.locator('label[for="star2"]').click();
    await customer.getByRole('button', { name: /./ }).first().click();
    await customer.locator('textarea[name="text"]').fill('The coffee was cold');
    await customer.locator('form:has(textarea[name="text"]) button[type="submit"]').click();
    await customer.getByTestId('feedback-thanks').waitFor();
    await customer.close();

    await page.getByRole('link', { name: 'Ratings' }).click();
    await page.getByRole('heading', { name: 'Ratings' }).waitFor();
    await page.getByLabel('Rating', { exact: true }).selectOption('3');
    await page.getByRole('checkbox', { name: 'With feedback only' }).check();
    await page.getByRole('button', { name: 'Search' }).click();
    const row = page.getByRole('row').filter({ hasText: 'The coffee was cold' });
    await row.waitFor();
    expect(await row.textContent()).toContain('2 / 5');
    expect(await row.getByRole('link', { name: 'order-e2e-7' }).count()).toBe(1);
    await expectAccessible('ratings');
    await page.getByLabel('Rating', { exact: true }).selectOption('1');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No ratings found.').waitFor();

    // The overview counts it at every stage of the funnel, and in the ratings' distribution (the four
    // requests are this one and the CSV's three, each with a step sent).
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('heading', { name: 'Funnel' }).waitFor();
    const stage = async (key: string) => (await page.locator(`tr[data-stage="${key}"] td`).first().textContent())!.trim();
    expect([await stage('requests'), await stage('sent'), await stage('opened'), await stage('rated'), await stage('publicLinksShown')]).toEqual(['4', '4', '1', '1', '1']);
    expect((await page.locator('tr[data-rating="2"] td').textContent())!.trim()).toBe('1');
    expect(await page.getByTestId('rating-average').textContent()).toBe('Average rating: 2');
    expect(await page.getByRole('table', { name: 'By channel' }).getByRole('row', { name: /EMAIL/ }).count()).toBe(1);
    await expectAccessible('overview');
    // A range before anything was sent counts nothing.
    await page.getByLabel('From').fill('2020-01-01');
    await page.getByLabel('To').fill('2020-01-31');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('table', { name: 'Funnel, 2020-01-01 — 2020-01-31' }).waitFor();
    expect(await stage('requests')).toBe('0');

    // Another organization's inbox does not have it; a bad filter is 400 with nothing read.
    const org = await stack.admin('POST', '/organizations', { name: 'Inbox Other', plan: 'standard', emailConfirmed: true });
    const other = await addMember(stack, org.body.organization.id, 'inbox-other@example.com', 'owner');
    expect((await other.call('GET', '/ratings')).body).toEqual({ ratings: [], nextAfter: null });
    const mine = await signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
    expect((await mine.call('GET', '/ratings')).body.ratings.map((r: { feedback: string }) => r.feedback)).toEqual(['The coffee was cold']);
    const bad = await mine.call('GET', '/ratings?maxRating=9');
    expect([bad.status, bad.body.code]).toEqual([400, 'invalid_request']);
    expect((await other.call('GET', '/overview')).body.total).toEqual({ requests: 0, sent: 0, delivered: 0, opened: 0, rated: 0, publicLinksShown: 0, publicLinkClicked: 0 });
    const tooLong = await mine.call('GET', '/overview?from=2020-01-01&to=2021-06-01');
    expect([tooLong.status, tooLong.body.code, tooLong.body.errors[0].parameter]).toEqual([400, 'invalid_request', 'to']);
    const backwards = await mine.call('GET', '/overview?from=2020-02-01&to=2020-01-01');
    expect([backwards.status, backwards.body.code]).toEqual([400, 'invalid_request']);
  });

  it('lets an invited viewer join and look, but not change anything: no forms, and the API says 403', async () => {
    // The owner invites them from the members page.
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill('viewer-e2e@example.com');
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText('The invitation was emailed to viewer-e2e@example.com.').waitFor();
    // The link goes only to the person's mailbox (here the dev inbox), never to the owner's page.
    const acceptUrl = await emailedLink(stack.aio.url, 'viewer-e2e@example.com');
    expect(acceptUrl).toMatch(/^http:\/\/localhost:8080\/app\/#\/accept\/inv_/);
    expect(await page.content()).not.toContain(acceptUrl.split('#/accept/')[1]);
    await expectAccessible('members');
    const viewerContext = await browser.newContext({ locale: 'ru-RU' });
    const ownerPage = page;
    try {
      const viewer = await viewerContext.newPage();
      await viewer.goto(acceptUrl.replace('http://localhost:8080', stack.aio.url));
      await viewer.getByRole('heading', { name: 'Присоединиться к организации' }).waitFor();
      page = viewer;
      await expectAccessible('accept an invitation (ru)');
      await viewer.getByLabel('Ваше имя').fill('Viewer');
      await viewer.getByLabel('Пароль').fill('viewer-password-1');
      await viewer.getByRole('button', { name: 'Задать пароль и войти' }).click();
      await viewer.getByRole('heading', { name: 'Каскады' }).waitFor();
      await viewer.getByRole('row').filter({ hasText: 'order-e2e-7' }).waitFor();
      await expectAccessible('cascades (ru, viewer)');

      await viewer.getByRole('link', { name: 'Разработчикам' }).click();
      await viewer.getByText('Ваша роль (наблюдатель) позволяет смотреть, но не изменять.').waitFor();
      await viewer.getByRole('cell', { name: 'crm from the console', exact: true }).waitFor();
      expect(await viewer.getByRole('button', { name: 'Создать ключ' }).count()).toBe(0);
      expect(await viewer.getByRole('button', { name: /Отозвать/ }).count()).toBe(0);
      await expectAccessible('developer (ru, viewer)');
      await viewer.getByRole('link', { name: 'Отправить вручную' }).click();
      await viewer.getByRole('heading', { name: 'Отправить вручную' }).waitFor();
      expect(await viewer.getByRole('button', { name: 'Отправить запрос отзыва' }).count()).toBe(0);
      await expectAccessible('send by hand (ru, viewer)');
      await viewer.getByRole('link', { name: 'Участники' }).click();
      await viewer.getByText('Приглашать людей могут только владельцы.').waitFor();
      await viewer.getByRole('cell', { name: 'viewer-e2e@example.com' }).waitFor();
      expect(await viewer.getByRole('button', { name: 'Пригласить' }).count()).toBe(0);

      // Even a hand-made call with the session's CSRF token is refused.
      const refused = await viewer.evaluate(async () => {
        const { csrfToken } = (await (await fetch('/account/v1/session')).json()) as { csrfToken: string };
        const res = await fetch('/account/v1/api-keys', { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrfToken }, body: '{"name":"sneaky"}' });
        return { status: res.status, code: ((await res.json()) as { code: string }).code };
      });
      expect(refused).toEqual({ status: 403, code: 'read_only_role' });
      expect((await stack.contactsSql("SELECT 1 FROM api_keys WHERE name = 'sneaky'")).length).toBe(0);
    } finally {
      page = ownerPage;
      await viewerContext.close();
    }
  });

  it('sets a new password from a reset link and signs in', async () => {
    const { members } = (await stack.admin('GET', `/organizations/${stack.aio.demo.organizationId}/members`)).body as { members: Array<{ id: string; email: string }> };
    const viewer = members.find((m) => m.email === 'viewer-e2e@example.com')!;
    const started = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/members/${viewer.id}/password-reset`);
    const resetContext = await browser.newContext({ locale: 'en-US' });
    const ownerPage = page;
    try {
      page = await resetContext.newPage();
      await page.goto(String(started.body.resetUrl).replace('http://localhost:8080', stack.aio.url));
      await page.getByRole('heading', { name: 'Set a new password' }).waitFor();
      await expectAccessible('reset password');
      await page.getByLabel('Password').fill('viewer-password-2');
      await page.getByRole('button', { name: 'Set password and sign in' }).click();
      await page.getByRole('heading', { name: 'Cascades' }).waitFor();
      await page.getByText('viewer-e2e@example.com').waitFor();
    } finally {
      page = ownerPage;
      await resetContext.close();
    }
  });

  it('has an accessibility check that can fail: an unlabelled field is a violation', async () => {
    await page.goto(`${stack.aio.url}/app/`);
    await page.getByRole('heading', { name: 'Cascades' }).waitFor();
    await page.evaluate("document.querySelector('main').append(Object.assign(document.createElement('input'), { type: 'text' }))");
    expect((await seriousViolations(page)).join('\n')).toMatch(/^label \(critical\)/m);
  });

  it('checked every page it built, in both languages', () => {
    expect(checked).toEqual(expect.arrayContaining(['sign-in (en)', 'sign-in (ru)', 'cascades (empty)', 'developer', 'send by hand', 'send by hand: CSV row errors', 'a cascade', 'ratings', 'overview', 'members', 'accept an invitation (ru)', 'developer (ru, viewer)', 'reset password']));
  });
});
