import type { FinishReason, SkipReason } from '@rrs/proto';
import type { PoolClient } from '@rrs/runtime';
import { isBulk } from '../fairShare';
import { DUE_CHANNEL } from '../recipientStore';
import type { UuidArray } from '../ids';
import { insertSelect, insertValues, StatementParams, unnestRows, type ColumnTypes } from './statement';

/** The cascade's row, keys named as the table's columns. */
export interface CascadeRow {
  id: string;
  organization_id: string;
  location_id: string;
  name: string;
  flow_id: string | null;
  channel: string | null;
  external_id: string | null;
  status: 'running' | 'finished';
  locale: string;
  templates: string;
  flow_steps: string;
  recipients_total: number;
  skipped: number;
  active_recipients: number;
  created_at: Date;
  finished_at: Date | null;
  trace_context: string;
  /** The response window this cascade's recipients wait after their last step (flow minutes; 0 = none). */
  response_window_minutes: number;
}

/**
 * One recipient as intake sends it: its `recipients` row (keys named as that table's columns; its id
 * and its review link's id travel apart, `NewCascade`), the token of its review link, and the reason
 * its steps are skipped. Its review link and its steps are made from it by the statement.
 */
export interface RecipientRow {
  position: number;
  name: string;
  email: string;
  phone: string;
  contact_id: string;
  contact_external_id: string;
  status: 'running' | 'finished';
  /** Set for a recipient skipped at intake. */
  finish_reason: FinishReason | null;
  consent_at: Date | null;
  /** Its review link's token. */
  token: string;
  /** Every step's reason for a recipient skipped at intake (its steps are `skipped`); null otherwise. */
  step_reason: SkipReason | null;
}

/** A step of the cascade's flow, as each recipient gets it. */
export interface FlowStepRow {
  step_order: number;
  channel: string;
  delay_minutes: number;
}

export interface NewCascade {
  cascade: CascadeRow;
  /** In position order. */
  recipients: RecipientRow[];
  /** The recipients' ids and their review links' ids, in position order. */
  recipientIds: UuidArray;
  reviewRequestIds: UuidArray;
  /** The flow's steps, in order. */
  flowSteps: FlowStepRow[];
  /** One id per step of each recipient: recipient by recipient (position order), step by step. */
  stepIds: UuidArray;
}

const CASCADE_COLUMNS: ColumnTypes<CascadeRow> = {
  id: 'uuid', organization_id: 'uuid', location_id: 'text', name: 'text', flow_id: 'uuid', channel: 'text', external_id: 'text', status: 'text',
  locale: 'text', templates: 'jsonb', flow_steps: 'jsonb', recipients_total: 'int', skipped: 'int', active_recipients: 'int',
  created_at: 'timestamptz', finished_at: 'timestamptz', trace_context: 'jsonb', response_window_minutes: 'int',
};
const RECIPIENT_COLUMNS: ColumnTypes<RecipientRow> = {
  position: 'int', name: 'text', email: 'text', phone: 'text', contact_id: 'text', contact_external_id: 'text', status: 'text',
  finish_reason: 'text', consent_at: 'timestamptz', token: 'text', step_reason: 'text',
};
const FLOW_STEP_COLUMNS: ColumnTypes<FlowStepRow> = { step_order: 'int', channel: 'text', delay_minutes: 'int' };

/** Whether every recipient has the same value in `column` (timestamps compared by their time). */
function sameForAll(recipients: readonly RecipientRow[], column: keyof RecipientRow): boolean {
  const first = recipients[0][column];
  const key = first instanceof Date ? first.getTime() : first;
  return recipients.every((recipient) => {
    const value = recipient[column];
    return (value instanceof Date ? value.getTime() : value) === key;
  });
}

/**
 * The `recipient` rows the statement's inserts read as `u`: a column with one value for every recipient
 * (the contact columns of an API start, the status, reasons and consent of a start that skips nobody)
 * travels as one parameter, not as an array of that value, which PostgreSQL would parse element by
 * element; the others as one array per column. Positions are not sent: `recipients` is in position order.
 */
