import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

/*
 * A local amoCRM account speaking the documented REST API v4 (amocrm.ru/developers/content/crm_platform:
 * leads-api, contacts-api, companies-api, events-and-notes, filters-api, webhooks-format; oauth/oauth),
 * for tests: bearer tokens (long-lived, or OAuth access tokens with a refresh token that works once), 204
 * for a missing entity, 429 beyond `perSecond` requests in any second, problem+json errors, leads with
 * their contacts (`is_main`) and their one company (`_embedded[companies]`), and the
 * x-www-form-urlencoded bodies of the "lead status changed" (`leads[status]`) and "lead changed"
 * (`leads[update]`) webhooks. Statuses 142 (won) and 143 (lost) are the system ones of every pipeline. Its OAuth consent
 * (oauth/step-by-step): the authorization page `GET /oauth?client_id&state&mode` whose "Allow" redirects to
 * the integration's Redirect URI with `code`, `state`, `referer` (this account's host) and `client_id`, and
 * the code exchanged once, within 20 minutes, at `POST /oauth2/access_token` (grant_type=authorization_code).
 */

export interface FakeAmoLead {
  id: number;
  name: string;
  status_id: number;
  pipeline_id: number;
  created_at: number;
  updated_at: number;
  closed_at: number | null;
  custom_fields_values: Array<{ field_id: number; values: Array<{ value: string | number }> }> | null;
  /** Linked contacts; the main one (`is_main`) is `mainContact`, else the first. */
  contacts: number[];
  mainContact: number | null;
  /** The lead's company (a lead has at most one). */
  company: number | null;
}

export interface FakeAmoContact {
  id: number;
  name: string;
  phone: string;
  email: string;
}

export interface FakeAmoNote {
  id: number;
  entity_id: number;
  note_type: string;
  params: { text: string };
  created_at: number;
}

export interface FakeAmoRequest {
  method: string;
  path: string;
  at: number;
  status: number;
}

const now = () => Math.floor(Date.now() / 1000);
const WON = 142;
const LOST = 143;

export class FakeAmoCrm {
  readonly subdomain = `test${randomBytes(3).toString('hex')}`;
  readonly accountId = 30_000_000 + Math.floor(Math.random() * 1_000_000);
  readonly pipelines = [5_000_001, 5_000_002];
  readonly leads = new Map<number, FakeAmoLead>();
  readonly contacts = new Map<number, FakeAmoContact>();
  /** Companies: the same shape as contacts (a name, a phone, an email). */
  readonly companies = new Map<number, FakeAmoContact>();
  readonly notes: FakeAmoNote[] = [];
  /** Every API request (OAuth token calls included), in order. */
  readonly requests: FakeAmoRequest[] = [];
  readonly longLivedTokens = new Set<string>();
  readonly oauthClient = { clientId: randomBytes(8).toString('hex'), clientSecret: randomBytes(16).toString('hex'), redirectUri: 'https://reviews.example/oauth/amocrm' };
  private readonly accessTokens = new Set<string>();
  private refreshToken = '';
  /** Successful refreshes. */
  refreshes = 0;
  /** Authorization codes issued by the consent page, not yet exchanged (amoCRM: valid 20 minutes, once). */
  private readonly codes = new Map<string, number>();
  /** Codes exchanged for tokens. */
  codeExchanges = 0;
  private nextId = 1_000;
  private forced: Array<{ status: number }> = [];
  private server!: http.Server;
  url = '';

  private constructor(readonly perSecond: number) {}

  static async start(options: { perSecond?: number } = {}): Promise<FakeAmoCrm> {
    const fake = new FakeAmoCrm(options.perSecond ?? 7);
    fake.server = http.createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', () => resolve()));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  issueLongLivedToken(): string {
    const token = `ll_${randomBytes(24).toString('hex')}`;
    this.longLivedTokens.add(token);
    return token;
  }

  /** A fresh OAuth pair, as the authorization-code exchange would give it. */
  issueOAuthTokens(): { accessToken: string; refreshToken: string } {
    const accessToken = `at_${randomBytes(24).toString('hex')}`;
    this.accessTokens.add(accessToken);
    this.refreshToken = `rt_${randomBytes(24).toString('hex')}`;
    return { accessToken, refreshToken: this.refreshToken };
  }

