import { BusError } from './errors';
import type { BusOptions, ConsumeOptions, KvOptions, OutgoingMessage, StreamName } from './types';

/*
 * The bus rulebook: every rule of the contract in `types.ts` that is not "move these bytes", written once
 * for both transports. Names (prefix, streams, subjects, durables, buckets, keys), which stream a subject
 * belongs to, the defaults and limits of a consumer, what a header may hold and which id deduplicates a
 * message, and the duplicate window itself. The JetStream transport configures the server with these
 * rules and checks input with them before anything goes on the wire; the in-process transport enforces
 * them itself. The settlement rules (ack, nak, term, the handler that throws) are in `delivery.ts`.
 */

export const DEFAULT_CONCURRENCY = 16;
/**
 * Short, because a handler's message is kept in progress while it runs (delivery.ts): this is how long
 * the work a dead process had taken waits before another takes it.
 */
export const DEFAULT_ACK_WAIT_MS = 4_000;
export const DEFAULT_MAX_DELIVER = 10;
export const DEFAULT_NAK_DELAY_MS = 1_000;
/** JetStream's default duplicate window. */
export const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;

/** The header that carries a message's deduplication id, as JetStream reads it. */
export const MSG_ID_HEADER = 'Nats-Msg-Id';

export interface StreamRule {
  /** First subject token of every message in the stream (`steps`, `events`). */
  root: string;
  /** Work-queue retention: a message is gone once acked, and no two durables may share a subject. */
  workQueue: boolean;
  /** Messages older than this are dropped; null keeps them until acked (work queue). */
  maxAgeMs: number | null;
}

export const STREAMS: Readonly<Record<StreamName, StreamRule>> = {
  STEPS: { root: 'steps', workQueue: true, maxAgeMs: null },
  EVENTS: { root: 'events', workQueue: false, maxAgeMs: 7 * 24 * 3_600_000 },
  RATINGS: { root: 'ratings', workQueue: true, maxAgeMs: null },
};

const STREAM_NAMES = Object.keys(STREAMS) as StreamName[];
const STREAM_SUBJECTS = STREAM_NAMES.map((stream) => `${STREAMS[stream].root}.>`).join(', ');
const NAME_PATTERN = /^[A-Za-z0-9_-]+$/;
const BUCKET_PATTERN = /^[-\w]+$/;
const KEY_PATTERN = /^[-/=.\w]+$/;

/**
 * The stream a subject (or, with `allowWildcards`, a consumer filter) belongs to; throws for anything
 * outside the bus. A subject has at least two tokens under a stream root; no token is empty or holds
 * whitespace; `*` and `>` are wildcards only as whole tokens of a filter (`>` only last) and are never
 * part of a token.
 */
export function streamOf(subject: string, allowWildcards = false): StreamName {
  const tokens = subject.split('.');
  const valid = tokens.every((token, i) => {
    if (token === '' || /\s/.test(token)) return false;
    if (token === '>') return allowWildcards && i === tokens.length - 1;
    if (token === '*') return allowWildcards;
    return !token.includes('*') && !token.includes('>');
  });
  if (valid && tokens.length >= 2) {
    for (const stream of STREAM_NAMES) {
      if (tokens[0] === STREAMS[stream].root) return stream;
    }
  }
  throw new BusError(`subject ${subject} is not within the bus streams (${STREAM_SUBJECTS})`);
}

/** Whether a subject (split into tokens) matches a filter (split into tokens), by NATS's wildcard rules. */
export function subjectMatches(filter: readonly string[], subject: readonly string[]): boolean {
  for (let i = 0; i < filter.length; i++) {
    if (filter[i] === '>') return subject.length > i;
    if (i >= subject.length) return false;
    if (filter[i] !== '*' && filter[i] !== subject[i]) return false;
  }
  return filter.length === subject.length;
}