function recipientRows(params: StatementParams, rows: NewCascade): string {
  // A recipient's position is its place in the list: the row's ordinality, less one.
  const columns = (Object.keys(RECIPIENT_COLUMNS) as Array<keyof RecipientRow>).filter((column) => column !== 'position');
  const uniform = columns.filter((column) => sameForAll(rows.recipients, column));
  const varying = Object.fromEntries(columns.filter((column) => !uniform.includes(column)).map((column) => [column, RECIPIENT_COLUMNS[column]])) as ColumnTypes<RecipientRow>;
  const constants = uniform.map((column) => `, ${params.add(rows.recipients[0][column], RECIPIENT_COLUMNS[column])} AS ${column}`).join('');
  return `SELECT u.*${constants} FROM ${unnestRows(params, 'u', varying, rows.recipients, { id: params.add(rows.recipientIds.bytes, 'uuid[]'), review_request_id: params.add(rows.reviewRequestIds.bytes, 'uuid[]') })}`;
}

/**
 * The whole intake in ONE statement (data-modifying CTEs over unnest arrays): one round trip whatever
 * the number of recipients. The recipients travel once, one array per column, and the review links
 * and steps are made from them in SQL (a step per recipient and flow step, its id from `stepIds`), so
 * the statement carries no column twice. The cascade's time is every row's time; the dispatchers are
 * notified on commit when a step is due. Sent as its own request with nothing deferred in front of it
 * (in a coalesced transaction, runtime coalescedTransaction.ts): its ids are binary parameters, which
 * cannot be written as literals.
 */
export async function insertCascade(client: PoolClient, rows: NewCascade): Promise<void> {
  const { cascade } = rows;
  const params = new StatementParams();
  const cascadeId = params.add(cascade.id, 'uuid');
  const organizationId = params.add(cascade.organization_id, 'uuid');
  const locationId = params.add(cascade.location_id, 'text');
  const at = params.add(cascade.created_at, 'timestamptz');
  // The ids in PostgreSQL's binary uuid[] (ids.ts): read without parsing text.
  const stepIds = params.add(rows.stepIds.bytes, 'uuid[]');
  const flowSteps = params.add(rows.flowSteps.length, 'int');
  const text = `WITH new_cascade AS (
      ${insertValues(params, 'cascades', CASCADE_COLUMNS, cascade, { id: cascadeId, organization_id: organizationId, location_id: locationId, created_at: at })}
    ), recipient AS (
      ${recipientRows(params, rows)}
    ), new_review_links AS (
      ${insertSelect('review_requests', {
        id: 'u.review_request_id', organization_id: organizationId, token: 'u.token', location_id: locationId, recipient_id: 'u.id',
        customer_name: 'u.name', contact: `CASE WHEN u.email <> '' THEN u.email ELSE u.phone END`, created_at: at,
      }, 'recipient u')}
    ), new_recipients AS (
      ${insertSelect('recipients', {
        id: 'u.id', cascade_id: cascadeId, organization_id: organizationId, position: 'u.ordinality - 1', name: 'u.name', email: 'u.email', phone: 'u.phone',
        contact_id: 'u.contact_id', contact_external_id: 'u.contact_external_id', status: 'u.status', finish_reason: 'u.finish_reason',
        finished_at: `CASE WHEN u.status = 'finished' THEN ${at} END`, review_request_id: 'u.review_request_id', consent_at: 'u.consent_at',
      }, 'recipient u')}
    ), new_steps AS (
      ${insertSelect('recipient_steps', {
        id: `(${stepIds})[(u.ordinality - 1) * ${flowSteps} + f.ordinality]`, recipient_id: 'u.id', cascade_id: cascadeId, organization_id: organizationId,
        step_order: 'f.step_order', channel: 'f.channel', sent_channel: 'f.channel', delay_minutes: 'f.delay_minutes',
        status: `CASE WHEN u.status = 'finished' THEN 'skipped' WHEN f.ordinality = 1 THEN 'scheduled' ELSE 'pending' END`, reason: 'u.step_reason',
        bulk: params.add(isBulk(cascade.recipients_total), 'boolean'),
        due_at: `CASE WHEN u.status = 'running' AND f.ordinality = 1 THEN ${at} END`,
        skipped_at: `CASE WHEN u.status = 'finished' THEN ${at} END`,
      }, `recipient u CROSS JOIN ${unnestRows(params, 'f', FLOW_STEP_COLUMNS, rows.flowSteps)}`)}
    )
    SELECT pg_notify(${params.add(DUE_CHANNEL, 'text')}, ${params.add(String(cascade.created_at.getTime()), 'text')}) WHERE ${params.add(cascade.active_recipients, 'int')} > 0`;
  await client.query(text, params.values);
}
