import { smscProvider, sinkSmsProvider, type SmsSendRequest } from '@rrs/channel-sms';
import { announceChannels, ProviderChain, SinkOutbox, type ChannelAnnouncement } from '@rrs/sender-kit';
import { startFakeSmsc, testContext, waitFor, type FakeSmsc } from '@rrs/testkit';
import { DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * The Channels page's provider health through the account API: two replicas of an SMS sender, each with
 * its own circuit breakers over SMSC (the local fake of its HTTP API) then the sink, announce the channel
 * `SMSRESERVE` on the all-in-one's bus. SMSC answering 503 opens one replica's breaker: the gateway shows
 * the provider `open` (on 1 of 2 replicas) with the fault's code, and `closed` again once SMSC answers.
 */
describe('account API: provider health of a running sender', () => {
  let stack: ConsoleStack;
  let owner: Signed;
  let smsc: FakeSmsc;
  let smscDown = false;
  const openMs = 400;
  const announcements: ChannelAnnouncement[] = [];
  const ctx = testContext('provider-health-api');

  beforeAll(async () => {
    stack = await startConsoleStack('provider-health');
    owner = await signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
    smsc = await startFakeSmsc({ respond: () => (smscDown ? { httpStatus: 503, body: 'Service Unavailable' } : undefined) });
  }, 60_000);
  afterAll(async () => {
    for (const announcement of announcements) announcement.stop();
    await smsc?.close();
    await ctx.stop();
    await stack?.close();
  });

  /** One replica: its own chain (breakers) over SMSC then the sink, announced under its own replica name. */
  async function replica(name: string): Promise<ProviderChain<SmsSendRequest>> {
    const chain = new ProviderChain<SmsSendRequest>('SMSRESERVE', [smscProvider({ baseUrl: smsc.url, login: 'bench', password: 'secret', timeoutMs: 5_000 }), sinkSmsProvider(new SinkOutbox())], { failureThreshold: 1, openMs });
    announcements.push(await announceChannels({
      bus: stack.aio.bus,
      logger: ctx.logger,
      entries: [{ key: 'SMSRESERVE', slug: 'sms-reserve', label: 'SMS (reserve)', contactField: 'phone', capabilities: ['send'], sender: 'channel-sms', position: 60 }],
      health: new Map([['SMSRESERVE', chain]]),
      replica: name,
      healthPutIntervalMs: 100,
    }));
    return chain;
  }

  const providersOf = async (key: string) => {
    const res = await owner.call('GET', '/channels');
    expect(res.status).toBe(200);
    return (res.body.channels as Array<{ channel: string; providers: Array<Record<string, unknown>> }>).find((c) => c.channel === key)?.providers;
  };
  /** The channel's providers once the first one (smsc) shows `state`. */
  const providersWhen = (state: string) =>
    waitFor(async () => {
      const providers = await providersOf('SMSRESERVE');
      return providers?.[0].state === state ? providers : undefined;
    }, { what: `smsc ${state} in the account API` });
  const send = (chain: ProviderChain<SmsSendRequest>, stepId: string) =>
    chain.send({ stepId, phone: '+79161234567', text: 'Rate your visit', link: 'https://example.com/r/x' }, { idempotencyKey: stepId, resumed: false, maybeWith: [] });

  it('shows a provider going down on one replica as open, with the fault, then closed once it recovered', async () => {
    const podA = await replica('pod-a:1');
    const podB = await replica('pod-b:1');
    await waitFor(async () => (await providersOf('SMSRESERVE'))?.[0]?.replicas === 2, { what: 'both replicas in the catalog' });
    expect(await providersOf('SMSRESERVE')).toEqual([
      expect.objectContaining({ name: 'smsc', state: 'closed', lastFailureCode: null, lastFailureAt: null, replicas: 2, replicasInState: 2 }),
      expect.objectContaining({ name: 'sink', state: 'closed', replicas: 2, replicasInState: 2 }),
    ]);

    smscDown = true;
    // SMSC's 503 is a provider fault: the step goes to the sink and replica A's SMSC circuit opens.
    await expect(send(podA, '6f1c8a52-0d4e-4c55-9c43-1b2f7e0a9d01')).resolves.toMatchObject({ provider: 'sink' });
    const opened = await providersWhen('open');
    expect(opened[0]).toMatchObject({ name: 'smsc', state: 'open', lastFailureCode: 'provider_unavailable', replicas: 2, replicasInState: 1 });
    expect(Date.parse(opened[0].lastFailureAt as string)).not.toBeNaN();
    expect(opened[1]).toMatchObject({ name: 'sink', state: 'closed' });
    // Replica B's breaker never saw the fault: still closed there.
    expect(podB.circuit('smsc')).toBe('closed');

    smscDown = false;
    await new Promise((resolve) => setTimeout(resolve, openMs));
    // The trial step after the open time goes to SMSC again and its success closes the circuit.
    await expect(send(podA, '6f1c8a52-0d4e-4c55-9c43-1b2f7e0a9d02')).resolves.toMatchObject({ provider: 'smsc' });
    const closed = await providersWhen('closed');
    expect(closed[0]).toMatchObject({ name: 'smsc', state: 'closed', lastFailureCode: 'provider_unavailable', replicas: 2, replicasInState: 2 });
  });

  it('gives the public channel list each provider\'s name, state (ok / degraded / down) and since, nothing more (no secrets, no replicas)', async () => {
    const publicProviders = async () => {
      const res = await fetch(`${stack.aio.url}/api/v1/channels`, { headers: { authorization: `Bearer ${stack.aio.demo.apiKey}` } });
      expect(res.status).toBe(200);
      const text = await res.text();
      // Neither the provider's credentials nor its address.
      expect(text).not.toContain('secret');
      expect(text).not.toContain(smsc.url);
      return (JSON.parse(text) as { channels: Array<{ key: string; delivers: boolean; providers: Array<Record<string, string>> }> }).channels;
    };
    const podC = await replica('pod-c:1');
    for (const channel of await publicProviders()) {
      expect(Object.keys(channel).sort()).toEqual(['configured', 'contactField', 'delivers', 'key', 'label', 'providers', 'sendEndpoint', 'slug']);
      for (const provider of channel.providers) expect(Object.keys(provider).sort()).toEqual(['name', 'since', 'state']);
    }
    smscDown = true;
    await expect(send(podC, '6f1c8a52-0d4e-4c55-9c43-1b2f7e0a9d03')).resolves.toMatchObject({ provider: 'sink' });
    const down = await waitFor(async () => {
      const channel = (await publicProviders()).find((c) => c.key === 'SMSRESERVE');
      return channel?.providers[0]?.state === 'down' ? channel : undefined;
    }, { what: 'smsc down in the public catalog' });
    expect(down.providers).toEqual([
      { name: 'smsc', state: 'down', since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
      { name: 'sink', state: 'ok', since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    ]);
    // A real provider first: the channel delivers, even with the sink behind it.
    expect(down.delivers).toBe(true);
    // The all-in-one outside production sends email through the sink alone: not delivered, and said so.
    expect((await publicProviders()).find((c) => c.key === 'EMAIL')).toMatchObject({ delivers: false, providers: [{ name: 'sink', state: 'ok' }] });
    smscDown = false;
  });
});
