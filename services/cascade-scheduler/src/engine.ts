/**
 * The timing and skip rules of a recipient's cascade, as pure state transitions (design brief §3).
 * Callers load a recipient with its steps (holding the recipient's row lock), apply transitions here,
 * and save what was marked dirty. Nothing here reads a clock: `now` comes from the caller's one clock.
 */
import { rerouteReasonOfUnreachable, UNDELIVERED_REASON, type FinishReason, type RecipientStatus, type SkipReason, type StepHoldReason, type StepStatus } from '@rrs/proto';

// The state names are the API's (proto/src/states.ts): the engine and the documents cannot drift apart.
export type { FinishReason, SkipReason, StepStatus };

export interface Reroute {
  from: string;
  to: string;
  reason: string;
}

export interface StepState {
  id: string;
  order: number;
  channel: string;
  delayMinutes: number;
  status: StepStatus;
  sentChannel: string;
  attempt: number;
  dueAt: Date | null;
  dispatchedAt: Date | null;
  sentAt: Date | null;
  skippedAt: Date | null;
  deliveredAt: Date | null;
  reason: string | null;
  reroutes: Reroute[];
  /** The provider that took the message (`smtp`, `postmark`, `smsc`, `smsru`, `greenapi`, `sink`), once sent and when the sender says. */
  provider?: string | null;
  dirty?: boolean;
}

export interface RecipientFields {
  id: string;
  cascadeId: string;
  organizationId: string;
  name: string;
  email: string;
  phone: string;
  status: RecipientStatus;
  finishReason: FinishReason | null;
  rating: number | null;
  ratedAt: Date | null;
  feedback: string | null;
  finishedAt: Date | null;
  /** While `waiting`: when the response window closes. */
  windowClosesAt: Date | null;
}

export interface RecipientState {
  recipient: RecipientFields;
  /** Ordered by `order`. */
  steps: StepState[];
  /** Flow minutes the recipient waits for a rating after its last step went out (the cascade's; 0 = finish at once). */
  responseWindowMinutes?: number;
  dirty?: boolean;
  /** Set by the transition that finished the recipient, so the caller writes the finish event. */
  finishedNow?: boolean;
  /** Set when a finished recipient's steps changed after its finish event was written: the caller refreshes an unpublished event. */
  finishEventStale?: boolean;
}

export interface Timing {
  now: Date;
  /** Length of one flow minute in ms (60 000, or less with the fast clock). */
  minuteMs: number;
}

/** What the firing step may use, checked when it fires, never when it is scheduled. */
export interface FireChecks {
  configured(channel: string): boolean;
  /** The person is in the organization's opt-out ledger (by any of their addresses): no channel reaches them. */
  optedOut(): boolean;
  /** The phone channels refuse the recipient's phone (premium rate, satellite, outside the allowed countries: proto phones.ts). */
  phoneRefused(): boolean;
  /** Null when the channel may send now; else when the recipient's send window next opens. */
  windowOpensAt(channel: string): Date | null;
}

/** The `reason` of a step held for its send window (still `scheduled`, due when the window opens). */
export const HELD_FOR_SEND_WINDOW: StepHoldReason = 'send_window';

/** Phone channels in reroute order: an SMS without balance goes to MAX, then TELEGRAM. */
export const PHONE_CHAIN = ['SMS', 'MAX', 'TELEGRAM'] as const;
const MESSENGERS = new Set(['MAX', 'TELEGRAM']);

export function contactField(channel: string): 'email' | 'phone' {
  return channel === 'EMAIL' ? 'email' : 'phone';
}

export function addressFor(channel: string, recipient: Pick<RecipientFields, 'email' | 'phone'>): string {
  return contactField(channel) === 'email' ? recipient.email.toLowerCase() : recipient.phone;
}

/** True when some step of the flow has its contact field: the recipient is queued, not skipped. */
export function canReachAny(channels: string[], recipient: Pick<RecipientFields, 'email' | 'phone'>): boolean {
  return channels.some((c) => addressFor(c, recipient) !== '');
}

