import { crmErrorOf, crmRequest, type CrmHttpOptions, type CrmResponse } from './http';
import { CrmError, type CrmClient, type CrmContact, type CrmDeal, type WonStage } from './types';

/*
 * Bitrix24 REST through an inbound webhook (https://apidocs.bitrix24.com/local-integrations/local-webhooks.html):
 * `POST <webhook url><method>` with a JSON body, answered `{ result, total?, next? }` or
 * `{ error, error_description }`. Too many requests: 503 QUERY_LIMIT_EXCEEDED (settings/performance/limits);
 * a method blocked for its operating time: 429 OPERATION_TIME_LIMIT; a wrong or expired webhook: 401.
 * List methods return 50 records a page, the next page from `start` = `next`.
 */

type Record_ = Record<string, unknown>;

/** `2024-09-02T18:37:18+00:00`: the date-time form of the API (no fractions). */
export function bitrixDateTime(d: Date): string {
  return `${d.toISOString().slice(0, 19)}+00:00`;
}

const date = (v: unknown): Date | null => {
  if (typeof v !== 'string' || v === '') return null;
  const parsed = Date.parse(v);
  return Number.isFinite(parsed) ? new Date(parsed) : null;
};

const idOrNull = (v: unknown): string | null => (v === null || v === undefined || v === '' || v === '0' || v === 0 ? null : String(v));

export function bitrixDealToDeal(d: Record_): CrmDeal {
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(d)) {
    if (typeof v === 'string' || typeof v === 'number') fields[k] = String(v);
  }
  return {
    id: String(d.ID),
    pipelineId: String(d.CATEGORY_ID ?? '0'),
    stageId: String(d.STAGE_ID ?? ''),
    stageSemantic: String(d.STAGE_SEMANTIC_ID ?? ''),
    stageChangedAt: date(d.MOVED_TIME) ?? date(d.DATE_MODIFY),
    cursorAt: date(d.DATE_MODIFY),
    contactId: idOrNull(d.CONTACT_ID),
    companyId: idOrNull(d.COMPANY_ID),
    fields,
  };
}

function firstMulti(v: unknown): string {
  if (!Array.isArray(v)) return '';
  const hit = v.find((x) => typeof (x as Record_)?.VALUE === 'string' && ((x as Record_).VALUE as string).trim() !== '') as Record_ | undefined;
  return hit ? (hit.VALUE as string).trim() : '';
}

export class Bitrix24Client implements CrmClient {
  /** `webhookUrl` ends with `/`: `https://<portal>/rest/<user>/<code>/`. */
  constructor(
    private readonly webhookUrl: string,
    private readonly http: CrmHttpOptions,
  ) {}

  private async call(method: string, params: Record_): Promise<CrmResponse> {
    return crmRequest(
      `${this.webhookUrl}${method}`,
      { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(params) },
      this.http,
      (r) => r.status === 503 && (r.body as Record_ | null)?.error === 'QUERY_LIMIT_EXCEEDED',
    );
  }

  /** The `result` of a call, or its error by kind (a 400 NOT_FOUND is null where `notFound` is allowed). */
  private async result(method: string, params: Record_, options: { notFound?: boolean } = {}): Promise<CrmResponse & { result: unknown }> {
    const res = await this.call(method, params);
    const body = res.body as Record_ | null;
    if (res.status === 200 && body && 'result' in body) return { ...res, result: body.result };
    const error = String(body?.error ?? '');
    const description = String(body?.error_description ?? '');
    if (options.notFound && res.status === 400 && (error === 'NOT_FOUND' || /not found/i.test(description))) return { ...res, result: null };
    if (res.status === 401 || error === 'INVALID_CREDENTIALS' || error === 'expired_token' || error === 'NO_AUTH_FOUND' || error === 'insufficient_scope') {
      throw new CrmError('unauthorized', `Bitrix24 ${method}: ${error || res.status} ${description}`.trim(), { status: res.status });
    }
    if (error === 'OPERATION_TIME_LIMIT') throw new CrmError('rate_limited', `Bitrix24 ${method}: ${error} ${description}`.trim(), { status: res.status });
    throw crmErrorOf(res, `Bitrix24 ${method}`);
  }

