import type { CrmAuthMode } from '@rrs/proto';
import { InvalidError, type FieldProblem } from '@rrs/runtime';
import { z } from 'zod';
import type { AmoCrmAuth } from './crm/amocrm';
import { CRM_KINDS, type CrmKind, type WonStage } from './crm/types';

/*
 * A connector's settings and credentials, and the rules of their input. Every rule is here once; the
 * gRPC transport hands the request's fields in and gets domain objects or an InvalidError naming each
 * offending field by a JSON pointer in the admin API's words (`/amocrm/baseUrl`, `/wonStages/0/stageId`).
 */

export interface WriteBackSettings {
  note: boolean;
  ratingField: string;
  feedbackField: string;
  reasonField: string;
}

export interface LocationMapping {
  field: string;
  values: Record<string, string>;
}

export interface ConnectorSettings {
  wonStages: WonStage[];
  locationId: string;
  locationMapping: LocationMapping | null;
  flowId: string;
  writeBack: WriteBackSettings;
}

export type ConnectorCredentials = { kind: 'amocrm'; auth: AmoCrmAuth } | { kind: 'bitrix24'; webhookUrl: string; applicationToken: string };

export interface Connector {
  id: string;
  organizationId: string;
  kind: CrmKind;
  name: string;
  enabled: boolean;
  crmUrl: string;
  authMode: CrmAuthMode;
  settings: ConnectorSettings;
  activeSince: Date;
  syncCursor: Date;
  nextSyncAt: Date;
  lastSyncAt: Date | null;
  lastEventAt: Date | null;
  lastError: string | null;
  lastErrorCode: string | null;
  lastErrorAt: Date | null;
  lastSuccessAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** secretBox-sealed ConnectorCredentials (context `connector:<id>:credentials`). */
  sealedCredentials: string;
}

export const DEFAULT_WRITE_BACK: WriteBackSettings = { note: true, ratingField: '', feedbackField: '', reasonField: '' };

export const credentialsContext = (connectorId: string) => `connector:${connectorId}:credentials`;

/** Input as the transport hands it over: plain strings, '' for "not given". */
export interface AmoCrmCredentialsInput {
  baseUrl: string;
  longLivedToken: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  accessToken: string;
  refreshToken: string;
}

export interface Bitrix24CredentialsInput {
  webhookUrl: string;
  applicationToken: string;
}

export interface SettingsInput {
  wonStages?: WonStage[];
  locationId?: string;
  locationMapping?: LocationMapping | null;
  flowId?: string;
  writeBack?: WriteBackSettings;
}

const AMOCRM_HOST = /^[a-z0-9][a-z0-9-]{0,62}\.(amocrm\.ru|amocrm\.com|kommo\.com)$/;
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const AMO_ID = /^\d{1,18}$/;
const B24_STAGE = /^[A-Za-z0-9_:-]{1,50}$/;
const B24_FIELD = /^[A-Z][A-Z0-9_]{0,99}$/;
const B24_CUSTOM_FIELD = /^UF_CRM_[A-Za-z0-9_]{1,90}$/;
const TOKEN = /^[\x21-\x7e]{1,4096}$/;

class Problems {
  readonly list: FieldProblem[] = [];
  add(pointer: string, detail: string): void {
    this.list.push({ pointer, detail });
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw new InvalidError(this.list);
  }
}

/** An https URL of the CRM (or, as a dev setting, plain http on loopback), or null after adding the problem. */
function crmUrl(p: Problems, pointer: string, value: string, allowHttp: boolean): URL | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    p.add(pointer, 'must be an absolute URL');
    return null;
  }
  const devLoopback = allowHttp && url.protocol === 'http:' && LOOPBACK.has(url.hostname);
  if (url.protocol !== 'https:' && !devLoopback) {
    p.add(pointer, 'must be an https URL');
    return null;
  }
  if (url.username || url.password || url.search || url.hash) {
    p.add(pointer, 'must not carry credentials, a query or a fragment');
    return null;
  }
  return url;
}

