export { buildConfig, type SmsConfig } from './config';
export { startSmsSender, CHANNEL } from './service';
