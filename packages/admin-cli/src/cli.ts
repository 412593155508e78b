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
  request(f: Flags): Request;
}

type Flags = Record<string, string | number | boolean | string[] | undefined>;

const org: FlagSpec = { kind: 'string', required: true, help: 'organization id' };
const enc = encodeURIComponent;
const s = (v: unknown) => v as string;

/** Only the flags given go into a body, so PATCH changes just those fields. */
function pick(f: Flags, mapping: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [flag, field] of Object.entries(mapping)) if (f[flag] !== undefined) out[field] = f[flag];
  return out;
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

function reviewLinks(values: string[] | undefined): Array<{ provider: string; url: string }> | undefined {
  if (values === undefined) return undefined;
  return values.map((v) => {
    const i = v.indexOf('=');
    if (i <= 0) throw new UsageError(`--review-link must be provider=url, got ${JSON.stringify(v)}`);
    return { provider: v.slice(0, i), url: v.slice(i + 1) };
  });
}

/** `EMAIL:0,SMS:60` → steps. */
function steps(text: string): Array<{ channel: string; delayMinutes: number }> {
  return text.split(',').map((part) => {
    const m = /^\s*([A-Za-z][A-Za-z0-9_]*)(?::(\d+))?\s*$/.exec(part);
    if (!m) throw new UsageError(`--steps must look like EMAIL:0,SMS:60, got ${JSON.stringify(text)}`);
    return { channel: m[1].toUpperCase(), delayMinutes: m[2] === undefined ? 0 : Number(m[2]) };
  });
}

const locationFlags = (nameRequired: boolean): Record<string, FlagSpec> => ({
  org,
  name: { kind: 'string', required: nameRequired, help: 'location name' },
  address: { kind: 'string', help: 'street address' },
  city: { kind: 'string', help: 'city' },
  'time-zone': { kind: 'string', help: "IANA zone; empty = the organization's" },
  'review-link': { kind: 'list', help: 'provider=https://… (repeat for several)' },
});

