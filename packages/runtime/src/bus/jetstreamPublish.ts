import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection, type Subscription as NatsSubscription } from 'nats';
import { BusError, toBusError } from './errors';
import type { PublishAck } from './types';

/** A message checked by the rulebook, as it goes on the wire. */
export interface WireMessage {
  /** Without the bus prefix, for errors. */
  subject: string;
  wireSubject: string;
  data: Uint8Array;
  headers: MsgHdrs | undefined;
}

/** The rulebook's checked headers as nats.js carries them; none at all when there are none. */
export function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (!record) return undefined;
  const hdrs = natsHeaders();
  for (const key of Object.keys(record)) hdrs.set(key, record[key]);
  return hdrs;
}

interface PendingBatch {
  answer(index: number, msg: Msg): void;
  fail(error: BusError): void;
}

/** Marks a PubAck that is a no-responders status: no stream took the subject. */
const NO_RESPONDERS = Symbol('no responders');

const utf8 = new TextDecoder();

/**
 * Pipelined JetStream publishing: a batch is written in one go with core publishes whose reply subjects
 * are tokens under one private inbox, and a single wildcard subscription routes each PubAck to its batch.
 * This replaces a request (reply subscription, timer, flush) per message. Tokens are never reused, so
 * an ack that arrives after its batch has failed finds no entry and is dropped.
 */
export class PubAckRouter {
  private subscription: NatsSubscription | null = null;
  private inbox = '';
  private lastToken = 0;
  private readonly waiting = new Map<string, { batch: PendingBatch; index: number }>();
  private readonly batches = new Set<PendingBatch>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Writes the messages at `indexes` and fills their acks in `acks`. Resolves with the indexes that no
   * stream answered (in input order), once every other one is stored; rejects on the first message that
   * was not stored, or when some are still unanswered after the timeout.
   */
  send(messages: readonly WireMessage[], indexes: readonly number[], acks: PublishAck[]): Promise<number[]> {
    return new Promise((resolve, reject) => {
      let inbox: string;
      try {
        inbox = this.replyInbox();
      } catch (err) {
        reject(toBusError('publish batch failed: cannot subscribe to its acks', err));
        return;
      }
      const tokens: string[] = [];
      const noResponders: number[] = [];
      let unanswered = indexes.length;
      let settled = false;
      const finish = (error?: BusError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.batches.delete(batch);
        if (error) {
          for (const token of tokens) this.waiting.delete(token);
          reject(error);
        } else {
          resolve(noResponders.sort((a, b) => a - b));
        }
      };
      const batch: PendingBatch = {
        answer: (index, msg) => {
          const ack = readPubAck(msg, messages[index].subject);
          if (ack instanceof BusError) return finish(ack);
          if (ack === NO_RESPONDERS) noResponders.push(index);
          else acks[index] = ack;
          if (--unanswered === 0) finish();
        },
        fail: finish,
      };
      const timer = setTimeout(() => {
        finish(new BusError(`publish batch timed out: ${unanswered} of ${indexes.length} messages not acknowledged within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      timer.unref();
      this.batches.add(batch);
      // Kept synchronous: nats.js flushes its buffer in a microtask (or at 32 KiB), so the batch goes out in a
      // few large writes instead of one per message.
      for (const index of indexes) {
        const message = messages[index];
        const token = (++this.lastToken).toString(36);
        tokens.push(token);
        this.waiting.set(token, { batch, index });
        try {
          this.nc.publish(message.wireSubject, message.data, { reply: `${inbox}.${token}`, headers: message.headers });
        } catch (err) {
          finish(toBusError(`publish to ${message.subject} failed`, err));
          return;
        }
      }
    });
  }

  /** Fails every batch still waiting: their acks may never arrive. */
  failAll(reason: string): void {
    for (const batch of [...this.batches]) batch.fail(new BusError(`publish batch failed: ${reason} while acks were outstanding`));
  }

  private replyInbox(): string {
    if (this.subscription && !this.subscription.isClosed()) return this.inbox;
    const inbox = createInbox();
    this.subscription = this.nc.subscribe(`${inbox}.*`, {
      callback: (err, msg) => {
        if (err) {
          this.failAll(`the ack subscription failed (${err.message})`);
          return;
        }
        const token = msg.subject.slice(inbox.length + 1);
        const entry = this.waiting.get(token);
        if (!entry) return;
        this.waiting.delete(token);
        entry.batch.answer(entry.index, msg);
      },
    });
    this.inbox = inbox;
    return inbox;
  }
}

/** A PubAck, the no-responders status, or why the message was not stored. */
function readPubAck(msg: Msg, subject: string): PublishAck | typeof NO_RESPONDERS | BusError {
  if (msg.data.length === 0) {
    if (msg.headers?.code === 503) return NO_RESPONDERS;
    return new BusError(`publish to ${subject} failed: unexpected reply status ${msg.headers?.code ?? 'none'} ${msg.headers?.description ?? ''}`.trimEnd());
  }
  let reply: { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: { code?: number; err_code?: number; description?: string } };
  try {
    reply = JSON.parse(utf8.decode(msg.data)) as typeof reply;
  } catch (err) {
    return toBusError(`publish to ${subject} failed: unreadable ack`, err);
  }
  if (reply.error) {
    const { description = 'unknown error', err_code: errCode, code } = reply.error;
    return new BusError(`publish to ${subject} failed: ${description} (${errCode ?? code})`, { cause: reply.error });
  }
  if (typeof reply.stream !== 'string' || reply.stream === '' || typeof reply.seq !== 'number') {
    return new BusError(`publish to ${subject} failed: invalid ack`);
  }
  return { stream: reply.stream, seq: reply.seq, duplicate: reply.duplicate === true };
}
