/* The messenger text lives in sender-kit, where the console's live preview runs the same code. */
export { renderMessengerText } from '@rrs/sender-kit';