/** Whether some subject matches both filters: two durables of a work-queue stream may not. */
export function subjectsOverlap(a: readonly string[], b: readonly string[]): boolean {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] === '>' || b[i] === '>') return true;
    if (a[i] !== '*' && b[i] !== '*' && a[i] !== b[i]) return false;
  }
  return a.length === b.length;
}

/**
 * Header names are printable ASCII without ':' and values hold no CR or LF; values lose surrounding
 * blanks (nats.js's rules, so both transports deliver the same headers). The msgId is set last and wins
 * over a `Nats-Msg-Id` the caller put in the headers. Undefined when there is no header at all.
 */
export function checkHeaders(headers: Record<string, string> | undefined, msgId: string | undefined): Record<string, string> | undefined {
  let checked: Record<string, string> | undefined;
  if (headers) {
    for (const key of Object.keys(headers)) {
      if (key === '') throw new BusError('header names must not be empty');
      for (let i = 0; i < key.length; i++) {
        const c = key.charCodeAt(i);
        if (c === 58 || c < 33 || c > 126) throw new BusError(`'${key[i]}' is not a valid character for a header key`);
      }
      const value = headers[key];
      if (/[\r\n]/.test(value)) throw new BusError('invalid header value - \\r and \\n are not allowed.');
      (checked ??= {})[key] = value.trim();
    }
  }
  if (msgId) (checked ??= {})[MSG_ID_HEADER] = msgId;
  return checked;
}

/** A message checked for publishing: nothing of a batch is sent before every message passed. */
export interface CheckedMessage {
  /** As the caller gave it, without the bus prefix. */
  subject: string;
  /** With the bus prefix: what goes on the wire. */
  wireSubject: string;
  stream: StreamName;
  data: Uint8Array;
  headers: Record<string, string> | undefined;
  /** The deduplication id: whatever ends up in the `Nats-Msg-Id` header, as JetStream reads it. */
  msgId: string | undefined;
}

/** A `ConsumeOptions` with every default applied and every value checked. */
export interface ConsumerRule {
  stream: StreamName;
  /** With the bus prefix. */
  streamName: string;
  durable: string;
  /** Without the bus prefix. */
  filterSubject: string;
  /** With the bus prefix. */
  wireFilterSubject: string;
  concurrency: number;
  ackWaitMs: number;
  maxDeliver: number;
  defaultNakDelayMs: number;
}

/** Names and checks of one bus, under its prefix (`BusOptions.prefix`). */
export class BusRules {
  readonly prefix: string;
  readonly duplicateWindowMs: number;
  /** Characters a delivered subject loses to drop the prefix. */
  readonly prefixLength: number;

  constructor(options: BusOptions) {
    const prefix = options.prefix ?? '';
    if (prefix !== '' && !NAME_PATTERN.test(prefix)) throw new BusError(`invalid bus prefix: ${prefix}`);
    const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
    if (!(duplicateWindowMs > 0)) throw new BusError('duplicateWindowMs must be positive');
    this.prefix = prefix;
    this.duplicateWindowMs = duplicateWindowMs;
    this.prefixLength = prefix ? prefix.length + 1 : 0;
  }

  /** `<PREFIX>_STEPS`, or `STEPS` without a prefix. */
  streamName(stream: StreamName): string {
    return this.prefix ? `${this.prefix.toUpperCase()}_${stream}` : stream;
  }

  /** `<prefix>.steps.email`, or the subject itself without a prefix. */
  wireSubject(subject: string): string {
    return this.prefix ? `${this.prefix}.${subject}` : subject;
  }

  /** A subject as it came off the wire, without the prefix. */
  localSubject(wireSubject: string): string {
    return wireSubject.slice(this.prefixLength);
  }

  /** The stream's subjects on the wire, e.g. `<prefix>.steps.>`. */
  streamSubjects(stream: StreamName): string {
    return this.wireSubject(`${STREAMS[stream].root}.>`);
  }

