import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { counter, listenHttp, type ListeningHttpServer, type Logger } from '@rrs/runtime';
import type { Connectors } from './connectors';
import { queueEvents, type QueuedEvent } from './inbox';
import type { Connector } from './model';

/*
 * The CRMs' webhook endpoint, `POST /hooks/crm/<connector id>/<secret>`. It verifies what the CRM
 * allows (the unguessable secret in the URL for both; Bitrix24's `auth[application_token]` as well, both
 * compared in constant time), stores the events in the inbox in one transaction and answers 200: no CRM
 * or reviewServices call happens before the answer, so the CRM never waits on them nor retries because of them.
 */

const MAX_BODY_BYTES = 64 * 1024;
/** Bitrix24 events that can carry a won deal. */
const BITRIX24_DEAL_EVENTS = new Set(['ONCRMDEALADD', 'ONCRMDEALUPDATE']);

const received = counter({ name: 'connector_hooks_total', help: 'CRM webhook requests, by kind and outcome.', labelNames: ['kind', 'outcome'] });

export type HookAnswer = { status: number; body: Record<string, unknown> };

const answer = (status: number, code: string, detail: string): HookAnswer => ({ status, body: { code, detail } });

/** Form fields of a body; JSON objects are flattened to the same bracket names (`data[FIELDS][ID]`). */
export function hookFields(contentType: string, raw: string): Map<string, string> | HookAnswer {
  const type = contentType.split(';')[0].trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') return new Map(new URLSearchParams(raw));
  if (type === 'application/json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return answer(400, 'invalid_event', 'the body is not valid JSON');
    }
    const out = new Map<string, string>();
    const walk = (value: unknown, name: string): void => {
      if (value !== null && typeof value === 'object') {
        for (const [k, v] of Object.entries(value as Record<string, unknown>)) walk(v, name === '' ? k : `${name}[${k}]`);
      } else if (value !== undefined && value !== null) out.set(name, String(value));
    };
    walk(parsed, '');
    return out;
  }
  return answer(415, 'unsupported_media_type', 'send application/x-www-form-urlencoded (or application/json)');
}

/** What is kept of a body: every field but the credentials a CRM sends along (`auth[...]`). */
function storedPayload(fields: Map<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of fields) if (!k.startsWith('auth[')) out[k] = v;
  return out;
}

/**
 * amoCRM account webhooks (crm_platform/webhooks-format): `leads[status][<n>][id]` with `status_id`,
 * `pipeline_id`, `old_status_id`, `old_pipeline_id`; `leads[add][<n>]` for a lead created in a stage;
 * `leads[update][<n>]` for any change of a lead, with its current `status_id` and `pipeline_id` — a lead
 * that is (or becomes) won, or leaves won, is handled as a status change. One event per lead; other
 * entities and actions carry no deal stage and are not kept.
 */
export function amoCrmEvents(fields: Map<string, string>): QueuedEvent[] | HookAnswer {
  const body = storedPayload(fields);
  const events: QueuedEvent[] = [];
  for (const [key, id] of fields) {
    const match = /^leads\[(status|add|update)\]\[(\d+)\]\[id\]$/.exec(key);
    if (!match) continue;
    const at = (f: string) => fields.get(`leads[${match[1]}][${match[2]}][${f}]`) ?? '';
    if (!/^\d{1,18}$/.test(id)) return answer(400, 'invalid_event', `${key} must be a lead id`);
    events.push({ dealId: id, event: `leads.${match[1]}`, payload: { lead: { id, statusId: at('status_id'), pipelineId: at('pipeline_id'), oldStatusId: at('old_status_id'), oldPipelineId: at('old_pipeline_id') }, body } });
  }
  return events;
}

/** Bitrix24 ONCRMDEALADD / ONCRMDEALUPDATE (api-reference/crm/deals/events): `data[FIELDS][ID]` only. */
export function bitrix24Events(fields: Map<string, string>): QueuedEvent[] | HookAnswer {
  const event = (fields.get('event') ?? '').toUpperCase();
  if (!BITRIX24_DEAL_EVENTS.has(event)) return [];
  const id = fields.get('data[FIELDS][ID]') ?? '';
  if (!/^\d{1,18}$/.test(id)) return answer(400, 'invalid_event', 'data[FIELDS][ID] must be a deal id');
  return [{ dealId: id, event, payload: { body: storedPayload(fields) } }];
}

function tokenMatches(expected: string, given: string): boolean {
  const expectedBytes = Buffer.from(expected, 'utf8');
  const givenBytes = Buffer.from(given, 'utf8');
  // Equal lengths first (timingSafeEqual needs them); the length of expectedBytes token is no secret.
  return expectedBytes.length === givenBytes.length && timingSafeEqual(expectedBytes, givenBytes);
}

