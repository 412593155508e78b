import { z } from 'zod';
import { ConfigError, envField, readEnv, type Env } from '@rrs/runtime';
import addressparser from 'nodemailer/lib/addressparser';
import { providerOrder, senderBaseConfig, senderEnvShape, type SenderBaseConfig, type SinkProviderName } from '@rrs/sender-kit';
import { parseDkimKeys, type DkimSettings } from './dkim';

/** Email providers channel-email has adapters for. */
export const EMAIL_PROVIDER_NAMES = ['smtp', 'postmark'] as const;
export type EmailProviderName = (typeof EMAIL_PROVIDER_NAMES)[number];

export interface PostmarkConfig {
  baseUrl: string;
  serverToken: string;
  messageStream: string;
  timeoutMs: number;
  /** Password of the Basic credentials in the webhook URL Postmark calls; unset = no Postmark receipts. */
  webhookSecret?: string;
}

/**
 * An SMTP session carries one message at a time (the pipelined envelope, then the data, each waiting
 * for the server), so the sessions bound a replica's email rate. 5 (nodemailer's pool default) held
 * channel-email to a few hundred emails/s against a local server; 16 stays well under common servers'
 * per-client limits (Postfix `smtpd_client_connection_count_limit` 50).
 */
export const DEFAULT_SMTP_MAX_CONNECTIONS = 16;

/** How the sender's mail is authenticated (docs/channels.md, "DKIM and the sender domain"). */
export interface SenderAuthentication {
  /** The From address's domain. */
  domain: string;
  /** Our own DKIM signing (DKIM_SELECTORS, DKIM_PRIVATE_KEYS, DKIM_DOMAIN); unset = we do not sign. */
  dkim?: DkimSettings;
  /** DKIM_SIGNED_BY_RELAY=true: the SMTP relay signs for us (the explicit opt-out of our own signing). */
  dkimSignedByRelay: boolean;
  /** SPF terms that must authorize the servers our mail leaves from (EMAIL_SPF; default `a:<SMTP host>`). */
  spfTerms: string[];
}

export interface EmailConfig extends SenderBaseConfig {
  /** `smtp://user:pass@host:port` (STARTTLS when offered) or `smtps://…` (TLS from the start). */
  smtpUrl?: string;
  /** From header, e.g. `Reviews <reviews@example.com>`. */
  emailFrom: string;
  smtpTimeoutMs: number;
  postmark?: PostmarkConfig;
  /**
   * Providers in failover order (`EMAIL_PROVIDERS`, providerOrder): `['sink']` when none is configured
   * outside production, or when named (`EMAIL_PROVIDERS=sink`, the only way to a sink in production).
   */
  providers: (EmailProviderName | SinkProviderName)[];
  receiptsHost: string;
  /** Port of the receipts endpoint (0 = any free port); it runs only when a provider sends receipts. */
  receiptsPort: number;
  /** SMTP sessions kept open to the server (SmtpPool); each carries one message at a time. */
  smtpMaxConnections: number;
  authentication: SenderAuthentication;
}

/** One SPF term (RFC 7208 §5, §6): a mechanism with its optional qualifier, or a modifier. */
const SPF_TERM = /^[+~?-]?(?:all|a|mx|ptr|(?:a|mx|ptr|include|exists):[^\s:]+(?:\/\d{1,3}){0,2}|a\/\d{1,3}|mx\/\d{1,3}|ip4:[\d.]+(?:\/\d{1,2})?|ip6:[0-9a-f:.]+(?:\/\d{1,3})?)$|^(?:redirect|exp)=\S+$/i;
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$/i;

/** The domain of the address in EMAIL_FROM (`Reviews <reviews@example.com>` → example.com). */
export function fromDomain(from: string): string {
  const address = addressparser(from, { flatten: true })[0]?.address ?? from;
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}