  async getDeal(id: string): Promise<CrmDeal | null> {
    const { result } = await this.result('crm.deal.get', { id }, { notFound: true });
    return result ? bitrixDealToDeal(result as Record_) : null;
  }

  /** crm.contact.get / crm.company.get: the name (a company's TITLE) and the first email and phone (multi-fields). */
  private async person(kind: CrmContact['kind'], id: string): Promise<CrmContact | null> {
    const { result } = await this.result(kind === 'contact' ? 'crm.contact.get' : 'crm.company.get', { id }, { notFound: true });
    if (!result) return null;
    const found = result as Record_;
    const name = kind === 'company'
      ? String(found.TITLE ?? '').trim()
      : [found.NAME, found.SECOND_NAME, found.LAST_NAME].filter((x) => typeof x === 'string' && x.trim() !== '').join(' ');
    return { kind, id: String(found.ID), name, email: firstMulti(found.EMAIL), phone: firstMulti(found.PHONE) };
  }

  /**
   * The deal's primary contact from crm.deal.contact.items.get (`IS_PRIMARY` `Y`; else the first by
   * `SORT`), not the deal's `CONTACT_ID`, which is deprecated; a deal with no contact asks its company.
   */
  async customerOf(deal: CrmDeal): Promise<CrmContact | null> {
    const { result } = await this.result('crm.deal.contact.items.get', { id: Number(deal.id) }, { notFound: true });
    const bindings = (Array.isArray(result) ? (result as Record_[]) : []).filter((b) => idOrNull(b.CONTACT_ID) !== null);
    const primary = bindings.find((b) => b.IS_PRIMARY === 'Y') ?? [...bindings].sort((a, b) => Number(a.SORT ?? 0) - Number(b.SORT ?? 0))[0];
    if (primary) return this.person('contact', String(primary.CONTACT_ID));
    return deal.companyId ? this.person('company', deal.companyId) : null;
  }

  /** crm.deal.list with `@ID` (IN), 50 a page. */
  async getDeals(ids: string[]): Promise<CrmDeal[]> {
    const deals: CrmDeal[] = [];
    for (let at = 0; at < ids.length; at += 50) {
      const res = await this.result('crm.deal.list', { filter: { '@ID': ids.slice(at, at + 50).map(Number) }, select: ['*', 'UF_*'], start: 0 });
      if (Array.isArray(res.result)) deals.push(...(res.result as Record_[]).map(bitrixDealToDeal));
    }
    return deals;
  }

  /** crm.deal.list of deals in a won stage modified at or after `since`, oldest change first. */
  async *listWonDeals(since: Date, wonStages: WonStage[]): AsyncGenerator<CrmDeal[]> {
    const filter: Record_ = { '>=DATE_MODIFY': bitrixDateTime(since) };
    if (wonStages.length === 0) filter.STAGE_SEMANTIC_ID = 'S';
    else filter['@STAGE_ID'] = [...new Set(wonStages.map((s) => s.stageId))];
    for (let start = 0; ; ) {
      const res = await this.result('crm.deal.list', { filter, order: { DATE_MODIFY: 'ASC', ID: 'ASC' }, select: ['*', 'UF_*'], start });
      const deals = Array.isArray(res.result) ? (res.result as Record_[]) : [];
      if (deals.length > 0) yield deals.map(bitrixDealToDeal);
      const next = (res.body as Record_).next;
      if (typeof next !== 'number' || deals.length === 0) break;
      start = next;
    }
  }

  async addNote(dealId: string, text: string): Promise<void> {
    await this.result('crm.timeline.comment.add', { fields: { ENTITY_ID: Number(dealId), ENTITY_TYPE: 'deal', COMMENT: text } });
  }

  async hasNote(dealId: string, marker: string): Promise<boolean> {
    const { result } = await this.result('crm.timeline.comment.list', {
      filter: { ENTITY_ID: Number(dealId), ENTITY_TYPE: 'deal' },
      select: ['ID', 'COMMENT'],
      order: { ID: 'DESC' },
    });
    return Array.isArray(result) && result.some((c) => typeof (c as Record_).COMMENT === 'string' && ((c as Record_).COMMENT as string).includes(marker));
  }

  async setDealFields(dealId: string, values: Record<string, string | number>): Promise<void> {
    await this.result('crm.deal.update', { id: Number(dealId), fields: values });
  }
}