export function parseAmoCrmCredentials(input: AmoCrmCredentialsInput, allowHttp: boolean): { credentials: ConnectorCredentials; crmUrl: string; authMode: CrmAuthMode } {
  const problems = new Problems();
  const url = crmUrl(problems, '/amocrm/baseUrl', input.baseUrl.trim(), allowHttp);
  if (url && url.protocol === 'https:' && !AMOCRM_HOST.test(url.hostname)) problems.add('/amocrm/baseUrl', 'must be the account address, https://<subdomain>.amocrm.ru (or .amocrm.com, .kommo.com)');
  if (url && url.pathname !== '/' && url.pathname !== '') problems.add('/amocrm/baseUrl', 'must be the account address without a path');
  const oauthFields = ['clientId', 'clientSecret', 'redirectUri', 'accessToken', 'refreshToken'] as const;
  const anyOauth = oauthFields.some((f) => input[f] !== '');
  let auth: AmoCrmAuth | null = null;
  if (input.longLivedToken !== '' && anyOauth) problems.add('/amocrm/longLivedToken', 'give a long-lived token or the OAuth fields, not both');
  else if (input.longLivedToken !== '') {
    if (!TOKEN.test(input.longLivedToken)) problems.add('/amocrm/longLivedToken', 'must be the token as amoCRM shows it');
    else auth = { mode: 'long_lived', token: input.longLivedToken };
  } else if (anyOauth) {
    for (const f of oauthFields) if (input[f] === '') problems.add(`/amocrm/${f}`, 'is required for OAuth');
    for (const f of ['accessToken', 'refreshToken', 'clientSecret'] as const) if (input[f] !== '' && !TOKEN.test(input[f])) problems.add(`/amocrm/${f}`, 'must be printable characters without spaces');
    if (input.redirectUri !== '') {
      try {
        new URL(input.redirectUri);
      } catch {
        problems.add('/amocrm/redirectUri', 'must be the redirect URI of the integration');
      }
    }
    if (problems.list.length === 0) auth = { mode: 'oauth', clientId: input.clientId, clientSecret: input.clientSecret, redirectUri: input.redirectUri, accessToken: input.accessToken, refreshToken: input.refreshToken };
  } else problems.add('/amocrm/longLivedToken', 'a long-lived token, or the OAuth client id, secret, redirect URI and tokens, are required');
  problems.throwIfAny();
  return { credentials: { kind: 'amocrm', auth: auth! }, crmUrl: url!.origin, authMode: auth!.mode };
}

export function parseBitrix24Credentials(input: Bitrix24CredentialsInput, allowHttp: boolean): { credentials: ConnectorCredentials; crmUrl: string; authMode: CrmAuthMode } {
  const problems = new Problems();
  const url = crmUrl(problems, '/bitrix24/webhookUrl', input.webhookUrl.trim(), allowHttp);
  const path = url ? /^\/rest\/(\d+)\/([A-Za-z0-9]+)\/?$/.exec(url.pathname) : null;
  if (url && !path) problems.add('/bitrix24/webhookUrl', 'must be the inbound webhook URL, https://<portal>/rest/<user id>/<code>/');
  // Empty until the outbound webhook exists: it is made with the inbound URL this connector's creation
  // returns, and only then does Bitrix24 show its token. Events are refused until it is set.
  if (input.applicationToken !== '' && !/^[A-Za-z0-9]{8,128}$/.test(input.applicationToken)) problems.add('/bitrix24/applicationToken', 'must be the token the outbound webhook settings show');
  problems.throwIfAny();
  const webhookUrl = `${url!.origin}/rest/${path![1]}/${path![2]}/`;
  return { credentials: { kind: 'bitrix24', webhookUrl, applicationToken: input.applicationToken }, crmUrl: url!.origin, authMode: 'webhook' };
}

