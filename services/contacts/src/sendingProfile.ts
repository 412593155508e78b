import { NotFoundError, type Pool } from '@rrs/runtime';
import { asUuid, LOCATION_COLUMNS, ORG_COLUMNS, type Location, type Organization } from './directory';
import { effectiveTemplates, type MessageTemplate, type TemplateRow } from './templates';
import { effectiveChannels, type ChannelConfiguration } from './channels';

export interface SendingProfile {
  organization: Organization;
  templates: MessageTemplate[];
  channels: ChannelConfiguration[];
}

/*
 * The organization, its own templates and channel rows (each in channel order, as their lists read
 * them) and, when asked, the location: one statement, so the question every start asks costs one round
 * trip to PostgreSQL (it was four statements in two). The location's columns follow the organization's
 * and the two aggregates; a location that is not there (or deleted) leaves them null.
 */
const PROFILE = `SELECT o.*, t.templates, c.channels, l.*
  FROM (SELECT ${ORG_COLUMNS} FROM organizations WHERE id = $1) o
  CROSS JOIN (SELECT coalesce(json_agg(json_build_array(channel, subject, body) ORDER BY channel), '[]') AS templates FROM message_templates WHERE organization_id = $1) t
  CROSS JOIN (SELECT coalesce(json_agg(json_build_array(channel, configured) ORDER BY channel), '[]') AS channels FROM channel_configurations WHERE organization_id = $1) c
  LEFT JOIN (SELECT ${LOCATION_COLUMNS} FROM locations WHERE organization_id = $1 AND id = $2::uuid AND deleted_at IS NULL) l ON true`;

/** Columns `from` (inclusive) to `to` (exclusive) of an array-mode row, as an object keyed by their names. */
function objectOf(fields: ReadonlyArray<{ name: string }>, row: readonly unknown[], from: number, to: number): Record<string, unknown> {
  const object: Record<string, unknown> = {};
  for (let k = from; k < to; k++) object[fields[k].name] = row[k];
  return object;
}

/**
 * Everything a sender needs about an organization to dispatch a step (every start asks it, with the
 * start's location): `not_found` naming the organization, or the location when one is asked and the
 * organization has none by that id.
 */
export class SendingProfiles {
  constructor(private readonly pool: Pool) {}

  async read(organizationId: string, locationId?: string): Promise<{ profile: SendingProfile; location?: Location }> {
    // A malformed location id is refused before the organization's, as when the two were asked apart.
    if (locationId) asUuid(locationId, 'location');
    const { rows, fields } = await this.pool.query<unknown[]>({ text: PROFILE, values: [asUuid(organizationId, 'organization'), locationId ? locationId.toLowerCase() : null], rowMode: 'array' });
    const row = rows[0];
    if (!row) throw new NotFoundError(`organization ${organizationId}`);
    const at = fields.findIndex((field) => field.name === 'templates');
    const organization = objectOf(fields, row, 0, at) as unknown as Organization;
    const templates = (row[at] as Array<[string, string, string]>).map(([channel, subject, body]): TemplateRow => ({ channel, subject, body }));
    const channels = (row[at + 1] as Array<[string, boolean]>).map(([channel, configured]): ChannelConfiguration => ({ channel, configured }));
    const profile = { organization, templates: effectiveTemplates(organization.locale, templates), channels: effectiveChannels(channels) };
    if (!locationId) return { profile };
    if (row[at + 2] === null) throw new NotFoundError(`location ${locationId}`);
    return { profile, location: objectOf(fields, row, at + 2, fields.length) as unknown as Location };
  }
}
