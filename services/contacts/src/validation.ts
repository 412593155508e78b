import { AppError } from '@rrs/runtime';
import { isSupportedCountry } from 'libphonenumber-js/max';

/**
 * Field checks of the directory. A 400 names every offending field as a JSON pointer into the request
 * body of the public or admin API (`details.errors[]`, the same shape the gateway's schema validation
 * answers), so an integrator sees one format whichever layer refused the request.
 */
export interface FieldError {
  pointer: string;
  detail: string;
}

export class FieldErrors {
  readonly errors: FieldError[] = [];

  add(pointer: string, detail: string): void {
    this.errors.push({ pointer, detail });
  }

  /** Throws 400 `invalid_request` when any field was refused. */
  throwIfAny(): void {
    if (this.errors.length === 0) return;
    const detail = this.errors.length === 1 ? `${this.errors[0].pointer}: ${this.errors[0].detail}` : `${this.errors.length} fields are invalid`;
    throw new AppError(400, 'invalid_request', detail, { details: { errors: this.errors } });
  }
}

export function invalidField(pointer: string, detail: string): AppError {
  const f = new FieldErrors();
  f.add(pointer, detail);
  return new AppError(400, 'invalid_request', `${pointer}: ${detail}`, { details: { errors: f.errors } });
}

export const PLANS = ['trial', 'standard', 'pro'] as const;
export const LOCALES = ['en', 'ru'] as const;
export const CHANNEL_KEY = /^[A-Z][A-Z0-9_]{0,31}$/;

export function isTimeZone(tz: string): boolean {
  if (tz === '' || tz.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
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
    const u = new URL(url);
    return u.protocol === 'https:' && u.hostname !== '' && u.username === '' && u.password === '';
  } catch {
    return false;
  }
}

/** Text that is stored and shown: no control characters except newline and tab. */
export function checkText(f: FieldErrors, pointer: string, value: string, opts: { min?: number; max: number; multiline?: boolean }): void {
  const min = opts.min ?? 0;
  if (value.length < min) f.add(pointer, min === 1 ? 'must not be empty' : `must be at least ${min} characters`);
  else if (value.length > opts.max) f.add(pointer, `must be at most ${opts.max} characters`);
  else if (opts.multiline ? /[\u0000-\u0008\u000b-\u001f\u007f]/.test(value) : /[\u0000-\u001f\u007f]/.test(value)) f.add(pointer, 'must not contain control characters');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/** Ids are UUIDs; anything else cannot name an object, so it is "not found" rather than a database error. */
export function asUuid(id: string, what: string): string {
  if (!UUID.test(id)) throw new AppError(404, 'not_found', `${what} ${id} not found`);
  return id.toLowerCase();
}
