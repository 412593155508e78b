import { BusError } from '../src/bus';
import { Delivery } from '../src/bus/delivery';
import { BusRules, checkHeaders, checkKey, DuplicateWindow, MSG_ID_HEADER, streamOf, subjectMatches, subjectsOverlap } from '../src/bus/rules';

/** The bus rulebook on its own; `bus.*.test.ts` hold both transports to it. */

const tokens = (subject: string): string[] => subject.split('.');

describe('streamOf', () => {
  test.each([
    ['steps.email', 'STEPS'],
    ['steps.result.batch', 'STEPS'],
    ['events.cascade.recipient.finished', 'EVENTS'],
    ['ratings.submitted', 'RATINGS'],
  ])('%s is in %s', (subject, stream) => {
    expect(streamOf(subject)).toBe(stream);
  });

  test.each(['steps', 'steps.', 'steps..x', 'steps.a b', 'steps.a\tb', 'steps.*', 'steps.>', 'steps.a*', 'steps.a>b', 'other.x', '>', ''])(
    'publishing to %j is refused',
    (subject) => {
      expect(() => streamOf(subject)).toThrow(new BusError(`subject ${subject} is not within the bus streams (steps.>, events.>, ratings.>)`));
    },
  );

  test('a filter may use * anywhere after the root and > last', () => {
    expect(streamOf('steps.*', true)).toBe('STEPS');
    expect(streamOf('events.*.x.>', true)).toBe('EVENTS');
    for (const filter of ['*.x', '>', 'steps.>.x', 'steps.a*', 'events']) expect(() => streamOf(filter, true)).toThrow(BusError);
  });
});

describe('subject matching', () => {
  test('* is one token, > one or more', () => {
    expect(subjectMatches(tokens('steps.*'), tokens('steps.email'))).toBe(true);
    expect(subjectMatches(tokens('steps.*'), tokens('steps.result.batch'))).toBe(false);
    expect(subjectMatches(tokens('steps.>'), tokens('steps.result.batch'))).toBe(true);
    expect(subjectMatches(tokens('steps.result.>'), tokens('steps.result'))).toBe(false);
    expect(subjectMatches(tokens('steps.result'), tokens('steps.result.batch'))).toBe(false);
  });

  test('the services durables on STEPS do not overlap; a wildcard over them does', () => {
    const durables = ['steps.email', 'steps.sms', 'steps.result', 'steps.result.batch'].map(tokens);
    for (const a of durables) for (const b of durables) expect(subjectsOverlap(a, b)).toBe(a === b);
    expect(subjectsOverlap(tokens('steps.*'), tokens('steps.email'))).toBe(true);
    expect(subjectsOverlap(tokens('steps.result.>'), tokens('steps.result.batch'))).toBe(true);
    expect(subjectsOverlap(tokens('steps.*'), tokens('steps.result.batch'))).toBe(false);
  });
});

