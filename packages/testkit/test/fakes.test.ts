import nodemailer from 'nodemailer';
import { renderEmail, smtpProvider } from '@rrs/channel-email';
import { smscProvider } from '@rrs/channel-sms';
import { startFakeSmsc, startSmtpSink, type FakeSmsc, type SmtpSink } from '../src';
import { dueStep } from '../../sender-kit/test/support/steps';

describe('the SMTP sink', () => {
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink({
      auth: { user: 'bench', pass: 's3cret' },
      onRcptTo: (address) => (address.startsWith('bounce') ? { code: 550, message: '5.1.1 No such user' } : address.startsWith('later') ? { code: 451, message: '4.7.1 Try again later' } : undefined),
    });
  });
  afterAll(() => sink.close());

  it("accepts channel-email's own SMTP messages and counts them by recipient and Message-ID", async () => {
    const provider = smtpProvider({ smtpUrl: sink.url, from: 'Reviews <reviews@acme.test>', timeoutMs: 2_000 });
    try {
      const step = dueStep('EMAIL', { recipient: { name: 'Anna', email: 'anna@example.com', phone: '' } });
      const before = sink.count;
      const sent = await provider.send(renderEmail(step, 'Reviews <reviews@acme.test>'), { idempotencyKey: step.stepId, resumed: false });
      expect(sent.providerMessageId).toBe(`<${step.stepId}@acme.test>`);
      expect(sink.count).toBe(before + 1);
      const got = sink.messages.at(-1)!;
      expect(got).toMatchObject({ from: 'reviews@acme.test', to: ['anna@example.com'], messageId: `<${step.stepId}@acme.test>` });
      expect(got.raw!.toString('utf8')).toContain(step.reviewUrl);
      expect(got.size).toBe(got.raw!.length);
      expect(sink.acceptedAtOf('anna@example.com')).toBe(got.acceptedAt);
      expect(sink.timesAccepted('anna@example.com')).toBe(1);
    } finally {
      provider.close();
    }
  });

  it('answers a refused recipient with its reply code, which the adapter sorts, and counts nothing', async () => {
    const provider = smtpProvider({ smtpUrl: sink.url, from: 'reviews@acme.test', timeoutMs: 2_000 });
    try {
      const before = sink.count;
      const bounce = dueStep('EMAIL', { recipient: { name: 'B', email: 'bounce@example.com', phone: '' } });
      await expect(provider.send(renderEmail(bounce, 'reviews@acme.test'), { idempotencyKey: bounce.stepId, resumed: false })).rejects.toMatchObject({ name: 'PermanentSendError', reason: 'recipient_rejected' });
      const later = dueStep('EMAIL', { recipient: { name: 'L', email: 'later@example.com', phone: '' } });
      await expect(provider.send(renderEmail(later, 'reviews@acme.test'), { idempotencyKey: later.stepId, resumed: false })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'recipient_deferred' });
      expect(sink.count).toBe(before);
      expect(sink.timesAccepted('bounce@example.com')).toBe(0);
    } finally {
      provider.close();
    }
  });

  it('refuses wrong credentials (535) and accepts nothing from that client', async () => {
    const before = sink.count;
    const wrong = nodemailer.createTransport({ host: '127.0.0.1', port: sink.port, secure: false, auth: { user: 'bench', pass: 'nope' } });
    await expect(wrong.sendMail({ from: 'a@acme.test', to: 'c@example.com', subject: 's', text: 't' })).rejects.toMatchObject({ code: 'EAUTH', responseCode: 535 });
    expect(sink.count).toBe(before);
  });

  it('counts without keeping messages when asked to', async () => {
    const lean = await startSmtpSink({ keepMessages: false });
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: lean.port, secure: false });
    try {
      expect(lean.url).toBe(`smtp://127.0.0.1:${lean.port}`);
      for (const to of ['x@example.com', 'y@example.com', 'x@example.com']) await transport.sendMail({ from: 'a@acme.test', to, subject: 's', text: 't' });
      expect(lean.count).toBe(3);
      expect(lean.messages).toHaveLength(0);
      expect(lean.timesAccepted('x@example.com')).toBe(2);
      expect(lean.acceptedAtOf('y@example.com')).toBeGreaterThan(lean.acceptedAtOf('x@example.com')!);
    } finally {
      transport.close();
      await lean.close();
    }
  });
});

