import type { Pool } from '@rrs/runtime';
import { checkChannelKey, localeOf, shownChannels } from './templates';

export interface ChannelConfiguration {
  channel: string;
  configured: boolean;
}

/** Every channel a list shows, given the organization's rows (in channel order): a channel without a row is not configured. */
export function effectiveChannels(rows: readonly ChannelConfiguration[]): ChannelConfiguration[] {
  const configured = new Map(rows.map((row) => [row.channel, row.configured]));
  return shownChannels(rows.map((row) => row.channel)).map((channel) => ({ channel, configured: configured.get(channel) ?? false }));
}

/** Which channels an organization has set up; a channel without a row is not configured. */
export class ChannelSettings {
  constructor(private readonly pool: Pool) {}

  async list(organizationId: string): Promise<ChannelConfiguration[]> {
    await localeOf(this.pool, organizationId);
    return this.listOf(organizationId);
  }

  /** `list` for an organization already read (known to exist). */
  async listOf(organizationId: string): Promise<ChannelConfiguration[]> {
    const { rows } = await this.pool.query<ChannelConfiguration>('SELECT channel, configured FROM channel_configurations WHERE organization_id = $1 ORDER BY channel', [organizationId]);
    return effectiveChannels(rows);
  }

  async set(input: { organizationId: string; channel: string; configured: boolean }): Promise<ChannelConfiguration> {
    await localeOf(this.pool, input.organizationId);
    checkChannelKey(input.channel);
    await this.pool.query(
      `INSERT INTO channel_configurations (organization_id, channel, configured) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id, channel) DO UPDATE SET configured = excluded.configured, updated_at = now()`,
      [input.organizationId, input.channel, input.configured],
    );
    return { channel: input.channel, configured: input.configured };
  }
}
