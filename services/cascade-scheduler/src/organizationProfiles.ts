import { contactsV1 } from '@rrs/proto';
import { NotFoundError, type PromiseClient } from '@rrs/runtime';

/** An organization as sending sees it: its plan and account, its templates, its configured channels. */
export interface SendingProfile {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; timeZone: string; defaultRegion?: string };
  templates: Array<{ channel: string; subject: string; body: string }>;
  channels: Array<{ channel: string; configured: boolean }>;
}

export interface LocationInfo {
  id: string;
  name: string;
  address: string;
  city: string;
  reviewLinks: Array<{ provider: string; url: string }>;
}

/**
 * What the scheduler asks the `contacts` service about an organization: its sending profile and its
 * locations. Asked by gRPC, never read from that service's schema.
 */
export interface OrganizationProfiles {
  /** `not_found` when the organization does not exist. */
  getSendingProfile(organizationId: string): Promise<SendingProfile>;
  /** `not_found` when the location does not exist or belongs to another organization. */
  getLocation(organizationId: string, id: string): Promise<LocationInfo>;
}

export function grpcOrganizationProfiles(client: PromiseClient<contactsV1.ContactsServiceClient>): OrganizationProfiles {
  return {
    async getSendingProfile(organizationId) {
      const response = await client.getSendingProfile({ organizationId });
      const organization = response.organization;
      if (!organization) throw new NotFoundError('organization');
      const { id, name, plan, emailConfirmed, locale, timeZone, defaultRegion } = organization;
      return {
        organization: { id, name, plan, emailConfirmed, locale, timeZone, defaultRegion },
        templates: response.templates.map((template) => ({ channel: template.channel, subject: template.subject, body: template.body })),
        channels: response.channels.map((channel) => ({ channel: channel.channel, configured: channel.configured })),
      };
    },
    async getLocation(organizationId, id) {
      const { location } = await client.getLocation({ organizationId, id });
      if (!location) throw new NotFoundError('location');
      const reviewLinks = location.reviewLinks.map((link) => ({ provider: link.provider, url: link.url }));
      return { id: location.id, name: location.name, address: location.address, city: location.city, reviewLinks };
    },
  };
}

/**
 * Which channels an organization has configured, as seen when a step fires. Cached briefly per
 * organization so a batch of thousands of steps asks `contacts` once; when it cannot be reached the
 * last known answer is used (and, with none, the step waits for the next attempt).
 */
export class ConfiguredChannels {
  private readonly cache = new Map<string, { at: number; channels: Set<string> }>();

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
          this.cache.set(id, { at: Date.now(), channels });
          out.set(id, channels);
        } catch (err) {
          if (hit) out.set(id, hit.channels);
          else throw err;
        }
      }),
    );
    return out;
  }

  invalidate(organizationId: string): void {
    this.cache.delete(organizationId);
  }
}
