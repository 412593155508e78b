import { parsePhoneNumberFromString, type CountryCode, type NumberType } from 'libphonenumber-js/max';

/*
 * Which phone numbers the phone channels (SMS, MAX, TELEGRAM) send to: the one rule, used by contacts
 * (POST /contacts answers 400 `phone_not_allowed`) and by the scheduler (a send or cascade skips the
 * recipient or step with reason `phone_not_allowed`). docs/customer-respect.md, "Phone numbers".
 *
 * Toll fraud pays the sender's bill into premium-rate, shared-cost and satellite/international-network
 * ranges, so only personal number types in the organization's allowed countries are sent to. Types are
 * libphonenumber's, from its full ("max") metadata.
 */

/** Number types a person holds. Everything else — premium rate, shared cost, toll free, UAN, VoIP,
 * personal-number redirection, pager, voicemail, and numbers the metadata cannot type — is refused. */
export const PERSONAL_PHONE_TYPES: readonly NumberType[] = ['MOBILE', 'FIXED_LINE', 'FIXED_LINE_OR_MOBILE'];

/** Why a phone is not sent to (`reason` in the 400's details; the step's reason is `phone_not_allowed` for all). */
export type PhoneRefusal =
  | { reason: 'not_a_number' }
  /** A non-geographic calling code: satellite (+881, +870), international networks (+882, +883), global services (+800, +808, +979). */
  | { reason: 'international_network'; callingCode: string }
  | { reason: 'number_type'; numberType: string }
  | { reason: 'country'; country: string };

/** ISO 3166 regions the organization's phone numbers may be in: its allowed countries, else its region. */
export function phoneCountries(organization: { defaultRegion?: string; allowedCountries?: readonly string[] }): string[] {
  if (organization.allowedCountries && organization.allowedCountries.length > 0) return [...organization.allowedCountries];
  return [organization.defaultRegion || 'RU'];
}

/** Null when the phone channels may send to this number (E.164, or read in the first allowed country); else why not. */
export function phoneRefusal(phone: string, countries: readonly string[]): PhoneRefusal | null {
  const parsed = phone.length <= 64 ? parsePhoneNumberFromString(phone, { defaultCountry: (countries[0] ?? 'RU') as CountryCode }) : undefined;
  if (!parsed) return { reason: 'not_a_number' };
  // A number with a type is valid (libphonenumber's isValid is "has a type" with this metadata, or its
  // national pattern, which typing checks first): isValid, which types the number again, is asked
  // only of a number without one.
  const type = parsed.getType();
  if (!type && !parsed.isValid()) return { reason: 'not_a_number' };
  if (!parsed.country) return { reason: 'international_network', callingCode: parsed.countryCallingCode };
  if (!type || !PERSONAL_PHONE_TYPES.includes(type)) return { reason: 'number_type', numberType: type ?? 'UNKNOWN' };
  if (!countries.includes(parsed.country)) return { reason: 'country', country: parsed.country };
  return null;
}

/** The refusal in words, for a 400's detail and the logs. */
export function describePhoneRefusal(refusal: PhoneRefusal, countries: readonly string[]): string {
  switch (refusal.reason) {
    case 'not_a_number':
      return 'is not a phone number';
    case 'international_network':
      return `is on an international network (+${refusal.callingCode}: satellite or global service), which the phone channels do not send to`;
    case 'number_type':
      return `is a ${refusal.numberType.toLowerCase().replace(/_/g, '-')} number, not a personal one; the phone channels send only to mobile and fixed-line numbers`;
    case 'country':
      return `is in ${refusal.country}; this organization sends to phone numbers in ${countries.join(', ')} only (its allowed countries)`;
  }
}
