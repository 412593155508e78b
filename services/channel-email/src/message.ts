/* The email's rendering lives in sender-kit, where the console's live preview runs the same code. */
export { renderEmail, type EmailMessage } from '@rrs/sender-kit';
