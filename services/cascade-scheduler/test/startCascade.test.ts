import { contactsV1, schedulerV1 } from '@rrs/proto';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import { createGrpcClient, type GrpcClientHandle } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { FakeProfiles, LOCATION, ORG, OTHER_ORG, recipientsInput, rejection, startHarness, startScriptedSender, type Harness } from './harness';

/** StartCascade over gRPC: validation, plan/account/channel errors (nothing created or sent), idempotent replay. */
describe('StartCascade over gRPC', () => {
  let h: Harness;
  let grpc: GrpcClientHandle<schedulerV1.CascadeSchedulerServiceClient>;
  let sender: Awaited<ReturnType<typeof startScriptedSender>>;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40 });
    grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${h.scheduler.grpcPort}`);
    sender = await startScriptedSender(h.tb.bus, ['EMAIL', 'SMS']);
    await h.scheduler.flows.create({ organizationId: ORG, name: 'Default', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 60 }] });
  });
  afterAll(async () => {
    grpc.close();
    await sender.stop();
    await h.close();
  });

  const base = (over: Partial<schedulerV1.StartCascadeRequest> = {}): schedulerV1.StartCascadeRequest => ({
    organizationId: ORG, locationId: LOCATION, name: 'Order', flowId: '', channel: '', externalId: 'crm-1', ignoreCooldown: false, dryRun: false,
    contact: undefined, contactIdempotencyKey: '', contactIdempotencyFingerprint: '',
    recipients: recipientsInput(2).map((r) => ({ ...r, contactId: '', contactExternalId: '' })), ...over,
  });
  const cascadeRows = async () => (await h.pool.query('SELECT count(*)::int AS n FROM cascades')).rows[0].n as number;
  const stepRows = async () => (await h.pool.query('SELECT count(*)::int AS n FROM recipient_steps')).rows[0].n as number;

  it('starts with the default flow and answers at once', async () => {
    const res = await grpc.client.startCascade(base());
    expect(res).toMatchObject({ status: 'running', queued: 2, skipped: 0, idempotentReplayed: false, flow: { name: 'Default', isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 60 }] } });
    const c = await grpc.client.getCascade({ organizationId: ORG, id: res.id });
    expect(c.cascade).toMatchObject({ id: res.id, externalId: 'crm-1', hasExternalId: true });
    expect(c.cascade?.recipients).toHaveLength(2);
    expect(c.cascade?.recipients[0].steps.map((s) => s.order)).toEqual([1, 2]);
  });

  it('opens its transaction with one request: BEGIN, the clock, the opt-out and the cooldown lookups', async () => {
    h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { cooldownDays: 30 }));
    const pg = await import('pg');
    const requests = jest.spyOn(pg.default.Client.prototype, 'query');
    try {
      const res = await grpc.client.startCascade(base({ externalId: 'one-request' }));
      expect(res).toMatchObject({ queued: 2, skipped: 0 });
      const texts = requests.mock.calls.map(([config]) => String(typeof config === 'string' ? config : (config as { text?: string }).text));
      // The dispatcher may run meanwhile; the cooldown's read is intake's own.
      const cooldownReads = texts.filter((text) => /FROM person_activity\s+WHERE/.test(text));
      expect(cooldownReads).toHaveLength(1);
      expect(cooldownReads[0]).toMatch(/^BEGIN;/);
      expect(cooldownReads[0]).toContain('clock_timestamp()');
      expect(cooldownReads[0]).toContain('FROM suppressions');
    } finally {
      requests.mockRestore();
      h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG));
    }
  });

  it('under an Idempotency-Key, the key\'s lock and saved-answer read open the transaction in that same request', async () => {
    h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { cooldownDays: 30 }));
    const pg = await import('pg');
    const requests = jest.spyOn(pg.default.Client.prototype, 'query');
    try {
      const md = { [MD_IDEMPOTENCY_KEY]: 'one-request-key', [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-one' };
      const recipients = recipientsInput(2, (i) => ({ email: `keyed${i}@example.com` })).map((r) => ({ ...r, contactId: '', contactExternalId: '' }));
      const res = await grpc.client.startCascade(base({ externalId: 'one-request-keyed', recipients }), { metadata: md });
      expect(res).toMatchObject({ queued: 2, skipped: 0, idempotentReplayed: false });
      const texts = requests.mock.calls.map(([config]) => String(typeof config === 'string' ? config : (config as { text?: string }).text));
      const keyReads = texts.filter((text) => text.includes('FROM idempotency_keys'));
      // On the code before: the lock with BEGIN, the saved answer's read, then the admission's reads — three requests.
      expect(keyReads).toHaveLength(1);
      expect(keyReads[0]).toMatch(/^BEGIN;/);
      expect(keyReads[0]).toContain('pg_try_advisory_xact_lock');
      expect(keyReads[0]).toMatch(/FROM person_activity\s+WHERE/);
      expect(keyReads[0]).toContain('FROM suppressions');
    } finally {
      requests.mockRestore();
      h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG));
    }
  });

  it('normalizes phones to E.164 in the organization region', async () => {
    const res = await grpc.client.startCascade(base({ recipients: [{ name: 'A', email: '', phone: '8 (916) 123-45-67', contactId: '', contactExternalId: '' }] }));
    expect((await grpc.client.getCascade({ organizationId: ORG, id: res.id })).cascade?.recipients[0].phone).toBe('+79161234567');
  });

  it("another organization's cascade is not found", async () => {
    const res = await grpc.client.startCascade(base());
    expect(await rejection(grpc.client.getCascade({ organizationId: OTHER_ORG, id: res.id }))).toMatchObject({ status: 404, code: 'not_found' });
    expect(await rejection(grpc.client.getCascade({ organizationId: ORG, id: 'not-a-uuid' }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it.each([
    ['no recipients', { recipients: [] }, '/recipients'],
    ['501 recipients', { recipients: recipientsInput(501).map((r) => ({ ...r, contactId: '', contactExternalId: '' })) }, '/recipients'],
    ['flowId and channel together', { flowId: '0190e0e0-0000-7000-8000-0000000000ff', channel: 'EMAIL' }, '/channel'],
    ['no locationId', { locationId: '' }, '/locationId'],
    ['a malformed phone', { recipients: [{ name: '', email: '', phone: '12', contactId: '', contactExternalId: '' }] }, '/recipients/0/phone'],
    ['a malformed email', { recipients: [{ name: '', email: 'not-mail', phone: '', contactId: '', contactExternalId: '' }] }, '/recipients/0/email'],
  ])('400 invalid_request for %s, nothing created', async (_name, over, field) => {
    const before = [await cascadeRows(), await stepRows()];
    const err = await rejection(grpc.client.startCascade(base(over as Partial<schedulerV1.StartCascadeRequest>)));
    expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(err.details.errors.map((e: { pointer: string }) => e.pointer)).toContain(field);
    if (field === '/recipients') expect(err.message).toContain('500');
    expect([await cascadeRows(), await stepRows()]).toEqual(before);
  });

  it.each([
    ['a trial plan', 402, 'plan_required', (): unknown => h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { plan: 'trial' })), {}],
    ['an unconfirmed account email', 409, 'email_not_confirmed', (): unknown => h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { emailConfirmed: false })), {}],
    ['an unknown location', 404, 'not_found', (): unknown => undefined, { locationId: 'elsewhere' }],
    ['an unknown flow', 404, 'not_found', (): unknown => undefined, { flowId: '0190e0e0-0000-7000-8000-0000000000ff' }],
    ['a malformed flow id', 404, 'not_found', (): unknown => undefined, { flowId: 'nope' }],
    ['a channel send on an unconfigured channel', 409, 'channel_not_configured', (): unknown => h.profiles.setConfigured(ORG, 'SMS', false), { channel: 'SMS' }],
  ] as const)('%s → %d %s, nothing created or sent', async (_name, status, code, arrange, over) => {
    arrange();
    try {
      const before = [await cascadeRows(), await stepRows(), sender.received.length];
      expect(await rejection(grpc.client.startCascade(base(over as Partial<schedulerV1.StartCascadeRequest>)))).toMatchObject({ status, code });
      await new Promise((r) => setTimeout(r, 100));
      expect([await cascadeRows(), await stepRows(), sender.received.length]).toEqual(before);
    } finally {
      h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG));
    }
  });

  describe('with a contact to save (POST /contacts with startCascade, won deals)', () => {
    const contact = (externalId: string, over: Partial<contactsV1.UpsertContactRequest> = {}): contactsV1.UpsertContactRequest => ({
      organizationId: ORG, externalId, name: 'Nina', email: `${externalId}@example.com`, phone: undefined, locationId: LOCATION, consentAt: undefined, attributesJson: undefined, startCascade: true, flowId: '', ...over,
    });
    const withContact = (externalId: string, over: Partial<schedulerV1.StartCascadeRequest> = {}) =>
      base({ locationId: '', recipients: [], externalId, contact: contact(externalId), ...over });

    it('reads the profile once, saves the contact, and starts its cascade with the contact as the one recipient at its location', async () => {
      const [profileCalls, saveCalls] = [h.profiles.calls, h.profiles.savedCalls];
      const res = await grpc.client.startCascade(withContact('wc-1'));
      expect(res).toMatchObject({ status: 'running', queued: 1, skipped: 0, idempotentReplayed: false, contactReplayed: false, contact: { externalId: 'wc-1', email: 'wc-1@example.com', locationId: LOCATION } });
      expect([h.profiles.calls - profileCalls, h.profiles.savedCalls - saveCalls]).toEqual([1, 1]);
      const cascade = (await grpc.client.getCascade({ organizationId: ORG, id: res.id })).cascade!;
      expect(cascade).toMatchObject({ locationId: LOCATION, externalId: 'wc-1' });
      expect(cascade.recipients.map((r) => [r.email, r.contactExternalId])).toEqual([['wc-1@example.com', 'wc-1']]);
    });

    it.each([
      ['a location of its own', '/locationId', { locationId: LOCATION }],
      ['recipients of its own', '/recipients', { recipients: [{ name: 'X', email: 'x@example.com', phone: '', contactId: '', contactExternalId: '' }] }],
      ['a dry run', '/dryRun', { dryRun: true }],
      ['a channel send', '/channel', { channel: 'EMAIL' }],
      ['a contact of another organization', '/contact/organizationId', { contact: contact('wc-bad', { organizationId: OTHER_ORG }) }],
    ] as const)('with %s → 400 naming %s; nothing saved or created', async (_name, field, over) => {
      const before = [await cascadeRows(), h.profiles.savedCalls];
      const err = await rejection(grpc.client.startCascade(withContact('wc-bad', over as Partial<schedulerV1.StartCascadeRequest>)));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(err.details.errors.map((e: { pointer: string }) => e.pointer)).toContain(field);
      expect([await cascadeRows(), h.profiles.savedCalls]).toEqual(before);
    });

    it.each([
      ['a trial plan', 402, 'plan_required', (): unknown => h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { plan: 'trial' })), {}],
      ['an unknown flow', 404, 'not_found', (): unknown => undefined, { flowId: '0190e0e0-0000-7000-8000-0000000000ff' }],
    ] as const)('%s → %d %s before the contact is saved: nothing saved or created', async (_name, status, code, arrange, over) => {
      arrange();
      try {
        const before = [await cascadeRows(), h.profiles.savedCalls];
        expect(await rejection(grpc.client.startCascade(withContact('wc-refused', over)))).toMatchObject({ status, code });
        expect([await cascadeRows(), h.profiles.savedCalls]).toEqual(before);
      } finally {
        h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG));
      }
    });
  });

  it('a per-organization recipient limit below 500 is enforced and named; nothing is created', async () => {
    const settings = await grpc.client.setOrganizationSettings({ organizationId: ORG, lowRatingThreshold: 3, maxRecipientsPerRequest: 2 });
    expect(settings.settings).toEqual({ organizationId: ORG, lowRatingThreshold: 3, maxRecipientsPerRequest: 2 });
    try {
      const before = await cascadeRows();
      const err = await rejection(grpc.client.startCascade(base({ recipients: recipientsInput(3).map((r) => ({ ...r, contactId: '', contactExternalId: '' })) })));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(err.details.errors).toEqual([{ pointer: '/recipients', detail: 'at most 2 recipients per request for this organization' }]);
      expect(await cascadeRows()).toBe(before);
      expect((await grpc.client.startCascade(base())).queued).toBe(2);
      expect(await rejection(grpc.client.setOrganizationSettings({ organizationId: ORG, lowRatingThreshold: 3, maxRecipientsPerRequest: 501 }))).toMatchObject({ status: 400 });
    } finally {
      await grpc.client.setOrganizationSettings({ organizationId: ORG, lowRatingThreshold: 3, maxRecipientsPerRequest: 0 });
    }
    expect((await grpc.client.getOrganizationSettings({ organizationId: ORG })).settings?.maxRecipientsPerRequest).toBe(500);
  });

  it('an idempotent replay returns the saved answer and sends nothing new; a different body with the key is 409', async () => {
    const md = { [MD_IDEMPOTENCY_KEY]: 'crm-webhook-42', [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-1' };
    const req = base({ channel: 'EMAIL', externalId: 'idem', recipients: recipientsInput(3, (i) => ({ email: `idem${i}@example.com` })).map((r) => ({ ...r, contactId: '', contactExternalId: '' })) });
    const first = await grpc.client.startCascade(req, { metadata: md });
    expect(first.idempotentReplayed).toBe(false);
    await waitFor(() => sender.received.filter((s) => s.recipient?.email.startsWith('idem')).length === 3, { what: 'three sends' });
    const cascades = await cascadeRows();
    const replay = await grpc.client.startCascade(req, { metadata: md });
    expect(replay).toEqual({ ...first, idempotentReplayed: true });
    expect(await rejection(grpc.client.startCascade({ ...req, name: 'other' }, { metadata: { ...md, [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-2' } }))).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
    await new Promise((r) => setTimeout(r, 300));
    expect(await cascadeRows()).toBe(cascades);
    expect(sender.received.filter((s) => s.recipient?.email.startsWith('idem'))).toHaveLength(3);
  });

  it('cancels a running cascade: every running recipient finishes canceled', async () => {
    const res = await grpc.client.startCascade(base({ externalId: 'cancel-me' }));
    await waitFor(async () => (await grpc.client.getCascade({ organizationId: ORG, id: res.id })).cascade?.recipients.every((r) => r.steps[0].status === 'sent'), { what: 'first steps sent' });
    expect((await grpc.client.cancelCascade({ organizationId: ORG, id: res.id })).canceled).toBe(2);
    const c = (await grpc.client.getCascade({ organizationId: ORG, id: res.id })).cascade!;
    expect(c.status).toBe('finished');
    expect(c.recipients.map((r) => [r.finishReason, r.steps[1].status])).toEqual([['canceled', 'canceled'], ['canceled', 'canceled']]);
    expect(await rejection(grpc.client.cancelCascade({ organizationId: OTHER_ORG, id: res.id }))).toMatchObject({ status: 404 });
  });

  it('flows: create, update, set default, and their errors', async () => {
    const { flow } = await grpc.client.createFlow({ organizationId: ORG, name: 'Alt', isDefault: false, steps: [{ order: 0, channel: 'sms', delayMinutes: 0 }] });
    expect(flow?.steps).toEqual([{ order: 1, channel: 'SMS', delayMinutes: 0 }]);
    const updated = await grpc.client.updateFlow({ organizationId: ORG, id: flow!.id, name: 'Alt 2', steps: [{ order: 0, channel: 'EMAIL', delayMinutes: 5 }, { order: 0, channel: 'MAX', delayMinutes: 30 }] });
    expect(updated.flow).toMatchObject({ name: 'Alt 2', steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 5 }, { order: 2, channel: 'MAX', delayMinutes: 30 }] });
    await grpc.client.setDefaultFlow({ organizationId: ORG, id: flow!.id });
    const list = (await grpc.client.listFlows({ organizationId: ORG })).flows;
    expect(list.filter((f) => f.isDefault).map((f) => f.id)).toEqual([flow!.id]);
    expect(await rejection(grpc.client.setDefaultFlow({ organizationId: OTHER_ORG, id: flow!.id }))).toMatchObject({ status: 404 });
    expect(await rejection(grpc.client.createFlow({ organizationId: ORG, name: 'Empty', isDefault: false, steps: [] }))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await rejection(grpc.client.createFlow({ organizationId: ORG, name: 'Neg', isDefault: false, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: -1 }] }))).toMatchObject({ status: 400 });
    expect((await grpc.client.listFlows({ organizationId: OTHER_ORG })).flows).toEqual([]);
  });
});
