/**
 * `npm run admin -- <command> [--flags]`: one command per operation of the account admin API
 * (`/admin/v1`). Prints the response body as JSON on stdout; a refused request prints the problem
 * (application/problem+json) on stderr. Exit codes: 0 success, 1 the API refused or failed, 2 usage.
 */

export interface CliEnv {
  ADMIN_URL?: string;
  ADMIN_TOKEN?: string;
}

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

type FlagKind = 'string' | 'int' | 'bool' | 'switch' | 'list';

interface FlagSpec {
  kind: FlagKind;
  required?: boolean;
  help: string;
}

interface Request {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: unknown;
}

interface Command {
  summary: string;
  flags: Record<string, FlagSpec>;
  request(flags: Flags): Request;
}

type Flags = Record<string, string | number | boolean | string[] | undefined>;

const org: FlagSpec = { kind: 'string', required: true, help: 'organization id' };
const requiredId = (help: string): FlagSpec => ({ kind: 'string', required: true, help });

/** A string flag's value (parseFlags has checked that required ones are there). */
const text = (flags: Flags, name: string): string => flags[name] as string;

/** `/organizations/<org>` followed by the given path segments, each URL-encoded. */
function orgPath(flags: Flags, ...segments: string[]): string {
  return ['/organizations', text(flags, 'org'), ...segments].map((segment, index) => (index === 0 ? segment : encodeURIComponent(segment))).join('/');
}

/** Only the flags given go into a body, so PATCH changes just those fields. */
function pick(flags: Flags, mapping: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [flag, field] of Object.entries(mapping)) if (flags[flag] !== undefined) body[field] = flags[flag];
  return body;
}

const ORG_FIELDS = { name: 'name', plan: 'plan', 'email-confirmed': 'emailConfirmed', 'sms-balance': 'smsBalance', 'time-zone': 'timeZone', locale: 'locale', region: 'defaultRegion' };
const orgFlags = (nameRequired: boolean): Record<string, FlagSpec> => ({
  name: { kind: 'string', required: nameRequired, help: 'organization name' },
  plan: { kind: 'string', help: 'trial | standard | pro' },
  'email-confirmed': { kind: 'bool', help: 'true | false' },
  'sms-balance': { kind: 'int', help: 'SMS parts (create: opening balance; update: sets the balance)' },
  'time-zone': { kind: 'string', help: 'IANA zone, e.g. Europe/Moscow' },
  locale: { kind: 'string', help: 'en | ru' },
  region: { kind: 'string', help: 'default phone region, e.g. RU' },
});

/** `key=value` of a repeatable flag, split at the first `=`; the key must not be empty. */
function pair(flag: string, shape: string, value: string): [string, string] {
  const separator = value.indexOf('=');
  if (separator <= 0) throw new UsageError(`--${flag} must be ${shape}, got ${JSON.stringify(value)}`);
  return [value.slice(0, separator), value.slice(separator + 1)];
}

function reviewLinks(values: string[] | undefined): Array<{ provider: string; url: string }> | undefined {
  if (values === undefined) return undefined;
  return values.map((value) => {
    const [provider, url] = pair('review-link', 'provider=url', value);
    return { provider, url };
  });
}

/** `EMAIL:0,SMS:60` → steps. */
function steps(list: string): Array<{ channel: string; delayMinutes: number }> {
  return list.split(',').map((part) => {
    const match = /^\s*([A-Za-z][A-Za-z0-9_]*)(?::(\d+))?\s*$/.exec(part);
    if (!match) throw new UsageError(`--steps must look like EMAIL:0,SMS:60, got ${JSON.stringify(list)}`);
    const [, channel, delay] = match;
    return { channel: channel.toUpperCase(), delayMinutes: delay === undefined ? 0 : Number(delay) };
  });
}

const LOCATION_FIELDS = { name: 'name', address: 'address', city: 'city', 'time-zone': 'timeZone' };
const locationFlags = (nameRequired: boolean): Record<string, FlagSpec> => ({
  org,
  name: { kind: 'string', required: nameRequired, help: 'location name' },
  address: { kind: 'string', help: 'street address' },
  city: { kind: 'string', help: 'city' },
  'time-zone': { kind: 'string', help: "IANA zone; empty = the organization's" },
  'review-link': { kind: 'list', help: 'provider=https://… (repeat for several)' },
});

/** A channel key as the API spells it (upper case). */
const channelOf = (flags: Flags): string => text(flags, 'channel').toUpperCase();

