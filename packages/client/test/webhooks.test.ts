import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '@rrs/client';

/* Deliveries signed as docs/webhooks.md says: one signature, or two during a secret rotation. */

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const body = JSON.stringify({ type: 'webhook.test', timestamp: '2026-05-01T12:00:00.000Z', data: { endpointId: 'w1', message: 'A test event' } });

function signed(secrets: string[], at = new Date()) {
  const id = 'evt_0193a1b2';
  const signatures = secrets.map((s) => new Webhook(s).sign(id, at, body));
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signatures.join(' ') };
}

describe('verifyWebhook', () => {
  it('returns the event when the signature matches', () => {
    const key = secret();
    expect(verifyWebhook(key, body, signed([key]))).toEqual(JSON.parse(body));
  });

  it('during a rotation, both the new and the old secret verify; a third does not', () => {
    const [next, previous] = [secret(), secret()];
    const headers = signed([next, previous]);
    expect(verifyWebhook(next, body, headers).type).toBe('webhook.test');
    expect(verifyWebhook(previous, body, headers).type).toBe('webhook.test');
    expect(() => verifyWebhook(secret(), body, headers)).toThrow(WebhookVerificationError);
  });

  it('reads the headers in any case, from a record, a Headers object or Node\'s header object', () => {
    const key = secret();
    const headers = signed([key]);
    const shouted = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]));
    expect(verifyWebhook(key, Buffer.from(body), shouted).type).toBe('webhook.test');
    expect(verifyWebhook(key, body, new Headers(headers)).type).toBe('webhook.test');
  });

  it('refuses a missing header, an altered body and a timestamp over 5 minutes away', () => {
    const key = secret();
    const headers = signed([key]);
    const { 'webhook-signature': _dropped, ...unsigned } = headers;
    expect(() => verifyWebhook(key, body, unsigned)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(key, body.replace('A test', 'Another'), headers)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(key, body, signed([key], new Date(Date.now() - 6 * 60_000)))).toThrow(WebhookVerificationError);
  });
});
