import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { CHANNEL_KEY_PATTERN, eventSubject, EVENT_TYPES, INTAKE_SKIPS, MAX_RECIPIENTS_PER_REQUEST, phoneCountries, phoneRefusal, schedulerV1, sendingRefusal, type IntakeSkip } from '@rrs/proto';
import { ConflictError, injectTraceContext, InvalidError, sendingRefused, type FieldProblem, type Pool, type PoolClient } from '@rrs/runtime';
import { recentlyAsked } from './cooldown';
import { canReachAny } from './engine';
import { finishEventFor } from './finishEvent';
import type { Flow, Flows } from './flows';
import { tokenBatch, uuidv7Batch } from './ids';
import type { OrganizationProfiles, SendingProfile } from './organizationProfiles';
import { recipientLimit } from './organizationSettings';
import { writeOutbox } from './outbox';
import { dbNow } from './recipientStore';
import { normalizeRecipients, type RecipientInput } from './recipientInput';
import { suppressedAmong } from './optOutLedger';
import { personAddresses } from './personAddresses';
import { savedAnswerCodec, type SavedAnswer } from './savedAnswer';
import { templatesByChannel, type SnapshotWriter } from './snapshots';
import { insertCascade, type CascadeRow, type NewCascade, type RecipientRow, type ReviewLinkRow, type StepRow } from './sql/insertCascade';
import type { AddressHasher } from './personHash';

export type StartCascadeInput = Omit<schedulerV1.StartCascadeRequest, 'recipients' | 'ignoreCooldown' | 'dryRun'> & { recipients: RecipientInput[]; ignoreCooldown?: boolean; dryRun?: boolean };
export type StartCascadeResult = SavedAnswer<schedulerV1.StartCascadeResponse>;

export interface IntakeDeps {
  pool: Pool;
  flows: Flows;
  profiles: OrganizationProfiles;
  snapshots: SnapshotWriter;
  /** The opt-out check looks up addresses and their keyed hashes (personHash.ts). */
  hasher: AddressHasher;
}

const answerCodec = savedAnswerCodec(schedulerV1.StartCascadeResponse);

/**
 * Starts a cascade: the cascade, its recipients, their review links and steps, and the
 * Idempotency-Key record are written in ONE transaction with one statement; the first steps are due
 * at once and the dispatcher is woken on commit. A replay returns the saved answer and writes nothing.
 */
export async function startCascade(deps: IntakeDeps, input: StartCascadeInput, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult; replayed: boolean }> {
  validateStart(input);
  // The organization's answers are read before the transaction: a replay still answers from the saved
  // record (checked first inside runIdempotent), and no connection is held during the gRPC calls.
  const [profile, location, flow, limit] = await Promise.all([
    deps.profiles.getSendingProfile(input.organizationId),
    deps.profiles.getLocation(input.organizationId, input.locationId),
    resolveFlow(deps.flows, input),
    recipientLimit(deps.pool, input.organizationId),
  ]);
  if (input.recipients.length > limit) throw InvalidError.field('/recipients', `at most ${limit} recipients per request for this organization`);
  const recipients = normalizeRecipients(input.recipients, profile.organization.defaultRegion);
  if (input.dryRun) {
    // Everything above and the refusals below are what a start would answer; nothing is written or recorded.
    refuseStart(input, profile);
    return { result: { id: '', status: '', queued: 0, skipped: 0, flow: { id: flow.id, organizationId: input.organizationId, name: flow.name, isDefault: flow.isDefault, steps: flow.steps }, channel: input.channel, externalId: input.externalId }, replayed: false };
  }
  return runIdempotent(deps.pool, idempotency, answerCodec, async (client) => {
    refuseStart(input, profile);
    await deps.snapshots.write(deps.pool, input.organizationId, profile, location);
    return writeCascade(client, deps.hasher, { ...input, recipients }, flow, profile);
  });
}

