import { hasSavedAnswer, runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { CHANNEL_KEY_PATTERN, eventSubject, EVENT_TYPES, MAX_RECIPIENTS_PER_REQUEST, schedulerV1, type IntakeSkip } from '@rrs/proto';
import { DomainError, injectTraceContext, InvalidError, type FieldProblem, type Pool, type PoolClient, type QueryResult } from '@rrs/runtime';
import { intakeReads, intakeSkips, refuseChannel, refuseSending, type IntakeReads } from './admission';
import { finishEventFor } from './finishEvent';
import type { Flow, Flows } from './flows';
import { tokenBatch, UuidArray } from './ids';
import { profileAt, type LocationInfo, type OrganizationProfiles, type SendingProfile } from './organizationProfiles';
import { recipientLimit } from './organizationSettings';
import { writeOutbox } from './outbox';
import type { RecipientBudgets } from './recipientBudget';
import { normalizeRecipients, type RecipientInput } from './recipientInput';
import { savedAnswerCodec, type SavedAnswer } from './savedAnswer';
import { templatesByChannel, type SnapshotWriter } from './snapshots';
import { insertCascade, type CascadeRow, type NewCascade, type RecipientRow } from './sql/insertCascade';
import type { AddressHasher } from './personHash';

export type StartCascadeInput = Omit<schedulerV1.StartCascadeRequest, 'recipients' | 'ignoreCooldown' | 'dryRun' | 'contact' | 'contactIdempotencyKey' | 'contactIdempotencyFingerprint'> & {
  recipients: RecipientInput[];
  ignoreCooldown?: boolean;
  dryRun?: boolean;
};
export type StartCascadeResult = SavedAnswer<schedulerV1.StartCascadeResponse>;

export interface IntakeDeps {
  pool: Pool;
  flows: Flows;
  profiles: OrganizationProfiles;
  snapshots: SnapshotWriter;
  /** The organizations' recipient budgets, taken by every start (admission.ts). */
  budgets: RecipientBudgets;
  /** The opt-out check looks up addresses and their keyed hashes (personHash.ts). */
  hasher: AddressHasher;
}

const answerCodec = savedAnswerCodec(schedulerV1.StartCascadeResponse);
/** A cascade's answer (and its saved record) holds no contact: a start with one adds the contact contacts answered (contactCascade.ts). */
const NO_CONTACT = { contact: undefined, contactReplayed: false };

/**
 * Starts a cascade: the cascade, its recipients, their review links and steps, and the
 * Idempotency-Key record are written in ONE transaction with one statement, and the recipients are
 * taken from the organization's budget in that same transaction (last, so its rows are locked only
 * until the commit); the first steps are due at once and the dispatcher is woken on commit. A replay
 * returns the saved answer and writes (and takes) nothing.
 *
 * A dry run (`dryRun`) is the one pre-check other services call: it answers every refusal a start would
 * (admission.ts, the budget as it is now) and creates nothing; its `locationId` may be empty (then the
 * location is not checked). A dry run under an Idempotency-Key whose start was already saved is
 * admitted: the replay it precedes takes nothing. A start with a contact to save runs the same
 * pre-check in process before the save (contactCascade.ts).
 */
export async function startCascade(deps: IntakeDeps, input: StartCascadeInput, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult; replayed: boolean }> {
  validateStart(input);
  const { profile, location, flow } = await readStart(deps, input);
  const recipients = normalizeRecipients(input.recipients, profile.organization.defaultRegion);
  if (input.dryRun) {
    // Everything above and the refusals below are what a start would answer; nothing is written or recorded.
    const recipientBudget = await precheckStart(deps, input, profile, idempotency);
    const flowAnswer = { id: flow.id, organizationId: input.organizationId, name: flow.name, isDefault: flow.isDefault, steps: flow.steps };
    const result = { id: '', status: '', queued: 0, skipped: 0, flow: flowAnswer, channel: input.channel, externalId: input.externalId, recipientBudget: recipientBudget ?? [], ...NO_CONTACT };
    return { result, replayed: recipientBudget === null };
  }
  return startAdmitted(deps, { ...input, recipients }, { profile, location: location!, flow }, idempotency);
}

/** What a start reads about its organization before any transaction. */
export interface StartContext {
  profile: SendingProfile;
  flow: Flow;
}

/**
 * The organization's answers a start needs: its sending profile (and the location, when the start names
 * one), the flow and the per-request recipient limit, read before the transaction (a replay still answers
 * from the saved record, checked first inside runIdempotent, and no connection is held during the gRPC
 * call). One question to contacts, beside the scheduler's own reads. The sending rule answers first,
 * whatever else is wrong with the request (402/409 before a 404).
 */
export async function readStart(deps: IntakeDeps, input: StartCascadeInput): Promise<StartContext & { location?: LocationInfo }> {
  const [asked, flowAsked, limitAsked] = await Promise.allSettled([profileAt(deps.profiles, input.organizationId, input.locationId), resolveFlow(deps.flows, input), recipientLimit(deps.pool, input.organizationId)]);
  if (asked.status === 'rejected') {
    // An unknown location: the profile alone still says whether the sending rule refuses first.
    if (input.locationId && asked.reason instanceof DomainError && asked.reason.kind === 'not_found') refuseSending(await deps.profiles.getSendingProfile(input.organizationId));
    throw asked.reason;
  }
  const { profile, location } = asked.value;
  refuseSending(profile);
  if (flowAsked.status === 'rejected') throw flowAsked.reason;
  if (limitAsked.status === 'rejected') throw limitAsked.reason;
  const [flow, limit] = [flowAsked.value, limitAsked.value];
  if (input.recipients.length > limit) throw InvalidError.field('/recipients', `at most ${limit} recipients per request for this organization`);
  return { profile, location, flow };
}

/**
 * The dry run's refusals after `readStart`: the channel, and the recipient budget as it is now (nothing
 * taken); answers the budget's windows. Null when a start was already saved under the Idempotency-Key:
 * it is admitted, since the replay it precedes takes nothing.
 */
export async function precheckStart(deps: IntakeDeps, input: Pick<StartCascadeInput, 'channel' | 'recipients'>, profile: SendingProfile, idempotency?: IdempotencyRequest): Promise<schedulerV1.RecipientWindow[] | null> {
  if (idempotency && (await hasSavedAnswer(deps.pool, idempotency))) return null;
  refuseChannel(input, profile);
  return deps.budgets.check(deps.pool, profile.organization, input.recipients.length);
}

/**
 * The start itself, once read (`readStart`) and with its recipients normalized: the rows, the
 * Idempotency-Key record and the recipients taken from the budget, in one transaction; a replay answers
 * the saved record.
 */
export function startAdmitted(deps: IntakeDeps, input: StartCascadeInput, read: StartContext & { location: LocationInfo }, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult; replayed: boolean }> {
  const { profile, location, flow } = read;
  // Coalesced: BEGIN goes with the Idempotency-Key's lock and read and the admission's reads (the clock,
  // cooldown and opt-outs), the Idempotency-Key record with COMMIT.
  const reads = intakeReads(input, profile);
  return runIdempotent(deps.pool, idempotency, answerCodec, async (client, results) => {
    refuseChannel(input, profile);
    await deps.snapshots.write(deps.pool, input.organizationId, profile, location);
    const result = await writeCascade(client, deps.hasher, input, flow, profile, { reads, results });
    return { ...result, recipientBudget: await deps.budgets.take(client, profile.organization, input.recipients.length) };
  }, { coalesced: true, reads: reads.statements });
}

export function validateStart(input: StartCascadeInput): void {
  const problems: FieldProblem[] = [];
  if (!input.locationId && !input.dryRun) problems.push({ pointer: '/locationId', detail: 'required' });
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

/**
 * The rows of a new cascade (its review links and steps are made from its recipients by the statement,
 * insertCascade.ts). Step 1 of each queued recipient is due at once, whatever its delay; later steps
 * wait for the previous one's outcome. A recipient skipped at intake is stored finished with its skip's
 * finish reason (its steps skipped with the skip's step reason) and counted in `skipped`.
 */
function planCascade(input: StartCascadeInput, flow: Flow, profile: SendingProfile, skips: Array<IntakeSkip | null>, now: Date, traceContext: Record<string, string>): NewCascade {
  const count = input.recipients.length;
  const time = now.getTime();
  const tokens = tokenBatch(count);
  const recipients = input.recipients.map((recipient, position): RecipientRow => {
    const skip = skips[position];
    return {
      position, name: recipient.name, email: recipient.email, phone: recipient.phone, contact_id: recipient.contactId ?? '',
      contact_external_id: recipient.contactExternalId ?? '', status: skip ? 'finished' : 'running', finish_reason: skip?.finishReason ?? null,
      consent_at: recipient.consentAt ?? null, token: tokens[position], step_reason: skip?.stepReason ?? null,
    };
  });
  const flowSteps = flow.steps.map((step) => ({ step_order: step.order, channel: step.channel, delay_minutes: step.delayMinutes }));
  const skipped = skips.filter((skip) => skip !== null).length;
  const active = count - skipped;
  const cascade: CascadeRow = {
    id: new UuidArray(1, time).at(0), organization_id: input.organizationId, location_id: input.locationId, name: input.name, flow_id: flow.id || null,
    channel: input.channel || null, external_id: input.externalId || null, status: active === 0 ? 'finished' : 'running',
    locale: profile.organization.locale || 'en', templates: JSON.stringify(templatesByChannel(profile)), flow_steps: JSON.stringify(flow.steps),
    recipients_total: count, skipped, active_recipients: active, created_at: now, finished_at: active === 0 ? now : null, trace_context: JSON.stringify(traceContext),
    response_window_minutes: flow.responseWindowMinutes ?? profile.organization.responseWindowMinutes ?? 0,
  };
  return {
    cascade, recipients, recipientIds: new UuidArray(count, time), reviewRequestIds: new UuidArray(count, time), flowSteps, stepIds: new UuidArray(count * flow.steps.length, time),
  };
}

/** Writes the cascade's rows, and the finish events of the recipients skipped at intake. */
async function writeCascade(client: PoolClient, hasher: AddressHasher, input: StartCascadeInput, flow: Flow, profile: SendingProfile, read: { reads: IntakeReads; results: QueryResult[] }): Promise<Omit<StartCascadeResult, 'recipientBudget'>> {
  const { now, skips } = await intakeSkips(client, hasher, input, flow.steps.map((step) => step.channel), profile, read);
  // The StartCascade span's context: every message of this cascade is published as its child.
  const traceContext = injectTraceContext({});
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
        reviewRequestId: rows.reviewRequestIds.at(recipient.position),
        recipient: { id: rows.recipientIds.at(recipient.position), ...input.recipients[recipient.position] },
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
    ...NO_CONTACT,
  };
}
