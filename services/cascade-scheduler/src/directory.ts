import { contactsV1 } from '@rrs/proto';
import { AppError, type PromiseClient } from '@rrs/runtime';

/** What the engine needs from the directory (the `contacts` service), asked by gRPC, never read from its schema. */
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

export interface Directory {
  getSendingProfile(organizationId: string): Promise<SendingProfile>;
  /** 404 `not_found` when the location does not exist or belongs to another organization. */
  getLocation(organizationId: string, id: string): Promise<LocationInfo>;
}

export function grpcDirectory(client: PromiseClient<contactsV1.ContactsServiceClient>): Directory {
  return {
    async getSendingProfile(organizationId) {
      const res = await client.getSendingProfile({ organizationId });
      const o = res.organization;
      if (!o) throw new AppError(404, 'not_found', 'organization not found');
      return {
        organization: { id: o.id, name: o.name, plan: o.plan, emailConfirmed: o.emailConfirmed, locale: o.locale, timeZone: o.timeZone, defaultRegion: o.defaultRegion },
        templates: res.templates.map((t) => ({ channel: t.channel, subject: t.subject, body: t.body })),
        channels: res.channels.map((c) => ({ channel: c.channel, configured: c.configured })),
      };
    },
    async getLocation(organizationId, id) {
      const res = await client.getLocation({ organizationId, id });
      const l = res.location;
      if (!l) throw new AppError(404, 'not_found', 'location not found');
      return { id: l.id, name: l.name, address: l.address, city: l.city, reviewLinks: l.reviewLinks.map((x) => ({ provider: x.provider, url: x.url })) };
    },
  };
}

/**
 * Which channels an organization has configured, as seen when a step fires. Cached briefly per
 * organization so a batch of thousands of steps asks the directory once; when the directory cannot
 * be reached the last known answer is used (and, with none, the step waits for the next attempt).
 */
export class ConfiguredChannels {
  private readonly cache = new Map<string, { at: number; channels: Set<string> }>();

  constructor(private readonly directory: Directory, private readonly ttlMs = 5_000) {}

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
          const profile = await this.directory.getSendingProfile(id);
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