  /** Every OAuth access token issued so far stops working (401), as at the end of their lifetime. */
  expireAccessTokens(): void {
    this.accessTokens.clear();
  }

  /** The refresh token stops working too: a refresh is answered 400, as after a revoked integration. */
  revokeRefreshToken(): void {
    this.refreshToken = '';
  }

  /** The next `count` API requests are answered `status` (429, 500, 401, …) whatever they ask. */
  failNext(count: number, status: number): void {
    for (let i = 0; i < count; i++) this.forced.push({ status });
  }

  addContact(c: { name: string; phone?: string; email?: string }): FakeAmoContact {
    const contact = { id: this.nextId++, name: c.name, phone: c.phone ?? '', email: c.email ?? '' };
    this.contacts.set(contact.id, contact);
    return contact;
  }

  addCompany(c: { name: string; phone?: string; email?: string }): FakeAmoContact {
    const company = { id: this.nextId++, name: c.name, phone: c.phone ?? '', email: c.email ?? '' };
    this.companies.set(company.id, company);
    return company;
  }

  addLead(
    l: { name?: string; pipelineId?: number; statusId?: number; contactId?: number; contactIds?: number[]; mainContactId?: number; companyId?: number; customFields?: Record<number, string | number> } = {},
  ): FakeAmoLead {
    const t = now();
    const lead: FakeAmoLead = {
      id: this.nextId++,
      name: l.name ?? 'Order',
      status_id: l.statusId ?? 100,
      pipeline_id: l.pipelineId ?? this.pipelines[0],
      created_at: t,
      updated_at: t,
      closed_at: l.statusId === WON || l.statusId === LOST ? t : null,
      custom_fields_values: l.customFields ? Object.entries(l.customFields).map(([id, value]) => ({ field_id: Number(id), values: [{ value }] })) : null,
      contacts: l.contactIds ?? (l.contactId ? [l.contactId] : []),
      mainContact: l.mainContactId ?? null,
      company: l.companyId ?? null,
    };
    this.leads.set(lead.id, lead);
    return lead;
  }

  /**
   * Moves a lead to a status, as a user would in the pipeline, and returns the body of the account
   * webhook "lead status changed" that amoCRM sends for it.
   */
  moveLead(id: number, statusId: number, pipelineId?: number): string {
    const lead = this.leads.get(id);
    if (!lead) throw new Error(`no lead ${id}`);
    const old = { status: lead.status_id, pipeline: lead.pipeline_id };
    lead.status_id = statusId;
    lead.pipeline_id = pipelineId ?? lead.pipeline_id;
    lead.updated_at = now();
    lead.closed_at = statusId === WON || statusId === LOST ? lead.updated_at : null;
    return this.statusWebhookBody(lead, old);
  }

  statusWebhookBody(lead: FakeAmoLead, old: { status: number; pipeline: number }): string {
    return new URLSearchParams({
      'leads[status][0][id]': String(lead.id),
      'leads[status][0][status_id]': String(lead.status_id),
      'leads[status][0][pipeline_id]': String(lead.pipeline_id),
      'leads[status][0][old_status_id]': String(old.status),
      'leads[status][0][old_pipeline_id]': String(old.pipeline),
      'account[id]': String(this.accountId),
      'account[subdomain]': this.subdomain,
    }).toString();
  }

  /**
   * The account webhook "lead changed" (`update_lead`, webhooks-format) for a lead as it is now: every
   * change of a lead sends it, with its current `status_id` and `pipeline_id` (and `old_status_id` when
   * the change moved it).
   */
  updateWebhookBody(lead: FakeAmoLead, oldStatusId?: number): string {
    return new URLSearchParams({
      'leads[update][0][id]': String(lead.id),
      'leads[update][0][name]': lead.name,
      'leads[update][0][status_id]': String(lead.status_id),
      ...(oldStatusId !== undefined ? { 'leads[update][0][old_status_id]': String(oldStatusId) } : {}),
      'leads[update][0][price]': '0',
      'leads[update][0][responsible_user_id]': '1',
      'leads[update][0][last_modified]': String(lead.updated_at),
      'leads[update][0][modified_user_id]': '1',
      'leads[update][0][created_user_id]': '1',
      'leads[update][0][date_create]': String(lead.created_at),
      'leads[update][0][pipeline_id]': String(lead.pipeline_id),
      'leads[update][0][account_id]': String(this.accountId),
      'account[id]': String(this.accountId),
      'account[subdomain]': this.subdomain,
    }).toString();
  }

