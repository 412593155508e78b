import { openApiChecker, waitFor, type OpenApiChecker } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack, type OrgKind } from './cascadeStack';

/**
 * POST /api/v1/contacts with `startCascade: true` over real HTTP → gateway → contacts (the contact) and
 * cascade-scheduler (the cascade) → Postgres + JetStream, with a scripted email/SMS sender.
 */
describe('POST /contacts with startCascade', () => {
  let stack: CascadeStack;
  let api: OpenApiChecker;

  beforeAll(async () => {
    stack = await startCascadeStack();
    api = await openApiChecker(`${stack.base}/api/v1/openapi.json`);
  });
  afterAll(async () => {
    await stack.close();
  });

  const post = (body: unknown, who: OrgKind = 'paid', headers: Record<string, string> = {}) =>
    api.fetch(`${stack.base}/api/v1/contacts`, { method: 'POST', headers: { authorization: `Bearer ${stack.keys[who]}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const getCascade = (id: string) => api.fetch(`${stack.base}/api/v1/cascades/${id}`, { headers: { authorization: `Bearer ${stack.keys.paid}` } });
  const contactsOf = (who: OrgKind = 'paid') => stack.contacts.contacts.count(stack.orgIds[who]);
  const cascadesOf = async (who: OrgKind = 'paid') =>
    (await stack.pool.query('SELECT count(*)::int AS n FROM cascades WHERE organization_id = $1', [stack.orgIds[who]])).rows[0].n as number;
  const recipientsOf = async (who: OrgKind = 'paid') =>
    (await stack.pool.query('SELECT count(*)::int AS n FROM recipients r JOIN cascades c ON c.id = r.cascade_id WHERE c.organization_id = $1', [stack.orgIds[who]])).rows[0].n as number;
  const pointers = (body: unknown) => ((body as { errors?: Array<{ pointer: string }> }).errors ?? []).map((e) => e.pointer);

  it('saves the contact, starts a cascade with it as the recipient, and dispatches its first step to the email sender', async () => {
    const res = await post({ externalId: 'order-1', name: 'Anna', email: 'anna@example.com', phone: '8 916 123-45-67', locationId: stack.locationId, startCascade: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    const body = res.body as { contact: { id: string }; cascade: { id: string } };
    expect(body).toEqual({
      contact: expect.objectContaining({ id: expect.any(String), externalId: 'order-1', name: 'Anna', email: 'anna@example.com', phone: '+79161234567', locationId: stack.locationId }),
      cascade: { id: expect.any(String), status: 'running', queued: 1, skipped: 0 },
    });
    const id = body.cascade.id;
    const email = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === id), { what: 'the email step at the sender' });
    expect(email.channel).toBe('EMAIL');
    const got = await waitFor(async () => {
      const r = await getCascade(id);
      return (r.body as { recipients: Array<{ steps: Array<{ status: string }> }> }).recipients[0].steps[0].status === 'sent' ? r : undefined;
    }, { what: 'the first step sent' });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id, status: 'running', externalId: 'order-1',
      recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+79161234567', externalId: 'order-1', status: 'running',
        steps: [{ order: 1, channel: 'EMAIL', status: 'sent' }, { order: 2, channel: 'SMS', status: 'scheduled' }] }],
    });
    expect(await contactsOf()).toBe(1);
  });

  it('uses the given flowId, and the stored location of a known contact', async () => {
    const flow = await stack.scheduler.flows.create({ organizationId: stack.orgIds.paid, name: 'SMS only', isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }] });
    // order-1 is stored with the location; this request leaves locationId out.
    const res = await post({ externalId: 'order-1', phone: '+7 916 765-43-21', startCascade: true, flowId: flow.id });
    expect(res.status).toBe(200);
    const id = (res.body as { cascade: { id: string } }).cascade.id;
    const sms = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === id), { what: 'the SMS step at the sender' });
    expect(sms.channel).toBe('SMS');
    const got = await getCascade(id);
    expect(got.body).toMatchObject({ recipients: [{ phone: '+79167654321', email: 'anna@example.com', steps: [{ order: 1, channel: 'SMS' }] }] });
    expect(await contactsOf()).toBe(1);
  });

  it('an Idempotency-Key repeat replays both answers and creates neither a second contact nor a second cascade', async () => {
    const [contactsBefore, cascadesBefore, recipientsBefore] = [await contactsOf(), await cascadesOf(), await recipientsOf()];
    const body = { externalId: 'order-2', email: 'boris@example.com', locationId: stack.locationId, startCascade: true };
    const first = await post(body, 'paid', { 'idempotency-key': 'hook-2' });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post(body, 'paid', { 'idempotency-key': '"hook-2"' });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await contactsOf()).toBe(contactsBefore + 1);
    expect(await cascadesOf()).toBe(cascadesBefore + 1);
    expect(await recipientsOf()).toBe(recipientsBefore + 1);
    const id = (first.body as { cascade: { id: string } }).cascade.id;
    await waitFor(() => stack.sender.received.some((s) => s.cascadeId === id), { what: 'the first email' });
    expect(stack.sender.received.filter((s) => s.cascadeId === id)).toHaveLength(1);

    const reused = await post({ ...body, email: 'other@example.com' }, 'paid', { 'idempotency-key': 'hook-2' });
    expect(reused.status).toBe(409);
    expect(reused.body).toMatchObject({ code: 'idempotency_key_reused' });
    expect(await contactsOf()).toBe(contactsBefore + 1);
    expect(await cascadesOf()).toBe(cascadesBefore + 1);
  });

  // The gateway does not check the sending rule (issue 28): the scheduler's dry run refuses before contacts saves anything.
  it.each([
    ['a trial plan', 'trial', 402, 'plan_required'],
    ['an unconfirmed account email', 'unconfirmed', 409, 'email_not_confirmed'],
  ] as const)('%s (%s) gets %d %s and nothing is created in either service', async (_label, who, status, code) => {
    const res = await post({ externalId: `${who}-1`, email: 'a@example.com', locationId: stack.locationId, startCascade: true }, who, { 'idempotency-key': `${who}-1` });
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ code });
    expect(await contactsOf(who)).toBe(0);
    expect(await cascadesOf(who)).toBe(0);
  });

  it('a plan set to trial while the key is still in the auth cache is 402 too: the scheduler reads the plan as it is now', async () => {
    const org = await stack.contacts.directory.createOrganization({ name: 'Downgraded', plan: 'standard', emailConfirmed: true, defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    const key = (await stack.contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    const location = await stack.contacts.directory.createLocation({ organizationId: org.id, name: 'L', address: '', city: '' });
    await stack.scheduler.flows.create({ organizationId: org.id, name: 'Default', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
    const send = () => api.fetch(`${stack.base}/api/v1/contacts`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ externalId: 'd-1', email: 'd@example.com', locationId: location.id, startCascade: true }) });
    expect((await api.fetch(`${stack.base}/api/v1/ping`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    await stack.contacts.directory.updateOrganization(org.id, { plan: 'trial' });
    const res = await send();
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({ code: 'plan_required' });
    expect(await stack.contacts.contacts.count(org.id)).toBe(0);
    expect((await stack.pool.query('SELECT count(*)::int AS n FROM cascades WHERE organization_id = $1', [org.id])).rows[0].n).toBe(0);
  });

  it('an unknown flowId (or one of another organization) is 404 naming /flowId, and the contact is not saved', async () => {
    const foreign = await stack.scheduler.flows.create({ organizationId: stack.orgIds.other, name: 'Theirs', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
    const [contactsBefore, cascadesBefore] = [await contactsOf(), await cascadesOf()];
    for (const flowId of ['0190e0e0-0000-7000-8000-00000000dead', 'nope', foreign.id]) {
      const res = await post({ externalId: 'f-1', email: 'f@example.com', locationId: stack.locationId, startCascade: true, flowId }, 'paid', { 'idempotency-key': `flow-${flowId}` });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: 'not_found' });
      expect(pointers(res.body)).toEqual(['/flowId']);
    }
    expect(await contactsOf()).toBe(contactsBefore);
    expect(await cascadesOf()).toBe(cascadesBefore);
  });

  it('without a default flow and without flowId it is 404, and the contact is not saved', async () => {
    const org = await stack.contacts.directory.createOrganization({ name: 'No flows', plan: 'standard', emailConfirmed: true, defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    const key = (await stack.contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    const location = await stack.contacts.directory.createLocation({ organizationId: org.id, name: 'L', address: '', city: '' });
    const res = await api.fetch(`${stack.base}/api/v1/contacts`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ externalId: 'n-1', email: 'n@example.com', locationId: location.id, startCascade: true }) });
    expect(res.status).toBe(404);
    expect(pointers(res.body)).toEqual(['/flowId']);
    expect(await stack.contacts.contacts.count(org.id)).toBe(0);
  });

  it('a contact without a location is 400 naming /locationId, and nothing is saved', async () => {
    const [contactsBefore, cascadesBefore] = [await contactsOf(), await cascadesOf()];
    const res = await post({ externalId: 'no-loc', email: 'x@example.com', startCascade: true });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request' });
    expect(pointers(res.body)).toEqual(['/locationId']);
    expect(await contactsOf()).toBe(contactsBefore);
    expect(await cascadesOf()).toBe(cascadesBefore);
  });

  it('a flowId without startCascade is accepted and ignored: the contact is saved, no cascade starts, the flow is not even looked up', async () => {
    const flow = await stack.scheduler.flows.create({ organizationId: stack.orgIds.paid, name: 'CRM flow', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
    const [contactsBefore, cascadesBefore] = [await contactsOf(), await cascadesOf()];
    const known = await post({ externalId: 'crm-flow-1', email: 'crm1@example.com', locationId: stack.locationId, flowId: flow.id });
    expect(known.status).toBe(200);
    expect(known.body).toMatchObject({ contact: { externalId: 'crm-flow-1', email: 'crm1@example.com' }, cascade: null });
    // An unknown flow id is not checked either (with startCascade it would be 404), and the trial plan may save contacts.
    const unknown = await post({ externalId: 'crm-flow-2', email: 'crm2@example.com', flowId: 'no-such-flow', startCascade: false });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toMatchObject({ contact: { externalId: 'crm-flow-2' }, cascade: null });
    const trial = await post({ externalId: 'crm-flow-3', email: 'crm3@example.com', flowId: flow.id }, 'trial');
    expect(trial.status).toBe(200);
    expect(await contactsOf()).toBe(contactsBefore + 2);
    expect(await contactsOf('trial')).toBe(1);
    expect(await cascadesOf()).toBe(cascadesBefore);
    expect(await cascadesOf('trial')).toBe(0);
  });

  it('no longer documents 501 for the route', () => {
    const responses = (api.doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)['/contacts'].post.responses;
    expect(Object.keys(responses)).not.toContain('501');
    expect(Object.keys(responses)).toEqual(expect.arrayContaining(['200', '400', '402', '404', '409']));
  });
});
