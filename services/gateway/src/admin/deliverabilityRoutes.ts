import { z } from 'zod';
import { ConflictError } from '@rrs/runtime';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import type { AuthKind } from '../http/auth';
import { defineRoute, type Route } from '../http/route';
import { checkSenderDomain, type TxtLookup } from '../useCases/deliverability';

/*
 * GET …/deliverability: whether mail of the running email sender will be accepted (SPF, DKIM, DMARC of
 * its sender domain, looked up in DNS now). The admin API (the operator, who publishes the records) and
 * the account API (the console's Channels page, read-only) serve the same route.
 */

const RecordCheck = z.object({
  check: z.enum(['spf', 'dkim', 'dmarc']),
  selector: z.string().nullable().meta({ description: 'The DKIM selector; null for SPF and DMARC.' }),
  status: z.enum(['pass', 'fail', 'not_checked', 'dns_error']).meta({ description: '`not_checked`: not ours to check (the relay or Postmark signs; no SMTP to authorize). `dns_error`: DNS did not answer.' }),
  name: z.string().meta({ description: 'The DNS name looked up (TXT).' }),
  found: z.array(z.string()).meta({ description: 'The records of the kind found there, as published.' }),
  detail: z.string(),
  record: z.string().nullable().meta({ description: 'The TXT record to publish at `name` (or to keep there).' }),
});

const Deliverability = z.object({
  domain: z.string().meta({ description: "The From address's domain (EMAIL_FROM)." }),
  checkedAt: z.string(),
  passed: z.boolean().meta({ description: 'No check failed or went unanswered (a `not_checked` one does not count against it).' }),
  checks: z.array(RecordCheck),
});

const EXAMPLE_KEY = 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQAB';
const EXAMPLE = {
  domain: 'example.com',
  checkedAt: '2026-05-01T09:00:00.000Z',
  passed: false,
  checks: [
    { check: 'spf', selector: null, status: 'pass', name: 'example.com', found: ['v=spf1 include:_spf.mail.example ~all'], detail: 'Authorizes include:_spf.mail.example.', record: 'v=spf1 include:_spf.mail.example ~all' },
    { check: 'dkim', selector: 'rrs2026', status: 'fail', name: 'rrs2026._domainkey.example.com', found: [], detail: 'No DKIM key is published for selector rrs2026: receivers cannot verify its signatures.', record: `v=DKIM1; k=rsa; p=${EXAMPLE_KEY}` },
    { check: 'dmarc', selector: null, status: 'pass', name: '_dmarc.example.com', found: ['v=DMARC1; p=quarantine'], detail: 'Policy p=quarantine; our DKIM signature (d=example.com) aligns with the From domain.', record: 'v=DMARC1; p=quarantine' },
  ],
};

const NO_EMAIL_SENDER = {
  status: 409,
  code: 'email_sender_not_running',
  description: 'No channel-email sender is running (or it is of a version that does not announce its sender domain), so there is no sender domain to check.',
};

export interface DeliverabilityDeps {
  channelCatalog?: ChannelCatalogSource;
  /** TXT look-ups through DNS_RESOLVER. */
  lookup: TxtLookup;
}

export function deliverabilityRoute(deps: DeliverabilityDeps, auth: Extract<AuthKind, 'adminToken' | 'session'>, path: string): Route {
  return defineRoute({
    method: 'GET',
    path,
    operationId: 'checkDeliverability',
    summary: 'Check the sender domain: SPF, DKIM, DMARC',
    description:
      "Looks up, in DNS now, what receiving servers check before they accept the email channel's mail: SPF at the From domain (authorizing the servers it leaves from), the DKIM key of each selector it signs with (the one published must be ours), and DMARC. Each check passes or fails and gives the record to publish (docs/channels.md, \"Deliverability\").",
    tags: ['channels'],
    auth,
    responses: { 200: { description: 'The checks.', body: Deliverability, example: EXAMPLE } },
    errors: [NO_EMAIL_SENDER],
    handler: async () => {
      const sender = deps.channelCatalog?.list().find((entry) => entry.key === 'EMAIL')?.senderDomain;
      if (!sender?.domain) throw new ConflictError(NO_EMAIL_SENDER.code, 'no running email sender announces its sender domain: start channel-email (of this version)');
      const report = await checkSenderDomain(sender, deps.lookup);
      return { body: { domain: report.domain, checkedAt: report.checkedAt.toISOString(), passed: report.checks.every((c) => c.status !== 'fail' && c.status !== 'dns_error'), checks: report.checks } };
    },
  });
}
