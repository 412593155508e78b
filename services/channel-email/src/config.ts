import { z } from 'zod';
import { envField, readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

/**
 * An SMTP session carries one message at a time (MAIL, RCPT, DATA, each waiting for the server), so the
 * connections bound a replica's email rate. 5 (nodemailer's default) held channel-email to a few hundred
 * emails/s against a local server; 16 stays well under common servers' per-client limits (Postfix
 * `smtpd_client_connection_count_limit` 50).
 */
export const DEFAULT_SMTP_MAX_CONNECTIONS = 16;

export interface EmailConfig extends SenderBaseConfig {
  /** `smtp://user:pass@host:port` (STARTTLS when offered) or `smtps://…` (TLS from the start); unset = sink provider. */
  smtpUrl?: string;
  /** From header, e.g. `Reviews <reviews@example.com>`. */
  emailFrom: string;
  smtpTimeoutMs: number;
  /** SMTP connections kept open to the server (nodemailer's pool); each carries one message at a time. */
  smtpMaxConnections: number;
}

export function buildConfig(env: Env): EmailConfig {
  const vars = readEnv(
    {
      ...senderEnvShape,
      SMTP_URL: envField.url(['smtp', 'smtps']).optional(),
      EMAIL_FROM: z.string().min(3).regex(/@/, 'must contain an address').default('Reviews <no-reply@localhost>'),
      SMTP_TIMEOUT_MS: envField.int(15_000, 100),
      SMTP_MAX_CONNECTIONS: envField.int(DEFAULT_SMTP_MAX_CONNECTIONS, 1),
    },
    env,
  );
  return { ...senderBaseConfig(vars), smtpUrl: vars.SMTP_URL, emailFrom: vars.EMAIL_FROM, smtpTimeoutMs: vars.SMTP_TIMEOUT_MS, smtpMaxConnections: vars.SMTP_MAX_CONNECTIONS };
}
