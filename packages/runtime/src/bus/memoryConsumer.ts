import { Delivery, HandlerSlots } from './delivery';
import type { BusErrorHandler } from './errors';
import { DEFAULT_ACK_WAIT_MS, DEFAULT_MAX_DELIVER, subjectMatches, type ConsumerRule } from './rules';
import type { MessageHandler, Subscription } from './types';

/** What a consumer reads of its stream (memory.ts's MemoryStream), named here so this module imports nothing of memory.ts. */
export interface ConsumedStream {
  readonly messages: ReadonlyMap<number, StoredMessage>;
  readonly workQueue: boolean;
  readonly lastSeq: number;
  remove(seq: number): void;
}

/** The bus's timers as a consumer sets them (memory.ts's Timers: every one cancelled on close). */
export interface ConsumerTimers {
  after(ms: number, fn: () => void): NodeJS.Timeout | null;
  cancel(timer: NodeJS.Timeout | null | undefined): void;
}

export interface StoredMessage {
  seq: number;
  subject: string;
  tokens: string[];
  data: Uint8Array;
  headers: Record<string, string>;
  storedAt: number;
}

interface AckDeadline {
  /** Identifies the delivery; a nak or `working()` from an older delivery of the same message is ignored. */
  token: object;
  timer: NodeJS.Timeout | null;
}

/**
 * A durable consumer: what a JetStream server does for one. Each message matching the filter is in
 * exactly one state: not yet reached by the cursor, awaiting ack, delayed (nak with delay), ready for
 * redelivery, or finished (acked, termed, or out of deliveries; a work queue then forgets the message).
 */
export class MemoryConsumer {
  filterTokens: string[] = [];
  private ackWaitMs = DEFAULT_ACK_WAIT_MS;
  private maxDeliver = DEFAULT_MAX_DELIVER;
  /** Next stream sequence the consumer has not looked at yet. */
  private cursor = 1;
  /**
   * Stored messages matching the filter that the cursor has not reached: kept as messages come and go,
   * so `pending()` (read by every metrics scrape) does not walk the stream's backlog.
   */
  private ahead = 0;
  /** Deliveries so far of every message delivered and not finished. */
  private readonly deliveries = new Map<number, number>();
  private readonly awaitingAck = new Map<number, AckDeadline>();
  private readonly delayed = new Map<number, NodeJS.Timeout | null>();
  /** Redeliveries go before new messages, oldest first. */
  private readonly ready = new Set<number>();
  private readonly subscribers: MemorySubscription[] = [];
  private nextSubscriber = 0;
  private dispatching = false;

  constructor(
    private readonly stream: ConsumedStream,
    readonly durable: string,
    private readonly timers: ConsumerTimers,
  ) {}

  configure(filterSubject: string, ackWaitMs: number, maxDeliver: number): void {
    this.filterTokens = filterSubject.split('.');
    this.ackWaitMs = ackWaitMs;
    this.maxDeliver = maxDeliver;
    this.ahead = 0;
    for (let seq = this.cursor; seq <= this.stream.lastSeq; seq++) {
      const message = this.stream.messages.get(seq);
      if (message && subjectMatches(this.filterTokens, message.tokens)) this.ahead++;
    }
  }

  /** The stream stored a message matching the filter (after the cursor: it is the newest). */
  stored(): void {
    this.ahead++;
    this.dispatch();
  }

  /** The stream dropped a message (age limit, or a work queue's finished message). */
  dropped(message: StoredMessage): void {
    if (message.seq >= this.cursor && subjectMatches(this.filterTokens, message.tokens)) this.ahead--;
  }

  attach(subscriber: MemorySubscription): void {
    this.subscribers.push(subscriber);
    this.dispatch();
  }

  detach(subscriber: MemorySubscription): void {
    const index = this.subscribers.indexOf(subscriber);
    if (index >= 0) this.subscribers.splice(index, 1);
  }

  pending(): number {
    return this.ahead + this.awaitingAck.size + this.delayed.size + this.ready.size;
  }

