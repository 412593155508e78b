import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks v1 signing: HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the
 * base64-decoded part of the secret after `whsec_`, sent as `v1,<base64>`.
 */
export const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret starts with whsec_');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

export function sign(secret: string, webhookId: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret)).update(`${webhookId}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The `webhook-signature` header: one signature per live secret, space-separated (current first). */
export function signatureHeader(secrets: readonly string[], webhookId: string, timestampSeconds: number, body: string): string {
  return secrets.map((s) => sign(s, webhookId, timestampSeconds, body)).join(' ');
}