export const COMMANDS: Record<string, Command> = {
  'orgs:create': { summary: 'Create an organization', flags: orgFlags(true), request: (f) => ({ method: 'POST', path: '/organizations', body: pick(f, ORG_FIELDS) }) },
  'orgs:list': {
    summary: 'List organizations (one page)',
    flags: { limit: { kind: 'int', help: 'page size, 1..500' }, after: { kind: 'string', help: 'nextAfter of the previous page' } },
    request: (f) => {
      const q = new URLSearchParams();
      if (f.limit !== undefined) q.set('limit', String(f.limit));
      if (f.after !== undefined) q.set('after', s(f.after));
      return { method: 'GET', path: `/organizations${q.size ? `?${q}` : ''}` };
    },
  },
  'orgs:get': { summary: 'Get an organization', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}` }) },
  'orgs:update': { summary: 'Update an organization (only the flags given)', flags: { org, ...orgFlags(false) }, request: (f) => ({ method: 'PATCH', path: `/organizations/${enc(s(f.org))}`, body: pick(f, ORG_FIELDS) }) },

  'keys:issue': {
    summary: 'Issue an API key (the secret is printed once)',
    flags: { org, name: { kind: 'string', help: 'label' }, scopes: { kind: 'string', help: 'comma-separated; default every scope' } },
    request: (f) => ({ method: 'POST', path: `/organizations/${enc(s(f.org))}/api-keys`, body: { ...pick(f, { name: 'name' }), ...(f.scopes !== undefined ? { scopes: s(f.scopes).split(',').map((x) => x.trim()).filter(Boolean) } : {}) } }),
  },
  'keys:list': { summary: 'List API keys', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/api-keys` }) },
  'keys:revoke': { summary: 'Revoke an API key', flags: { org, key: { kind: 'string', required: true, help: 'key id' } }, request: (f) => ({ method: 'DELETE', path: `/organizations/${enc(s(f.org))}/api-keys/${enc(s(f.key))}` }) },

  'locations:create': {
    summary: 'Create a location',
    flags: locationFlags(true),
    request: (f) => ({ method: 'POST', path: `/organizations/${enc(s(f.org))}/locations`, body: { ...pick(f, { name: 'name', address: 'address', city: 'city', 'time-zone': 'timeZone' }), ...(f['review-link'] ? { reviewLinks: reviewLinks(f['review-link'] as string[]) } : {}) } }),
  },
  'locations:list': { summary: 'List locations', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/locations` }) },
  'locations:get': { summary: 'Get a location', flags: { org, location: { kind: 'string', required: true, help: 'location id' } }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/locations/${enc(s(f.location))}` }) },
  'locations:update': {
    summary: 'Update a location (only the flags given; --review-link replaces all links)',
    flags: { ...locationFlags(false), location: { kind: 'string', required: true, help: 'location id' }, 'clear-review-links': { kind: 'switch', help: 'remove every review link' } },
    request: (f) => {
      const body: Record<string, unknown> = pick(f, { name: 'name', address: 'address', city: 'city', 'time-zone': 'timeZone' });
      if (f['review-link'] && f['clear-review-links']) throw new UsageError('give --review-link or --clear-review-links, not both');
      if (f['review-link']) body.reviewLinks = reviewLinks(f['review-link'] as string[]);
      if (f['clear-review-links']) body.reviewLinks = [];
      return { method: 'PATCH', path: `/organizations/${enc(s(f.org))}/locations/${enc(s(f.location))}`, body };
    },
  },
  'locations:delete': { summary: 'Delete a location', flags: { org, location: { kind: 'string', required: true, help: 'location id' } }, request: (f) => ({ method: 'DELETE', path: `/organizations/${enc(s(f.org))}/locations/${enc(s(f.location))}` }) },

  'flows:create': {
    summary: 'Create a flow',
    flags: { org, name: { kind: 'string', required: true, help: 'flow name' }, steps: { kind: 'string', required: true, help: 'CHANNEL:delayMinutes,… e.g. EMAIL:0,SMS:60' }, default: { kind: 'switch', help: 'make it the default flow' } },
    request: (f) => ({ method: 'POST', path: `/organizations/${enc(s(f.org))}/flows`, body: { name: f.name, steps: steps(s(f.steps)), ...(f.default ? { isDefault: true } : {}) } }),
  },
  'flows:list': { summary: 'List flows', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/flows` }) },
  'flows:update': {
    summary: 'Replace the name and steps of a flow',
    flags: { org, flow: { kind: 'string', required: true, help: 'flow id' }, name: { kind: 'string', required: true, help: 'flow name' }, steps: { kind: 'string', required: true, help: 'CHANNEL:delayMinutes,…' } },
    request: (f) => ({ method: 'PUT', path: `/organizations/${enc(s(f.org))}/flows/${enc(s(f.flow))}`, body: { name: f.name, steps: steps(s(f.steps)) } }),
  },
  'flows:set-default': { summary: "Make a flow the organization's default", flags: { org, flow: { kind: 'string', required: true, help: 'flow id' } }, request: (f) => ({ method: 'POST', path: `/organizations/${enc(s(f.org))}/flows/${enc(s(f.flow))}/default` }) },

  'templates:list': { summary: 'List message templates', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/templates` }) },
  'templates:set': {
    summary: "Set a channel's message template",
    flags: { org, channel: { kind: 'string', required: true, help: 'EMAIL, SMS, MAX, TELEGRAM, …' }, subject: { kind: 'string', help: 'EMAIL only' }, body: { kind: 'string', required: true, help: 'text with {{name}}, {{location}}, {{link}}' } },
    request: (f) => ({ method: 'PUT', path: `/organizations/${enc(s(f.org))}/templates/${enc(s(f.channel).toUpperCase())}`, body: pick(f, { subject: 'subject', body: 'body' }) }),
  },
  'templates:reset': { summary: "Go back to a channel's default template", flags: { org, channel: { kind: 'string', required: true, help: 'channel key' } }, request: (f) => ({ method: 'DELETE', path: `/organizations/${enc(s(f.org))}/templates/${enc(s(f.channel).toUpperCase())}` }) },

  'channels:list': { summary: 'Which channels are configured', flags: { org }, request: (f) => ({ method: 'GET', path: `/organizations/${enc(s(f.org))}/channels` }) },
  'channels:set': {
    summary: 'Configure a channel',
    flags: { org, channel: { kind: 'string', required: true, help: 'channel key' }, configured: { kind: 'bool', required: true, help: 'true | false' } },
    request: (f) => ({ method: 'PUT', path: `/organizations/${enc(s(f.org))}/channels/${enc(s(f.channel).toUpperCase())}`, body: { configured: f.configured } }),
  },

  'sms:credit': {
    summary: 'Add SMS parts to the balance',
    flags: { org, parts: { kind: 'int', required: true, help: 'parts to add' }, reason: { kind: 'string', help: 'kept in the ledger' } },
    request: (f) => ({ method: 'POST', path: `/organizations/${enc(s(f.org))}/sms-balance/credits`, body: pick(f, { parts: 'parts', reason: 'reason' }) }),
  },
};

export function parseFlags(args: string[], specs: Record<string, FlagSpec>): Flags {
  const flags: Flags = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(arg);
    if (!m) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const [, name, inline] = m;
    const spec = specs[name];
    if (!spec) throw new UsageError(`unknown flag --${name}`);
    if (spec.kind === 'switch') {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (i + 1 >= args.length || /^--[a-z]/.test(args[i + 1])) throw new UsageError(`--${name} needs a value`);
      value = args[++i];
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
  for (const [name, c] of Object.entries(COMMANDS)) {
    lines.push(`  ${name.padEnd(18)} ${c.summary}`);
    for (const [flag, spec] of Object.entries(c.flags)) lines.push(`      --${flag}${spec.kind === 'switch' ? '' : ' <value>'}${spec.required ? '' : ' (optional)'}  ${spec.help}`);
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
    const token = env.ADMIN_TOKEN;
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
