import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import { contactsV1, phoneCountries, type SendWindow } from '@rrs/proto';
import { NotFoundError, type PromiseClient } from '@rrs/runtime';

/** An organization as sending sees it: its plan and account, its templates, its configured channels. */
export interface SendingProfile {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; timeZone: string; defaultRegion?: string; sendWindow?: SendWindow | null; responseWindowMinutes?: number;
    /** Absent or 0 = no cooldown. */
    cooldownDays?: number;
    requireConsent?: boolean;
    /** ISO 3166 regions the phone channels send to; empty or absent = `defaultRegion` (proto phones.ts). */
    allowedCountries?: string[];
  };
  templates: Array<{ channel: string; subject: string; body: string }>;
  channels: Array<{ channel: string; configured: boolean }>;
}

export interface LocationInfo {
  id: string;
  name: string;
  address: string;
  city: string;
  reviewLinks: Array<{ provider: string; url: string }>;
  /** IANA zone; empty or absent = the organization's. */
  timeZone?: string;
  /** Absent or null = the organization's window. */
  sendWindow?: SendWindow | null;
}

const fromProtoWindow = (window: contactsV1.SendWindow | undefined): SendWindow | null =>
  window ? { start: window.start, end: window.end, days: window.days, channels: window.channels } : null;

/** A member of the organization's console, as alerts and the inbox's assignments see them. */
export interface MemberInfo {
  id: string;
  email: string;
  name: string;
  role: string;
}

/** A contact saved for its cascade (a start with a contact, startContactCascade.ts). */
export interface SavedContact {
  contact: contactsV1.Contact;
  /** True when contacts answered with the saved response of the contact's Idempotency-Key. */
  replayed: boolean;
  /** The contact's location: the cascade's. */
  location: LocationInfo;
}

/** The contact's own Idempotency-Key record in contacts (the cascade has its own, in the scheduler). */
export interface ContactIdempotency {
  key: string;
  fingerprint: string;
}

/**
 * What the scheduler asks the `contacts` service about an organization: its sending profile, its
 * locations and its people, and the one thing it writes there: the contact a start saves before its
 * cascade. Asked by gRPC, never read from that service's schema.
 */
export interface OrganizationProfiles {
  /** The organization's console members (who rating alerts go to, who an item can be assigned to). */
  listMembers(organizationId: string): Promise<MemberInfo[]>;
  /** `not_found` when the organization does not exist. */
  getSendingProfile(organizationId: string): Promise<SendingProfile>;
  /** `not_found` when the location does not exist or belongs to another organization. */
  getLocation(organizationId: string, id: string): Promise<LocationInfo>;
  /** Both answers in one question (a start's); without it, `profileAt` asks the two above. */
  getSendingProfileAt?(organizationId: string, locationId: string): Promise<{ profile: SendingProfile; location: LocationInfo }>;
  /**
   * Saves the contact of a start with a contact (contacts' UpsertContact with `startCascade`: contacts
   * checks its fields and that it has a location) and answers it with its location, in one call.
   */
  saveContact(request: Omit<contactsV1.UpsertContactRequest, 'startCascade'>, idempotency?: ContactIdempotency): Promise<SavedContact>;
}

/** The organization's sending profile and, when `locationId` is given, that location: one call to contacts when it can. */
export async function profileAt(profiles: OrganizationProfiles, organizationId: string, locationId: string): Promise<{ profile: SendingProfile; location?: LocationInfo }> {
  if (!locationId) return { profile: await profiles.getSendingProfile(organizationId) };
  if (profiles.getSendingProfileAt) return profiles.getSendingProfileAt(organizationId, locationId);
  const [profile, location] = await Promise.all([profiles.getSendingProfile(organizationId), profiles.getLocation(organizationId, locationId)]);
  return { profile, location };
}

function sendingProfileOf(response: contactsV1.GetSendingProfileResponse): SendingProfile {
  const organization = response.organization;
  if (!organization) throw new NotFoundError('organization');
  const { id, name, plan, emailConfirmed, locale, timeZone, defaultRegion } = organization;
  return {
    organization: { id, name, plan, emailConfirmed, locale, timeZone, defaultRegion, sendWindow: fromProtoWindow(organization.sendWindow), responseWindowMinutes: organization.responseWindowMinutes,
      cooldownDays: organization.cooldownDays, requireConsent: organization.requireConsent, allowedCountries: organization.allowedCountries },
    templates: response.templates.map((template) => ({ channel: template.channel, subject: template.subject, body: template.body })),
    channels: response.channels.map((channel) => ({ channel: channel.channel, configured: channel.configured })),
  };
}

function locationOf(location: contactsV1.Location): LocationInfo {
  const reviewLinks = location.reviewLinks.map((link) => ({ provider: link.provider, url: link.url }));
  return { id: location.id, name: location.name, address: location.address, city: location.city, reviewLinks, timeZone: location.timeZone, sendWindow: fromProtoWindow(location.sendWindow) };
}

