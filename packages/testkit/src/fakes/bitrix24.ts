import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

/*
 * A local Bitrix24 portal speaking the documented REST API through an inbound webhook
 * (apidocs.bitrix24.com: local-integrations/local-webhooks, api-reference/crm/deals, deals/contacts,
 * crm/contacts, crm/companies, crm/timeline/comments, settings/performance/limits), for tests:
 * `POST /rest/<user>/<code>/<method>` with a JSON body, `{ result, total, next }` answers,
 * `{ error, error_description }` errors (401 INVALID_CREDENTIALS for a wrong code, 400 NOT_FOUND, 503
 * QUERY_LIMIT_EXCEEDED from a leaky bucket), 50 records a page, the x-www-form-urlencoded body of the
 * outbound webhook ONCRMDEALUPDATE/ADD. A deal's contacts are bindings (crm.deal.contact.items.get:
 * `CONTACT_ID`, `SORT`, `ROLE_ID`, `IS_PRIMARY`); its deprecated `CONTACT_ID` field holds the binding
 * first by `SORT`, which need not be the primary one; `COMPANY_ID` its company.
 */

type Fields = Record<string, unknown>;

export interface FakeBitrixDeal extends Fields {
  ID: string;
  TITLE: string;
  CATEGORY_ID: string;
  STAGE_ID: string;
  STAGE_SEMANTIC_ID: 'P' | 'S' | 'F';
  CONTACT_ID: string | null;
  COMPANY_ID: string | null;
  DATE_CREATE: string;
  DATE_MODIFY: string;
  MOVED_TIME: string;
}

export interface FakeBitrixComment {
  ID: string;
  ENTITY_ID: string;
  ENTITY_TYPE: string;
  CREATED: string;
  COMMENT: string;
  AUTHOR_ID: string;
}

/** `2024-08-30T14:29:00+03:00`: the portal's date-time form (Moscow time here). */
export function bitrixTime(d: Date): string {
  const shifted = new Date(d.getTime() + 3 * 3_600_000);
  return `${shifted.toISOString().slice(0, 19)}+03:00`;
}

function semanticOf(stageId: string): 'P' | 'S' | 'F' {
  const stage = stageId.includes(':') ? stageId.split(':')[1] : stageId;
  if (stage === 'WON') return 'S';
  if (stage === 'LOSE' || stage === 'APOLOGY') return 'F';
  return 'P';
}

export class FakeBitrix24 {
  readonly userId = 1;
  readonly webhookCode = randomBytes(8).toString('hex');
  /** The token the outbound webhook settings show; events carry it as auth[application_token]. */
  readonly applicationToken = randomBytes(16).toString('hex');
  readonly memberId = randomBytes(16).toString('hex');
  readonly deals = new Map<string, FakeBitrixDeal>();
  readonly contacts = new Map<string, Fields>();
  readonly companies = new Map<string, Fields>();
  /** Per deal: its contact bindings, as crm.deal.contact.items.get answers them. */
  readonly dealContacts = new Map<string, Array<{ CONTACT_ID: number; SORT: number; ROLE_ID: number; IS_PRIMARY: 'Y' | 'N' }>>();
  readonly comments: FakeBitrixComment[] = [];
  /** Every REST call: the method and when it came. */
  readonly calls: Array<{ method: string; at: number; status: number }> = [];
  private nextId = 100;
  private forced: Array<{ status: number; error: string }> = [];
  /** Leaky bucket (settings/performance/limits): each call adds 1, `drainPerSecond` drain every second, over `bucketSize` → 503. */
  private bucket = 0;
  private bucketAt = Date.now();
  private server!: http.Server;
  url = '';

  private constructor(private readonly bucketSize: number, private readonly drainPerSecond: number) {}