function touch(state: RecipientState, step?: StepState): void {
  if (step) step.dirty = true;
  else state.dirty = true;
}

export function finish(state: RecipientState, reason: FinishReason, timing: Timing): void {
  const recipient = state.recipient;
  if (recipient.status === 'finished') return;
  recipient.status = 'finished';
  recipient.windowClosesAt = null;
  recipient.finishReason = reason;
  recipient.finishedAt = timing.now;
  state.finishedNow = true;
  touch(state);
}

/**
 * Schedules the next pending step, or finishes the recipient when none is left.
 * - Step k>1 is due `delayMinutes` after the last step actually sent to the recipient.
 * - When nothing was sent yet (every earlier step skipped or failed), it is due at once.
 */
export function scheduleNext(state: RecipientState, timing: Timing): void {
  if (state.recipient.status === 'finished') return;
  if (state.steps.some((s) => s.status === 'scheduled' || s.status === 'dispatched')) return;
  const next = state.steps.find((s) => s.status === 'pending');
  if (!next) {
    const last = lastSent(state);
    const windowMinutes = state.responseWindowMinutes ?? 0;
    if (last && windowMinutes > 0 && state.recipient.status === 'running') {
      // Reached: wait for the rating the last message asked for, counted from when it went out.
      const closes = new Date(last.getTime() + windowMinutes * timing.minuteMs);
      if (closes > timing.now) {
        state.recipient.status = 'waiting';
        state.recipient.windowClosesAt = closes;
        touch(state);
        return;
      }
    }
    finish(state, exhaustionReason(state), timing);
    return;
  }
  const last = lastSent(state);
  next.status = 'scheduled';
  next.dueAt = last ? new Date(last.getTime() + next.delayMinutes * timing.minuteMs) : timing.now;
  touch(state, next);
}

/** When the last step actually sent to the recipient went out (read from the steps, not stored twice). */
export function lastSent(state: RecipientState): Date | null {
  let last: Date | null = null;
  for (const step of state.steps) if (step.sentAt && (!last || step.sentAt > last)) last = step.sentAt;
  return last;
}

/** Why a recipient whose steps are all done finishes: reached (exhausted), or never reached. */
export function exhaustionReason(state: RecipientState): FinishReason {
  if (state.steps.some((s) => s.sentAt !== null)) return 'exhausted';
  const notReached = state.steps.every((s) => s.status === 'skipped' || s.status === 'canceled' || (s.status === 'failed' && s.reason === 'unreachable'));
  if (!notReached) return 'exhausted';
  return state.steps.some((s) => s.reason === 'opted_out') ? 'unsubscribed' : 'unreachable';
}

/** The first step of a new recipient is due at once, whatever its delay. */
export function start(state: RecipientState, timing: Timing): void {
  scheduleNext(state, timing);
}

export interface Dispatch {
  step: StepState;
  /** `<step id>:<attempt>`: the Nats-Msg-Id, stable if this dispatch is retried after a crash. */
  attemptId: string;
  channel: string;
}

function skip(state: RecipientState, step: StepState, reason: SkipReason, timing: Timing): void {
  step.status = 'skipped';
  step.skippedAt = timing.now;
  step.reason = reason;
  touch(state, step);
  scheduleNext(state, timing);
}

function fail(state: RecipientState, step: StepState, reason: string, timing: Timing): void {
  step.status = 'failed';
  step.reason = reason;
  touch(state, step);
  scheduleNext(state, timing);
}

/**
 * Moves a phone step to the next phone channel (SMS → MAX → TELEGRAM), due at once; when there is no
 * next channel the step fails with the reason.
 */
export function reroute(state: RecipientState, step: StepState, reason: string, timing: Timing): void {
  const at = PHONE_CHAIN.indexOf(step.sentChannel as (typeof PHONE_CHAIN)[number]);
  const to = at >= 0 ? PHONE_CHAIN[at + 1] : undefined;
  if (!to) {
    fail(state, step, reason, timing);
    return;
  }
  step.reroutes = [...step.reroutes, { from: step.sentChannel, to, reason }];
  step.sentChannel = to;
  step.status = 'scheduled';
  step.dueAt = timing.now;
  touch(state, step);
}

