import { toBusError, type BusErrorHandler } from './errors';
import type { BusMessage, MessageHandler } from './types';

/*
 * The settlement rules of the bus, for both transports:
 * - a delivery is settled once: the first of ack, nak and term counts, the rest are ignored, and
 *   `working()` after settling does nothing;
 * - a nak on the last delivery (`deliveryCount >= maxDeliver`) is a term: the message is not redelivered,
 *   and it does not sit out the ack wait first;
 * - a handler runs outside the call that delivered it (never inside publish or consume), at most
 *   `concurrency` at once; one that throws without settling is reported and nak'ed with
 *   `defaultNakDelayMs`;
 * - while a handler runs, its message is kept in progress (`working()` every quarter of the ack wait),
 *   so the ack wait can be short: a message is redelivered after `ackWaitMs` only when its handler
 *   returned without settling it or its process died (or stalled for most of the ack wait) — which is
 *   how a dead replica's work moves on to another within the ack wait.
 * The ack-wait redelivery and the delivery count are the server's (JetStream) or the in-process
 * consumer's; see `memoryConsumer.ts`.
 */

/** A delivered message; a transport says how to send each settlement, this class says when. */
export abstract class Delivery implements BusMessage {
  abstract readonly subject: string;
  abstract readonly data: Uint8Array;
  abstract readonly headers: Readonly<Record<string, string>>;
  abstract readonly deliveryCount: number;
  abstract readonly seq: number;
  private settled = false;

  protected constructor(private readonly maxDeliver: number) {}

  ack(): void {
    if (this.settle()) this.sendAck();
  }

  nak(delayMs = 0): void {
    if (this.deliveryCount >= this.maxDeliver) {
      this.term(`max deliveries (${this.maxDeliver}) reached`);
      return;
    }
    if (this.settle()) this.sendNak(Math.max(0, delayMs));
  }

  term(reason?: string): void {
    if (this.settle()) this.sendTerm(reason);
  }

  working(): void {
    if (!this.settled) this.sendWorking();
  }

  protected abstract sendAck(): void;
  /** `delayMs` is 0 (as soon as possible) or more. */
  protected abstract sendNak(delayMs: number): void;
  protected abstract sendTerm(reason: string | undefined): void;
  protected abstract sendWorking(): void;

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    return true;
  }
}

/** The handlers one subscription runs. */
export class HandlerSlots {
  /** The handlers running, with the message each works on. */
  private readonly running = new Map<Promise<void>, BusMessage>();
  /** One timer for all of them (not one per message): sends `working()` for every message still handled. */
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(
    private readonly handler: MessageHandler,
    private readonly options: { concurrency: number; defaultNakDelayMs: number; ackWaitMs: number },
    private readonly onError: BusErrorHandler,
    /** Called when a handler has finished and its slot is free again. */
    private readonly onSlotFreed: () => void,
  ) {}

  /** How many more handlers may start now. */
  get free(): number {
    return this.options.concurrency - this.running.size;
  }

  run(message: BusMessage): void {
    const running: Promise<void> = this.handle(message).finally(() => {
      this.running.delete(running);
      if (this.running.size === 0 && this.heartbeat) {
        clearInterval(this.heartbeat);
        this.heartbeat = null;
      }
      this.onSlotFreed();
    });
    this.running.set(running, message);
    // Every quarter of the ack wait: a message first beats between a quarter and a half of it after delivery.
    this.heartbeat ??= setInterval(() => {
      for (const m of this.running.values()) m.working();
    }, Math.max(25, Math.floor(this.options.ackWaitMs / 4)));
  }

  /** Resolves once no handler runs (including those started while waiting). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.keys()]);
  }

  private async handle(message: BusMessage): Promise<void> {
    await Promise.resolve();
    try {
      await this.handler(message);
    } catch (err) {
      this.onError(toBusError(`handler for ${message.subject} #${message.seq} (delivery ${message.deliveryCount}) failed`, err));
      message.nak(this.options.defaultNakDelayMs);
    }
  }
}
