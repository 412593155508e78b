import type { connectorsV1 } from '@rrs/proto';
import type { DomainError } from '@rrs/runtime';
import { FakeAmoCrm, FakeBitrix24, waitFor } from '@rrs/testkit';
import { SYNC_CHANNEL } from '../src/connectors';
import { startConnectorStack, type ConnectorStack } from './support/stack';

const REDIRECT_URI = 'http://localhost:8080/app/';
const MEMBER = 'member-owner-1';

/**
 * Connecting a CRM from the console (the connectors service's side): amoCRM's OAuth consent against the
 * fake's authorization page and code exchange, the state bound to its organization and member; and a
 * connector's status that tells the truth once things work again (`application_token_missing` cleared).
 */
describe('connecting a CRM from the console', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;

  beforeAll(async () => {
    amo = await FakeAmoCrm.start();
    amo.oauthClient.redirectUri = REDIRECT_URI;
    b24 = await FakeBitrix24.start();
    stack = await startConnectorStack({
      amoCrmOAuth: { clientId: amo.oauthClient.clientId, clientSecret: amo.oauthClient.clientSecret, redirectUri: REDIRECT_URI, authorizeUrl: `${amo.url}/oauth` },
    });
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const connectorCount = async () => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM connectors WHERE organization_id = $1', [stack.organizationId])).rows[0].n;
  const refusal = (call: Promise<unknown>) =>
    call.then(
      () => {
        throw new Error('expected a refusal');
      },
      (err: DomainError) => ({ kind: err.kind, code: err.code }),
    );

  /** The consent as a browser goes through it: amoCRM's page, "Allow", and the redirect back to the console. */
  async function consent(authorizeUrl: string): Promise<URL> {
    const page = await fetch(authorizeUrl);
    expect(page.status).toBe(200);
    const state = /name="state" value="([^"]*)"/.exec(await page.text())![1];
    const allowed = await fetch(`${amo.url}/oauth/allow`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ state }) });
    expect(allowed.status).toBe(302);
    return new URL(allowed.headers.get('location')!);
  }

  it('amoCRM OAuth: the authorization page, the code exchanged once for tokens, the connector made with them and working', async () => {
    const started = await stack.grpc.startAmoCrmOAuth({ organizationId: stack.organizationId, memberId: MEMBER, name: 'Sales', locationId: stack.locationId, flowId: '' });
    const authorize = new URL(started.authorizeUrl);
    expect(`${authorize.origin}${authorize.pathname}`).toBe(`${amo.url}/oauth`);
    expect(authorize.searchParams.get('client_id')).toBe(amo.oauthClient.clientId);
    expect(authorize.searchParams.get('mode')).toBe('post_message');
    const state = authorize.searchParams.get('state')!;
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const back = await consent(started.authorizeUrl);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT_URI);
    expect(back.searchParams.get('state')).toBe(state);
    const completion = { organizationId: stack.organizationId, memberId: MEMBER, state, code: back.searchParams.get('code')!, referer: back.searchParams.get('referer')! };
    const before = await connectorCount();
    // Another member, or another organization, cannot use this state.
    expect(await refusal(stack.grpc.completeAmoCrmOAuth({ ...completion, memberId: 'someone-else' }))).toEqual({ kind: 'not_found', code: 'oauth_state_invalid' });
    expect(await refusal(stack.grpc.completeAmoCrmOAuth({ ...completion, organizationId: stack.otherOrganizationId }))).toEqual({ kind: 'not_found', code: 'oauth_state_invalid' });
    expect(await connectorCount()).toBe(before);

    const done: connectorsV1.CompleteAmoCrmOAuthResponse = await stack.grpc.completeAmoCrmOAuth(completion);
    expect(done.connector).toMatchObject({ kind: 'amocrm', name: 'Sales', authMode: 'oauth', crmUrl: amo.url, locationId: stack.locationId });
    expect(done.inboundUrl).toMatch(new RegExp(`^http://hooks\\.test/hooks/crm/${done.connector!.id}/[A-Za-z0-9_-]{43}$`));
    expect(amo.codeExchanges).toBe(1);
    // The state is used once.
    expect(await refusal(stack.grpc.completeAmoCrmOAuth(completion))).toEqual({ kind: 'not_found', code: 'oauth_state_invalid' });
    expect(await connectorCount()).toBe(before + 1);

    // The tokens work: a won lead's hook starts its cascade, read with the OAuth access token.
    await stack.firstPass(done.connector!.id);
    const contact = amo.addContact({ name: 'Olga', email: 'olga@example.com' });
    const lead = amo.addLead({ contactId: contact.id });
    expect((await stack.hook(done.inboundUrl, amo.moveLead(lead.id, 142))).status).toBe(200);
    await waitFor(async () => (await stack.cascadesOf(`amocrm:lead:${lead.id}`)).length === 1 || undefined, { what: 'the cascade of the lead', timeoutMs: 20_000 });
    // The connector records the cascade it started once the scheduler has answered: the cascade can be
    // seen a moment before the connector's status counts it.
    const status = await waitFor(async () => {
      const read = (await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: done.connector!.id })).status;
      return read && read.cascadesStarted > 0 ? read : undefined;
    }, { what: "the connector's status counting the cascade", timeoutMs: 10_000 });
    expect(status).toMatchObject({ cascadesStarted: 1, lastCascadeAt: expect.any(Date), lastSuccessAt: expect.any(Date), lastErrorCode: '' });
  });

  it('a code amoCRM refuses (used, expired) is 400 oauth_code_refused with nothing created; a foreign location is refused before leaving for amoCRM', async () => {
    const started = await stack.grpc.startAmoCrmOAuth({ organizationId: stack.organizationId, memberId: MEMBER, name: '', locationId: stack.locationId, flowId: '' });
    const back = await consent(started.authorizeUrl);
    const before = await connectorCount();
    const refused = await refusal(stack.grpc.completeAmoCrmOAuth({ organizationId: stack.organizationId, memberId: MEMBER, state: back.searchParams.get('state')!, code: 'def-not-a-real-code', referer: back.searchParams.get('referer')! }));
    expect(refused).toEqual({ kind: 'invalid', code: 'oauth_code_refused' });
    expect(await connectorCount()).toBe(before);

    const { rows } = await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM amocrm_oauth_states');
    expect(await refusal(stack.grpc.startAmoCrmOAuth({ organizationId: stack.otherOrganizationId, memberId: MEMBER, name: '', locationId: stack.locationId, flowId: '' }))).toMatchObject({ kind: 'not_found' });
    expect((await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM amocrm_oauth_states')).rows[0].n).toBe(rows[0].n);
  });

  it('Bitrix24: application_token_missing is cleared once the token is given and deals flow; a deal’s old failure is shown as past by lastSuccessAt', async () => {
    const created = await stack.grpc.createConnector({
      organizationId: stack.organizationId, kind: 'bitrix24', name: 'Portal', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: '' },
      wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '', writeBack: undefined,
    });
    const id = created.connector!.id;
    await stack.firstPass(id);
    const contact = b24.addContact({ name: 'Pavel', lastName: 'Orlov', phone: '+7 916 111-22-33', email: 'pavel@example.com' });
    const deal = b24.addDeal({ contactId: String(contact.ID) });
    b24.moveDeal(deal.ID, 'WON');
    expect((await stack.hook(created.inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(401);
    const status = async () => (await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id })).status!;
    expect(await status()).toMatchObject({ lastErrorCode: 'application_token_missing' });
    // A reconciliation works without the token (through the REST webhook) while events are still refused:
    // it does not clear the missing token.
    const { rows: [{ at: refusedAt }] } = await stack.pool.query<{ at: Date }>('SELECT now() AS at');
    await stack.pool.query('UPDATE connectors SET next_sync_at = now() WHERE id = $1', [id]);
    await stack.pool.query(`SELECT pg_notify('${SYNC_CHANNEL}', '')`);
    await waitFor(async () => ((await status()).lastSuccessAt?.getTime() ?? 0) > refusedAt.getTime() || undefined, { what: 'a reconciliation after the refused event, recorded as a success', timeoutMs: 20_000 });
    expect(await status()).toMatchObject({ lastErrorCode: 'application_token_missing' });

    await stack.grpc.updateConnector({
      organizationId: stack.organizationId, id, amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken },
      wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: false,
    });
    expect(await status()).toMatchObject({ lastErrorCode: '', lastError: '' });
    expect((await stack.hook(created.inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(200);
    await waitFor(async () => (await stack.cascadesOf(`bitrix24:deal:${deal.ID}`)).length === 1 || undefined, { what: 'the deal started', timeoutMs: 20_000 });
    await stack.settled(id);
    const working = await status();
    expect(working).toMatchObject({ lastErrorCode: '', cascadesStarted: 1, lastSuccessAt: expect.any(Date), lastCascadeAt: expect.any(Date) });

    // A deal without a contact fails and is recorded; the next deal that works makes it past (lastSuccessAt after it).
    const orphan = b24.addDeal({});
    b24.moveDeal(orphan.ID, 'WON');
    await stack.hook(created.inboundUrl, b24.eventBody('ONCRMDEALUPDATE', orphan.ID));
    await waitFor(async () => ((await status()).lastErrorCode === 'deal_without_contact') || undefined, { what: 'the failure recorded', timeoutMs: 20_000 });
    const failedAt = (await status()).lastErrorAt!;
    const next = b24.addDeal({ contactId: String(b24.addContact({ name: 'Rita', lastName: 'Lis', email: 'rita@example.com' }).ID) });
    b24.moveDeal(next.ID, 'WON');
    await stack.hook(created.inboundUrl, b24.eventBody('ONCRMDEALUPDATE', next.ID));
    await waitFor(async () => (await stack.cascadesOf(`bitrix24:deal:${next.ID}`)).length === 1 || undefined, { what: 'the next deal started', timeoutMs: 20_000 });
    await stack.settled(id);
    const after = await status();
    expect(after.lastErrorCode).toBe('deal_without_contact');
    expect(after.lastSuccessAt!.getTime()).toBeGreaterThan(failedAt.getTime());
  });
});