/** The organization's sending rule, and a one-step channel send's channel configured. */
function refuseStart(input: StartCascadeInput, profile: SendingProfile): void {
  const refusal = sendingRefusal(profile.organization);
  if (refusal) throw sendingRefused(refusal);
  if (input.channel && !profile.channels.some((c) => c.channel === input.channel && c.configured)) {
    throw new ConflictError('channel_not_configured', `the ${input.channel} channel is not configured for this organization`);
  }
}

function validateStart(input: StartCascadeInput): void {
  const problems: FieldProblem[] = [];
  if (!input.locationId) problems.push({ pointer: '/locationId', detail: 'required' });
  if (input.flowId && input.channel) problems.push({ pointer: '/channel', detail: 'flowId and channel are mutually exclusive' });
  if (input.recipients.length < 1 || input.recipients.length > MAX_RECIPIENTS_PER_REQUEST) {
    problems.push({ pointer: '/recipients', detail: `1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients per request` });
  }
  if (input.channel && !CHANNEL_KEY_PATTERN.test(input.channel)) problems.push({ pointer: '/channel', detail: 'not a channel key' });
  if (problems.length) throw new InvalidError(problems);
}

/** A `channel` send is a one-step flow in that channel (no flow id); otherwise `flowId`, or the default flow. */
function resolveFlow(flows: Flows, input: StartCascadeInput): Promise<Flow> {
  if (input.channel) return Promise.resolve({ id: '', organizationId: input.organizationId, name: input.channel, isDefault: false, steps: [{ order: 1, channel: input.channel, delayMinutes: 0 }] });
  if (input.flowId) return flows.get(input.organizationId, input.flowId);
  return flows.getDefault(input.organizationId);
}

const DAY_MS = 86_400_000;
const [UNREACHABLE, PHONE_NOT_ALLOWED, OPTED_OUT, NO_CONSENT, COOLDOWN] = INTAKE_SKIPS;

/**
 * Why each recipient is skipped at intake, or null when it is queued (INTAKE_SKIPS, in their order):
 * no step has its contact field; only phone steps could reach it and the phone channels refuse its
 * number (proto phones.ts); the person opted out of the organization; the organization requires
 * consent and none was given; the person was asked (or rated) within the organization's cooldown.
 */
async function intakeSkips(client: PoolClient, hasher: AddressHasher, input: StartCascadeInput, channels: string[], profile: SendingProfile, now: Date): Promise<Array<IntakeSkip | null>> {
  const organizationId = input.organizationId;
  const addresses = input.recipients.flatMap(personAddresses);
  const cooldownDays = input.ignoreCooldown ? 0 : profile.organization.cooldownDays ?? 0;
  const [suppressed, asked] = await Promise.all([
    suppressedAmong(client, hasher, [organizationId], addresses),
    cooldownDays > 0 ? recentlyAsked(client, organizationId, addresses, new Date(now.getTime() - cooldownDays * DAY_MS)) : new Set<string>(),
  ]);
  const countries = phoneCountries(profile.organization);
  return input.recipients.map((recipient) => {
    const own = personAddresses(recipient);
    if (!canReachAny(channels, recipient)) return UNREACHABLE;
    if (recipient.phone && phoneRefusal(recipient.phone, countries) && !canReachAny(channels, { ...recipient, phone: '' })) return PHONE_NOT_ALLOWED;
    if (own.some((address) => suppressed.has(`${organizationId}|${address}`))) return OPTED_OUT;
    if (profile.organization.requireConsent && !recipient.consentAt) return NO_CONSENT;
    if (own.some((address) => asked.has(address))) return COOLDOWN;
    return null;
  });
}

/**
 * The rows of a new cascade. Step 1 of each queued recipient is due at once, whatever its delay;
 * later steps wait for the previous one's outcome. A recipient skipped at intake is stored finished with
 * its skip's finish reason (its steps skipped with the skip's step reason) and counted in `skipped`.
 */
