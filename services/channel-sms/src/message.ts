/* The SMS text and its parts live in sender-kit, where the console's live preview runs the same code. */
export { renderSms, type SmsText } from '@rrs/sender-kit';
