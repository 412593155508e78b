import { InvalidError, NotFoundError, type FieldProblem } from '@rrs/runtime';
import { isSupportedCountry } from 'libphonenumber-js/max';

/**
 * Field checks of the directory. An `invalid` error names every offending field as a JSON pointer into
 * the request body of the public or admin API (`details.errors[]`, the same shape the gateway's schema
 * validation answers), so an integrator sees one format whichever layer refused the request.
 */
export class FieldErrors {
  readonly errors: FieldProblem[] = [];

  add(pointer: string, detail: string): void {
    this.errors.push({ pointer, detail });
  }

  /** Throws `invalid_request` listing every refused field, when there is any. */
  throwIfAny(): void {
    if (this.errors.length === 0) return;
    const [first] = this.errors;
    const message = this.errors.length === 1 ? `${first.pointer}: ${first.detail}` : `${this.errors.length} fields are invalid`;
    throw new InvalidError(this.errors, { message });
  }
}

export const PLANS = ['trial', 'standard', 'pro'] as const;
export const LOCALES = ['en', 'ru'] as const;
export { isChannelKey, MAX_CHANNEL_KEY_LENGTH } from '@rrs/proto';

export function isTimeZone(timeZone: string): boolean {
  if (timeZone === '' || timeZone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone });
    return true;
  } catch {
    return false;
  }
}

export function isRegion(region: string): boolean {
  return /^[A-Z]{2}$/.test(region) && isSupportedCountry(region);
}

export function isHttpsUrl(url: string): boolean {
  if (url.length > 2048) return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' && parsed.hostname !== '' && parsed.username === '' && parsed.password === '';
  } catch {
    return false;
  }
}

/** Text that is stored and shown: no control characters except newline and tab. */
export function checkText(errors: FieldErrors, pointer: string, value: string, limits: { min?: number; max: number; multiline?: boolean }): void {
  const min = limits.min ?? 0;
  if (value.length < min) errors.add(pointer, min === 1 ? 'must not be empty' : `must be at least ${min} characters`);
  else if (value.length > limits.max) errors.add(pointer, `must be at most ${limits.max} characters`);
  else if (limits.multiline ? /[\u0000-\u0008\u000b-\u001f\u007f]/.test(value) : /[\u0000-\u001f\u007f]/.test(value)) errors.add(pointer, 'must not contain control characters');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/** Ids are UUIDs; anything else cannot name an object, so it is "not found" rather than a database error. */
export function asUuid(id: string, what: string): string {
  if (!UUID.test(id)) throw new NotFoundError(`${what} ${id}`);
  return id.toLowerCase();
}

/** The row a lookup found; none is `not_found` naming the object (`what` = "location <id>"). */
export function found<T>(row: T | undefined, what: string): T {
  if (!row) throw new NotFoundError(what);
  return row;
}
