import { crmErrorOf, crmRequest, type CrmHttpOptions, type CrmResponse } from './http';
import { AMOCRM_WON_STATUS, CrmError, type CrmClient, type CrmContact, type CrmDeal, type WonStage } from './types';

/*
 * amoCRM REST API v4 (https://www.amocrm.ru/developers/content/crm_platform/leads-api, contacts-api,
 * companies-api, events-and-notes, filters-api, oauth/oauth): JSON over HTTPS on the account's own
 * address, a bearer token (long-lived, or an OAuth 2.0 access token refreshed with its refresh token on
 * 401). A missing entity is answered 204 No Content; too many requests 429.
 */

export type AmoCrmAuth =
  | { mode: 'long_lived'; token: string }
  | { mode: 'oauth'; clientId: string; clientSecret: string; redirectUri: string; accessToken: string; refreshToken: string };

/** Where the adapter gets its token, and how a refused OAuth token is replaced (once, for every worker). */
export interface AmoCrmAuthSource {
  get(): Promise<AmoCrmAuth>;
  /**
   * The credentials after `failedAccessToken` was refused: refreshed by `refresh` under the connector's
   * lock, or as another worker already refreshed them. The new tokens are stored before they are used.
   */
  replace(failedAccessToken: string, refresh: (auth: Extract<AmoCrmAuth, { mode: 'oauth' }>) => Promise<{ accessToken: string; refreshToken: string }>): Promise<AmoCrmAuth>;
}

const tokenOf = (auth: AmoCrmAuth) => (auth.mode === 'oauth' ? auth.accessToken : auth.token);

interface AmoLead {
  id: number;
  status_id: number;
  pipeline_id: number;
  closed_at?: number | null;
  updated_at?: number | null;
  custom_fields_values?: Array<{ field_id: number; values?: Array<{ value?: unknown }> }> | null;
  _embedded?: { contacts?: Array<{ id: number; is_main?: boolean }>; companies?: Array<{ id: number }> };
}

/** A contact or a company: both keep their phones and emails in custom fields coded PHONE and EMAIL. */
interface AmoContact {
  id: number;
  name?: string | null;
  first_name?: string | null;
  last_name?: string | null;
  custom_fields_values?: Array<{ field_code?: string | null; values?: Array<{ value?: unknown }> }> | null;
}

const unix = (v: number | null | undefined): Date | null => (typeof v === 'number' && v > 0 ? new Date(v * 1000) : null);

export function amoLeadToDeal(lead: AmoLead): CrmDeal {
  const contacts = lead._embedded?.contacts ?? [];
  const main = contacts.find((c) => c.is_main) ?? contacts[0];
  // A lead has at most one company (leads-api: `_embedded[companies]`, always embedded).
  const company = lead._embedded?.companies?.[0];
  const fields: Record<string, string> = { pipeline_id: String(lead.pipeline_id) };
  for (const field of lead.custom_fields_values ?? []) {
    const value = field.values?.[0]?.value;
    if (value !== undefined && value !== null) fields[String(field.field_id)] = String(value);
  }
  const closedAt = unix(lead.closed_at);
  return {
    id: String(lead.id),
    pipelineId: String(lead.pipeline_id),
    stageId: String(lead.status_id),
    stageSemantic: '',
    stageChangedAt: closedAt,
    cursorAt: closedAt,
    contactId: main ? String(main.id) : null,
    companyId: company ? String(company.id) : null,
    fields,
  };
}

function firstValue(contact: AmoContact, code: string): string {
  const field = (contact.custom_fields_values ?? []).find((f) => f.field_code === code);
  const value = field?.values?.find((x) => typeof x.value === 'string' && x.value.trim() !== '')?.value;
  return typeof value === 'string' ? value.trim() : '';
}

export class AmoCrmClient implements CrmClient {
  constructor(
    private readonly baseUrl: string,
    private readonly auth: AmoCrmAuthSource,
    private readonly http: CrmHttpOptions,
  ) {}

