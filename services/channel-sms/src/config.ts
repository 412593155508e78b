import { z } from 'zod';
import { ConfigError, envField, readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

export interface SmsConfig extends SenderBaseConfig {
  /** contacts gRPC address: the SMS balance is debited there. */
  contactsAddress: string;
  /** Unset login = sink provider (all-in-one mode). */
  smsc?: { baseUrl: string; login: string; password: string; sender?: string; timeoutMs: number };
  receiptsHost: string;
  /** Port of the receipts endpoint (0 = any free port); it runs only with a real provider. */
  receiptsPort: number;
}

export function buildConfig(env: Env): SmsConfig {
  const vars = readEnv(
    {
      ...senderEnvShape,
      // Each service has its own default ops port, so they can run side by side on one host.
      OPS_PORT: envField.port(9467),
      CONTACTS_ADDR: z.string().regex(/^[^:\s]+:\d{1,5}$/, 'must be host:port').default('127.0.0.1:50051'),
      SMSC_URL: envField.url(['http', 'https']).default('https://smsc.ru'),
      SMSC_LOGIN: z.string().min(1).optional(),
      SMSC_PASSWORD: z.string().min(1).optional(),
      SMSC_SENDER: z.string().min(1).max(11).optional(),
      SMSC_TIMEOUT_MS: envField.int(10_000, 100),
      SMS_RECEIPTS_HOST: envField.host(),
      SMS_RECEIPTS_PORT: envField.port(9470),
    },
    env,
  );
  if (vars.SMSC_LOGIN && !vars.SMSC_PASSWORD) throw new ConfigError('SMSC_PASSWORD', 'is required when SMSC_LOGIN is set');
  return {
    ...senderBaseConfig(vars),
    contactsAddress: vars.CONTACTS_ADDR,
    smsc: vars.SMSC_LOGIN ? { baseUrl: vars.SMSC_URL, login: vars.SMSC_LOGIN, password: vars.SMSC_PASSWORD as string, sender: vars.SMSC_SENDER, timeoutMs: vars.SMSC_TIMEOUT_MS } : undefined,
    receiptsHost: vars.SMS_RECEIPTS_HOST,
    receiptsPort: vars.SMS_RECEIPTS_PORT,
  };
}