const AMOCRM_FIELDS = {
  'amocrm-url': 'baseUrl', 'amocrm-token': 'longLivedToken', 'amocrm-client-id': 'clientId', 'amocrm-client-secret': 'clientSecret',
  'amocrm-redirect-uri': 'redirectUri', 'amocrm-access-token': 'accessToken', 'amocrm-refresh-token': 'refreshToken',
};
const BITRIX24_FIELDS = { 'bitrix24-webhook-url': 'webhookUrl', 'bitrix24-application-token': 'applicationToken' };
const WRITE_BACK_FIELDS = { note: 'note', 'rating-field': 'ratingField', 'feedback-field': 'feedbackField', 'reason-field': 'reasonField' };
const connectorFlags: Record<string, FlagSpec> = {
  name: { kind: 'string', help: 'connector name' },
  'amocrm-url': { kind: 'string', help: 'amoCRM account address, https://<subdomain>.amocrm.ru' },
  'amocrm-token': { kind: 'string', help: 'amoCRM long-lived token (or the OAuth flags below)' },
  'amocrm-client-id': { kind: 'string', help: 'amoCRM OAuth: integration ID' },
  'amocrm-client-secret': { kind: 'string', help: 'amoCRM OAuth: integration secret key' },
  'amocrm-redirect-uri': { kind: 'string', help: 'amoCRM OAuth: redirect URI' },
  'amocrm-access-token': { kind: 'string', help: 'amoCRM OAuth: access token' },
  'amocrm-refresh-token': { kind: 'string', help: 'amoCRM OAuth: refresh token' },
  'bitrix24-webhook-url': { kind: 'string', help: 'Bitrix24 inbound webhook, https://<portal>/rest/<user>/<code>/' },
  'bitrix24-application-token': { kind: 'string', help: "Bitrix24 outbound webhook's application token" },
  'won-stage': { kind: 'list', help: 'a won stage: STAGE or PIPELINE/STAGE, e.g. 142, 5512/142, 1/C1:WON (repeat for several)' },
  location: { kind: 'string', help: 'location id of the review requests' },
  'location-field': { kind: 'string', help: 'CRM field that picks the location (with --location-map)' },
  'location-map': { kind: 'list', help: 'CRM value=location id (repeat for several)' },
  flow: { kind: 'string', help: "flow id; left out: the organization's default flow" },
  note: { kind: 'bool', help: 'write a note to the deal: true | false' },
  'rating-field': { kind: 'string', help: 'deal field for the rating' },
  'feedback-field': { kind: 'string', help: 'deal field for the feedback' },
  'reason-field': { kind: 'string', help: 'deal field for the finish reason' },
};
const connectorId: FlagSpec = requiredId('connector id');

/** A connector body from its flags: only what is given, each credential and setting group as the API nests it. */
function connectorBody(flags: Flags): Record<string, unknown> {
  const body: Record<string, unknown> = pick(flags, { name: 'name', location: 'locationId', flow: 'flowId' });
  const amocrm = pick(flags, AMOCRM_FIELDS);
  if (Object.keys(amocrm).length > 0) body.amocrm = amocrm;
  const bitrix24 = pick(flags, BITRIX24_FIELDS);
  if (Object.keys(bitrix24).length > 0) body.bitrix24 = bitrix24;
  const writeBack = pick(flags, WRITE_BACK_FIELDS);
  if (Object.keys(writeBack).length > 0) body.writeBack = writeBack;
  if (flags['won-stage']) {
    body.wonStages = (flags['won-stage'] as string[]).map((stage) => {
      const separator = stage.indexOf('/');
      return separator < 0 ? { stageId: stage } : { pipelineId: stage.slice(0, separator), stageId: stage.slice(separator + 1) };
    });
  }
  if ((flags['location-field'] === undefined) !== (flags['location-map'] === undefined)) throw new UsageError('--location-field and --location-map go together');
  if (flags['location-map']) {
    body.locationMapping = { field: flags['location-field'], values: Object.fromEntries((flags['location-map'] as string[]).map((entry) => pair('location-map', 'value=location id', entry))) };
  }
  return body;
}