const settingsShape = z.object({
  wonStages: z.array(z.object({ pipelineId: z.string(), stageId: z.string() })).max(50),
  locationId: z.string().max(64),
  locationMapping: z.object({ field: z.string().max(100), values: z.record(z.string().max(200), z.string().min(1).max(64)) }).nullable(),
  flowId: z.string().max(64),
  writeBack: z.object({ note: z.boolean(), ratingField: z.string().max(100), feedbackField: z.string().max(100), reasonField: z.string().max(100) }),
});

/** Checks settings against the kind's id formats; returns them normalized (an empty mapping is none). */
export function checkSettings(kind: CrmKind, s: ConnectorSettings): ConnectorSettings {
  const problems = new Problems();
  const parsed = settingsShape.safeParse(s);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.add(`/${issue.path.join('/')}`, issue.message);
    problems.throwIfAny();
  }
  const mapping = s.locationMapping && s.locationMapping.field !== '' ? s.locationMapping : null;
  s.wonStages.forEach((w, i) => {
    if (kind === 'amocrm') {
      if (w.pipelineId !== '' && !AMO_ID.test(w.pipelineId)) problems.add(`/wonStages/${i}/pipelineId`, 'must be an amoCRM pipeline id (digits), or empty for every pipeline');
      if (!AMO_ID.test(w.stageId)) problems.add(`/wonStages/${i}/stageId`, 'must be an amoCRM status id (digits; 142 is won)');
    } else {
      if (w.pipelineId !== '' && !/^\d{1,10}$/.test(w.pipelineId)) problems.add(`/wonStages/${i}/pipelineId`, 'must be a Bitrix24 category id (digits), or empty');
      if (!B24_STAGE.test(w.stageId)) problems.add(`/wonStages/${i}/stageId`, 'must be a Bitrix24 STAGE_ID such as WON or C1:WON');
    }
  });
  if (mapping) {
    const fieldOk = kind === 'amocrm' ? AMO_ID.test(mapping.field) || mapping.field === 'pipeline_id' : B24_FIELD.test(mapping.field);
    if (!fieldOk) problems.add('/locationMapping/field', kind === 'amocrm' ? 'must be a custom field id of leads, or pipeline_id' : 'must be a deal field name such as UF_CRM_1721244482250 or CATEGORY_ID');
    if (Object.keys(mapping.values).length === 0) problems.add('/locationMapping/values', 'must map at least one value to a location');
    if (Object.keys(mapping.values).length > 500) problems.add('/locationMapping/values', 'at most 500 values');
  }
  if (s.locationId === '' && !mapping) problems.add('/locationId', 'a location, or a location mapping, is required');
  for (const setting of ['ratingField', 'feedbackField', 'reasonField'] as const) {
    const fieldId = s.writeBack[setting];
    if (fieldId === '') continue;
    const ok = kind === 'amocrm' ? AMO_ID.test(fieldId) : B24_CUSTOM_FIELD.test(fieldId);
    if (!ok) problems.add(`/writeBack/${setting}`, kind === 'amocrm' ? 'must be a custom fieldId id of leads (digits)' : 'must be a custom deal fieldId, UF_CRM_…');
  }
  problems.throwIfAny();
  return { ...s, locationMapping: mapping };
}

export function checkKind(kind: string): CrmKind {
  if (!(CRM_KINDS as readonly string[]).includes(kind)) throw InvalidError.field('/kind', 'must be amocrm or bitrix24');
  return kind as CrmKind;
}

export function checkName(name: string, pointer = '/name'): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200 || /[\u0000-\u001f\u007f]/.test(trimmed)) throw InvalidError.field(pointer, '1 to 200 characters without control characters');
  return trimmed;
}

/** The location of a deal: the mapped value of its field, else the connector's location; null when neither. */
export function locationOfDeal(settings: ConnectorSettings, fields: Record<string, string>): string | null {
  const mapping = settings.locationMapping;
  if (mapping) {
    const value = fields[mapping.field];
    if (value !== undefined && mapping.values[value]) return mapping.values[value];
  }
  return settings.locationId || null;
}
