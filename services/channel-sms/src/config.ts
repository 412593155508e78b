import { z } from 'zod';
import { ConfigError, envField, readEnv, type Env } from '@rrs/runtime';
import { providerOrder, senderBaseConfig, senderEnvShape, type SenderBaseConfig, type SinkProviderName } from '@rrs/sender-kit';
import { SMSC_MAX_CONNECTIONS_DEFAULT } from './provider';

/** SMS providers channel-sms has adapters for. */
export const SMS_PROVIDER_NAMES = ['smsc', 'smsru'] as const;
export type SmsProviderName = (typeof SMS_PROVIDER_NAMES)[number];

export interface SmsConfig extends SenderBaseConfig {
  /** contacts gRPC address: the SMS balance is debited there. */
  contactsAddress: string;
  /**
   * Providers in failover order (`SMS_PROVIDERS`, providerOrder): `['sink']` when none is configured
   * outside production, or when named (`SMS_PROVIDERS=sink`, the only way to a sink in production).
   */
  providers: (SmsProviderName | SinkProviderName)[];
  /** `maxConnections` unset = SMSC_MAX_CONNECTIONS_DEFAULT. */
  smsc?: { baseUrl: string; login: string; password: string; sender?: string; timeoutMs: number; maxConnections?: number };
  /** How often SMSC's inbox is read for STOP replies (`SMSC_INBOX_POLL_MS`); 0 = never. */
  smscInboxPollMs?: number;
  smsru?: { baseUrl: string; apiId: string; sender?: string; test: boolean; timeoutMs: number; receiptsSecret?: string };
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
      SMS_PROVIDERS: z.string().regex(/^[a-z]+(,[a-z]+)*$/, 'must be a comma-separated list, e.g. smsc,smsru').optional(),
      SMSC_URL: envField.url(['http', 'https']).default('https://smsc.ru'),
      SMSC_LOGIN: z.string().min(1).optional(),
      SMSC_PASSWORD: z.string().min(1).optional(),
      SMSC_SENDER: z.string().min(1).max(11).optional(),
      SMSC_TIMEOUT_MS: envField.int(10_000, 100),
      SMSC_MAX_CONNECTIONS: envField.int(SMSC_MAX_CONNECTIONS_DEFAULT, 1),
      SMSC_INBOX_POLL_MS: envField.int(60_000, 0),
      SMSRU_URL: envField.url(['http', 'https']).default('https://sms.ru'),
      SMSRU_API_ID: z.string().min(1).optional(),
      SMSRU_SENDER: z.string().min(1).max(11).optional(),
      SMSRU_TEST: z.enum(['true', 'false', '1', '0']).default('false'),
      SMSRU_TIMEOUT_MS: envField.int(10_000, 100),
      /** Secret path segment of SMS.ru's status callback: `/receipts/smsru/<secret>`. */
      SMSRU_CALLBACK_SECRET: z.string().regex(/^[A-Za-z0-9_-]{16,128}$/, 'must be 16–128 letters, digits, _ or -').optional(),
      SMS_RECEIPTS_HOST: envField.host(),
      SMS_RECEIPTS_PORT: envField.port(9470),
      NODE_ENV: envField.nodeEnv(),
    },
    env,
  );
  if (vars.SMSC_LOGIN && !vars.SMSC_PASSWORD) throw new ConfigError('SMSC_PASSWORD', 'is required when SMSC_LOGIN is set');
  const smsc = vars.SMSC_LOGIN ? { baseUrl: vars.SMSC_URL, login: vars.SMSC_LOGIN, password: vars.SMSC_PASSWORD as string, sender: vars.SMSC_SENDER, timeoutMs: vars.SMSC_TIMEOUT_MS, maxConnections: vars.SMSC_MAX_CONNECTIONS } : undefined;
  const smsru = vars.SMSRU_API_ID
    ? { baseUrl: vars.SMSRU_URL, apiId: vars.SMSRU_API_ID, sender: vars.SMSRU_SENDER, test: vars.SMSRU_TEST === 'true' || vars.SMSRU_TEST === '1', timeoutMs: vars.SMSRU_TIMEOUT_MS, receiptsSecret: vars.SMSRU_CALLBACK_SECRET }
    : undefined;
  // Default order: every configured provider, SMSC first (it can be asked whether it has a message).
  const providers = providerOrder<SmsProviderName>({
    variable: 'SMS_PROVIDERS',
    listed: vars.SMS_PROVIDERS,
    adapters: [
      { name: 'smsc', configured: smsc !== undefined, needs: 'SMSC_LOGIN' },
      { name: 'smsru', configured: smsru !== undefined, needs: 'SMSRU_API_ID' },
    ],
    production: vars.NODE_ENV === 'production',
  });
  return {
    ...senderBaseConfig(vars),
    contactsAddress: vars.CONTACTS_ADDR,
    providers,
    smsc,
    smscInboxPollMs: vars.SMSC_INBOX_POLL_MS,
    smsru,
    receiptsHost: vars.SMS_RECEIPTS_HOST,
    receiptsPort: vars.SMS_RECEIPTS_PORT,
  };
}
