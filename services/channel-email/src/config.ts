import { z } from 'zod';
import { ConfigError, envField, readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

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

export interface EmailConfig extends SenderBaseConfig {
  /** `smtp://user:pass@host:port` (STARTTLS when offered) or `smtps://…` (TLS from the start). */
  smtpUrl?: string;
  /** From header, e.g. `Reviews <reviews@example.com>`. */
  emailFrom: string;
  smtpTimeoutMs: number;
  postmark?: PostmarkConfig;
  /** Providers in failover order (`EMAIL_PROVIDERS`); empty = the sink provider (all-in-one mode). */
  providers: EmailProviderName[];
  receiptsHost: string;
  /** Port of the receipts endpoint (0 = any free port); it runs only when a provider sends receipts. */
  receiptsPort: number;
  /** SMTP sessions kept open to the server (SmtpPool); each carries one message at a time. */
  smtpMaxConnections: number;
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
    },
    env,
  );
  const postmark = vars.POSTMARK_SERVER_TOKEN
    ? { baseUrl: vars.POSTMARK_API_URL, serverToken: vars.POSTMARK_SERVER_TOKEN, messageStream: vars.POSTMARK_MESSAGE_STREAM, timeoutMs: vars.POSTMARK_TIMEOUT_MS, webhookSecret: vars.POSTMARK_WEBHOOK_SECRET }
    : undefined;
  // Default order: every configured provider, SMTP first (today's setups keep their behaviour).
  const providers: EmailProviderName[] = [];
  if (vars.EMAIL_PROVIDERS === undefined) {
    if (vars.SMTP_URL) providers.push('smtp');
    if (postmark) providers.push('postmark');
  } else {
    for (const name of vars.EMAIL_PROVIDERS.split(',')) {
      if (!(EMAIL_PROVIDER_NAMES as readonly string[]).includes(name)) throw new ConfigError('EMAIL_PROVIDERS', `unknown provider ${JSON.stringify(name)} (known: ${EMAIL_PROVIDER_NAMES.join(', ')})`);
      if (providers.includes(name as EmailProviderName)) throw new ConfigError('EMAIL_PROVIDERS', `lists ${name} twice`);
      if (name === 'smtp' && !vars.SMTP_URL) throw new ConfigError('EMAIL_PROVIDERS', 'lists smtp but SMTP_URL is not set');
      if (name === 'postmark' && !postmark) throw new ConfigError('EMAIL_PROVIDERS', 'lists postmark but POSTMARK_SERVER_TOKEN is not set');
      providers.push(name as EmailProviderName);
    }
  }
  return {
    ...senderBaseConfig(vars),
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