describe('BusRules', () => {
  test('names under a prefix, and without one', () => {
    const rules = new BusRules({ prefix: 't1' });
    expect(rules.streamName('STEPS')).toBe('T1_STEPS');
    expect(rules.wireSubject('steps.email')).toBe('t1.steps.email');
    expect(rules.localSubject('t1.steps.email')).toBe('steps.email');
    expect(rules.streamSubjects('EVENTS')).toBe('t1.events.>');
    expect(rules.bucketName('channels', { ttlMs: 1 })).toBe('t1_channels');
    const bare = new BusRules({});
    expect([bare.streamName('EVENTS'), bare.wireSubject('steps.sms'), bare.localSubject('steps.sms'), bare.bucketName('channels', { ttlMs: 1 })]).toEqual([
      'EVENTS',
      'steps.sms',
      'steps.sms',
      'channels',
    ]);
  });

  test('invalid options are refused at construction', () => {
    expect(() => new BusRules({ prefix: 'a.b' })).toThrow('invalid bus prefix: a.b');
    expect(() => new BusRules({ duplicateWindowMs: 0 })).toThrow('duplicateWindowMs must be positive');
    expect(new BusRules({}).duplicateWindowMs).toBe(120_000);
  });

  test('consumer: defaults, checks, and the names on the wire', () => {
    const rules = new BusRules({ prefix: 'p' });
    expect(rules.consumer({ stream: 'STEPS', durable: 'sender-email', filterSubject: 'steps.email' })).toEqual({
      stream: 'STEPS',
      streamName: 'P_STEPS',
      durable: 'sender-email',
      filterSubject: 'steps.email',
      wireFilterSubject: 'p.steps.email',
      concurrency: 16,
      ackWaitMs: 4_000,
      maxDeliver: 10,
      defaultNakDelayMs: 1_000,
    });
    const base = { stream: 'STEPS' as const, durable: 'd', filterSubject: 'steps.x' };
    expect(() => rules.consumer({ ...base, durable: 'a.b' })).toThrow('invalid durable name: a.b');
    expect(() => rules.consumer({ ...base, stream: 'EVENTS' })).toThrow('filter steps.x is not within stream EVENTS');
    expect(() => rules.consumer({ ...base, concurrency: 0 })).toThrow('concurrency must be a positive integer');
    expect(() => rules.consumer({ ...base, ackWaitMs: 0 })).toThrow('ackWaitMs must be positive');
    expect(() => rules.consumer({ ...base, maxDeliver: 1.5 })).toThrow('maxDeliver must be a positive integer');
    expect(() => rules.consumer({ ...base, defaultNakDelayMs: -1 })).toThrow('defaultNakDelayMs must not be negative');
  });

  test('outgoing: the msgId wins over a Nats-Msg-Id header and is the dedupe id; header values are trimmed', () => {
    const rules = new BusRules({ prefix: 'p' });
    const data = new Uint8Array([1]);
    expect(rules.outgoing({ subject: 'steps.x', data, options: { msgId: 'm1', headers: { [MSG_ID_HEADER]: 'old', a: ' v ' } } })).toEqual({
      subject: 'steps.x',
      wireSubject: 'p.steps.x',
      stream: 'STEPS',
      data,
      headers: { [MSG_ID_HEADER]: 'm1', a: 'v' },
      msgId: 'm1',
    });
    expect(rules.outgoing({ subject: 'events.y', data, options: { headers: { [MSG_ID_HEADER]: 'from-header' } } }).msgId).toBe('from-header');
    expect(rules.outgoing({ subject: 'events.y', data, options: { msgId: '', headers: {} } })).toMatchObject({ headers: undefined, msgId: undefined });
    expect(() => rules.outgoing({ subject: 'steps.x', data, options: { headers: { 'a:b': 'v' } } })).toThrow(
      "publish to steps.x failed: ':' is not a valid character for a header key",
    );
  });

  test('headers: names printable ASCII without colon, values without CR or LF', () => {
    expect(checkHeaders({ 'X-Trace-Id': 't' }, undefined)).toEqual({ 'X-Trace-Id': 't' });
    expect(() => checkHeaders({ '': 'v' }, undefined)).toThrow('header names must not be empty');
    expect(() => checkHeaders({ 'a b': 'v' }, undefined)).toThrow(BusError);
    expect(() => checkHeaders({ a: 'v\r\n' }, undefined)).toThrow('invalid header value');
  });

  test('KV: bucket names, TTL and keys', () => {
    const rules = new BusRules({});
    expect(() => rules.bucketName('a.b', { ttlMs: 1 })).toThrow('invalid bucket name: a.b');
    expect(() => rules.bucketName('ok', { ttlMs: 0 })).toThrow('ttlMs must be positive');
    expect(() => checkKey('b', 'channel/EMAIL=1.x')).not.toThrow();
    for (const key of ['.a', 'a.', 'a b', '', 'a*']) expect(() => checkKey('b', key)).toThrow(`kv b: invalid key: ${key}`);
  });
});

describe('DuplicateWindow', () => {
  test('an id answers its first sequence until the window has passed since it was accepted', () => {
    const window = new DuplicateWindow(1_000);
    expect(window.earlier('a', 0)).toBeUndefined();
    window.accept('a', 7, 0);
    expect(window.earlier('a', 999)).toBe(7);
    expect(window.earlier(undefined, 999)).toBeUndefined();
    expect(window.earlier('a', 1_000)).toBeUndefined();
  });
});

class RecordedDelivery extends Delivery {
  readonly subject = 'steps.x';
  readonly data = new Uint8Array();
  readonly headers = {};
  readonly seq = 1;
  readonly sent: string[] = [];

  constructor(
    readonly deliveryCount: number,
    maxDeliver: number,
  ) {
    super(maxDeliver);
  }

  protected sendAck(): void {
    this.sent.push('ack');
  }
  protected sendNak(delayMs: number): void {
    this.sent.push(`nak ${delayMs}`);
  }
  protected sendTerm(reason: string | undefined): void {
    this.sent.push(`term ${reason}`);
  }
  protected sendWorking(): void {
    this.sent.push('working');
  }
}

describe('Delivery', () => {
  test('the first settlement counts; working() only before it', () => {
    const delivery = new RecordedDelivery(1, 10);
    delivery.working();
    delivery.nak(-5);
    delivery.ack();
    delivery.term('late');
    delivery.working();
    expect(delivery.sent).toEqual(['working', 'nak 0']);
  });

  test('a nak on the last delivery terminates the message', () => {
    const delivery = new RecordedDelivery(3, 3);
    delivery.nak(1_000);
    delivery.ack();
    expect(delivery.sent).toEqual(['term max deliveries (3) reached']);
  });
});
