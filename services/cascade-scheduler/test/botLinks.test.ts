import { BOT_LINK_CODE, schedulerV1 } from '@rrs/proto';
import { createGrpcClient, type GrpcClientHandle } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, rejection, startHarness, type Harness } from './harness';

/**
 * Link codes of the official bots (GetReviewForm `bot_channels` → `bot_links`, ClaimBotLink) and the
 * bots' opt-out (RecordBotOptOut), over gRPC on Postgres + JetStream.
 */
describe('bot link codes and bot opt-outs', () => {
  let h: Harness;
  let grpc: GrpcClientHandle<schedulerV1.CascadeSchedulerServiceClient>;
  let flowId: string;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL', 'SMS'] } });
    grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${h.scheduler.grpcPort}`);
    flowId = (await h.scheduler.flows.create({ organizationId: ORG, name: 'sms', isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }] })).id;
  });
  afterAll(async () => {
    grpc.close();
    await h.close();
  });

  async function linkOf(person: { email: string; phone: string }) {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: '', recipients: [{ name: 'Rita', ...person }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the SMS sent' });
    const { rows } = await h.pool.query('SELECT rr.token, r.id AS recipient_id FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { token: rows[0].token as string, recipientId: rows[0].recipient_id as string };
  }
  const form = (token: string, botChannels: string[]) => grpc.client.getReviewForm({ token, recordOpen: false, forUnsubscribe: false, botChannels });

  it('a rated form with a phone gets one opaque code per bot channel asked, the same on every view until used; none before a rating or for channels without a bot', async () => {
    const { token } = await linkOf({ email: 'b1@example.com', phone: '+79001110001' });
    expect((await form(token, ['MAX', 'TELEGRAM'])).form!.botLinks).toEqual([]);
    await h.scheduler.reviews.submitRating(token, 5);
    const first = (await form(token, ['MAX', 'TELEGRAM', 'SMS', 'TELEGRAM'])).form!.botLinks;
    expect(first.map((link) => link.channel)).toEqual(['MAX', 'TELEGRAM']);
    for (const link of first) expect(link.code).toMatch(BOT_LINK_CODE);
    expect(first[0].code).not.toBe(first[1].code);
    expect((await form(token, ['TELEGRAM'])).form!.botLinks.map((link) => link.code)).toEqual([first[1].code]);
    expect((await form(token, [])).form!.botLinks).toEqual([]);
  });

  it('ClaimBotLink: once, on its channel, by one chat (the same chat again gets the same answer); a claimed code is kept and the next view gets a new one', async () => {
    const { token, recipientId } = await linkOf({ email: 'b2@example.com', phone: '+79001110002' });
    await h.scheduler.reviews.submitRating(token, 4);
    const code = (await form(token, ['TELEGRAM'])).form!.botLinks[0].code;
    const wrongChannel = await rejection(grpc.client.claimBotLink({ code, channel: 'MAX', chatId: '1' }));
    expect(wrongChannel).toMatchObject({ status: 404, code: 'bot_link_invalid' });
    const claimed = await grpc.client.claimBotLink({ code, channel: 'TELEGRAM', chatId: '1' });
    expect(claimed).toEqual({ organizationId: ORG, phone: '+79001110002', recipientId, locale: 'en', organizationName: expect.any(String), staff: false });
    await expect(grpc.client.claimBotLink({ code, channel: 'TELEGRAM', chatId: '1' })).resolves.toEqual(claimed);
    expect(await rejection(grpc.client.claimBotLink({ code, channel: 'TELEGRAM', chatId: '2' }))).toMatchObject({ status: 404, code: 'bot_link_invalid' });
    // The person's export carries the claimed link (by phone), with its chat.
    const exported = await grpc.client.exportPerson({ organizationId: ORG, email: '', phone: '+79001110002' });
    expect(exported.botLinks).toEqual([{ channel: 'TELEGRAM', reviewRequestId: expect.any(String), linkedAt: expect.any(Date), chatId: '1' }]);
    expect((await grpc.client.exportPerson({ organizationId: ORG, email: '', phone: '+79001110001' })).botLinks).toEqual([]);
    const next = (await form(token, ['TELEGRAM'])).form!.botLinks[0].code;
    expect(next).not.toBe(code);
    // Viewing the page again keeps the claimed code: the export still has the link, and a retried
    // webhook of that chat still gets its answer.
    expect((await grpc.client.exportPerson({ organizationId: ORG, email: '', phone: '+79001110002' })).botLinks).toEqual(exported.botLinks);
    await expect(grpc.client.claimBotLink({ code, channel: 'TELEGRAM', chatId: '1' })).resolves.toEqual(claimed);
    expect((await form(token, ['TELEGRAM'])).form!.botLinks[0].code).toBe(next);
  });

  it('refuses unknown, malformed and expired codes (404 bot_link_invalid) and a claim without a chat (400), claiming nothing', async () => {
    const { token } = await linkOf({ email: 'b3@example.com', phone: '+79001110003' });
    await h.scheduler.reviews.submitRating(token, 5);
    const code = (await form(token, ['MAX'])).form!.botLinks[0].code;
    expect(await rejection(grpc.client.claimBotLink({ code, channel: 'MAX', chatId: '' }))).toMatchObject({ status: 400, code: 'invalid_request' });
    for (const bad of ['AAAAAAAAAAAAAAAAAAAAAA', 'short', `${code}x`]) expect(await rejection(grpc.client.claimBotLink({ code: bad, channel: 'MAX', chatId: '9' }))).toMatchObject({ status: 404, code: 'bot_link_invalid' });
    await h.pool.query("UPDATE bot_link_codes SET expires_at = now() - interval '1 second' WHERE code = $1", [code]);
    expect(await rejection(grpc.client.claimBotLink({ code, channel: 'MAX', chatId: '9' }))).toMatchObject({ status: 404, code: 'bot_link_invalid' });
    expect((await h.pool.query('SELECT used_at FROM bot_link_codes WHERE code = $1', [code])).rows[0].used_at).toBeNull();
  });

  it('RecordBotOptOut puts the phone and the linked recipient’s email in the ledger (stop_reply, the bot’s channel), once; the form then offers no bot', async () => {
    const person = { email: 'b4@example.com', phone: '+79001110004' };
    const { token, recipientId } = await linkOf(person);
    await h.scheduler.reviews.submitRating(token, 5);
    const request = { organizationId: ORG, phone: person.phone, channel: 'TELEGRAM', recipientId };
    await expect(grpc.client.recordBotOptOut(request)).resolves.toEqual({ suppressed: 2 });
    await expect(grpc.client.recordBotOptOut(request)).resolves.toEqual({ suppressed: 0 });
    const { rows } = await h.pool.query('SELECT address, channel, source FROM suppressions WHERE address = ANY($1::text[]) ORDER BY address', [[person.email, person.phone]]);
    expect(rows).toEqual([{ address: person.phone, channel: 'TELEGRAM', source: 'stop_reply' }, { address: person.email, channel: 'TELEGRAM', source: 'stop_reply' }]);
    expect((await form(token, ['MAX', 'TELEGRAM'])).form!.botLinks).toEqual([]);
  });

  it.each([
    ['/organizationId', { organizationId: 'nope', phone: '+79001110005', channel: 'MAX', recipientId: '' }],
    ['/phone', { organizationId: ORG, phone: '89001110005', channel: 'MAX', recipientId: '' }],
    ['/channel', { organizationId: ORG, phone: '+79001110005', channel: 'SMS', recipientId: '' }],
  ])('RecordBotOptOut refuses a bad %s (400 invalid_request) and records nothing', async (pointer, request) => {
    const before = (await h.pool.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n;
    const refused = await rejection(grpc.client.recordBotOptOut(request));
    expect(refused).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(JSON.stringify(refused.details)).toContain(pointer);
    expect((await h.pool.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n).toBe(before);
  });
});
