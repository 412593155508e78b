export { buildConfig, type MessengerConfig } from './config';
export { startMessengerSender, CHANNELS } from './service';