export interface HookDeps {
  connectors: Connectors;
  logger: Logger;
  /** Events were queued: wake the inbox worker of this process (others hear the NOTIFY). */
  onQueued(): void;
}

/** Judges one request; the HTTP server below only moves bytes. */
export async function handleHook(deps: HookDeps, request: { method: string; path: string; contentType: string; body: string }): Promise<HookAnswer> {
  const match = /^\/hooks\/crm\/([^/]+)\/([^/]+)\/?$/.exec(request.path);
  if (!match) return answer(404, 'not_found', 'no such hook');
  if (request.method !== 'POST') return answer(405, 'method_not_allowed', 'CRM webhooks are POST requests');
  const connector = await deps.connectors.verifyInbound(match[1], match[2]);
  if (!connector) return answer(404, 'not_found', 'no such hook');
  const fields = hookFields(request.contentType, request.body);
  if (!(fields instanceof Map)) return fields;
  if (connector.kind === 'bitrix24') {
    const expected = bitrix24Token(deps, connector);
    if (expected === '') {
      await deps.connectors.recordError(connector.id, 'application_token_missing', 'an event came, but the connector has no application token yet: set the token the outbound webhook shows');
      return answer(401, 'invalid_application_token', 'this connector has no application token yet; set the one the outbound webhook shows');
    }
    if (!tokenMatches(expected, fields.get('auth[application_token]') ?? '')) {
      return answer(401, 'invalid_application_token', 'auth[application_token] does not match the outbound webhook of this connector');
    }
    // The token is set and matches: the earlier "missing" is over.
    if (connector.lastErrorCode === 'application_token_missing') await deps.connectors.clearMissingToken(connector.id);
  }
  const events = connector.kind === 'amocrm' ? amoCrmEvents(fields) : bitrix24Events(fields);
  if (!Array.isArray(events)) return events;
  // A disabled connector keeps nothing: when enabled again, its reconciliation (whose cursor stood
  // still) finds the deals won meanwhile.
  if (!connector.enabled) return { status: 200, body: { accepted: 0, ignored: 'connector_disabled' } };
  if (events.length === 0) return { status: 200, body: { accepted: 0 } };
  await queueEvents(deps.connectors.pool, connector.id, 'webhook', events, { touchLastEvent: true });
  deps.onQueued();
  return { status: 200, body: { accepted: events.length } };
}

function bitrix24Token(deps: HookDeps, connector: Connector): string {
  const credentials = deps.connectors.credentials(connector);
  return credentials.kind === 'bitrix24' ? credentials.applicationToken : '';
}

export type RunningHooksServer = ListeningHttpServer;

/**
 * The endpoint as a Node request listener: what the hooks server runs, and what an embedding process
 * (the all-in-one) can mount on its own HTTP server for paths under `/hooks/crm/`.
 */
export function hooksRequestListener(deps: HookDeps): http.RequestListener {
  return (req, res) => {
    const send = (a: HookAnswer, kind = 'unknown') => {
      received.inc({ kind, outcome: String(a.status) });
      res.writeHead(a.status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...(a.status === 405 ? { allow: 'POST' } : {}), ...(a.status === 503 ? { 'retry-after': '5' } : {}) });
      res.end(JSON.stringify(a.body));
    };
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (tooLarge) return send(answer(413, 'payload_too_large', `at most ${MAX_BODY_BYTES} bytes`));
      const path = new URL(req.url ?? '/', 'http://hooks.invalid').pathname;
      handleHook(deps, { method: req.method ?? 'GET', path, contentType: req.headers['content-type'] ?? '', body: Buffer.concat(chunks).toString('utf8') }).then(
        (a) => send(a, path.startsWith('/hooks/crm/') ? 'crm' : 'unknown'),
        (err: unknown) => {
          // Nothing was stored: a 503 makes the CRM deliver it again (and reconciliation covers a CRM that does not).
          deps.logger.error({ err }, 'CRM webhook could not be stored');
          send(answer(503, 'service_unavailable', 'the event could not be stored; deliver it again'));
        },
      );
    });
    req.on('error', () => res.destroy());
  };
}

export async function startHooksServer(options: HookDeps & { host: string; port: number }): Promise<RunningHooksServer> {
  const server = http.createServer(hooksRequestListener(options));
  // CRM webhooks are small form bodies: a slow sender holds a connection for seconds, not minutes.
  server.requestTimeout = 15_000;
  server.headersTimeout = 10_000;
  return listenHttp(server, options);
}