/**
 * A scheduled step comes due: it is skipped (and the next one scheduled) when the recipient lacks the
 * contact field, its phone is refused (phone steps), it opted out, or the channel is not configured; otherwise it is dispatched.
 * A rerouted step whose new channel is not configured moves on along the phone chain.
 */
export function fire(state: RecipientState, step: StepState, checks: FireChecks, timing: Timing): Dispatch | null {
  if (step.status !== 'scheduled') return null;
  if (state.recipient.status === 'finished') {
    step.status = 'canceled';
    touch(state, step);
    return null;
  }
  for (let hops = 0; hops <= PHONE_CHAIN.length; hops++) {
    const channel = step.sentChannel;
    const address = addressFor(channel, state.recipient);
    if (address === '') {
      skip(state, step, 'no_contact', timing);
      return null;
    }
    if (contactField(channel) === 'phone' && checks.phoneRefused()) {
      skip(state, step, 'phone_not_allowed', timing);
      return null;
    }
    if (checks.optedOut()) {
      skip(state, step, 'opted_out', timing);
      return null;
    }
    if (checks.configured(channel)) break;
    if (step.reroutes.length === 0) {
      skip(state, step, 'channel_not_configured', timing);
      return null;
    }
    reroute(state, step, 'channel_not_configured', timing);
    if (step.status !== 'scheduled') return null;
  }
  // Held, never dropped: the step keeps its place and goes out when the window opens; the next step's
  // delay counts from when this one actually went out (scheduleNext reads sentAt).
  const opensAt = checks.windowOpensAt(step.sentChannel);
  if (opensAt) {
    step.dueAt = opensAt;
    step.reason = HELD_FOR_SEND_WINDOW;
    touch(state, step);
    return null;
  }
  if (step.reason === HELD_FOR_SEND_WINDOW) step.reason = null;
  step.attempt += 1;
  step.status = 'dispatched';
  step.dispatchedAt = timing.now;
  touch(state, step);
  return { step, attemptId: `${step.id}:${step.attempt}`, channel: step.sentChannel };
}

/**
 * A dispatched step whose result never came (the sender never answered, or its result was lost): it is
 * dispatched again as a new attempt — the sender's send log is keyed by step id, so a step that was sent
 * is reported again, not sent again — or, on its last attempt, fails `no_result` and the recipient moves on.
 */
export function resultTimedOut(state: RecipientState, step: StepState, lastAttempt: boolean, timing: Timing): void {
  if (step.status !== 'dispatched') return;
  if (lastAttempt) {
    fail(state, step, NO_RESULT, timing);
    return;
  }
  step.status = 'scheduled';
  step.dueAt = timing.now;
  touch(state, step);
}

export const NO_RESULT = 'no_result';

export type Outcome = 'SENT' | 'FAILED' | 'NO_BALANCE' | 'UNREACHABLE' | 'DELIVERED' | 'UNDELIVERED';

/**
 * Applies a sender's result. Results for an attempt that is no longer the step's current one (the
 * recipient rated while the message was in flight, a duplicate) only record the send time.
 */
