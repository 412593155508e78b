export { buildConfig, type EmailConfig } from './config';
export { startEmailSender, CHANNEL } from './service';
