import { INTAKE_SKIPS, phoneCountries, phoneRefusal, sendingRefusal, type IntakeSkip } from '@rrs/proto';
import { ConflictError, queryEach, sendingRefused, type PoolClient, type QueryResult, type Statement } from '@rrs/runtime';
import { clockAndAsked, clockAndRecentlyAsked } from './cooldown';
import { canReachAny } from './engine';
import type { SendingProfile } from './organizationProfiles';
import { suppressedFrom, suppressionLookup, type SuppressionLookup } from './optOutLedger';
import type { AddressHasher } from './personHash';
import { personAddresses } from './personAddresses';
import type { RecipientInput } from './recipientInput';

/*
 * The admission decision: whether a start may happen at all, and which of its recipients are admitted
 * or skipped (and why). Every entry point reaches it through the scheduler's StartCascade (the public
 * API, the console by hand and by CSV, the CRM connectors) or its dry run, which is the only pre-check
 * anyone else calls; nobody re-checks these rules elsewhere. In order:
 *   1. the sending rule (proto `sendingRefusal`: 402 `plan_required`, 409 `email_not_confirmed`):
 *      `refuseSending`, the only place it is checked (the gateway, the account API, the connectors and
 *      contacts never check it), before any other answer about the start; then a one-step channel
 *      send's channel configured (409 `channel_not_configured`): `refuseChannel`;
 *   2. each recipient's intake skip (no usable contact, phone not allowed, opted out, no consent,
 *      cooldown): `intakeSkips`;
 *   3. the organization's recipient budget (429 `recipient_quota_exceeded`): `recipientBudget.ts`,
 *      taken last in the start's transaction.
 * The send windows and the SMS balance are decided when a step fires (fireChecks.ts, the SMS sender),
 * not at intake: a start inside a closed window is admitted and its steps wait.
 * A new admission rule goes here (docs/architecture.md, "Where a change goes").
 */

/** What a start asks to be admitted. */
export interface AdmissionRequest {
  organizationId: string;
  /** Set for a one-step channel send. */
  channel?: string;
  recipients: RecipientInput[];
  ignoreCooldown?: boolean;
}

/** The organization's sending rule (402 `plan_required`, 409 `email_not_confirmed`): answered before anything else about a start. */
export function refuseSending(profile: SendingProfile): void {
  const refusal = sendingRefusal(profile.organization);
  if (refusal) throw sendingRefused(refusal);
}

/** A one-step channel send's channel configured (409 `channel_not_configured`); asked after `refuseSending`. */
export function refuseChannel(request: Pick<AdmissionRequest, 'channel'>, profile: SendingProfile): void {
  if (request.channel && !profile.channels.some((c) => c.channel === request.channel && c.configured)) {
    throw new ConflictError('channel_not_configured', `the ${request.channel} channel is not configured for this organization`);
  }
}

const [UNREACHABLE, PHONE_NOT_ALLOWED, OPTED_OUT, NO_CONSENT, COOLDOWN] = INTAKE_SKIPS;

/** The reads `intakeSkips` answers from: the clock with the cooldown's lookup, and the opt-out ledger's. */
export interface IntakeReads {
  statements: Statement[];
  lookup: SuppressionLookup | null;
}

/** `intakeSkips`'s reads, to send in the request that opens the start's transaction (runIdempotent's `reads`). */
export function intakeReads(request: AdmissionRequest, profile: SendingProfile): IntakeReads {
  const addresses = request.recipients.flatMap(personAddresses);
  const cooldownDays = request.ignoreCooldown ? 0 : profile.organization.cooldownDays ?? 0;
  const lookup = suppressionLookup([request.organizationId], addresses);
  return { statements: [clockAndRecentlyAsked(request.organizationId, addresses, cooldownDays), ...(lookup ? [lookup.statement] : [])], lookup };
}

/**
 * Why each recipient is skipped at intake, or null when it is queued (INTAKE_SKIPS, in their order):
 * no step has its contact field; only phone steps could reach it and the phone channels refuse its
 * number (proto phones.ts); the person opted out of the organization; the organization requires
 * consent and none was given; the person was asked (or rated) within the organization's cooldown.
 * Answered with the transaction's clock (`now`, the cascade's time), read with the opt-out and cooldown
 * lookups (`intakeReads`) in the request that opens the transaction: `read`, when the caller sent them
 * there itself (with the Idempotency-Key's lock), else here.
 */
export async function intakeSkips(client: PoolClient, hasher: AddressHasher, request: AdmissionRequest, channels: string[], profile: SendingProfile, read?: { reads: IntakeReads; results: QueryResult[] }): Promise<{ now: Date; skips: Array<IntakeSkip | null> }> {
  const organizationId = request.organizationId;
  const { statements, lookup } = read?.reads ?? intakeReads(request, profile);
  const [clockRead, suppressionRead] = read?.results ?? (await queryEach(client, statements));
  const { now, asked } = clockAndAsked(clockRead.rows[0]);
  const suppressed = lookup ? await suppressedFrom(client, hasher, lookup, suppressionRead.rows) : new Set<string>();
  const countries = phoneCountries(profile.organization);
  const skips = request.recipients.map((recipient) => {
    if (!canReachAny(channels, recipient)) return UNREACHABLE;
    // The number is parsed (the costliest check of a start) only when no other step could reach the person.
    if (recipient.phone && !canReachAny(channels, { email: recipient.email, phone: '' }) && phoneRefusal(recipient.phone, countries)) return PHONE_NOT_ALLOWED;
    const own = suppressed.size > 0 || asked.size > 0 ? personAddresses(recipient) : [];
    if (own.some((address) => suppressed.has(`${organizationId}|${address}`))) return OPTED_OUT;
    if (profile.organization.requireConsent && !recipient.consentAt) return NO_CONSENT;
    if (own.some((address) => asked.has(address))) return COOLDOWN;
    return null;
  });
  return { now, skips };
}
