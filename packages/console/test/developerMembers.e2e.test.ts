import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { launchBrowser, waitFor } from '@rrs/testkit';
import { screenshotSizes, seriousViolations } from './browserChecks';
import { addMember, DEMO_PASSWORD, startConsoleStack, type ConsoleStack } from './consoleStack';
import { startWebhookReceiver, type ReceivedWebhook } from './webhookReceiver';

/** Page checks that also leave a screenshot for docs/console.md (CONSOLE_SCREENSHOTS_DIR). */
const SCREENSHOTS: Record<string, string> = {
  'developer: webhooks': 'developer-webhooks',
  'members: manage': 'members-manage',
  'forgot password': 'forgot-password',
};

/**
 * The console's developer section (webhook endpoints, the API reference) and members management in
 * headless Chromium (Debian's, through playwright-core) against the real all-in-one, with a local
 * webhook receiver and the dev inbox standing in for people's mailboxes.
 */
describe('the console: webhooks and members in a browser', () => {
  let stack: ConsoleStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let receiverUrl: string;
  let received: ReceivedWebhook[] = [];
  const checked: string[] = [];
  const expectAccessible = async (name: string, on: Page = page) => {
    expect(await seriousViolations(on)).toEqual([]);
    checked.push(name);
    if (SCREENSHOTS[name]) await screenshotSizes(on, SCREENSHOTS[name]);
  };
  const local = (link: string) => link.replace('http://localhost:8080', stack.aio.url);
  /** The newest email to `to` in the dev inbox whose link matches. */
  const emailTo = (to: string, link: RegExp) =>
    waitFor(
      async () => {
        const { messages } = (await (await fetch(`${stack.aio.url}/dev/messages?to=${encodeURIComponent(to)}`)).json()) as { messages: Array<{ channel: string; subject: string; text: string; link: string }> };
        return messages.find((m) => m.channel === 'EMAIL' && link.test(m.link));
      },
      { what: `an email to ${to}` },
    );
  const signInPage = async (email: string, password: string) => {
    const other = await browser.newContext({ locale: 'en-US' });
    const signedIn = await other.newPage();
    await signedIn.goto(`${stack.aio.url}/app/`);
    await signedIn.getByLabel('Email', { exact: true }).fill(email);
    await signedIn.getByLabel('Password', { exact: true }).fill(password);
    await signedIn.getByRole('button', { name: 'Sign in' }).click();
    await signedIn.getByRole('heading', { name: 'Cascades' }).waitFor();
    return { context: other, page: signedIn };
  };
  const sessionStatus = (on: Page) => on.evaluate(async () => (await fetch('/account/v1/session')).status);

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    receiverUrl = receiver.url;
    received = receiver.received;
    stack = await startConsoleStack('developer-members-e2e');
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
    await receiver?.close();
  });

  it('creates a webhook endpoint, shows its secret once, sends a signed test, logs it, replays it, rotates the secret and changes the events', async () => {
    await page.getByRole('link', { name: 'Developer' }).click();
    await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
    await page.getByLabel('URL', { exact: true }).fill(receiverUrl);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await page.getByLabel('Signing secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByRole('cell', { name: receiverUrl, exact: true }).waitFor();

    // Shown once: after a reload the endpoint is listed, its secret is not.
    await page.reload();
    await page.getByRole('cell', { name: receiverUrl, exact: true }).waitFor();
    expect(await page.getByLabel('Signing secret').count()).toBe(0);
    await page.getByRole('button', { name: `Delivery log ${receiverUrl}` }).click();

    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.getByText('Test event queued: see the delivery log.').waitFor();
    const test = await waitFor(() => received.find((r) => String(r.body).includes('"webhook.test"')), { what: 'the test event at the receiver' });
    // Signed per Standard Webhooks with the secret the page showed.
    const verified = new Webhook(secret).verify(test.body, test.headers as Record<string, string>) as { type: string };
    expect(verified.type).toBe('webhook.test');
    const log = page.getByRole('table', { name: `Delivery log of ${receiverUrl}` });
    await waitFor(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return (await log.getByRole('row').filter({ hasText: 'webhook.test' }).filter({ hasText: 'delivered' }).count()) === 1;
      },
      { what: 'the test delivery in the log', intervalMs: 200 },
    );

    await log.getByRole('button', { name: /^Replay webhook\.test/ }).click();
    await page.getByText('Replay queued.').waitFor();
    const eventId = test.headers['webhook-id'];
    await waitFor(() => received.filter((r) => r.headers['webhook-id'] === eventId).length === 2, { what: 'the replayed delivery' });

    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = await page.getByLabel('Signing secret').inputValue();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    const before = received.length;
    await page.getByRole('button', { name: 'Send a test event' }).click();
    const second = await waitFor(() => received.length > before && received[received.length - 1], { what: 'the test after rotation' });
    expect((new Webhook(rotated).verify(second.body, second.headers as Record<string, string>) as { type: string }).type).toBe('webhook.test');

    await page.getByRole('group', { name: `Events of ${receiverUrl}` }).getByLabel('cascade.recipient.rated').check();
    await page.getByRole('button', { name: 'Save events' }).click();
    await page.getByText('Events saved.').waitFor();
    await page.getByRole('row').filter({ hasText: receiverUrl }).filter({ hasText: 'cascade.recipient.rated' }).first().waitFor();

    // The API reference is an item of the page, with the public API's document.
    await page.getByRole('heading', { name: 'API reference' }).waitFor();
    const reference = await page.getByRole('link', { name: 'Open the API reference' }).getAttribute('href');
    expect((await fetch(`${stack.aio.url}${reference}`)).status).toBe(200);
    await expectAccessible('developer: webhooks');
  });

  it('invites a person by email; they accept through the emailed link; the owner changes their role, then removes them and their session stops', async () => {
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill('newcomer@example.com');
    await page.getByLabel('Role', { exact: true }).selectOption('viewer');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText('The invitation was emailed to newcomer@example.com.').waitFor();
    await page.getByRole('table', { name: 'Pending invitations' }).getByRole('cell', { name: 'newcomer@example.com' }).waitFor();
    const invitation = await emailTo('newcomer@example.com', /#\/accept\/inv_/);
    expect(invitation.text).toContain(invitation.link);

    const newcomerContext = await browser.newContext({ locale: 'en-US' });
    try {
      const newcomer = await newcomerContext.newPage();
      await newcomer.goto(local(invitation.link));
      await newcomer.getByRole('heading', { name: 'Join your organization' }).waitFor();
      await newcomer.getByLabel('Your name').fill('Newcomer');
      await newcomer.getByLabel('Password').fill('newcomer-password-1');
      await newcomer.getByRole('button', { name: 'Set password and sign in' }).click();
      await newcomer.getByRole('heading', { name: 'Cascades' }).waitFor();

      await page.reload();
      const row = page.getByRole('table', { name: 'Members' }).getByRole('row').filter({ hasText: 'newcomer@example.com' });
      await row.getByLabel('Access level of newcomer@example.com').selectOption('admin');
      await row.getByRole('button', { name: 'Change role' }).click();
      await page.getByText('The role of newcomer@example.com is now admin.').waitFor();
      expect(await newcomer.evaluate(async () => ((await (await fetch('/account/v1/session')).json()) as { member: { role: string } }).member.role)).toBe('admin');
      expect(await page.getByRole('table', { name: 'Pending invitations' }).count()).toBe(0);
      await expectAccessible('members: manage');

      await page.getByRole('table', { name: 'Members' }).getByRole('row').filter({ hasText: 'newcomer@example.com' }).getByRole('button', { name: 'Remove', exact: true }).click();
      await page.getByRole('button', { name: 'Remove newcomer@example.com for good' }).click();
      await page.getByText('newcomer@example.com was removed; their sessions have ended.').waitFor();
      expect(await page.getByRole('table', { name: 'Members' }).getByRole('cell', { name: 'newcomer@example.com' }).count()).toBe(0);
      expect(await sessionStatus(newcomer)).toBe(401);
      await newcomer.reload();
      await newcomer.getByRole('heading', { name: 'Sign in' }).waitFor();
    } finally {
      await newcomerContext.close();
    }
  });

  it('revokes a pending invitation, whose link then no longer works', async () => {
    await page.getByLabel('Email', { exact: true }).fill('changed-mind@example.com');
    await page.getByRole('button', { name: 'Invite' }).click();
    const invitation = await emailTo('changed-mind@example.com', /#\/accept\/inv_/);
    const pending = page.getByRole('table', { name: 'Pending invitations' });
    await pending.getByRole('row').filter({ hasText: 'changed-mind@example.com' }).getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No pending invitations.').waitFor();
    const token = decodeURIComponent(invitation.link.split('#/accept/')[1]);
    const accept = await fetch(`${stack.aio.url}/account/v1/invitations/accept`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, name: 'X', password: 'some-password-1' }) });
    expect([accept.status, ((await accept.json()) as { code: string }).code]).toEqual([401, 'invalid_invitation']);
  });

  it('resets a forgotten password by email from the sign-in page, answering an unknown email the same way', async () => {
    await addMember(stack, stack.aio.demo.organizationId, 'forgot-e2e@example.com', 'admin', 'the-old-password-1');
    const visitor = await browser.newContext({ locale: 'en-US' });
    try {
      const signedOut = await visitor.newPage();
      await signedOut.goto(`${stack.aio.url}/app/`);
      await signedOut.getByRole('link', { name: 'Forgot password?' }).click();
      await signedOut.getByRole('heading', { name: 'Reset your password' }).waitFor();
      await expectAccessible('forgot password', signedOut);

      await signedOut.getByLabel('Email', { exact: true }).fill('nobody-e2e@example.com');
      await signedOut.getByRole('button', { name: 'Email me a link' }).click();
      const answer = 'If an account uses this email, a link to set a new password is on its way. Check your inbox.';
      await signedOut.getByText(answer).waitFor();
      await signedOut.getByLabel('Email', { exact: true }).fill('forgot-e2e@example.com');
      await signedOut.getByRole('button', { name: 'Email me a link' }).click();
      await signedOut.getByText(answer).waitFor();

      const email = await emailTo('forgot-e2e@example.com', /#\/reset\/rst_/);
      expect(((await (await fetch(`${stack.aio.url}/dev/messages?to=nobody-e2e%40example.com`)).json()) as { messages: unknown[] }).messages).toEqual([]);
      await signedOut.goto(local(email.link));
      await signedOut.getByRole('heading', { name: 'Set a new password' }).waitFor();
      await signedOut.getByLabel('Password').fill('the-new-password-1');
      await signedOut.getByRole('button', { name: 'Set password and sign in' }).click();
      await signedOut.getByRole('heading', { name: 'Cascades' }).waitFor();
      await signedOut.getByText('forgot-e2e@example.com').waitFor();
    } finally {
      await visitor.close();
    }
  });

  it('offers "Forgot password?" in Russian too', async () => {
    const russian = await browser.newContext({ locale: 'ru-RU' });
    try {
      const signedOut = await russian.newPage();
      await signedOut.goto(`${stack.aio.url}/app/`);
      await signedOut.getByRole('link', { name: 'Забыли пароль?' }).click();
      await signedOut.getByRole('heading', { name: 'Сброс пароля' }).waitFor();
      expect(await signedOut.getByLabel('Email', { exact: true }).count()).toBe(1);
      await expectAccessible('forgot password (ru)', signedOut);
    } finally {
      await russian.close();
    }
  });

  it('shows a viewer the endpoints, their log and the people, with no form or button that changes them', async () => {
    await addMember(stack, stack.aio.demo.organizationId, 'viewer-dev-e2e@example.com', 'viewer', 'viewer-password-9');
    const viewer = await signInPage('viewer-dev-e2e@example.com', 'viewer-password-9');
    try {
      await viewer.page.getByRole('link', { name: 'Developer' }).click();
      await viewer.page.getByRole('cell', { name: receiverUrl, exact: true }).waitFor();
      await viewer.page.getByRole('button', { name: `Delivery log ${receiverUrl}` }).click();
      await viewer.page.getByRole('table', { name: `Delivery log of ${receiverUrl}` }).waitFor();
      for (const name of ['Add endpoint', 'Send a test event', 'Rotate secret', 'Save events']) expect([name, await viewer.page.getByRole('button', { name }).count()]).toEqual([name, 0]);
      expect(await viewer.page.getByRole('button', { name: /^(Replay|Delete)/ }).count()).toBe(0);
      expect(await viewer.page.locator('main form').count()).toBe(0);
      await expectAccessible('developer: webhooks (viewer)', viewer.page);

      await viewer.page.getByRole('link', { name: 'Members' }).click();
      await viewer.page.getByRole('cell', { name: 'viewer-dev-e2e@example.com' }).waitFor();
      for (const name of ['Change role', 'Remove', 'Email a reset link', 'Revoke', 'Invite']) expect([name, await viewer.page.getByRole('button', { name }).count()]).toEqual([name, 0]);
      expect(await viewer.page.locator('main form').count()).toBe(0);
      await expectAccessible('members (viewer)', viewer.page);
    } finally {
      await viewer.context.close();
    }
  });

  it('checked every page it built or changed', () => {
    expect(checked).toEqual(['developer: webhooks', 'members: manage', 'forgot password', 'forgot password (ru)', 'developer: webhooks (viewer)', 'members (viewer)']);
  });
});
