import { busV1, contactsV1, eventsV1, stepSubjects } from '@rrs/proto';
import { StepResultPublisher } from '@rrs/sender-kit';
import { createPool, httpStatusOf, InvalidError, NotFoundError, uuidv7, type Bus, type DomainError, type Pool, type Subscription } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startScheduler, SCHEMA, type OrganizationProfiles, type RunningScheduler, type SchedulerDeps, type SchedulerStartConfig, type SendingProfile, type LocationInfo, type MemberInfo, type SavedContact } from '../src';

export const ORG = '0190e0e0-0000-7000-8000-000000000001';
export const OTHER_ORG = '0190e0e0-0000-7000-8000-000000000002';
export const LOCATION = 'loc-1';

export type Outcome = keyof typeof busV1.StepOutcome;

/** In-test organization profiles: the profile and locations the scheduler would get from `contacts`. */
export class FakeProfiles implements OrganizationProfiles {
  byOrganization = new Map<string, SendingProfile>();
  calls = 0;
  channelCheckCalls = 0;

  constructor() {
    for (const org of [ORG, OTHER_ORG]) this.byOrganization.set(org, FakeProfiles.profile(org));
  }

  static profile(org: string, over: Partial<SendingProfile['organization']> = {}): SendingProfile {
    return {
      organization: { id: org, name: 'Coffee Co', plan: 'standard', emailConfirmed: true, locale: 'en', timeZone: 'UTC', ...over },
      templates: [
        { channel: 'EMAIL', subject: 'How was {{location}}?', body: 'Hi {{name}}, rate us: {{link}}' },
        { channel: 'SMS', subject: '', body: 'Rate {{location}}: {{link}}' },
      ],
      channels: ['EMAIL', 'SMS', 'MAX', 'TELEGRAM'].map((channel) => ({ channel, configured: true })),
    };
  }

  setConfigured(org: string, channel: string, configured: boolean): void {
    const profile = this.byOrganization.get(org)!;
    profile.channels = profile.channels.map((c) => (c.channel === channel ? { ...c, configured } : c));
  }

  async getSendingProfile(organizationId: string): Promise<SendingProfile> {
    // The dispatcher's channel checks (ConfiguredChannels, uncached in the harness) read the profile for
    // every round, whenever a step comes due: counted apart, so `calls` is what the request paths read.
    if (new Error().stack?.includes('forOrganizations')) this.channelCheckCalls++;
    else this.calls++;
    const profile = this.byOrganization.get(organizationId);
    if (!profile) throw new NotFoundError('organization');
    return structuredClone(profile);
  }

  /** The organization's console members, by organization. */
  members = new Map<string, MemberInfo[]>();

  async listMembers(organizationId: string): Promise<MemberInfo[]> {
    return structuredClone(this.members.get(organizationId) ?? []);
  }

  /** What a location sets for itself (its send window and zone), by location id. */
  locationSettings = new Map<string, Pick<LocationInfo, 'timeZone' | 'sendWindow'>>();

  /** Contacts saved by starts with a contact (as contacts' UpsertContact would), by organization and externalId. */
  saved = new Map<string, contactsV1.Contact>();
  savedCalls = 0;

  async saveContact(request: Omit<contactsV1.UpsertContactRequest, 'startCascade'>): Promise<SavedContact> {
    this.savedCalls++;
    const key = `${request.organizationId}|${request.externalId ?? uuidv7()}`;
    const stored = this.saved.get(key);
    const locationId = request.locationId ?? stored?.locationId;
    if (!locationId) throw InvalidError.field('/locationId', 'startCascade needs the contact to have a location');
    const location = await this.getLocation(request.organizationId, locationId);
    const now = new Date();
    const contact: contactsV1.Contact = {
      id: stored?.id ?? uuidv7(), organizationId: request.organizationId, externalId: request.externalId, name: request.name ?? stored?.name, email: request.email ?? stored?.email,
      phone: request.phone ?? stored?.phone, locationId, consentAt: request.consentAt ? new Date(request.consentAt) : stored?.consentAt, attributesJson: '{}', createdAt: stored?.createdAt ?? now, updatedAt: now,
    };
    this.saved.set(key, contact);
    return { contact, replayed: false, location };
  }

  async getLocation(organizationId: string, id: string): Promise<LocationInfo> {
    if (organizationId !== ORG || !id.startsWith(LOCATION)) throw new NotFoundError('location');
    return { id, name: 'Coffee on Tverskaya', address: 'Tverskaya 1', city: 'Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/review' }], ...this.locationSettings.get(id) };
  }
}

/**
 * A sender speaking the bus contract: takes `steps.<channel>` and `steps.<channel>.small`, answers in batches on
 * `steps.result.batch` (through the sender kit's publisher) with the outcome `decide` picks. Records
 * every delivery (a redelivered or duplicate step shows up twice).
 */