export function applyResult(state: RecipientState, step: StepState, attemptId: string, outcome: Outcome, reason: string, timing: Timing, provider = '', occurredAt?: Date): void {
  if (outcome === 'DELIVERED') {
    if (!step.deliveredAt) {
      // The receipt's own time (a provider's event time) when it has one, kept within [sent, now]: another
      // clock never puts a delivery before its send or in the future.
      const at = occurredAt && occurredAt.getTime() < timing.now.getTime() ? occurredAt : timing.now;
      step.deliveredAt = step.sentAt && at.getTime() < step.sentAt.getTime() ? step.sentAt : at;
      touch(state, step);
    }
    return;
  }
  if (outcome === 'UNDELIVERED') {
    step.reason = `${UNDELIVERED_REASON}${reason ? `: ${reason}` : ''}`;
    touch(state, step);
    return;
  }
  // A dispatcher that published and then died before committing left the step scheduled with its
  // attempt not counted; the message went out all the same, so its result is this step's result.
  if (step.status === 'scheduled' && attemptId === `${step.id}:${step.attempt + 1}` && state.recipient.status === 'running') {
    step.attempt += 1;
    step.status = 'dispatched';
    step.dispatchedAt = timing.now;
    touch(state, step);
  }
  const current = step.status === 'dispatched' && attemptId === `${step.id}:${step.attempt}`;
  if (!current) {
    // A message that went out after all (a late result of a step canceled by a rating, or given up as
    // `no_result`) is reported as what it is, `sent`, whatever order the rating and the result came in;
    // the recipient's course does not change (it finished, or moved on).
    // So is the step of an attempt published by a dispatcher whose commit this result's read did not see
    // (it read the step still scheduled) when the recipient has finished since: it went out.
    const publishedUnseen = step.status === 'scheduled' && attemptId === `${step.id}:${step.attempt + 1}` && state.recipient.status === 'finished';
    const settledWithoutResult = step.status === 'canceled' || (step.status === 'failed' && step.reason === NO_RESULT) || publishedUnseen;
    if (outcome === 'SENT' && step.sentAt === null && settledWithoutResult) {
      if (publishedUnseen) step.attempt += 1;
      step.status = 'sent';
      step.reason = null;
      step.sentAt = timing.now;
      step.provider = provider || null;
      touch(state, step);
      if (state.recipient.status === 'finished') state.finishEventStale = true;
    }
    return;
  }
  switch (outcome) {
    case 'SENT':
      step.status = 'sent';
      step.sentAt = timing.now;
      step.provider = provider || null;
      touch(state, step);
      // A step in flight when the recipient rated: its finish event, if not out yet, now says `sent`.
      if (state.recipient.status === 'finished') state.finishEventStale = true;
      scheduleNext(state, timing);
      return;
    case 'NO_BALANCE':
      if (step.sentChannel === 'SMS') reroute(state, step, 'no_balance', timing);
      else fail(state, step, 'no_balance', timing);
      return;
    case 'UNREACHABLE':
      // A working account that can't send (blocked, logged out) is told apart from a number not on the messenger.
      if (MESSENGERS.has(step.sentChannel)) reroute(state, step, rerouteReasonOfUnreachable(reason), timing);
      else fail(state, step, 'unreachable', timing);
      return;
    case 'FAILED':
    default:
      // Who refused it, when the sender says (a provider's permanent refusal, the last provider tried).
      step.provider = provider || null;
      fail(state, step, reason || 'failed', timing);
  }
}

/** Cancels every step not yet dispatched; a dispatched one is already on its way to the provider. */
function cancelPending(state: RecipientState): void {
  for (const step of state.steps) {
    if (step.status === 'pending' || step.status === 'scheduled') {
      step.status = 'canceled';
      touch(state, step);
    }
  }
}

/** The first rating finishes the recipient and cancels its pending steps; later ones change nothing. */
export function rate(state: RecipientState, rating: number, timing: Timing): boolean {
  const recipient = state.recipient;
  if (recipient.rating !== null) return false;
  recipient.rating = rating;
  recipient.ratedAt = timing.now;
  touch(state);
  if (recipient.status !== 'finished') {
    cancelPending(state);
    finish(state, 'rated', timing);
  }
  return true;
}

/** A waiting recipient whose response window has closed without a rating finishes (`exhausted`). */
export function closeResponseWindow(state: RecipientState, timing: Timing): void {
  const recipient = state.recipient;
  if (recipient.status !== 'waiting' || !recipient.windowClosesAt || recipient.windowClosesAt > timing.now) return;
  finish(state, exhaustionReason(state), timing);
}

export function stop(state: RecipientState, reason: 'unsubscribed' | 'canceled', timing: Timing): void {
  if (state.recipient.status === 'finished') return;
  cancelPending(state);
  finish(state, reason, timing);
}
