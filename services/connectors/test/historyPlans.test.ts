import { FakeAmoCrm, historyScans, recordStatements, waitFor, type StatementRecorder } from '@rrs/testkit';
import { SCHEMA } from '../src';
import { reviewTokenOf, startConnectorStack, type ConnectorStack } from './support/stack';

/**
 * Costs that do not grow with history (issue 35): every statement the connectors service ran while serving
 * the API, the console and its CRMs (a connector created, read, listed, changed, its status, a sync, won
 * deals through the inbound webhook and its inbox, a rating written back to the deal, a lost deal stopped,
 * the connector deleted) is EXPLAINed on a database seeded with a year of CRM events, deals and write-backs
 * for many organizations; none may read a history table whole. Only the connectors' own statements are
 * recorded (contacts and the scheduler of the stack have their own test).
 */
const HISTORY_TABLES = ['crm_events', 'deal_cascades', 'write_backs', 'connectors', 'amocrm_oauth_states', 'idempotency_keys'];
const ORGANIZATIONS = 200;
const SEEDED = 150_000;

describe('history plans: no statement connectors runs for the API, the console or a CRM reads a history table whole', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let recorder: StatementRecorder;

  beforeAll(async () => {
    recorder = recordStatements({ schema: SCHEMA });
    stack = await startConnectorStack();
    amo = await FakeAmoCrm.start();
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    await stack?.close();
    await amo?.close();
  });

  /** A year of won deals over many organizations' connectors: each event processed, a cascade, a rating written back. */
  async function seedHistory(): Promise<void> {
    const seed = [
      `INSERT INTO connectors (id, organization_id, kind, name, crm_url, auth_mode, credentials, inbound_secret_hash, settings, active_since, sync_cursor, created_at)
       SELECT gen_random_uuid(), o, 'amocrm', 'Seeded', 'https://seed.amocrm.ru', 'long_lived', 'sealed', sha256(gen_random_uuid()::text::bytea), '{}', now() - interval '1 year', now(), now() - interval '1 year'
         FROM (SELECT gen_random_uuid() AS o FROM generate_series(1, ${ORGANIZATIONS})) orgs, generate_series(1, 2)`,
      `WITH c AS (SELECT id, organization_id, row_number() OVER () - 1 AS n, count(*) OVER () AS total FROM connectors),
            deal AS (SELECT c.id AS connector_id, c.organization_id, 'seed-' || g AS deal_id, now() - interval '1 year' + g * (interval '1 year' / ${SEEDED}) AS at
                       FROM generate_series(1, ${SEEDED}) g JOIN c ON c.n = g % c.total),
            ev AS (INSERT INTO crm_events (connector_id, source, event, deal_id, payload, status, outcome, cascade_id, attempts, next_attempt_at, received_at, processed_at)
                   SELECT connector_id, 'webhook', 'won', deal_id, '{}', 'done', 'started', 'cascade-' || deal_id, 1, at, at, at FROM deal RETURNING 1),
            dc AS (INSERT INTO deal_cascades (connector_id, deal_id, won_key, organization_id, cascade_id, contact_id, crm_contact_id, created_at, finished_at)
                   SELECT connector_id, deal_id, '1:142', organization_id, 'cascade-' || deal_id, gen_random_uuid()::text, '1', at, at + interval '3 days' FROM deal RETURNING 1)
       INSERT INTO write_backs (event_id, connector_id, deal_id, event_type, cascade_id, rating, feedback, reason, occurred_at, note_done, fields_done, status, attempts, created_at, done_at)
       SELECT 'event-' || deal_id, connector_id, deal_id, 'cascade.recipient.finished', 'cascade-' || deal_id, 5, '', 'rated', at, true, true, 'done', 1, at, at FROM deal`,
      `INSERT INTO amocrm_oauth_states (state_hash, organization_id, member_id, name, location_id, flow_id, created_at, expires_at, used_at)
       SELECT sha256(gen_random_uuid()::text::bytea), organization_id, 'm', 'Seeded', '', '', created_at, created_at + interval '10 minutes', created_at FROM connectors, generate_series(1, 20)`,
      'ANALYZE',
    ];
    for (const statement of seed) await stack.pool.query(statement);
  }

  it('every statement recorded while serving reads history through an index', async () => {
    const organizationId = stack.organizationId;
    const created = await stack.grpc.createConnector({
      organizationId, kind: 'amocrm', name: 'Sales', bitrix24: undefined, wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '',
      amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken(), clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '' },
      writeBack: { note: true, ratingField: '777001', feedbackField: '', reasonField: '' },
    }, { metadata: { 'idempotency-key': 'connector-1', 'idempotency-fingerprint': 'f-connector' } });
    const id = created.connector!.id;
    await stack.firstPass(id);

    const cascadeOf = (leadId: number) =>
      waitFor(async () => (await stack.cascadesOf(`amocrm:lead:${leadId}`))[0]?.id, { what: `the cascade of lead ${leadId}`, timeoutMs: 20_000 });
    const rated = amo.addLead({ contactId: amo.addContact({ name: 'Anna', email: 'anna@example.com' }).id });
    expect((await stack.hook(created.inboundUrl, amo.moveLead(rated.id, 142))).status).toBe(200);
    const token = await reviewTokenOf(stack, await cascadeOf(rated.id));
    await stack.scheduler.reviews.submitRating(token, 2);
    await stack.scheduler.reviews.submitFeedback(token, 'Coffee was cold');
    await waitFor(async () => (await stack.grpc.getConnectorStatus({ organizationId, id })).status?.writeBacksDone === 1, { what: 'the rating written back', timeoutMs: 20_000 });

    const lost = amo.addLead({ contactId: amo.addContact({ name: 'Ivan', phone: '8 916 123-45-67' }).id });
    expect((await stack.hook(created.inboundUrl, amo.moveLead(lost.id, 142))).status).toBe(200);
    await cascadeOf(lost.id);
    expect((await stack.hook(created.inboundUrl, amo.moveLead(lost.id, 143))).status).toBe(200);
    await waitFor(async () => (await stack.grpc.getConnectorStatus({ organizationId, id })).status?.writeBacksDone === 2, { what: 'the lost deal stopped and noted', timeoutMs: 20_000 });
    await stack.settled(id);

    await stack.grpc.getConnector({ organizationId, id });
    await stack.grpc.listConnectors({ organizationId });
    await stack.grpc.updateConnector({ organizationId, id, name: 'Sales team', amocrm: undefined, bitrix24: undefined, wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: true });
    await stack.grpc.runSync({ organizationId, id });
    await stack.grpc.deleteConnector({ organizationId, id });
    expect(recorder.statements.size).toBeGreaterThan(20);

    recorder.stop();
    await seedHistory();
    expect(await historyScans(stack.db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });
});
