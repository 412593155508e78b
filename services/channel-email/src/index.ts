export { buildConfig, type EmailConfig } from './config';
export { startEmailSender, emailSend, CHANNEL, SCHEMA } from './service';
export { renderEmail, type EmailMessage } from './message';
export { smtpProvider, sinkEmailProvider, classifySmtpError, type EmailProvider } from './provider';