export const COMMANDS: Record<string, Command> = {
  'orgs:create': { summary: 'Create an organization', flags: orgFlags(true), request: (flags) => ({ method: 'POST', path: '/organizations', body: pick(flags, ORG_FIELDS) }) },
  'orgs:list': {
    summary: 'List organizations (one page)',
    flags: { limit: { kind: 'int', help: 'page size, 1..500' }, after: { kind: 'string', help: 'nextAfter of the previous page' } },
    request: (flags) => {
      const query = new URLSearchParams();
      if (flags.limit !== undefined) query.set('limit', String(flags.limit));
      if (flags.after !== undefined) query.set('after', text(flags, 'after'));
      return { method: 'GET', path: `/organizations${query.size ? `?${query}` : ''}` };
    },
  },
  'orgs:get': { summary: 'Get an organization', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags) }) },
  'orgs:update': { summary: 'Update an organization (only the flags given)', flags: { org, ...orgFlags(false) }, request: (flags) => ({ method: 'PATCH', path: orgPath(flags), body: pick(flags, ORG_FIELDS) }) },

  'keys:issue': {
    summary: 'Issue an API key (the secret is printed once)',
    flags: { org, name: { kind: 'string', help: 'label' }, scopes: { kind: 'string', help: 'comma-separated; default every scope' } },
    request: (flags) => ({
      method: 'POST',
      path: orgPath(flags, 'api-keys'),
      body: { ...pick(flags, { name: 'name' }), ...(flags.scopes !== undefined ? { scopes: text(flags, 'scopes').split(',').map((scope) => scope.trim()).filter(Boolean) } : {}) },
    }),
  },
  'keys:list': { summary: 'List API keys', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'api-keys') }) },
  'keys:revoke': { summary: 'Revoke an API key', flags: { org, key: requiredId('key id') }, request: (flags) => ({ method: 'DELETE', path: orgPath(flags, 'api-keys', text(flags, 'key')) }) },

  'members:invite': {
    summary: "Invite a person to the organization's console (prints the accept link once)",
    flags: { org, email: { kind: 'string', required: true, help: 'their email' }, role: { kind: 'string', help: 'owner (default) | admin | viewer' } },
    request: (flags) => ({ method: 'POST', path: orgPath(flags, 'invitations'), body: pick(flags, { email: 'email', role: 'role' }) }),
  },
  'members:reset-password': {
    summary: "Make a member's one-time password reset link (printed once)",
    flags: { org, member: requiredId('member id') },
    request: (flags) => ({ method: 'POST', path: orgPath(flags, 'members', text(flags, 'member'), 'password-reset') }),
  },
  'members:list': { summary: "List the organization's console people", flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'members') }) },

  'locations:create': {
    summary: 'Create a location',
    flags: locationFlags(true),
    request: (flags) => ({
      method: 'POST',
      path: orgPath(flags, 'locations'),
      body: { ...pick(flags, LOCATION_FIELDS), ...(flags['review-link'] ? { reviewLinks: reviewLinks(flags['review-link'] as string[]) } : {}) },
    }),
  },
  'locations:list': { summary: 'List locations', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'locations') }) },
  'locations:get': { summary: 'Get a location', flags: { org, location: requiredId('location id') }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'locations', text(flags, 'location')) }) },
  'locations:update': {
    summary: 'Update a location (only the flags given; --review-link replaces all links)',
    flags: { ...locationFlags(false), location: requiredId('location id'), 'clear-review-links': { kind: 'switch', help: 'remove every review link' } },
    request: (flags) => {
      const body: Record<string, unknown> = pick(flags, LOCATION_FIELDS);
      if (flags['review-link'] && flags['clear-review-links']) throw new UsageError('give --review-link or --clear-review-links, not both');
      if (flags['review-link']) body.reviewLinks = reviewLinks(flags['review-link'] as string[]);
      if (flags['clear-review-links']) body.reviewLinks = [];
      return { method: 'PATCH', path: orgPath(flags, 'locations', text(flags, 'location')), body };
    },
  },
  'locations:delete': { summary: 'Delete a location', flags: { org, location: requiredId('location id') }, request: (flags) => ({ method: 'DELETE', path: orgPath(flags, 'locations', text(flags, 'location')) }) },

  'flows:create': {
    summary: 'Create a flow',
    flags: { org, name: requiredId('flow name'), steps: requiredId('CHANNEL:delayMinutes,… e.g. EMAIL:0,SMS:60'), default: { kind: 'switch', help: 'make it the default flow' } },
    request: (flags) => ({ method: 'POST', path: orgPath(flags, 'flows'), body: { name: flags.name, steps: steps(text(flags, 'steps')), ...(flags.default ? { isDefault: true } : {}) } }),
  },
  'flows:list': { summary: 'List flows', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'flows') }) },
  'flows:update': {
    summary: 'Replace the name and steps of a flow',
    flags: { org, flow: requiredId('flow id'), name: requiredId('flow name'), steps: requiredId('CHANNEL:delayMinutes,…') },
    request: (flags) => ({ method: 'PUT', path: orgPath(flags, 'flows', text(flags, 'flow')), body: { name: flags.name, steps: steps(text(flags, 'steps')) } }),
  },
  'flows:set-default': { summary: "Make a flow the organization's default", flags: { org, flow: requiredId('flow id') }, request: (flags) => ({ method: 'POST', path: orgPath(flags, 'flows', text(flags, 'flow'), 'default') }) },

  'templates:list': { summary: 'List message templates', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'templates') }) },
  'templates:set': {
    summary: "Set a channel's message template",
    flags: { org, channel: requiredId('EMAIL, SMS, MAX, TELEGRAM, …'), subject: { kind: 'string', help: 'EMAIL only' }, body: requiredId('text with {{name}}, {{location}}, {{link}}') },
    request: (flags) => ({ method: 'PUT', path: orgPath(flags, 'templates', channelOf(flags)), body: pick(flags, { subject: 'subject', body: 'body' }) }),
  },
  'templates:reset': { summary: "Go back to a channel's default template", flags: { org, channel: requiredId('channel key') }, request: (flags) => ({ method: 'DELETE', path: orgPath(flags, 'templates', channelOf(flags)) }) },

  'channels:list': { summary: 'Which channels are configured', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'channels') }) },
  'channels:set': {
    summary: 'Configure a channel',
    flags: { org, channel: requiredId('channel key'), configured: { kind: 'bool', required: true, help: 'true | false' } },
    request: (flags) => ({ method: 'PUT', path: orgPath(flags, 'channels', channelOf(flags)), body: { configured: flags.configured } }),
  },

  'sms:credit': {
    summary: 'Add SMS parts to the balance',
    flags: { org, parts: { kind: 'int', required: true, help: 'parts to add' }, reason: { kind: 'string', help: 'kept in the ledger' } },
    request: (flags) => ({ method: 'POST', path: orgPath(flags, 'sms-balance', 'credits'), body: pick(flags, { parts: 'parts', reason: 'reason' }) }),
  },

  'connectors:create': {
    summary: 'Connect a CRM (prints the inbound URL to paste into it, once)',
    flags: { org, kind: requiredId('amocrm | bitrix24'), ...connectorFlags },
    request: (flags) => ({ method: 'POST', path: orgPath(flags, 'connectors'), body: { kind: flags.kind, ...connectorBody(flags) } }),
  },
  'connectors:list': { summary: 'List connectors with their status', flags: { org }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'connectors') }) },
  'connectors:get': { summary: 'Get a connector', flags: { org, connector: connectorId }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'connectors', text(flags, 'connector')) }) },
  'connectors:update': {
    summary: 'Update a connector (only the flags given)',
    flags: {
      org, connector: connectorId, ...connectorFlags,
      enabled: { kind: 'bool', help: 'true | false' },
      'rotate-secret': { kind: 'switch', help: 'issue a new inbound URL (printed once); the old one stops at once' },
      'clear-won-stages': { kind: 'switch', help: "back to the CRM's own won stages" },
      'clear-location': { kind: 'switch', help: 'remove the default location (the mapping alone decides)' },
      'clear-location-map': { kind: 'switch', help: 'remove the location mapping' },
      'clear-flow': { kind: 'switch', help: "back to the organization's default flow" },
    },
    request: (flags) => {
      const body = { ...pick(flags, { enabled: 'enabled' }), ...connectorBody(flags) };
      const clears: Array<[string, string, unknown]> = [['clear-won-stages', 'wonStages', []], ['clear-location', 'locationId', null], ['clear-location-map', 'locationMapping', null], ['clear-flow', 'flowId', null]];
      for (const [flag, field, value] of clears) {
        if (!flags[flag]) continue;
        if (body[field] !== undefined) throw new UsageError(`--${flag} goes with no other value of ${field}`);
        body[field] = value;
      }
      if (flags['rotate-secret']) body.rotateInboundSecret = true;
      return { method: 'PATCH', path: orgPath(flags, 'connectors', text(flags, 'connector')), body };
    },
  },
  'connectors:delete': { summary: 'Delete a connector (its inbound URL stops working)', flags: { org, connector: connectorId }, request: (flags) => ({ method: 'DELETE', path: orgPath(flags, 'connectors', text(flags, 'connector')) }) },
  'connectors:status': { summary: "A connector's last sync, last error and counts", flags: { org, connector: connectorId }, request: (flags) => ({ method: 'GET', path: orgPath(flags, 'connectors', text(flags, 'connector'), 'status') }) },
  'connectors:sync': { summary: 'Reconcile a connector now', flags: { org, connector: connectorId }, request: (flags) => ({ method: 'POST', path: orgPath(flags, 'connectors', text(flags, 'connector'), 'sync') }) },

  'deliverability:check': { summary: "Check the email sender domain's SPF, DKIM and DMARC in DNS, with the records to publish", flags: {}, request: () => ({ method: 'GET', path: '/deliverability' }) },
};