  /** Checks subject and headers of a message to publish. */
  outgoing(message: OutgoingMessage): CheckedMessage {
    const { subject, data, options } = message;
    const stream = streamOf(subject);
    let headers: Record<string, string> | undefined;
    try {
      headers = checkHeaders(options?.headers, options?.msgId);
    } catch (err) {
      throw new BusError(`publish to ${subject} failed: ${(err as Error).message}`, { cause: err });
    }
    const msgId = headers?.[MSG_ID_HEADER] || undefined;
    return { subject, wireSubject: this.wireSubject(subject), stream, data, headers, msgId };
  }

  consumer(options: ConsumeOptions): ConsumerRule {
    if (!NAME_PATTERN.test(options.durable)) throw new BusError(`invalid durable name: ${options.durable}`);
    if (streamOf(options.filterSubject, true) !== options.stream) {
      throw new BusError(`filter ${options.filterSubject} is not within stream ${options.stream}`);
    }
    const rule: ConsumerRule = {
      stream: options.stream,
      streamName: this.streamName(options.stream),
      durable: options.durable,
      filterSubject: options.filterSubject,
      wireFilterSubject: this.wireSubject(options.filterSubject),
      concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
      ackWaitMs: options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS,
      maxDeliver: options.maxDeliver ?? DEFAULT_MAX_DELIVER,
      defaultNakDelayMs: options.defaultNakDelayMs ?? DEFAULT_NAK_DELAY_MS,
    };
    if (!Number.isInteger(rule.concurrency) || rule.concurrency < 1) throw new BusError('concurrency must be a positive integer');
    if (!(rule.ackWaitMs > 0)) throw new BusError('ackWaitMs must be positive');
    if (!Number.isInteger(rule.maxDeliver) || rule.maxDeliver < 1) throw new BusError('maxDeliver must be a positive integer');
    if (!(rule.defaultNakDelayMs >= 0)) throw new BusError('defaultNakDelayMs must not be negative');
    return rule;
  }

  /** The bucket's name under the prefix (`<prefix>_channels`); an existing bucket keeps the TTL it was created with. */
  bucketName(bucket: string, options: KvOptions): string {
    if (!BUCKET_PATTERN.test(bucket)) throw new BusError(`invalid bucket name: ${bucket}`);
    if (!(options.ttlMs > 0)) throw new BusError('ttlMs must be positive');
    return this.prefix ? `${this.prefix}_${bucket}` : bucket;
  }
}

/** KV keys are what nats.js accepts: `-/=_.` and word characters, not starting or ending with a dot. */
export function checkKey(bucketName: string, key: string): void {
  if (key.startsWith('.') || key.endsWith('.') || !KEY_PATTERN.test(key)) {
    throw new BusError(`kv ${bucketName}: invalid key: ${key}`);
  }
}

/** An entry is gone once its bucket's TTL has passed, whether or not the store has dropped it yet. */
export function isLive(createdAt: number, ttlMs: number, now = Date.now()): boolean {
  return createdAt + ttlMs > now;
}

/** `entries()` lists by key. */
export function byKey(a: { key: string }, b: { key: string }): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The duplicate window of one stream: a msgId accepted less than `windowMs` ago makes a publish a
 * duplicate of the message stored then. JetStream keeps it on the server (`duplicate_window`); the
 * in-process stream keeps it here.
 */
export class DuplicateWindow {
  /** Insertion order is acceptance time, so expired ids are always at the front. */
  private readonly accepted = new Map<string, { seq: number; at: number }>();

  constructor(private readonly windowMs: number) {}

  /** The sequence of the message first stored with this id within the window, if any. */
  earlier(msgId: string | undefined, now: number): number | undefined {
    for (const [id, { at }] of this.accepted) {
      if (now - at < this.windowMs) break;
      this.accepted.delete(id);
    }
    return msgId === undefined ? undefined : this.accepted.get(msgId)?.seq;
  }

  accept(msgId: string, seq: number, now: number): void {
    this.accepted.set(msgId, { seq, at: now });
  }
}