export function buildConfig(env: Env): EmailConfig {
  const vars = readEnv(
    {
      ...senderEnvShape,
      SMTP_URL: envField.url(['smtp', 'smtps']).optional(),
      EMAIL_FROM: z.string().min(3).regex(/@/, 'must contain an address').default('Reviews <no-reply@localhost>'),
      SMTP_TIMEOUT_MS: envField.int(15_000, 100),
      EMAIL_PROVIDERS: z.string().regex(/^[a-z]+(,[a-z]+)*$/, 'must be a comma-separated list, e.g. postmark,smtp').optional(),
      POSTMARK_SERVER_TOKEN: z.string().min(1).optional(),
      POSTMARK_API_URL: envField.url(['http', 'https']).default('https://api.postmarkapp.com'),
      POSTMARK_MESSAGE_STREAM: z.string().regex(/^[a-z0-9-]{1,30}$/, 'must be a message stream id, e.g. outbound').default('outbound'),
      POSTMARK_TIMEOUT_MS: envField.int(10_000, 100),
      /** Basic-auth password Postmark's webhook URL carries: `https://postmark:<secret>@host/receipts/postmark`. */
      POSTMARK_WEBHOOK_SECRET: z.string().regex(/^[A-Za-z0-9_-]{16,128}$/, 'must be 16–128 letters, digits, _ or -').optional(),
      EMAIL_RECEIPTS_HOST: envField.host(),
      EMAIL_RECEIPTS_PORT: envField.port(9473),
      SMTP_MAX_CONNECTIONS: envField.int(DEFAULT_SMTP_MAX_CONNECTIONS, 1),
      NODE_ENV: envField.nodeEnv(),
      /** The DKIM selector(s) signing every SMTP message: one, or two (new first) while a key is rotated. */
      DKIM_SELECTORS: z.string().min(1).optional(),
      /** Their RSA private keys, PEM, in the same order (a chart Secret: secrets.dkimPrivateKeys). */
      DKIM_PRIVATE_KEYS: z.string().min(1).optional(),
      /** The `d=` domain; the From domain by default. */
      DKIM_DOMAIN: z.string().regex(DOMAIN, 'must be a domain name, e.g. example.com').optional(),
      /** `true`: the SMTP relay signs for us, so we do not (the only way to send SMTP unsigned in production). */
      DKIM_SIGNED_BY_RELAY: z.enum(['true', 'false']).default('false'),
      /** SPF terms that authorize our sending servers, space-separated, e.g. `include:_spf.mail.ru` or `ip4:203.0.113.7`. */
      EMAIL_SPF: z.string().optional(),
    },
    env,
  );
  const postmark = vars.POSTMARK_SERVER_TOKEN
    ? { baseUrl: vars.POSTMARK_API_URL, serverToken: vars.POSTMARK_SERVER_TOKEN, messageStream: vars.POSTMARK_MESSAGE_STREAM, timeoutMs: vars.POSTMARK_TIMEOUT_MS, webhookSecret: vars.POSTMARK_WEBHOOK_SECRET }
    : undefined;
  // Default order: every configured provider, SMTP first (today's setups keep their behaviour).
  const providers = providerOrder<EmailProviderName>({
    variable: 'EMAIL_PROVIDERS',
    listed: vars.EMAIL_PROVIDERS,
    adapters: [
      { name: 'smtp', configured: vars.SMTP_URL !== undefined, needs: 'SMTP_URL' },
      { name: 'postmark', configured: postmark !== undefined, needs: 'POSTMARK_SERVER_TOKEN' },
    ],
    production: vars.NODE_ENV === 'production',
  });
  return {
    ...senderBaseConfig(vars),
    authentication: senderAuthentication(vars, providers),
    smtpUrl: vars.SMTP_URL,
    emailFrom: vars.EMAIL_FROM,
    smtpTimeoutMs: vars.SMTP_TIMEOUT_MS,
    smtpMaxConnections: vars.SMTP_MAX_CONNECTIONS,
    postmark,
    providers,
    receiptsHost: vars.EMAIL_RECEIPTS_HOST,
    receiptsPort: vars.EMAIL_RECEIPTS_PORT,
  };
}

/**
 * The sender domain's authentication. Our DKIM signs when DKIM_SELECTORS and DKIM_PRIVATE_KEYS are
 * given; in production SMTP mail is never sent unsigned unless DKIM_SIGNED_BY_RELAY=true says the relay
 * signs (Gmail and Microsoft refuse unauthenticated bulk mail). Postmark signs its own sends.
 */
function senderAuthentication(
  vars: { NODE_ENV: string; EMAIL_FROM: string; SMTP_URL?: string; DKIM_SELECTORS?: string; DKIM_PRIVATE_KEYS?: string; DKIM_DOMAIN?: string; DKIM_SIGNED_BY_RELAY: 'true' | 'false'; EMAIL_SPF?: string },
  providers: readonly string[],
): SenderAuthentication {
  const domain = fromDomain(vars.EMAIL_FROM);
  const relay = vars.DKIM_SIGNED_BY_RELAY === 'true';
  if (vars.DKIM_SELECTORS && !vars.DKIM_PRIVATE_KEYS) throw new ConfigError('DKIM_PRIVATE_KEYS', 'is required with DKIM_SELECTORS: the PEM private key of each selector, in the same order');
  if (vars.DKIM_PRIVATE_KEYS && !vars.DKIM_SELECTORS) throw new ConfigError('DKIM_SELECTORS', 'is required with DKIM_PRIVATE_KEYS: the selector of each key, e.g. rrs2026');
  const keys = vars.DKIM_SELECTORS && vars.DKIM_PRIVATE_KEYS ? parseDkimKeys(vars.DKIM_SELECTORS, vars.DKIM_PRIVATE_KEYS) : [];
  if (vars.DKIM_DOMAIN && keys.length === 0) throw new ConfigError('DKIM_DOMAIN', 'is the d= domain of our own signatures: it needs DKIM_SELECTORS and DKIM_PRIVATE_KEYS');
  if (keys.length > 0 && relay) throw new ConfigError('DKIM_SIGNED_BY_RELAY', 'is true while DKIM_SELECTORS and DKIM_PRIVATE_KEYS are given: either we sign or the relay does');
  if (vars.NODE_ENV === 'production' && providers.includes('smtp') && keys.length === 0 && !relay) {
    throw new ConfigError(
      'DKIM_PRIVATE_KEYS',
      'is required in production for SMTP (Gmail and Microsoft refuse unauthenticated bulk mail): give DKIM_SELECTORS and DKIM_PRIVATE_KEYS (docs/channels.md, "DKIM and the sender domain"), or DKIM_SIGNED_BY_RELAY=true if your SMTP relay signs for you',
    );
  }
  const terms = (vars.EMAIL_SPF ?? '').split(/\s+/).filter(Boolean);
  for (const term of terms) if (!SPF_TERM.test(term)) throw new ConfigError('EMAIL_SPF', `${JSON.stringify(term)} is not an SPF term (include:…, ip4:…, ip6:…, a, a:…, mx, …)`);
  const smtpHost = vars.SMTP_URL && providers.includes('smtp') ? new URL(vars.SMTP_URL).hostname : undefined;
  return {
    domain,
    dkim: keys.length > 0 ? { domain: (vars.DKIM_DOMAIN ?? domain).toLowerCase(), keys } : undefined,
    dkimSignedByRelay: relay,
    spfTerms: terms.length > 0 ? terms : smtpHost ? [`a:${smtpHost}`] : [],
  };
}