export function grpcOrganizationProfiles(client: PromiseClient<contactsV1.ContactsServiceClient>): OrganizationProfiles {
  return {
    async getSendingProfile(organizationId) {
      return sendingProfileOf(await client.getSendingProfile({ organizationId, locationId: '' }));
    },
    async getSendingProfileAt(organizationId, locationId) {
      const response = await client.getSendingProfile({ organizationId, locationId });
      if (!response.location) throw new NotFoundError('location');
      return { profile: sendingProfileOf(response), location: locationOf(response.location) };
    },
    async saveContact(request, idempotency) {
      const metadata: Record<string, string> = idempotency ? { [MD_IDEMPOTENCY_KEY]: idempotency.key, [MD_IDEMPOTENCY_FINGERPRINT]: idempotency.fingerprint } : {};
      const response = await client.upsertContact({ ...request, startCascade: true }, { metadata });
      if (!response.contact || !response.location) throw new NotFoundError('location');
      return { contact: response.contact, replayed: response.idempotentReplayed, location: locationOf(response.location) };
    },
    async listMembers(organizationId) {
      const { members } = await client.listMembers({ organizationId });
      return members.map((member) => ({ id: member.id, email: member.email, name: member.name, role: member.role }));
    },
    async getLocation(organizationId, id) {
      const { location } = await client.getLocation({ organizationId, id });
      if (!location) throw new NotFoundError('location');
      return locationOf(location);
    },
  };
}

/**
 * Which channels an organization has configured, as seen when a step fires. Cached briefly per
 * organization so a batch of thousands of steps asks `contacts` once; when it cannot be reached the
 * last known answer is used (and, with none, the step waits for the next attempt).
 */
export class ConfiguredChannels {
  private readonly cache = new Map<string, { at: number; channels: Set<string>; hours: SendingHours; phoneCountries: string[] }>();

  constructor(private readonly profiles: OrganizationProfiles, private readonly ttlMs = 5_000) {}

  async forOrganizations(ids: Iterable<string>): Promise<Map<string, Set<string>>> {
    const out = new Map<string, Set<string>>();
    await Promise.all(
      [...new Set(ids)].map(async (id) => {
        const hit = this.cache.get(id);
        if (hit && Date.now() - hit.at < this.ttlMs) {
          out.set(id, hit.channels);
          return;
        }
        try {
          const profile = await this.profiles.getSendingProfile(id);
          const channels = new Set(profile.channels.filter((c) => c.configured).map((c) => c.channel));
          const hours = { window: profile.organization.sendWindow ?? null, timeZone: profile.organization.timeZone || 'UTC' };
          this.cache.set(id, { at: Date.now(), channels, hours, phoneCountries: phoneCountries(profile.organization) });
          out.set(id, channels);
        } catch (err) {
          if (hit) out.set(id, hit.channels);
          else throw err;
        }
      }),
    );
    return out;
  }

  /** The countries the organization's phone channels send to, as last read by `forOrganizations` (call it first). */
  phoneCountries(organizationId: string): string[] {
    return this.cache.get(organizationId)?.phoneCountries ?? [];
  }

  invalidate(organizationId: string): void {
    this.cache.delete(organizationId);
    for (const key of this.locationCache.keys()) if (key.startsWith(`${organizationId}|`)) this.locationCache.delete(key);
  }

  private readonly locationCache = new Map<string, { at: number; timeZone: string; window: SendWindow | null }>();

  /**
   * The send window and time zone that apply to recipients of each (organization, location): the
   * location's window, else the organization's; the location's zone, else the organization's. Call
   * after `forOrganizations` for the same organizations (their hours come with their channels). A
   * location that cannot be read (deleted, or contacts unreachable with nothing cached) counts as
   * having no settings of its own: the organization's apply.
   */
  async sendingHours(pairs: Iterable<{ organizationId: string; locationId: string }>): Promise<Map<string, SendingHours>> {
    const out = new Map<string, SendingHours>();
    const wanted = new Map<string, { organizationId: string; locationId: string }>();
    for (const pair of pairs) wanted.set(`${pair.organizationId}|${pair.locationId}`, pair);
    await Promise.all(
      [...wanted].map(async ([key, { organizationId, locationId }]) => {
        const organization = this.cache.get(organizationId)?.hours ?? { window: null, timeZone: 'UTC' };
        let own = this.locationCache.get(key);
        if (!own || Date.now() - own.at >= this.ttlMs) {
          try {
            const location = await this.profiles.getLocation(organizationId, locationId);
            own = { at: Date.now(), timeZone: location.timeZone ?? '', window: location.sendWindow ?? null };
            this.locationCache.set(key, own);
          } catch {
            own = own ?? { at: 0, timeZone: '', window: null };
          }
        }
        out.set(key, { window: own.window ?? organization.window, timeZone: own.timeZone || organization.timeZone });
      }),
    );
    return out;
  }
}

/** The local hours a recipient's steps may go out in. */
export interface SendingHours {
  /** Null: any time. */
  window: SendWindow | null;
  timeZone: string;
}
