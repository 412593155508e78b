import { busV1 } from '@rrs/proto';
import { StepOutcome, type SendResult } from './result';
import { fillTemplate } from './template';
import type { SendStep } from './sender';

/** A message a sink provider "sent": what the dev inbox shows. */
export interface SinkMessage {
  channel: string;
  stepId: string;
  to: string;
  subject: string;
  text: string;
  link: string;
  sentAt: Date;
}

/**
 * The provider of the all-in-one mode: keeps messages in memory (bounded, oldest dropped first) instead
 * of sending them, so a demo cascade can be followed without any account at a real provider.
 */
export class SinkOutbox {
  /** A ring: until full, messages in order; then `oldest` is where the next one overwrites. */
  private readonly ring: SinkMessage[] = [];
  private oldest = 0;
  constructor(private readonly capacity = 1_000) {}

  record(message: Omit<SinkMessage, 'sentAt'> & { sentAt?: Date }): SinkMessage {
    const stored = { ...message, sentAt: message.sentAt ?? new Date() };
    // Overwriting in place: dropping the oldest from the front of an array moved every other message,
    // a thousand per send once full.
    if (this.ring.length < this.capacity) this.ring.push(stored);
    else {
      this.ring[this.oldest] = stored;
      this.oldest = (this.oldest + 1) % this.capacity;
    }
    return stored;
  }

  /**
   * Drops an erased person's messages, keeping the others in order: those of their steps, and those
   * whose link names one of their review requests (a rating alert's link into the console's inbox).
   */
  forget(erased: { stepIds: readonly string[]; reviewRequestIds: readonly string[] }): void {
    if (erased.stepIds.length === 0 && erased.reviewRequestIds.length === 0) return;
    const gone = new Set(erased.stepIds);
    const named = (link: string) => erased.reviewRequestIds.some((id) => link.includes(id));
    const kept = this.list().filter((message) => !gone.has(message.stepId) && !named(message.link));
    this.ring.length = 0;
    this.ring.push(...kept);
    this.oldest = 0;
  }

  /** Oldest first (a copy). */
  list(): readonly SinkMessage[] {
    return this.oldest === 0 ? this.ring.slice() : [...this.ring.slice(this.oldest), ...this.ring.slice(0, this.oldest)];
  }
}

/** A send function that records the filled template into the outbox instead of calling a provider. */
export function sinkSend(channel: string, outbox: SinkOutbox, to: (step: busV1.StepDue) => string): SendStep {
  return async (step): Promise<SendResult> => {
    outbox.record({
      channel,
      stepId: step.stepId,
      to: to(step),
      subject: fillTemplate(step.template?.subject ?? '', step),
      text: fillTemplate(step.template?.body ?? '', step),
      link: step.reviewUrl,
    });
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: `sink-${step.stepId}` };
  };
}