export function parseFlags(args: string[], specs: Record<string, FlagSpec>): Flags {
  const flags: Flags = {};
  for (let position = 0; position < args.length; position++) {
    const arg = args[position];
    const match = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(arg);
    if (!match) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const [, name, inline] = match;
    const spec = specs[name];
    if (!spec) throw new UsageError(`unknown flag --${name}`);
    if (spec.kind === 'switch') {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (position + 1 >= args.length || /^--[a-z]/.test(args[position + 1])) throw new UsageError(`--${name} needs a value`);
      value = args[++position];
    }
    if (spec.kind === 'list') flags[name] = [...((flags[name] as string[] | undefined) ?? []), value];
    else if (flags[name] !== undefined) throw new UsageError(`--${name} is given twice`);
    else if (spec.kind === 'int') {
      if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new UsageError(`--${name} must be an integer, got ${JSON.stringify(value)}`);
      flags[name] = Number(value);
    } else if (spec.kind === 'bool') {
      if (value !== 'true' && value !== 'false') throw new UsageError(`--${name} must be true or false, got ${JSON.stringify(value)}`);
      flags[name] = value === 'true';
    } else flags[name] = value;
  }
  for (const [name, spec] of Object.entries(specs)) if (spec.required && flags[name] === undefined) throw new UsageError(`--${name} is required (${spec.help})`);
  return flags;
}

