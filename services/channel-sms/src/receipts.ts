import { createHash } from 'node:crypto';
import type { ListeningHttpServer, Logger } from '@rrs/runtime';
import { sameSecret, startReceiptEndpoint, StepOutcome, type ReceiptResult, type ReceiptRoute, type SendLog, type StepOutcome as Outcome, type StepResultPublisher } from '@rrs/sender-kit';

/** SMSC.ru message statuses that end a message (the others, −1 queued and 0 handed over, are not final). */
const SMSC_FINAL: Record<number, { outcome: Outcome; reason: string }> = {
  1: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'delivered' },
  2: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'read' },
  3: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'expired' },
  20: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'undeliverable' },
  22: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'invalid_phone' },
  23: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'prohibited' },
  24: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'provider_account_balance' },
  25: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'unavailable_phone' },
};

export function mapSmscStatus(status: number): { outcome: Outcome; reason: string } | null {
  return SMSC_FINAL[status] ?? null;
}


/**
 * Handles one SMSC status notification (`id`, `phone`, `status`, `sha1` = sha1("id:phone:status:password")):
 * a final status becomes a DELIVERED/UNDELIVERED step result for the step the message was sent for.
 */
export async function handleSmscReceipt(
  fields: URLSearchParams,
  deps: { results: StepResultPublisher; sendLog: SendLog; password: string },
): Promise<ReceiptResult> {
  const id = fields.get('id');
  const phone = fields.get('phone') ?? '';
  const status = fields.get('status');
  if (!id || status === null || !/^-?\d+$/.test(status)) return 'bad_request';
  const expected = createHash('sha1').update(`${id}:${phone}:${status}:${deps.password}`).digest('hex');
  if (!sameSecret((fields.get('sha1') ?? '').toLowerCase(), expected)) return 'bad_signature';
  const final = mapSmscStatus(Number(status));
  if (!final) return 'not_final';
  const sent = await deps.sendLog.findByProviderMessageId(id);
  if (!sent) return 'unknown_message';
  await deps.results.publish(sent, { outcome: final.outcome, reason: final.reason, providerMessageId: id, parts: sent.result.parts });
  return 'recorded';
}

/**
 * SMS.ru status codes (https://sms.ru/api/status, https://sms.ru/api/callback) that end a message; 100
 * queued, 101 handed to the operator and 102 in transit are not final.
 */
const SMSRU_FINAL: Record<number, { outcome: Outcome; reason: string }> = {
  103: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'delivered' },
  110: { outcome: StepOutcome.STEP_OUTCOME_DELIVERED, reason: 'read' },
  104: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'expired' },
  105: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'deleted_by_operator' },
  106: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'phone_failure' },
  107: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'undeliverable' },
  108: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'rejected' },
  150: { outcome: StepOutcome.STEP_OUTCOME_UNDELIVERED, reason: 'no_route' },
};

export function mapSmsRuStatus(status: number): { outcome: Outcome; reason: string } | null {
  return SMSRU_FINAL[status] ?? null;
}

/**
 * Handles one SMS.ru callback: `data[0]`, `data[1]`, … each `sms_status\n<sms_id>\n<code>\n<unix time>`
 * (other kinds of entries, e.g. incoming messages, are ignored). SMS.ru signs nothing: the callback URL
 * carries a secret path segment, checked by the server before this runs. Every entry is applied before
 * the answer, so SMS.ru retries the whole callback if one fails.
 */
export async function handleSmsRuCallback(fields: URLSearchParams, deps: { results: StepResultPublisher; sendLog: SendLog }): Promise<ReceiptResult> {
  const entries = [...fields].filter(([name]) => /^data\[\d*\]$/.test(name)).map(([, value]) => value.split('\n'));
  if (entries.length === 0) return 'bad_request';
  let recorded = false;
  for (const [kind, smsId, code] of entries) {
    if (kind !== 'sms_status') continue;
    if (!smsId || !/^-?\d+$/.test(code ?? '')) return 'bad_request';
    const final = mapSmsRuStatus(Number(code));
    if (!final) continue;
    const sent = await deps.sendLog.findByProviderMessageId(smsId);
    if (!sent) continue;
    await deps.results.publish(sent, { outcome: final.outcome, reason: final.reason, providerMessageId: smsId, parts: sent.result.parts, provider: sent.result.provider });
    recorded = true;
  }
  return recorded ? 'recorded' : 'not_final';
}

/**
 * The receipts endpoint, on its own port (`SMS_RECEIPTS_PORT`): `POST|GET /receipts/smsc` (form-encoded
 * or query string, signed, as SMSC sends it) and `POST /receipts/smsru/<secret>` (SMS.ru signs nothing:
 * the secret path segment is the credential, and a wrong one is told apart from no route by nothing).
 */
export async function startReceiptServer(options: {
  host: string;
  port: number;
  results: StepResultPublisher;
  sendLog: SendLog;
  /** SMSC's API password (its receipts are signed with it); unset = no SMSC receipts. */
  password?: string;
  /** Secret path segment of SMS.ru's callback (`POST /receipts/smsru/<secret>`); unset = no SMS.ru callbacks. */
  smsruSecret?: string;
  logger: Logger;
}): Promise<ListeningHttpServer> {
  const fieldsOf = (body: Buffer, url: URL) => {
    const fields = new URLSearchParams(url.search);
    for (const [name, value] of new URLSearchParams(body.toString('utf8'))) fields.set(name, value);
    return fields;
  };
  const routes: ReceiptRoute[] = [];
  if (options.password !== undefined) {
    const password = options.password;
    routes.push({ provider: 'smsc', methods: ['POST', 'GET'], matches: (path) => path === '/receipts/smsc', authorize: () => true, handle: (body, url) => handleSmscReceipt(fieldsOf(body, url), { ...options, password }) });
  }
  if (options.smsruSecret !== undefined) {
    const secret = options.smsruSecret;
    routes.push({
      provider: 'smsru',
      methods: ['POST'],
      matches: (path) => path.startsWith('/receipts/smsru/'),
      authorize: (_req, url) => sameSecret(url.pathname.slice('/receipts/smsru/'.length), secret),
      handle: (body, url) => handleSmsRuCallback(fieldsOf(body, url), options),
      // SMS.ru wants `100` for a callback it need not send again.
      okBody: '100',
    });
  }
  return startReceiptEndpoint({ channel: 'SMS', host: options.host, port: options.port, routes, logger: options.logger, maxBodyBytes: 16_384 });
}
