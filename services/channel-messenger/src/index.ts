export { buildConfig, MESSENGER_SENDER_CONCURRENCY, type MessengerConfig, type MessengerAccount } from './config';
export { startMessengerSender, messengerSend, CHANNELS, SCHEMA, type MessengerChannel } from './service';
export { renderMessengerText } from './message';
export { AccountLookupCache, greenApiProvider, sinkMessengerProvider, type MessengerProvider } from './provider';
export { AccountHealth, ACCOUNT_DOWN_STATES, accountDownReason, MIN_HEALTH_INTERVAL_MS } from './health';
export { createSendRateLimiter, type SendRateLimiter } from './rateLimit';