  /** A request with the current token; a 401 of an OAuth token refreshes it once and tries again. */
  private async call(method: string, path: string, body?: unknown): Promise<CrmResponse> {
    let auth = await this.auth.get();
    for (let refreshed = false; ; refreshed = true) {
      const res = await crmRequest(
        `${this.baseUrl}${path}`,
        {
          method,
          headers: { authorization: `Bearer ${tokenOf(auth)}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        },
        this.http,
        (r) => r.status === 429,
      );
      if (res.status !== 401 || auth.mode !== 'oauth' || refreshed) return res;
      auth = await this.auth.replace(auth.accessToken, (current) => this.refreshTokens(current));
    }
  }

  /** POST /oauth2/access_token with grant_type=refresh_token: a new access token and a new refresh token (the old one stops working). */
  private async refreshTokens(auth: Extract<AmoCrmAuth, { mode: 'oauth' }>): Promise<{ accessToken: string; refreshToken: string }> {
    const res = await crmRequest(
      `${this.baseUrl}/oauth2/access_token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ client_id: auth.clientId, client_secret: auth.clientSecret, grant_type: 'refresh_token', refresh_token: auth.refreshToken, redirect_uri: auth.redirectUri }),
      },
      this.http,
      (r) => r.status === 429,
    );
    const body = res.body as { access_token?: unknown; refresh_token?: unknown } | null;
    if (res.status === 200 && typeof body?.access_token === 'string' && typeof body.refresh_token === 'string') {
      return { accessToken: body.access_token, refreshToken: body.refresh_token };
    }
    if (res.status >= 400 && res.status < 500 && res.status !== 429) {
      throw new CrmError('unauthorized', `amoCRM refused the refresh token (${res.status}); connect the integration again`, { status: res.status });
    }
    throw crmErrorOf(res, 'amoCRM token refresh');
  }

  async getDeal(id: string): Promise<CrmDeal | null> {
    const res = await this.call('GET', `/api/v4/leads/${encodeURIComponent(id)}?with=contacts`);
    if (res.status === 204 || res.status === 404) return null;
    if (res.status !== 200) throw crmErrorOf(res, `amoCRM GET lead ${id}`);
    return amoLeadToDeal(res.body as AmoLead);
  }

  /** GET /api/v4/contacts/{id} or /api/v4/companies/{id}: the name and the first email and phone. */
  private async person(kind: CrmContact['kind'], id: string): Promise<CrmContact | null> {
    const path = kind === 'contact' ? 'contacts' : 'companies';
    const res = await this.call('GET', `/api/v4/${path}/${encodeURIComponent(id)}`);
    if (res.status === 204 || res.status === 404) return null;
    if (res.status !== 200) throw crmErrorOf(res, `amoCRM GET ${kind} ${id}`);
    const found = res.body as AmoContact;
    const name = (found.name ?? '').trim() || [found.first_name, found.last_name].filter(Boolean).join(' ').trim();
    return { kind, id: String(found.id), name, email: firstValue(found, 'EMAIL'), phone: firstValue(found, 'PHONE') };
  }

  async customerOf(deal: CrmDeal): Promise<CrmContact | null> {
    if (deal.contactId) return this.person('contact', deal.contactId);
    return deal.companyId ? this.person('company', deal.companyId) : null;
  }

  /** GET /api/v4/leads?filter[id][]=…, 250 a request (filters-api: `filter[id]` takes an array). */
  async getDeals(ids: string[]): Promise<CrmDeal[]> {
    const deals: CrmDeal[] = [];
    for (let at = 0; at < ids.length; at += 250) {
      const query = new URLSearchParams({ with: 'contacts', limit: '250' });
      for (const id of ids.slice(at, at + 250)) query.append('filter[id][]', id);
      const res = await this.call('GET', `/api/v4/leads?${query}`);
      if (res.status === 204) continue;
      if (res.status !== 200) throw crmErrorOf(res, 'amoCRM GET leads by id');
      deals.push(...((res.body as { _embedded?: { leads?: AmoLead[] } })._embedded?.leads ?? []).map(amoLeadToDeal));
    }
    return deals;
  }

