import { z } from 'zod';
import { envField, readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

export interface EmailConfig extends SenderBaseConfig {
  /** `smtp://user:pass@host:port` (STARTTLS when offered) or `smtps://…` (TLS from the start); unset = sink provider. */
  smtpUrl?: string;
  /** From header, e.g. `Reviews <reviews@example.com>`. */
  emailFrom: string;
  smtpTimeoutMs: number;
}

export function buildConfig(env: Env): EmailConfig {
  const vars = readEnv(
    {
      ...senderEnvShape,
      SMTP_URL: envField.url(['smtp', 'smtps']).optional(),
      EMAIL_FROM: z.string().min(3).regex(/@/, 'must contain an address').default('Reviews <no-reply@localhost>'),
      SMTP_TIMEOUT_MS: envField.int(15_000, 100),
    },
    env,
  );
  return { ...senderBaseConfig(vars), smtpUrl: vars.SMTP_URL, emailFrom: vars.EMAIL_FROM, smtpTimeoutMs: vars.SMTP_TIMEOUT_MS };
}