  static async start(options: { bucketSize?: number; drainPerSecond?: number } = {}): Promise<FakeBitrix24> {
    const fake = new FakeBitrix24(options.bucketSize ?? 50, options.drainPerSecond ?? 2);
    fake.server = http.createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', () => resolve()));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  /** The inbound webhook URL, `<portal>/rest/<user>/<code>/`. */
  get webhookUrl(): string {
    return `${this.url}/rest/${this.userId}/${this.webhookCode}/`;
  }

  get domain(): string {
    return new URL(this.url).host;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** The next `count` calls are answered with this error, whatever they ask (default: 503 QUERY_LIMIT_EXCEEDED). */
  failNext(count: number, error: { status: number; error: string } = { status: 503, error: 'QUERY_LIMIT_EXCEEDED' }): void {
    for (let i = 0; i < count; i++) this.forced.push(error);
  }

  addContact(c: { name: string; lastName?: string; phone?: string; email?: string }): Fields {
    const id = String(this.nextId++);
    const contact: Fields = {
      ID: id,
      NAME: c.name,
      LAST_NAME: c.lastName ?? '',
      HAS_PHONE: c.phone ? 'Y' : 'N',
      HAS_EMAIL: c.email ? 'Y' : 'N',
      ...(c.phone ? { PHONE: [{ ID: String(this.nextId++), VALUE_TYPE: 'WORK', VALUE: c.phone, TYPE_ID: 'PHONE' }] } : {}),
      ...(c.email ? { EMAIL: [{ ID: String(this.nextId++), VALUE_TYPE: 'WORK', VALUE: c.email, TYPE_ID: 'EMAIL' }] } : {}),
    };
    this.contacts.set(id, contact);
    return contact;
  }

  /** A company: its TITLE, and PHONE and EMAIL multi-fields as a contact has them. */
  addCompany(c: { title: string; phone?: string; email?: string }): Fields {
    const id = String(this.nextId++);
    const company: Fields = {
      ID: id,
      TITLE: c.title,
      COMPANY_TYPE: 'CUSTOMER',
      HAS_PHONE: c.phone ? 'Y' : 'N',
      HAS_EMAIL: c.email ? 'Y' : 'N',
      ...(c.phone ? { PHONE: [{ ID: String(this.nextId++), VALUE_TYPE: 'WORK', VALUE: c.phone, TYPE_ID: 'PHONE' }] } : {}),
      ...(c.email ? { EMAIL: [{ ID: String(this.nextId++), VALUE_TYPE: 'WORK', VALUE: c.email, TYPE_ID: 'EMAIL' }] } : {}),
    };
    this.companies.set(id, company);
    return company;
  }

  /**
   * A deal. `contactId` binds one contact (primary); `contacts` binds several in `SORT` order, the one
   * with `primary` (else the first) being the primary binding.
   */
  addDeal(d: { title?: string; categoryId?: number; stageId?: string; contactId?: string; contacts?: Array<{ id: string; primary?: boolean }>; companyId?: string; fields?: Fields } = {}): FakeBitrixDeal {
    const t = bitrixTime(new Date());
    const stage = d.stageId ?? (d.categoryId ? `C${d.categoryId}:NEW` : 'NEW');
    const linked = d.contacts ?? (d.contactId ? [{ id: d.contactId, primary: true }] : []);
    const primaryAt = Math.max(0, linked.findIndex((c) => c.primary));
    const bindings = linked.map((c, i) => ({ CONTACT_ID: Number(c.id), SORT: (i + 1) * 10, ROLE_ID: 0, IS_PRIMARY: (i === primaryAt ? 'Y' : 'N') as 'Y' | 'N' }));
    const deal: FakeBitrixDeal = {
      ID: String(this.nextId++),
      TITLE: d.title ?? 'Order',
      CATEGORY_ID: String(d.categoryId ?? 0),
      STAGE_ID: stage,
      STAGE_SEMANTIC_ID: semanticOf(stage),
      CONTACT_ID: bindings.length ? String(bindings[0].CONTACT_ID) : null,
      COMPANY_ID: d.companyId ?? null,
      DATE_CREATE: t,
      DATE_MODIFY: t,
      MOVED_TIME: t,
      ...(d.fields ?? {}),
    };
    this.deals.set(deal.ID, deal);
    this.dealContacts.set(deal.ID, bindings);
    return deal;
  }

  /** Moves a deal to a stage as a user would (DATE_MODIFY and MOVED_TIME now). */
  moveDeal(id: string, stageId: string): FakeBitrixDeal {
    const deal = this.deals.get(id);
    if (!deal) throw new Error(`no deal ${id}`);
    const t = bitrixTime(new Date());
    Object.assign(deal, { STAGE_ID: stageId, STAGE_SEMANTIC_ID: semanticOf(stageId), DATE_MODIFY: t, MOVED_TIME: t });
    return deal;
  }

  /** The outbound webhook's POST body for a deal event, as Bitrix24 sends it (x-www-form-urlencoded). */
  eventBody(event: 'ONCRMDEALUPDATE' | 'ONCRMDEALADD' | string, dealId: string, applicationToken = this.applicationToken): string {
    return new URLSearchParams({
      event,
      event_handler_id: '7',
      'data[FIELDS][ID]': dealId,
      ts: String(Math.floor(Date.now() / 1000)),
      'auth[domain]': this.domain,
      'auth[client_endpoint]': `${this.url}/rest/`,
      'auth[server_endpoint]': 'https://oauth.bitrix.info/rest/',
      'auth[member_id]': this.memberId,
      'auth[application_token]': applicationToken,
    }).toString();
  }

  commentsOf(dealId: string): FakeBitrixComment[] {
    return this.comments.filter((c) => c.ENTITY_TYPE === 'deal' && c.ENTITY_ID === dealId);
  }

  private leak(): boolean {
    const t = Date.now();
    this.bucket = Math.max(0, this.bucket - ((t - this.bucketAt) / 1000) * this.drainPerSecond);
    this.bucketAt = t;
    if (this.bucket + 1 > this.bucketSize) return false;
    this.bucket += 1;
    return true;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = new URL(req.url ?? '/', this.url).pathname;
    const call = { method: '', at: Date.now(), status: 0 };
    this.calls.push(call);
    const send = (status: number, body: unknown) => {
      call.status = status;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const error = (status: number, code: string, description: string) => send(status, { error: code, error_description: description });
    const time = { start: call.at / 1000, finish: Date.now() / 1000, duration: 0, operating: 0 };
    const ok = (result: unknown, extra: Fields = {}) => send(200, { result, ...extra, time });

    const m = /^\/rest\/(\d+)\/([^/]+)\/([a-z0-9.]+?)(?:\.json)?$/.exec(path);
    if (!m) return error(404, 'ERROR_METHOD_NOT_FOUND', 'Method not found!');
    call.method = m[3];
    if (Number(m[1]) !== this.userId || m[2] !== this.webhookCode) return error(401, 'INVALID_CREDENTIALS', 'Invalid request credentials');
    const forced = this.forced.shift();
    if (forced) return error(forced.status, forced.error, 'forced by the test');
    if (!this.leak()) return error(503, 'QUERY_LIMIT_EXCEEDED', 'Too many requests');
    let p: Fields;
    try {
      p = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Fields) : {};
    } catch {
      return error(400, 'INVALID_REQUEST', 'the body is not JSON');
    }
    const idOf = (v: unknown) => String(v ?? '');
    switch (m[3]) {
      case 'crm.deal.get': {
        const deal = this.deals.get(idOf(p.id ?? p.ID));
        return deal ? ok(deal) : error(400, 'NOT_FOUND', 'Not found');
      }
      case 'crm.contact.get': {
        const contact = this.contacts.get(idOf(p.id ?? p.ID));
        return contact ? ok(contact) : error(400, 'NOT_FOUND', 'Not found');
      }
      case 'crm.company.get': {
        const company = this.companies.get(idOf(p.id ?? p.ID));
        return company ? ok(company) : error(400, '', 'Not found');
      }
      case 'crm.deal.contact.items.get': {
        const bindings = this.dealContacts.get(idOf(p.id));
        return bindings ? ok(bindings) : error(400, '', 'Not found.');
      }
      case 'crm.deal.update': {
        const deal = this.deals.get(idOf(p.id));
        if (!deal) return error(400, 'NOT_FOUND', 'Not found');
        const fields = (p.fields ?? {}) as Fields;
        for (const k of Object.keys(fields)) if (!/^(UF_CRM_\w+|TITLE|COMMENTS)$/.test(k)) return error(400, 'INVALID_ARG_VALUE', `field ${k} cannot be set here`);
        Object.assign(deal, fields, { DATE_MODIFY: bitrixTime(new Date()) });
        return ok(true);
      }
      case 'crm.deal.list':
        return this.listDeals(p, ok);
      case 'crm.timeline.comment.add': {
        const f = (p.fields ?? {}) as Fields;
        if (f.ENTITY_TYPE !== 'deal' || !this.deals.has(idOf(f.ENTITY_ID))) return error(400, 'NOT_FOUND', 'Not found');
        if (typeof f.COMMENT !== 'string' || f.COMMENT === '') return error(400, 'INVALID_ARG_VALUE', 'Empty comment');
        const comment: FakeBitrixComment = { ID: String(this.nextId++), ENTITY_ID: idOf(f.ENTITY_ID), ENTITY_TYPE: 'deal', CREATED: bitrixTime(new Date()), COMMENT: f.COMMENT, AUTHOR_ID: String(this.userId) };
        this.comments.push(comment);
        return ok(Number(comment.ID));
      }
      case 'crm.timeline.comment.list': {
        const f = (p.filter ?? {}) as Fields;
        if (!f.ENTITY_ID || !f.ENTITY_TYPE) return error(400, 'INVALID_ARG_VALUE', 'filter ENTITY_ID and ENTITY_TYPE are required');
        const list = this.comments.filter((c) => c.ENTITY_TYPE === f.ENTITY_TYPE && c.ENTITY_ID === idOf(f.ENTITY_ID)).sort((a, b) => Number(b.ID) - Number(a.ID));
        return ok(list.slice(0, 50), { total: list.length, ...(list.length > 50 ? { next: 50 } : {}) });
      }
      default:
        return error(404, 'ERROR_METHOD_NOT_FOUND', 'Method not found!');
    }
  }

  /** crm.deal.list with the filter operators the tests use (`>=DATE_MODIFY`, `STAGE_SEMANTIC_ID`, `@STAGE_ID`, `@ID`), 50 a page. */
  private listDeals(p: Fields, ok: (result: unknown, extra?: Fields) => void): void {
    const filter = (p.filter ?? {}) as Fields;
    const since = typeof filter['>=DATE_MODIFY'] === 'string' ? Date.parse(filter['>=DATE_MODIFY'] as string) : null;
    const stages = Array.isArray(filter['@STAGE_ID']) ? (filter['@STAGE_ID'] as string[]) : null;
    const ids = Array.isArray(filter['@ID']) ? (filter['@ID'] as unknown[]).map(String) : null;
    const all = [...this.deals.values()]
      .filter((d) => (since === null || Date.parse(d.DATE_MODIFY) >= since) && (!filter.STAGE_SEMANTIC_ID || d.STAGE_SEMANTIC_ID === filter.STAGE_SEMANTIC_ID) && (!stages || stages.includes(d.STAGE_ID)) && (!ids || ids.includes(d.ID)))
      .sort((a, b) => Date.parse(a.DATE_MODIFY) - Date.parse(b.DATE_MODIFY) || Number(a.ID) - Number(b.ID));
    const start = Number(p.start ?? 0);
    const page = all.slice(start, start + 50);
    ok(page, { total: all.length, ...(start + 50 < all.length ? { next: start + 50 } : {}) });
  }
}
