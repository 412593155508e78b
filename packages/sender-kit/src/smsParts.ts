/**
 * SMS length rules for one part: 160 GSM-7 septets (characters of the extension table cost 2, being
 * sent as ESC + char), or 70 UCS-2 code units when any character is outside GSM-7 (Cyrillic, most
 * emoji; an emoji outside the BMP is a surrogate pair and costs 2 units).
 */
const GSM_BASIC = new Set(
  Array.from(
    '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
  ),
);
const GSM_EXTENDED = new Set(Array.from('^{}\\[~]|€\f'));

export type SmsEncoding = 'GSM-7' | 'UCS-2';

export const ONE_PART_LIMIT: Record<SmsEncoding, number> = { 'GSM-7': 160, 'UCS-2': 70 };
/** A part of a concatenated message carries a header: 153 septets / 67 units are left for text. */
export const MULTI_PART_LIMIT: Record<SmsEncoding, number> = { 'GSM-7': 153, 'UCS-2': 67 };

export function encodingOf(text: string): SmsEncoding {
  for (const ch of text) if (!GSM_BASIC.has(ch) && !GSM_EXTENDED.has(ch)) return 'UCS-2';
  return 'GSM-7';
}

/** Length in the unit of the encoding: septets for GSM-7, UTF-16 code units for UCS-2. */
export function smsLength(text: string, encoding = encodingOf(text)): number {
  if (encoding === 'UCS-2') return text.length;
  let length = 0;
  for (const ch of text) length += GSM_EXTENDED.has(ch) ? 2 : 1;
  return length;
}

export function fitsOnePart(text: string): boolean {
  const enc = encodingOf(text);
  return smsLength(text, enc) <= ONE_PART_LIMIT[enc];
}

/** What a text costs: its encoding, its length in that encoding's unit, the parts it takes and the room in each. */
export interface SmsCount {
  encoding: SmsEncoding;
  length: number;
  parts: number;
  perPart: number;
}

/** The part counter (the sender's debit and the console's template preview): one part up to 160/70, else 153/67 each. */
export function smsCount(text: string): SmsCount {
  const encoding = encodingOf(text);
  const length = smsLength(text, encoding);
  if (length <= ONE_PART_LIMIT[encoding]) return { encoding, length, parts: 1, perPart: ONE_PART_LIMIT[encoding] };
  return { encoding, length, parts: Math.ceil(length / MULTI_PART_LIMIT[encoding]), perPart: MULTI_PART_LIMIT[encoding] };
}

/** Parts a text takes. */
export function smsParts(text: string): number {
  return smsCount(text).parts;
}

/**
 * Cuts `before + link + after` to one part. The link is never broken: text after the link goes first,
 * then the text before it is shortened (at a word boundary when one is near), whole characters only.
 * A link too long even alone is returned alone.
 */
export function cutToOnePart(before: string, link: string, after: string): string {
  const join = (b: string, a: string) => `${b}${link}${a}`;
  if (fitsOnePart(join(before, after))) return join(before, after);
  if (fitsOnePart(join(before, ''))) return join(before, '');
  const chars = Array.from(before.trimEnd());
  const sep = link && chars.length > 0 ? ' ' : '';
  // Longest prefix that fits; the text is at most one template line, so the search is short.
  let lo = 0;
  let hi = chars.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fitsOnePart(join(chars.slice(0, mid).join('').trimEnd() + sep, ''))) lo = mid;
    else hi = mid - 1;
  }
  let prefix = chars.slice(0, lo).join('');
  const space = prefix.lastIndexOf(' ');
  if (space > prefix.length / 2) prefix = prefix.slice(0, space);
  prefix = prefix.trimEnd();
  return prefix ? `${prefix}${sep}${link}` : link;
}
