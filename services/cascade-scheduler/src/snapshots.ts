import type { Pool } from '@rrs/runtime';
import type { LocationInfo, SendingProfile } from './organizationProfiles';

/** The organization's templates by channel key, as snapshotted on a cascade at start. */
export function templatesByChannel(profile: SendingProfile): Record<string, { subject: string; body: string }> {
  const templates: Record<string, { subject: string; body: string }> = {};
  for (const template of profile.templates) templates[template.channel] = { subject: template.subject, body: template.body };
  return templates;
}

/**
 * Keeps the latest organization name/locale and location data a start or a review request saw, for
 * the review form and for rendering steps without asking `contacts`. Remembers which snapshot was last
 * written, so concurrent starts for the same location do not all queue on the same row; a change is
 * written at once.
 */
export class SnapshotWriter {
  private readonly written = new Map<string, string>();

  async write(pool: Pool, organizationId: string, profile: SendingProfile, location: LocationInfo): Promise<void> {
    const key = `${organizationId}:${location.id}`;
    const { organization } = profile;
    const value = JSON.stringify([organization.name, organization.locale, location.name, location.address, location.city, location.reviewLinks]);
    if (this.written.get(key) === value) return;
    await pool.query(
      `WITH organization AS (
         INSERT INTO organization_settings (organization_id, name, locale) VALUES ($1, $2, $3)
         ON CONFLICT (organization_id) DO UPDATE SET name = excluded.name, locale = excluded.locale, updated_at = now())
       INSERT INTO location_snapshots (organization_id, location_id, name, review_links, address, city) VALUES ($1, $4, $5, $6, $7, $8)
       ON CONFLICT (organization_id, location_id) DO UPDATE
         SET name = excluded.name, review_links = excluded.review_links, address = excluded.address, city = excluded.city, updated_at = now()`,
      [organizationId, organization.name, organization.locale || 'en', location.id, location.name, JSON.stringify(location.reviewLinks), location.address, location.city],
    );
    this.written.set(key, value);
  }
}