export async function startScriptedSender(
  bus: Bus,
  channels: string[],
  decide: (step: busV1.StepDue) => Outcome = () => 'STEP_OUTCOME_SENT',
): Promise<{ received: busV1.StepDue[]; smallSubject: Set<string>; stop(): Promise<void> }> {
  const received: busV1.StepDue[] = [];
  /** The step ids received on a channel's small requests' subject. */
  const smallSubject = new Set<string>();
  const subs: Subscription[] = [];
  const results = new StepResultPublisher(bus);
  for (const channel of channels) for (const lane of stepSubjects(channel)) {
    subs.push(
      await bus.consume({ stream: 'STEPS', durable: `test-${lane.durable}`, filterSubject: lane.subject, concurrency: 64 }, async (msg) => {
        const step = busV1.StepDue.decode(msg.data);
        received.push(step);
        if (lane.small) smallSubject.add(step.stepId);
        const outcome = busV1.StepOutcome[decide(step)];
        await results.publish(step, { outcome, reason: outcome === busV1.StepOutcome.STEP_OUTCOME_FAILED ? 'provider_rejected' : '', parts: 1 });
        msg.ack();
      }),
    );
  }
  return { received, smallSubject, stop: async () => void (await Promise.all(subs.map((s) => s.drain()))) };
}

/** Collects `events.cascade.recipient.finished`. */
export async function collectEvents(bus: Bus): Promise<{ events: eventsV1.Event[]; stop(): Promise<void> }> {
  const events: eventsV1.Event[] = [];
  const sub = await bus.consume({ stream: 'EVENTS', durable: 'test-events', filterSubject: 'events.>', concurrency: 8 }, async (msg) => {
    events.push(eventsV1.Event.decode(msg.data));
    msg.ack();
  });
  return { events, stop: () => sub.drain() };
}

export type ScriptedSender = Awaited<ReturnType<typeof startScriptedSender>>;
export type CollectedEvents = Awaited<ReturnType<typeof collectEvents>>;

export interface Harness {
  db: TestDatabase;
  tb: TestBus;
  pool: Pool;
  profiles: FakeProfiles;
  scheduler: RunningScheduler;
  ctx: ReturnType<typeof testContext>;
  /** The scripted sender asked for with `sender` (one with no channels otherwise). */
  sender: ScriptedSender;
  /** The finish events, when asked for with `collectEvents` (none otherwise). */
  events: CollectedEvents;
  close(): Promise<void>;
}

export interface HarnessOptions {
  minuteMs?: number;
  kind?: 'jetstream' | 'memory';
  deps?: SchedulerDeps;
  feedbackWindowMinutes?: number;
  config?: Partial<SchedulerStartConfig>;
  /** A scripted sender on these channels, answering what `decide` picks (SENT by default). */
  sender?: { channels: string[]; decide?: (step: busV1.StepDue) => Outcome };
  collectEvents?: boolean;
}

/** A scheduler on a fresh database and a fresh JetStream prefix, with the fast clock. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const db = await createTestDatabase();
  const tb = await createTestBus(options.kind ?? 'jetstream');
  await tb.bus.ensureStreams();
  const profiles = new FakeProfiles();
  const ctx = testContext('scheduler-test');
  const scheduler = await startScheduler(
    {
      databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0,
      minuteMs: options.minuteMs ?? 50, publicBaseUrl: 'http://reviews.test', feedbackWindowMinutes: options.feedbackWindowMinutes ?? 2,
      ...options.config,
    },
    ctx,
    { bus: tb.bus, profiles, channelsCacheMs: 0, ...options.deps },
  );
  const pool = createPool({ url: db.url, schema: SCHEMA });
  const sender = await startScriptedSender(tb.bus, options.sender?.channels ?? [], options.sender?.decide);
  const events = options.collectEvents ? await collectEvents(tb.bus) : { events: [], stop: async () => undefined };
  return {
    db, tb, pool, profiles, scheduler, ctx, sender, events,
    async close() {
      await sender.stop();
      await events.stop();
      await pool.end();
      await ctx.stop();
      await tb.cleanup();
      await db.drop();
    },
  };
}

export function recipientsInput(n: number, make: (i: number) => { name?: string; email?: string; phone?: string } = (i) => ({ name: `R${i}`, email: `r${i}@example.com`, phone: `+7900000${String(i).padStart(4, '0')}` })) {
  return Array.from({ length: n }, (_, i) => {
    const r = make(i);
    return { name: r.name ?? '', email: r.email ?? '', phone: r.phone ?? '' };
  });
}

/** What a test reads off a refused call. */
export interface Rejection {
  kind: DomainError['kind'];
  code: string;
  message: string;
  /** The HTTP status the gateway answers it with. */
  status: number;
  details: { errors: Array<{ pointer: string; detail: string }> };
}

/**
 * The error a call rejects with, and the HTTP status the gateway answers it with (by its kind): domain
 * code and the gRPC boundary speak kinds, not statuses.
 */
export function rejection(call: Promise<unknown>): Promise<Rejection> {
  return call.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => Object.assign(err as DomainError, { status: httpStatusOf(err) }) as unknown as Rejection,
  );
}

/**
 * For tests of a results consumer of their own: a harness without a dispatcher, and a bus on its own
 * prefix (so the harness scheduler's results consumer never sees these results). `sub` is drained at the end.
 */
export function resultConsumerFixture(): { h: Harness; bus: TestBus; sub: Subscription | undefined } {
  const fixture = {} as { h: Harness; bus: TestBus; sub: Subscription | undefined };
  beforeAll(async () => {
    fixture.h = await startHarness({ deps: { noDispatcher: true } });
    fixture.bus = await createTestBus('jetstream');
    await fixture.bus.bus.ensureStreams();
  });
  afterAll(async () => {
    await fixture.sub?.drain();
    await fixture.bus.cleanup();
    await fixture.h.close();
  });
  return fixture;
}