function planCascade(input: StartCascadeInput, flow: Flow, profile: SendingProfile, skips: Array<IntakeSkip | null>, now: Date, traceContext: Record<string, string>): NewCascade {
  const count = input.recipients.length;
  const ids = uuidv7Batch(1 + count * (2 + flow.steps.length), now.getTime());
  const tokens = tokenBatch(count);
  let nextId = 1;
  const reviewLinks: ReviewLinkRow[] = [];
  const recipients: RecipientRow[] = [];
  const steps: StepRow[] = [];
  input.recipients.forEach((recipient, position) => {
    const id = ids[nextId++];
    const reviewRequestId = ids[nextId++];
    const skip = skips[position];
    reviewLinks.push({ id: reviewRequestId, token: tokens[position], recipient_id: id, customer_name: recipient.name, contact: recipient.email || recipient.phone });
    recipients.push({
      id, position, name: recipient.name, email: recipient.email, phone: recipient.phone, contact_id: recipient.contactId ?? '',
      contact_external_id: recipient.contactExternalId ?? '', status: skip ? 'finished' : 'running', finish_reason: skip?.finishReason ?? null,
      review_request_id: reviewRequestId, consent_at: recipient.consentAt ?? null,
    });
    flow.steps.forEach((step, index) => {
      const status = skip ? 'skipped' : index === 0 ? 'scheduled' : 'pending';
      steps.push({ id: ids[nextId++], recipient_id: id, step_order: step.order, channel: step.channel, delay_minutes: step.delayMinutes, status, reason: skip?.stepReason ?? null });
    });
  });
  const skipped = skips.filter((skip) => skip !== null).length;
  const active = count - skipped;
  const cascade: CascadeRow = {
    id: ids[0], organization_id: input.organizationId, location_id: input.locationId, name: input.name, flow_id: flow.id || null,
    channel: input.channel || null, external_id: input.externalId || null, status: active === 0 ? 'finished' : 'running',
    locale: profile.organization.locale || 'en', templates: JSON.stringify(templatesByChannel(profile)), flow_steps: JSON.stringify(flow.steps),
    recipients_total: count, skipped, active_recipients: active, created_at: now, finished_at: active === 0 ? now : null, trace_context: JSON.stringify(traceContext),
    response_window_minutes: flow.responseWindowMinutes ?? profile.organization.responseWindowMinutes ?? 0,
  };
  return { cascade, reviewLinks, recipients, steps };
}

/** Writes the cascade's rows, and the finish events of the recipients skipped at intake. */
async function writeCascade(client: PoolClient, hasher: AddressHasher, input: StartCascadeInput, flow: Flow, profile: SendingProfile): Promise<StartCascadeResult> {
  const now = await dbNow(client);
  // The StartCascade span's context: every message of this cascade is published as its child.
  const traceContext = injectTraceContext({});
  const skips = await intakeSkips(client, hasher, input, flow.steps.map((step) => step.channel), profile, now);
  const rows = planCascade(input, flow, profile, skips, now, traceContext);
  await insertCascade(client, rows);
  const { cascade } = rows;
  const skippedRecipients = rows.recipients.filter((recipient) => recipient.status === 'finished');
  if (skippedRecipients.length) {
    const events = skippedRecipients.map((recipient) => ({
      ...finishEventFor({
        organizationId: input.organizationId,
        cascadeId: cascade.id,
        cascadeExternalId: cascade.external_id,
        locationId: input.locationId,
        reviewRequestId: recipient.review_request_id,
        recipient: { id: recipient.id, ...input.recipients[recipient.position] },
        rating: null,
        feedback: null,
        reason: skips[recipient.position]!.finishReason,
        steps: flow.steps.map((step) => ({ order: step.order, channel: step.channel, status: 'skipped', reason: skips[recipient.position]!.stepReason, sentAt: null, reroutedTo: '' })),
        finishedAt: now,
      }),
      headers: traceContext,
    }));
    await writeOutbox(client, eventSubject(EVENT_TYPES.cascadeRecipientFinished), events);
  }
  return {
    id: cascade.id,
    status: cascade.status,
    queued: cascade.active_recipients,
    skipped: cascade.skipped,
    flow: { id: flow.id, organizationId: input.organizationId, name: flow.name, isDefault: flow.isDefault, steps: flow.steps },
    channel: input.channel,
    externalId: input.externalId,
  };
}