describe('the fake SMSC.ru', () => {
  let smsc: FakeSmsc;
  beforeAll(async () => {
    smsc = await startFakeSmsc({
      login: 'acme',
      password: 'pw',
      balance: 2,
      pricePerMessage: 1,
      respond: (request) => (request.phones[0] === '+79160000503' ? { httpStatus: 503, body: '{"error":"unavailable"}' } : request.phones[0] === '+79160000006' ? { error: 'message is denied', errorCode: 6 } : request.phones[0] === '+79160009999' ? { hang: true } : undefined),
    });
  });
  afterAll(() => smsc.close());

  const provider = (password = 'pw', timeoutMs = 2_000) => smscProvider({ baseUrl: smsc.url, login: 'acme', password, sender: 'Acme', timeoutMs });
  const balance = async (password = 'pw') => (await fetch(`${smsc.url}/sys/balance.php?login=acme&psw=${password}&fmt=3&cur=1`)).json();

  it("takes channel-sms's send request, answers the step id, counts it by id and phone, and charges the balance", async () => {
    expect(await balance()).toEqual({ balance: '2.00', currency: 'RUR' });
    const stepId = '0190e0e0-0000-7000-8000-000000000001';
    expect(await provider().send({ stepId, phone: '+79161234567', text: 'Rate us: https://x/r/1', link: 'https://x/r/1' })).toEqual({ providerMessageId: stepId });
    expect(smsc.byId(stepId)).toMatchObject({ id: stepId, phones: ['+79161234567'], mes: 'Rate us: https://x/r/1', sender: 'Acme', cnt: 1 });
    expect(smsc.acceptedAtOfId(stepId)).toBe(smsc.byId(stepId)!.acceptedAt);
    expect(smsc.acceptedAtOf('+79161234567')).toBe(smsc.byId(stepId)!.acceptedAt);
    expect(smsc.count).toBe(1);
    expect(await balance()).toEqual({ balance: '1.00', currency: 'RUR' });
  });

  it('refuses the same request within a minute with error 9, which the adapter reads as sent: counted once', async () => {
    const request = { stepId: '0190e0e0-0000-7000-8000-000000000001', phone: '+79161234567', text: 'Rate us: https://x/r/1', link: 'https://x/r/1' };
    const before = smsc.requests;
    expect(await provider().send(request)).toEqual({ providerMessageId: request.stepId });
    expect(smsc.requests).toBe(before + 1);
    expect(smsc.count).toBe(1);
    expect(smsc.timesAccepted('+79161234567')).toBe(1);
  });

  it("answers status.php as SMSC does, so a resumed send of channel-sms finds the message and never sends it again", async () => {
    const sent = { stepId: '0190e0e0-0000-7000-8000-000000000001', phone: '+79161234567', text: 'Rate us: https://x/r/1', link: 'https://x/r/1', resumed: true };
    const before = smsc.requests;
    expect(await provider().send(sent)).toEqual({ providerMessageId: sent.stepId });
    expect(smsc.requests).toBe(before);
    const status = async (id: string, phone: string) => (await fetch(`${smsc.url}/sys/status.php`, { method: 'POST', body: new URLSearchParams({ login: 'acme', psw: 'pw', phone, id, fmt: '3' }) })).json();
    expect(await status(sent.stepId, sent.phone)).toMatchObject({ status: 0 });
    expect(await status(sent.stepId, '+79160000000')).toEqual({ status: -3 });
    expect(await status('never-sent', sent.phone)).toEqual({ status: -3 });
  });

  it.each([
    ['a wrong password (error 2)', () => provider('wrong').send({ stepId: 's-2', phone: '+79161234568', text: 'hi', link: '' }), { name: 'RetryableSendError', reason: 'provider_auth_failed' }],
    ['an invalid number (error 7)', () => provider().send({ stepId: 's-7', phone: '+7916', text: 'hi', link: '' }), { name: 'PermanentSendError', reason: 'invalid_phone' }],
    ['a forbidden message (error 6, from respond)', () => provider().send({ stepId: 's-6', phone: '+79160000006', text: 'hi', link: '' }), { name: 'PermanentSendError', reason: 'message_forbidden' }],
    ['HTTP 503 (from respond)', () => provider().send({ stepId: 's-503', phone: '+79160000503', text: 'hi', link: '' }), { name: 'RetryableSendError', reason: 'provider_unavailable' }],
    ['no answer (from respond)', () => provider('pw', 200).send({ stepId: 's-hang', phone: '+79160009999', text: 'hi', link: '' }), { name: 'RetryableSendError', reason: 'provider_timeout' }],
  ])('answers %s as the adapter expects, and accepts nothing', async (_label, send, expected) => {
    const before = smsc.count;
    await expect(send()).rejects.toMatchObject(expected);
    expect(smsc.count).toBe(before);
  });

  it('refuses with error 3 once the balance runs out, and says so on balance.php', async () => {
    expect(await provider().send({ stepId: 's-last', phone: '+79161110001', text: 'hi', link: '' })).toEqual({ providerMessageId: 's-last' });
    await expect(provider().send({ stepId: 's-broke', phone: '+79161110002', text: 'hi', link: '' })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_account_balance' });
    expect(smsc.byId('s-broke')).toBeUndefined();
    expect(await balance()).toEqual({ balance: '0.00', currency: 'RUR' });
    expect(await balance('wrong')).toEqual({ error: 'authorise error', error_code: 2 });
  });

  it('assigns numeric ids when none is given and answers fmt=3 only', async () => {
    const lean = await startFakeSmsc({ keepMessages: false });
    try {
      const form = (extra: Record<string, string>) => new URLSearchParams({ login: 'bench', psw: 'secret', phones: '+79161234567;+79161234568', mes: 'hi', ...extra });
      const answer = await (await fetch(`${lean.url}/sys/send.php`, { method: 'POST', body: form({ fmt: '3' }) })).json();
      expect(answer).toEqual({ id: 1, cnt: 2 });
      expect(lean.acceptedAtOfId('1')).toBeDefined();
      expect(lean.messages).toHaveLength(0);
      expect((await fetch(`${lean.url}/sys/send.php?${form({ fmt: '0' })}`)).status).toBe(400);
      expect(lean.count).toBe(1);
    } finally {
      await lean.close();
    }
  });
});
