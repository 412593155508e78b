export { buildConfig, type SmsConfig } from './config';
export { startSmsSender, smsSend, CHANNEL, SCHEMA } from './service';
export { renderSms, type SmsText } from './message';
export { cutToOnePart, encodingOf, smsLength, smsParts, fitsOnePart, ONE_PART_LIMIT, type SmsEncoding } from '@rrs/sender-kit';
export { smscProvider, sinkSmsProvider, type SmsProvider, type SmscOptions } from './provider';
export { contactsSmsBalance, type SmsBalance } from './balance';
export { handleSmscReceipt, handleSmsRuCallback, mapSmscStatus, mapSmsRuStatus, startReceiptServer } from './receipts';
export { smsRuProvider, sortSmsRuCode, type SmsRuOptions } from './smsru';
export { SMS_PROVIDER_NAMES, type SmsProviderName } from './config';
