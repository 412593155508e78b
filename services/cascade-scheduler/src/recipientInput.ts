import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';
import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, type FieldProblem } from '@rrs/runtime';

/** A recipient as a request gives it; `contactId`/`contactExternalId` only for a directory contact. */
export type RecipientInput = Pick<schedulerV1.RecipientInput, 'name' | 'email' | 'phone'> & Partial<Pick<schedulerV1.RecipientInput, 'contactId' | 'contactExternalId' | 'consentAt'>>;

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export const isEmail = (email: string) => EMAIL.test(email) && email.length <= 254;

/** A phone in E.164 (a number without a country code read in `defaultRegion`); null when it is not a valid number. */
export function e164(phone: string, defaultRegion: string): string | null {
  const parsed = parsePhoneNumberFromString(phone, (defaultRegion || 'RU') as CountryCode);
  return parsed && parsed.isValid() ? parsed.number : null;
}

/** An address as the ledgers key it: an email lower-case, a phone in E.164; null when it is neither. */
export function normalizeAddress(address: string, defaultRegion = 'RU'): string | null {
  const trimmed = address.trim();
  if (trimmed.includes('@')) return isEmail(trimmed) ? trimmed.toLowerCase() : null;
  return e164(trimmed, defaultRegion);
}

/**
 * Phones to E.164 (numbers without a country code read in the organization's region), emails
 * trimmed; a malformed one is `invalid` naming the recipient, and nothing is created.
 */
export function normalizeRecipients(recipients: RecipientInput[], defaultRegion = 'RU'): RecipientInput[] {
  const problems: FieldProblem[] = [];
  const normalized = recipients.map((recipient, i) => {
    const email = recipient.email.trim();
    if (email && !isEmail(email)) problems.push({ pointer: `/recipients/${i}/email`, detail: 'not an email address' });
    let phone = recipient.phone.trim();
    if (phone) {
      const number = e164(phone, defaultRegion);
      if (number === null) problems.push({ pointer: `/recipients/${i}/phone`, detail: 'not a valid phone number' });
      else phone = number;
    }
    return { ...recipient, name: recipient.name.trim(), email, phone };
  });
  if (problems.length) throw new InvalidError(problems);
  return normalized;
}
