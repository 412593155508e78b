export { buildConfig, type MessengerConfig, type MessengerAccount } from './config';
export { startMessengerSender, messengerSend, CHANNELS, SCHEMA, type MessengerChannel } from './service';
export { renderMessengerText } from './message';
export { greenApiProvider, sinkMessengerProvider, type MessengerProvider } from './provider';
export { createSendRateLimiter, type SendRateLimiter } from './rateLimit';