  /** Moves a lead as a user would and returns the "lead changed" webhook amoCRM sends for it. */
  moveLeadUpdate(id: number, statusId: number): string {
    const lead = this.leads.get(id);
    if (!lead) throw new Error(`no lead ${id}`);
    const old = lead.status_id;
    this.moveLead(id, statusId);
    return this.updateWebhookBody(lead, old);
  }

  notesOf(leadId: number): FakeAmoNote[] {
    return this.notes.filter((n) => n.entity_id === leadId);
  }

  /** API requests (not OAuth) answered in the most crowded second. */
  maxRequestsInAnySecond(): number {
    const times = this.requests.filter((r) => r.path.startsWith('/api/')).map((r) => r.at);
    let max = 0;
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= 1000) j++;
      max = Math.max(max, i - j + 1);
    }
    return max;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', this.url);
    const record = { method: req.method ?? 'GET', path: url.pathname, at: Date.now(), status: 0 };
    this.requests.push(record);
    const send = (status: number, body?: unknown, type = 'application/hal+json') => {
      record.status = status;
      if (body === undefined) {
        res.writeHead(status).end();
        return;
      }
      res.writeHead(status, { 'content-type': type }).end(JSON.stringify(body));
    };
    const problem = (status: number, detail: string) => send(status, { title: http.STATUS_CODES[status], type: `https://httpstatus.es/${status}`, status, detail }, 'application/problem+json');

    if (url.pathname === '/oauth2/access_token' && req.method === 'POST') return this.token(raw, req.headers['content-type'] ?? '', send, problem);
    if (url.pathname === '/oauth' && req.method === 'GET') return this.consentPage(url, res, record);
    if (url.pathname === '/oauth/allow' && req.method === 'POST') {
      const form = new URLSearchParams(raw);
      record.status = 302;
      res.writeHead(302, { location: this.authorize(form.get('state') ?? '') }).end();
      return;
    }
    if (!url.pathname.startsWith('/api/v4/')) return problem(404, 'not found');
    const forced = this.forced.shift();
    if (forced) return problem(forced.status, 'forced by the test');
    const recent = this.requests.filter((r) => r.path.startsWith('/api/') && r !== record && r.status !== 429 && record.at - r.at < 1000).length;
    if (recent >= this.perSecond) return problem(429, 'Too Many Requests');
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!this.accessTokens.has(token) && !this.longLivedTokens.has(token)) return problem(401, 'Unauthorized');

    let body: unknown = null;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        return problem(400, 'invalid JSON');
      }
    }
    const q = url.searchParams;
    let m: RegExpExecArray | null;
    if (req.method === 'GET' && url.pathname === '/api/v4/leads/pipelines') {
      return send(200, { _total_items: this.pipelines.length, _embedded: { pipelines: this.pipelines.map((id, i) => ({ id, name: `Pipeline ${i + 1}`, is_main: i === 0 })) } });
    }
    if (req.method === 'GET' && url.pathname === '/api/v4/leads') return this.listLeads(q, send);
    if ((m = /^\/api\/v4\/leads\/(\d+)$/.exec(url.pathname))) {
      const lead = this.leads.get(Number(m[1]));
      if (req.method === 'GET') return lead ? send(200, this.leadJson(lead, (q.get('with') ?? '').split(',').includes('contacts'))) : send(204);
      if (req.method === 'PATCH') {
        if (!lead) return problem(404, 'lead not found');
        const fields = (body as { custom_fields_values?: Array<{ field_id: number; values: Array<{ value: string | number }> }> }).custom_fields_values ?? [];
        const current = new Map((lead.custom_fields_values ?? []).map((f) => [f.field_id, f]));
        for (const f of fields) {
          if (typeof f.field_id !== 'number') return problem(400, 'custom_fields_values.field_id must be an integer');
          current.set(f.field_id, { field_id: f.field_id, values: f.values });
        }
        lead.custom_fields_values = [...current.values()];
        lead.updated_at = now();
        return send(200, { id: lead.id, updated_at: lead.updated_at, _links: { self: { href: `${this.url}/api/v4/leads/${lead.id}` } } });
      }
    }
    if ((m = /^\/api\/v4\/leads\/(\d+)\/notes$/.exec(url.pathname))) {
      const leadId = Number(m[1]);
      if (req.method === 'POST') {
        if (!this.leads.has(leadId)) return problem(400, 'entity not found');
        const notes = body as Array<{ note_type?: string; params?: { text?: string } }>;
        if (!Array.isArray(notes) || notes.some((n) => n.note_type !== 'common' || typeof n.params?.text !== 'string' || n.params.text === '')) {
          return problem(400, 'an array of common notes with params.text is expected');
        }
        const added = notes.map((n) => {
          const note: FakeAmoNote = { id: this.nextId++, entity_id: leadId, note_type: 'common', params: { text: n.params!.text! }, created_at: now() };
          this.notes.push(note);
          return note;
        });
        return send(200, { _embedded: { notes: added.map((n) => ({ id: n.id, entity_id: n.entity_id, request_id: '0' })) } });
      }
      if (req.method === 'GET') {
        const list = this.notesOf(leadId).filter((n) => !q.get('filter[note_type]') || n.note_type === q.get('filter[note_type]')).reverse();
        return list.length ? send(200, { _embedded: { notes: list } }) : send(204);
      }
    }
    if (req.method === 'GET' && (m = /^\/api\/v4\/(contacts|companies)\/(\d+)$/.exec(url.pathname))) {
      const c = (m[1] === 'contacts' ? this.contacts : this.companies).get(Number(m[2]));
      if (!c) return send(204);
      const custom = [
        ...(c.phone ? [{ field_id: 1, field_name: 'Телефон', field_code: 'PHONE', field_type: 'multitext', values: [{ value: c.phone, enum_id: 1, enum_code: 'WORK' }] }] : []),
        ...(c.email ? [{ field_id: 2, field_name: 'Email', field_code: 'EMAIL', field_type: 'multitext', values: [{ value: c.email, enum_id: 3, enum_code: 'WORK' }] }] : []),
      ];
      return send(200, { id: c.id, name: c.name, first_name: '', last_name: '', custom_fields_values: custom.length ? custom : null });
    }
    return problem(404, 'not found');
  }

  /** A lead as leads-api answers it: its company always in `_embedded[companies]`, its contacts with `with=contacts`. */
  private leadJson(lead: FakeAmoLead, withContacts: boolean) {
    const { contacts, mainContact, company, ...rest } = lead;
    const main = mainContact ?? contacts[0];
    const companies = company === null ? [] : [{ id: company, _links: { self: { href: `${this.url}/api/v4/companies/${company}` } } }];
    return {
      ...rest,
      price: 0,
      account_id: this.accountId,
      _links: { self: { href: `${this.url}/api/v4/leads/${lead.id}` } },
      _embedded: {
        companies,
        ...(withContacts ? { contacts: contacts.map((id) => ({ id, is_main: id === main, _links: { self: { href: `${this.url}/api/v4/contacts/${id}` } } })) } : {}),
      },
    };
  }

  /** GET /api/v4/leads with filter[id][] (or filter[id]), filter[statuses][0][pipeline_id|status_id], filter[closed_at|updated_at][from|to], page, limit. */
  private listLeads(q: URLSearchParams, send: (status: number, body?: unknown) => void): void {
    const num = (k: string) => (q.has(k) ? Number(q.get(k)) : undefined);
    const ids = [...q.getAll('filter[id][]'), ...q.getAll('filter[id]')].map(Number);
    const pipeline = num('filter[statuses][0][pipeline_id]');
    const status = num('filter[statuses][0][status_id]');
    const range = (field: 'closed_at' | 'updated_at', v: number | null) => {
      const from = num(`filter[${field}][from]`);
      const to = num(`filter[${field}][to]`);
      return (from === undefined || (v !== null && v >= from)) && (to === undefined || (v !== null && v <= to));
    };
    const limit = Math.min(250, num('limit') ?? 50);
    const page = num('page') ?? 1;
    const all = [...this.leads.values()]
      .filter((l) => (ids.length === 0 || ids.includes(l.id)) && (pipeline === undefined || l.pipeline_id === pipeline) && (status === undefined || l.status_id === status))
      .filter((l) => range('closed_at', l.closed_at) && range('updated_at', l.updated_at))
      .sort((a, b) => a.id - b.id);
    const slice = all.slice((page - 1) * limit, page * limit);
    if (slice.length === 0) return send(204);
    const more = page * limit < all.length;
    send(200, {
      _page: page,
      _links: { self: { href: `${this.url}/api/v4/leads?page=${page}` }, ...(more ? { next: { href: `${this.url}/api/v4/leads?page=${page + 1}` } } : {}) },
      _embedded: { leads: slice.map((l) => this.leadJson(l, (q.get('with') ?? '').split(',').includes('contacts'))) },
    });
  }

  /**
   * The person allowed access on the consent page: where amoCRM sends the browser, the integration's
   * Redirect URI with a new authorization code, the state, this account's host as `referer` and the id.
   */
  authorize(state: string): string {
    const code = `def${randomBytes(24).toString('hex')}`;
    this.codes.set(code, Date.now() + 20 * 60_000);
    const target = new URL(this.oauthClient.redirectUri);
    target.searchParams.set('code', code);
    target.searchParams.set('state', state);
    target.searchParams.set('referer', new URL(this.url).host);
    target.searchParams.set('client_id', this.oauthClient.clientId);
    return target.toString();
  }

  /** GET /oauth: amoCRM's authorization page for the integration `client_id`, with its "Allow" button. */
  private consentPage(url: URL, res: http.ServerResponse, record: FakeAmoRequest): void {
    const known = url.searchParams.get('client_id') === this.oauthClient.clientId;
    record.status = known ? 200 : 400;
    const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
    const body = known
      ? `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>amoCRM: allow access</title></head><body><main><h1>Allow access to ${this.subdomain}.amocrm.ru?</h1>
<form method="post" action="/oauth/allow"><input type="hidden" name="state" value="${escape(url.searchParams.get('state') ?? '')}"><button type="submit">Allow</button></form></main></body></html>`
      : '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>amoCRM</title></head><body><main><h1>Unknown integration</h1></main></body></html>';
    res.writeHead(record.status, { 'content-type': 'text/html; charset=utf-8' }).end(body);
  }

  /**
   * POST /oauth2/access_token: grant_type=authorization_code (a code of the consent page, once, in its 20
   * minutes) or refresh_token (a new pair; the refresh token used stops working).
   */
  private token(raw: string, contentType: string, send: (status: number, body?: unknown, type?: string) => void, problem: (status: number, detail: string) => void): void {
    const body: Record<string, string> = contentType.includes('json') ? (JSON.parse(raw || '{}') as Record<string, string>) : Object.fromEntries(new URLSearchParams(raw));
    const c = this.oauthClient;
    if (body.client_id !== c.clientId || body.client_secret !== c.clientSecret || body.redirect_uri !== c.redirectUri) return problem(401, 'Client authentication failed');
    if (body.grant_type === 'authorization_code') {
      const expires = this.codes.get(body.code ?? '');
      this.codes.delete(body.code ?? '');
      if (expires === undefined || expires < Date.now()) return problem(400, 'Authorization code has been revoked');
      const pair = this.issueOAuthTokens();
      this.codeExchanges++;
      return send(200, { token_type: 'Bearer', expires_in: 86_400, access_token: pair.accessToken, refresh_token: pair.refreshToken }, 'application/json');
    }
    if (body.grant_type !== 'refresh_token') return problem(400, 'unsupported grant_type');
    if (this.refreshToken === '' || body.refresh_token !== this.refreshToken) return problem(400, 'Token has been revoked');
    const pair = this.issueOAuthTokens();
    this.refreshes++;
    send(200, { token_type: 'Bearer', expires_in: 86_400, access_token: pair.accessToken, refresh_token: pair.refreshToken }, 'application/json');
  }
}
