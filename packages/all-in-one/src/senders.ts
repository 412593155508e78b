import { buildConfig as emailConfigOf, type EmailConfig } from '@rrs/channel-email';
import { buildConfig as smsConfigOf, type SmsConfig } from '@rrs/channel-sms';
import { buildConfig as messengerConfigOf, type MessengerConfig } from '@rrs/channel-messenger';
import type { Env } from '@rrs/runtime';

/**
 * The senders' provider settings, read by the senders' own config functions from the all-in-one's
 * environment (docs/channels.md, "The all-in-one's providers"): the same variables (SMTP_URL,
 * POSTMARK_*, EMAIL_PROVIDERS, DKIM_*, SMSC_*, SMSRU_*, SMS_PROVIDERS, MAX_* / TELEGRAM_* working
 * accounts and bots, MESSENGER_SINK, PROVIDER_CIRCUIT_*, PROVIDER_RATE_LIMITS), the same validation,
 * the same failover order and the same rule: the sink only when none is set outside production, or when
 * named; in production a missing provider is a ConfigError naming the variables, so the process does not
 * start. The provider rates are the senders' own parse of PROVIDER_RATE_LIMITS (`sink=N` limits the sink,
 * as embedded benchmarks want); the all-in-one adds its REDIS_URL to share their windows (launcher.ts).
 */
export interface SenderProviders {
  email: Pick<EmailConfig, 'smtpUrl' | 'emailFrom' | 'smtpTimeoutMs' | 'smtpMaxConnections' | 'postmark' | 'providers' | 'receiptsHost' | 'receiptsPort' | 'authentication' | 'circuit' | 'providerRates'>;
  sms: Pick<SmsConfig, 'providers' | 'smsc' | 'smscInboxPollMs' | 'smsru' | 'receiptsHost' | 'receiptsPort' | 'circuit' | 'providerRates'>;
  messenger: Pick<MessengerConfig, 'max' | 'telegram' | 'sink' | 'bots' | 'providerRates'>;
}

/**
 * The senders' configs need a DATABASE_URL; the all-in-one's may be unset (embedded PostgreSQL), and
 * its send logs use the all-in-one's database anyway: a stand-in satisfies the field, nothing reads it.
 */
const UNUSED_DATABASE_URL = 'postgres://all-in-one/embedded';

export function senderProvidersOf(env: Env): SenderProviders {
  const senderEnv = { ...env, DATABASE_URL: env.DATABASE_URL || UNUSED_DATABASE_URL };
  const email = emailConfigOf(senderEnv);
  const sms = smsConfigOf(senderEnv);
  const messenger = messengerConfigOf(senderEnv);
  return {
    email: {
      smtpUrl: email.smtpUrl, emailFrom: email.emailFrom, smtpTimeoutMs: email.smtpTimeoutMs, smtpMaxConnections: email.smtpMaxConnections, postmark: email.postmark,
      providers: email.providers, receiptsHost: email.receiptsHost, receiptsPort: email.receiptsPort, authentication: email.authentication, circuit: email.circuit,
      providerRates: email.providerRates,
    },
    sms: { providers: sms.providers, smsc: sms.smsc, smscInboxPollMs: sms.smscInboxPollMs, smsru: sms.smsru, receiptsHost: sms.receiptsHost, receiptsPort: sms.receiptsPort, circuit: sms.circuit, providerRates: sms.providerRates },
    messenger: { max: messenger.max, telegram: messenger.telegram, sink: messenger.sink, bots: messenger.bots, providerRates: messenger.providerRates },
  };
}
