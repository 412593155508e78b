/**
 * Which inbound replies are opt-outs ("STOP"-style replies): the one list every sender that reads replies
 * (SMS now; a messenger may reuse it) applies, so a person who writes STOP through any of them is heard
 * the same way (docs/customer-respect.md, docs/channels.md "STOP replies").
 *
 * A reply is an opt-out when, ignoring case, `Ё`/`Е`, whitespace, punctuation, symbols and emoji, it is
 * exactly one of the words below. Only the whole reply counts: "stop by tomorrow" or "не стоп" are not
 * opt-outs (a word inside a sentence is too often something else). The Latin words are the US carriers'
 * standard opt-out keywords (CTIA Messaging Principles and Best Practices, 2023: STOP, STOPALL,
 * UNSUBSCRIBE, CANCEL, END, QUIT, plus the common OPTOUT and REVOKE); the Russian ones are the usual
 * "stop" and "unsubscribe" forms.
 */
export const STOP_REPLY_WORDS = [
  'STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'OPTOUT', 'REVOKE',
  'СТОП', 'ОТПИСАТЬСЯ', 'ОТПИСКА', 'ОТПИШИТЕ', 'ОТПИСАТЬ',
] as const;

const WORDS: ReadonlySet<string> = new Set(STOP_REPLY_WORDS);

/** The reply reduced to its letters and digits, upper-case, `Ё` read as `Е`. */
export function normalizeReply(text: string): string {
  return text.normalize('NFKC').toUpperCase().replace(/Ё/g, 'Е').replace(/[^\p{L}\p{N}]+/gu, '');
}

/** Whether an inbound reply asks to hear nothing more (see STOP_REPLY_WORDS). */
export function isStopReply(text: string): boolean {
  return WORDS.has(normalizeReply(text));
}
