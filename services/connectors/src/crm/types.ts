/** What the connectors need from a CRM, in the same words for amoCRM (leads) and Bitrix24 (deals). */

export { CRM_KINDS, type CrmKind } from '@rrs/proto';
import type { CrmKind } from '@rrs/proto';

export interface CrmDeal {
  id: string;
  /** amoCRM pipeline id; Bitrix24 CATEGORY_ID. */
  pipelineId: string;
  /** amoCRM status id; Bitrix24 STAGE_ID. */
  stageId: string;
  /** Bitrix24's stage group: `S` success, `F` failure, `P` in progress; empty for amoCRM. */
  stageSemantic: string;
  /** When the deal reached its current stage: amoCRM `closed_at`, Bitrix24 `MOVED_TIME`. */
  stageChangedAt: Date | null;
  /** The field the reconciliation cursor runs on: amoCRM `closed_at`, Bitrix24 `DATE_MODIFY`. */
  cursorAt: Date | null;
  /** amoCRM: the lead's main contact (`is_main`); Bitrix24: the deprecated `CONTACT_ID` (see CrmClient.customerOf). Null when none. */
  contactId: string | null;
  /** The deal's company (amoCRM: the lead's one linked company; Bitrix24 `COMPANY_ID`); null when none. */
  companyId: string | null;
  /** Field values the location mapping may read (custom fields by id or name, and pipeline ids). */
  fields: Record<string, string>;
}

export interface CrmContact {
  /** Who is asked: the deal's contact, or — for a deal with no contact — its company. */
  kind: 'contact' | 'company';
  id: string;
  name: string;
  /** The first email and phone of the contact; empty when it has none. */
  email: string;
  phone: string;
}

export interface CrmClient {
  /** Null when the CRM has no such deal (deleted, or never existed). */
  getDeal(id: string): Promise<CrmDeal | null>;
  /** The deals of these ids that exist (any order), as few requests as the API allows. */
  getDeals(ids: string[]): Promise<CrmDeal[]>;
  /**
   * The person a deal's review request goes to: its primary contact (amoCRM: the lead's main contact;
   * Bitrix24: the binding with `IS_PRIMARY` of `crm.deal.contact.items.get`), else — a deal with no
   * contact — its company, with the company's phone and email. Null when it has neither.
   */
  customerOf(deal: CrmDeal): Promise<CrmContact | null>;
  /**
   * Deals in a won stage whose cursor field is at or after `since`, page by page. `wonStages` empty means
   * the CRM's own success stages (amoCRM 142 in every pipeline, Bitrix24 STAGE_SEMANTIC_ID `S`).
   */
  listWonDeals(since: Date, wonStages: WonStage[]): AsyncGenerator<CrmDeal[]>;
  /** Adds a note (amoCRM) / timeline comment (Bitrix24) to the deal. */
  addNote(dealId: string, text: string): Promise<void>;
  /** Whether a note of the deal contains `marker` (the newest notes are searched). */
  hasNote(dealId: string, marker: string): Promise<boolean>;
  /** Writes custom fields of the deal (field id or name → value). */
  setDealFields(dealId: string, values: Record<string, string | number>): Promise<void>;
}

export interface WonStage {
  pipelineId: string;
  stageId: string;
}

/** amoCRM's system status of a won lead, the same in every pipeline. */
export const AMOCRM_WON_STATUS = '142';
/** amoCRM's system status of a lead closed as lost ("Закрыто и не реализовано"), the same in every pipeline. */
export const AMOCRM_LOST_STATUS = '143';

/** Whether a deal is in a failure stage: amoCRM status 143, Bitrix24 `STAGE_SEMANTIC_ID` `F`. */
export function isLost(kind: CrmKind, deal: Pick<CrmDeal, 'stageId' | 'stageSemantic'>): boolean {
  return kind === 'amocrm' ? deal.stageId === AMOCRM_LOST_STATUS : deal.stageSemantic === 'F';
}

/**
 * The won stage a deal is in, as the key of "this deal was won there" (with the deal id, the
 * idempotency of its cascade), or null when the deal is not in a won stage of the connector.
 */
export function wonKeyOf(kind: CrmKind, deal: Pick<CrmDeal, 'pipelineId' | 'stageId' | 'stageSemantic'>, wonStages: WonStage[]): string | null {
  if (wonStages.length === 0) {
    if (kind === 'amocrm') return deal.stageId === AMOCRM_WON_STATUS ? `${deal.pipelineId}:${deal.stageId}` : null;
    return deal.stageSemantic === 'S' ? deal.stageId : null;
  }
  const hit = wonStages.find((s) => s.stageId === deal.stageId && (s.pipelineId === '' || s.pipelineId === deal.pipelineId));
  if (!hit) return null;
  return kind === 'amocrm' ? `${deal.pipelineId}:${deal.stageId}` : deal.stageId;
}

/**
 * Why a CRM call failed, by what the caller should do:
 * - `unauthorized`: the credentials no longer work (after a refresh, for amoCRM OAuth); the admin must fix them.
 * - `rate_limited`, `unavailable`: try again later (backoff); the CRM or the way to it is overloaded or down.
 * - `rejected`: the CRM refused this request (4xx); repeating it changes nothing.
 */
export type CrmErrorKind = 'unauthorized' | 'rate_limited' | 'unavailable' | 'rejected';

export class CrmError extends Error {
  readonly kind: CrmErrorKind;
  /** Stable code for the status: `crm_unauthorized`, `crm_rate_limited`, `crm_unavailable`, `crm_rejected`. */
  readonly code: string;
  readonly status?: number;
  readonly retryAfterMs?: number;

  constructor(kind: CrmErrorKind, message: string, options: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CrmError';
    this.kind = kind;
    this.code = `crm_${kind}`;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }

  get retryable(): boolean {
    return this.kind === 'rate_limited' || this.kind === 'unavailable';
  }
}
