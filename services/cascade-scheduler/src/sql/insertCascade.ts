import type { FinishReason, SkipReason } from '@rrs/proto';
import type { PoolClient } from '@rrs/runtime';
import { isBulk } from '../fairShare';
import { DUE_CHANNEL } from '../recipientStore';
import { insertRows, insertValues, StatementParams, type ColumnTypes } from './statement';

/** Rows of a new cascade, one object per row, keys named as the tables' columns. */
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

export interface ReviewLinkRow {
  id: string;
  token: string;
  recipient_id: string;
  customer_name: string;
  contact: string;
}

export interface RecipientRow {
  id: string;
  position: number;
  name: string;
  email: string;
  phone: string;
  contact_id: string;
  contact_external_id: string;
  status: 'running' | 'finished';
  /** Set for a recipient skipped at intake. */
  finish_reason: FinishReason | null;
  review_request_id: string;
  consent_at: Date | null;
}

export interface StepRow {
  id: string;
  recipient_id: string;
  step_order: number;
  channel: string;
  delay_minutes: number;
  status: 'scheduled' | 'pending' | 'skipped';
  reason: SkipReason | null;
}

export interface NewCascade {
  cascade: CascadeRow;
  reviewLinks: ReviewLinkRow[];
  recipients: RecipientRow[];
  steps: StepRow[];
}

const CASCADE_COLUMNS: ColumnTypes<CascadeRow> = {
  id: 'uuid', organization_id: 'uuid', location_id: 'text', name: 'text', flow_id: 'uuid', channel: 'text', external_id: 'text', status: 'text',
  locale: 'text', templates: 'jsonb', flow_steps: 'jsonb', recipients_total: 'int', skipped: 'int', active_recipients: 'int',
  created_at: 'timestamptz', finished_at: 'timestamptz', trace_context: 'jsonb', response_window_minutes: 'int',
};
const REVIEW_LINK_COLUMNS: ColumnTypes<ReviewLinkRow> = { id: 'uuid', token: 'text', recipient_id: 'uuid', customer_name: 'text', contact: 'text' };
const RECIPIENT_COLUMNS: ColumnTypes<RecipientRow> = {
  id: 'uuid', position: 'int', name: 'text', email: 'text', phone: 'text', contact_id: 'text', contact_external_id: 'text', status: 'text',
  finish_reason: 'text', review_request_id: 'uuid', consent_at: 'timestamptz',
};
const STEP_COLUMNS: ColumnTypes<StepRow> = { id: 'uuid', recipient_id: 'uuid', step_order: 'int', channel: 'text', delay_minutes: 'int', status: 'text', reason: 'text' };

/**
 * The whole intake in ONE statement (data-modifying CTEs over unnest arrays, one array per column):
 * one round trip whatever the number of recipients. The cascade's time is every row's time; the
 * dispatchers are notified on commit when a step is due.
 */
export async function insertCascade(client: PoolClient, rows: NewCascade): Promise<void> {
  const { cascade } = rows;
  const params = new StatementParams();
  const shared = {
    cascade_id: params.add(cascade.id, 'uuid'),
    organization_id: params.add(cascade.organization_id, 'uuid'),
    location_id: params.add(cascade.location_id, 'text'),
  };
  const at = params.add(cascade.created_at, 'timestamptz');
  const text = `WITH new_cascade AS (
      ${insertValues(params, 'cascades', CASCADE_COLUMNS, cascade, { id: shared.cascade_id, organization_id: shared.organization_id, location_id: shared.location_id, created_at: at })}
    ), new_review_links AS (
      ${insertRows(params, 'review_requests', REVIEW_LINK_COLUMNS, rows.reviewLinks, { organization_id: shared.organization_id, location_id: shared.location_id, created_at: at })}
    ), new_recipients AS (
      ${insertRows(params, 'recipients', RECIPIENT_COLUMNS, rows.recipients, { cascade_id: shared.cascade_id, organization_id: shared.organization_id, finished_at: `CASE WHEN u.status = 'finished' THEN ${at} END` })}
    ), new_steps AS (
      ${insertRows(params, 'recipient_steps', STEP_COLUMNS, rows.steps, {
        cascade_id: shared.cascade_id,
        organization_id: shared.organization_id,
        sent_channel: 'u.channel',
        bulk: params.add(isBulk(cascade.recipients_total), 'boolean'),
        due_at: `CASE WHEN u.status = 'scheduled' THEN ${at} END`,
        skipped_at: `CASE WHEN u.status = 'skipped' THEN ${at} END`,
      })}
    )
    SELECT pg_notify(${params.add(DUE_CHANNEL, 'text')}, ${params.add(String(cascade.created_at.getTime()), 'text')}) WHERE ${params.add(cascade.active_recipients, 'int')} > 0`;
  await client.query(text, params.values);
}
