export { buildConfig, EMAIL_PROVIDER_NAMES, type EmailConfig, type EmailProviderName, type PostmarkConfig } from './config';
export { startEmailSender, emailSend, CHANNEL, SCHEMA } from './service';
export { renderEmail, type EmailMessage } from './message';
export { smtpProvider, sinkEmailProvider, classifySmtpError, type EmailProvider } from './provider';
export { postmarkProvider, sortPostmarkCode, POSTMARK_STEP_METADATA, type PostmarkOptions } from './postmark';
export { handlePostmarkWebhook, resultsOfPostmarkEvent, startEmailReceiptServer } from './receipts';