  /** Hands out messages while some subscriber has a free slot. Called whenever either may have appeared. */
  dispatch(): void {
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (;;) {
        const subscriber = this.pickSubscriber();
        if (!subscriber) return;
        const message = this.takeNext();
        if (!message) return;
        this.deliver(subscriber, message);
      }
    } finally {
      this.dispatching = false;
    }
  }

  /** Ack and term alike: the message is finished, whichever delivery says so. */
  finishBy(seq: number): void {
    if (this.deliveries.has(seq)) this.finish(seq);
  }

  nak(seq: number, token: object, delayMs: number): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.timers.cancel(deadline.timer);
    this.awaitingAck.delete(seq);
    this.retry(seq, delayMs);
  }

  working(seq: number, token: object): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.timers.cancel(deadline.timer);
    deadline.timer = this.timers.after(this.ackWaitMs, () => this.expire(seq, token));
  }

  private pickSubscriber(): MemorySubscription | undefined {
    const count = this.subscribers.length;
    for (let i = 0; i < count; i++) {
      const index = (this.nextSubscriber + i) % count;
      const subscriber = this.subscribers[index];
      if (subscriber.hasCapacity()) {
        this.nextSubscriber = (index + 1) % count;
        return subscriber;
      }
    }
    return undefined;
  }

  private takeNext(): StoredMessage | undefined {
    for (const seq of this.ready) {
      this.ready.delete(seq);
      const message = this.stream.messages.get(seq);
      if (message) return message;
      this.deliveries.delete(seq);
    }
    while (this.cursor <= this.stream.lastSeq) {
      const message = this.stream.messages.get(this.cursor++);
      if (message && subjectMatches(this.filterTokens, message.tokens)) {
        this.ahead--;
        return message;
      }
    }
    return undefined;
  }

  private deliver(subscriber: MemorySubscription, message: StoredMessage): void {
    const deliveryCount = (this.deliveries.get(message.seq) ?? 0) + 1;
    this.deliveries.set(message.seq, deliveryCount);
    const token = {};
    const timer = this.timers.after(this.ackWaitMs, () => this.expire(message.seq, token));
    this.awaitingAck.set(message.seq, { token, timer });
    subscriber.run(new MemoryMessage(this, message, deliveryCount, this.maxDeliver, token));
  }

  private expire(seq: number, token: object): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.awaitingAck.delete(seq);
    this.retry(seq, 0);
  }

  private retry(seq: number, delayMs: number): void {
    if ((this.deliveries.get(seq) ?? 0) >= this.maxDeliver) {
      this.finish(seq);
      return;
    }
    if (delayMs > 0) {
      const timer = this.timers.after(delayMs, () => {
        this.delayed.delete(seq);
        this.ready.add(seq);
        this.dispatch();
      });
      this.delayed.set(seq, timer);
      return;
    }
    this.ready.add(seq);
    this.dispatch();
  }

  private finish(seq: number): void {
    const deadline = this.awaitingAck.get(seq);
    if (deadline) {
      this.timers.cancel(deadline.timer);
      this.awaitingAck.delete(seq);
    }
    if (this.delayed.has(seq)) {
      this.timers.cancel(this.delayed.get(seq));
      this.delayed.delete(seq);
    }
    this.ready.delete(seq);
    this.deliveries.delete(seq);
    if (this.stream.workQueue) this.stream.remove(seq);
  }
}

class MemoryMessage extends Delivery {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly seq: number;

  constructor(
    private readonly consumer: MemoryConsumer,
    message: StoredMessage,
    readonly deliveryCount: number,
    maxDeliver: number,
    private readonly token: object,
  ) {
    super(maxDeliver);
    this.subject = message.subject;
    // Each delivery gets its own copy: a handler mutating its buffer must not change a redelivery.
    this.data = message.data.slice();
    this.headers = { ...message.headers };
    this.seq = message.seq;
  }

  protected sendAck(): void {
    this.consumer.finishBy(this.seq);
  }

  protected sendNak(delayMs: number): void {
    this.consumer.nak(this.seq, this.token, delayMs);
  }

  protected sendTerm(): void {
    this.consumer.finishBy(this.seq);
  }

  protected sendWorking(): void {
    this.consumer.working(this.seq, this.token);
  }
}

export class MemorySubscription implements Subscription {
  private readonly handlers: HandlerSlots;
  private draining = false;
  private drained: Promise<void> | null = null;

  constructor(
    private readonly consumer: MemoryConsumer,
    handler: MessageHandler,
    rule: ConsumerRule,
    onError: BusErrorHandler,
    private readonly onDrained: (subscription: MemorySubscription) => void,
  ) {
    this.handlers = new HandlerSlots(handler, rule, onError, () => consumer.dispatch());
  }

  hasCapacity(): boolean {
    return !this.draining && this.handlers.free > 0;
  }

  run(message: MemoryMessage): void {
    this.handlers.run(message);
  }

  drain(): Promise<void> {
    if (!this.drained) {
      this.draining = true;
      this.consumer.detach(this);
      this.drained = (async () => {
        await this.handlers.idle();
        this.onDrained(this);
      })();
    }
    return this.drained;
  }
}