  /** The won (pipeline, status) pairs to list: the configured ones, or status 142 of every pipeline. */
  private async wonPairs(wonStages: WonStage[]): Promise<WonStage[]> {
    if (wonStages.length > 0 && wonStages.every((s) => s.pipelineId !== '')) return wonStages;
    const res = await this.call('GET', '/api/v4/leads/pipelines');
    if (res.status !== 200) throw crmErrorOf(res, 'amoCRM GET pipelines');
    const pipelines = ((res.body as { _embedded?: { pipelines?: Array<{ id: number }> } })._embedded?.pipelines ?? []).map((p) => String(p.id));
    if (wonStages.length === 0) return pipelines.map((pipelineId) => ({ pipelineId, stageId: AMOCRM_WON_STATUS }));
    return wonStages.flatMap((s) => (s.pipelineId !== '' ? [s] : pipelines.map((pipelineId) => ({ pipelineId, stageId: s.stageId }))));
  }

  /**
   * GET /api/v4/leads filtered by one (pipeline, status) at a time (the API filters one stage of one
   * pipeline per filter) and by closed_at from `since`, 250 a page.
   */
  async *listWonDeals(since: Date, wonStages: WonStage[]): AsyncGenerator<CrmDeal[]> {
    for (const pair of await this.wonPairs(wonStages)) {
      for (let page = 1; ; page++) {
        const query = new URLSearchParams({
          'filter[statuses][0][pipeline_id]': pair.pipelineId,
          'filter[statuses][0][status_id]': pair.stageId,
          'filter[closed_at][from]': String(Math.floor(since.getTime() / 1000)),
          with: 'contacts',
          limit: '250',
          page: String(page),
        });
        const res = await this.call('GET', `/api/v4/leads?${query}`);
        if (res.status === 204) break;
        if (res.status !== 200) throw crmErrorOf(res, 'amoCRM GET leads');
        const body = res.body as { _embedded?: { leads?: AmoLead[] }; _links?: { next?: unknown } };
        const leads = body._embedded?.leads ?? [];
        if (leads.length > 0) yield leads.map(amoLeadToDeal);
        if (!body._links?.next || leads.length === 0) break;
      }
    }
  }

  async addNote(dealId: string, text: string): Promise<void> {
    const res = await this.call('POST', `/api/v4/leads/${encodeURIComponent(dealId)}/notes`, [{ note_type: 'common', params: { text } }]);
    if (res.status !== 200) throw crmErrorOf(res, `amoCRM POST note of lead ${dealId}`);
  }

  async hasNote(dealId: string, marker: string): Promise<boolean> {
    const query = new URLSearchParams({ 'filter[note_type]': 'common', limit: '250', 'order[id]': 'desc' });
    const res = await this.call('GET', `/api/v4/leads/${encodeURIComponent(dealId)}/notes?${query}`);
    if (res.status === 204) return false;
    if (res.status !== 200) throw crmErrorOf(res, `amoCRM GET notes of lead ${dealId}`);
    const notes = (res.body as { _embedded?: { notes?: Array<{ params?: { text?: unknown } }> } })._embedded?.notes ?? [];
    return notes.some((n) => typeof n.params?.text === 'string' && n.params.text.includes(marker));
  }

  async setDealFields(dealId: string, values: Record<string, string | number>): Promise<void> {
    const custom = Object.entries(values).map(([fieldId, value]) => ({ field_id: Number(fieldId), values: [{ value }] }));
    const res = await this.call('PATCH', `/api/v4/leads/${encodeURIComponent(dealId)}`, { custom_fields_values: custom });
    if (res.status !== 200) throw crmErrorOf(res, `amoCRM PATCH lead ${dealId}`);
  }
}