export function usage(): string {
  const lines = ['Usage: npm run admin -- <command> [--flags]', '', 'Environment: ADMIN_URL (default http://localhost:8080), ADMIN_TOKEN (required).', '', 'Commands:'];
  for (const [name, command] of Object.entries(COMMANDS)) {
    lines.push(`  ${name.padEnd(18)} ${command.summary}`);
    for (const [flag, spec] of Object.entries(command.flags)) lines.push(`      --${flag}${spec.kind === 'switch' ? '' : ' <value>'}${spec.required ? '' : ' (optional)'}  ${spec.help}`);
  }
  return lines.join('\n');
}

const TIMEOUT_MS = 30_000;

/** Runs one command; returns the process exit code. */
export async function runCli(argv: string[], env: CliEnv, io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    io.out(usage());
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  try {
    if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}; run \`npm run admin -- help\``);
    const flags = parseFlags(rest, command.flags);
    // The gateway's ADMIN_TOKEN may list several tokens (rotation); the first one is used.
    const token = env.ADMIN_TOKEN?.split(',')[0].trim();
    if (!token) throw new UsageError('set ADMIN_TOKEN to the admin token of the gateway');
    const base = (env.ADMIN_URL || 'http://localhost:8080').replace(/\/+$/, '');
    const req = command.request(flags);
    let url: URL;
    try {
      url = new URL(`${base}/admin/v1${req.path}`);
    } catch {
      throw new UsageError(`ADMIN_URL is not a URL: ${JSON.stringify(base)}`);
    }
    const res = await fetch(url, {
      method: req.method,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(req.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: req.body === undefined ? undefined : JSON.stringify(req.body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await res.text();
    let body: unknown = text === '' ? null : text;
    try {
      if (text !== '') body = JSON.parse(text);
    } catch {
      /* not JSON: printed as text */
    }
    if (!res.ok) {
      io.err(JSON.stringify(body, null, 2));
      return 1;
    }
    io.out(JSON.stringify(res.status === 204 ? { ok: true } : body, null, 2));
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`error: ${err.message}`);
      return 2;
    }
    io.err(JSON.stringify({ code: 'request_failed', detail: `could not reach the admin API: ${(err as Error).message}` }, null, 2));
    return 1;
  }
}
