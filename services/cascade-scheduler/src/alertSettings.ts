import {
  ALERT_EMAIL_CHOICES, DEFAULT_ALERT_THRESHOLD, DEFAULT_RESPONSE_TARGET_MINUTES, DEFAULT_WORKING_HOURS, isOneOf, MAX_RESPONSE_TARGET_MINUTES, workingHoursProblems,
  type schedulerV1, type WorkingHours,
} from '@rrs/proto';
import { DomainError, InvalidError, inTransaction, type Pool, type PoolClient } from '@rrs/runtime';
import { isUuid } from './ids';
import type { OrganizationProfiles } from './organizationProfiles';

type Queryable = Pool | PoolClient;

/*
 * An organization's rating alerts and inbox settings (docs/console.md, "Rating alerts"): the threshold
 * (and each location's own), the response target and the working hours it counts in, the Reply-To of
 * replies to customers, and each member's choice of email alerts. Kept beside the ratings they apply to.
 */

export interface InboxSettings {
  threshold: number;
  responseTargetMinutes: number;
  workingHours: WorkingHours;
  replyTo: string;
}

interface SettingsRow {
  alert_threshold: number;
  response_target_minutes: number;
  work_start: string;
  work_end: string;
  work_days: number[];
  reply_to: string;
}

const DEFAULTS: InboxSettings = { threshold: DEFAULT_ALERT_THRESHOLD, responseTargetMinutes: DEFAULT_RESPONSE_TARGET_MINUTES, workingHours: DEFAULT_WORKING_HOURS, replyTo: '' };

/** The organization's inbox settings (the defaults before it set any). */
export async function inboxSettingsOf(db: Queryable, organizationId: string): Promise<InboxSettings> {
  const { rows } = await db.query<SettingsRow>('SELECT alert_threshold, response_target_minutes, work_start, work_end, work_days, reply_to FROM organization_settings WHERE organization_id = $1', [organizationId]);
  const row = rows[0];
  if (!row) return DEFAULTS;
  return { threshold: row.alert_threshold, responseTargetMinutes: row.response_target_minutes, workingHours: { start: row.work_start, end: row.work_end, days: row.work_days }, replyTo: row.reply_to };
}

/**
 * The threshold a rating at a location is measured against: the location's own, else the
 * organization's, else the default. SQL so that the rating's own transaction reads it.
 */
export const THRESHOLD_OF_LOCATION_SQL = `coalesce(
    (SELECT alert_threshold FROM location_snapshots WHERE organization_id = $1 AND location_id = $2),
    (SELECT alert_threshold FROM organization_settings WHERE organization_id = $1),
    ${DEFAULT_ALERT_THRESHOLD})`;

export async function getAlertSettings(pool: Queryable, organizationId: string): Promise<schedulerV1.AlertSettings> {
  if (!isUuid(organizationId)) return { ...settingsMessage(organizationId, DEFAULTS), locationThresholds: [], members: [] };
  const settings = await inboxSettingsOf(pool, organizationId);
  const [locations, members] = await Promise.all([
    pool.query<{ location_id: string; alert_threshold: number }>('SELECT location_id, alert_threshold FROM location_snapshots WHERE organization_id = $1 AND alert_threshold IS NOT NULL ORDER BY location_id', [organizationId]),
    pool.query<{ member_id: string; email: string }>('SELECT member_id, email FROM member_alerts WHERE organization_id = $1 ORDER BY member_id', [organizationId]),
  ]);
  return {
    ...settingsMessage(organizationId, settings),
    locationThresholds: locations.rows.map((r) => ({ locationId: r.location_id, threshold: r.alert_threshold })),
    members: members.rows.map((r) => ({ memberId: r.member_id, email: r.email })),
  };
}

function settingsMessage(organizationId: string, s: InboxSettings): Omit<schedulerV1.AlertSettings, 'locationThresholds' | 'members'> {
  return {
    organizationId, threshold: s.threshold, responseTargetMinutes: s.responseTargetMinutes,
    workStart: s.workingHours.start, workEnd: s.workingHours.end, workDays: s.workingHours.days, replyTo: s.replyTo,
  };
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const thresholdOk = (value: number) => Number.isInteger(value) && value >= 0 && value <= 5;

/**
 * Replaces the organization's settings (and the locations' own thresholds: those not listed go back to
 * the organization's). Every problem is reported at once, by pointer; nothing changes when one is wrong.
 * The locations named must be the organization's (asked of the directory).
 */
export async function setAlertSettings(pool: Pool, profiles: OrganizationProfiles, settings: schedulerV1.AlertSettings): Promise<schedulerV1.AlertSettings> {
  const problems: Array<{ pointer: string; detail: string }> = [];
  if (!isUuid(settings.organizationId)) problems.push({ pointer: '/organizationId', detail: 'an organization id' });
  if (!thresholdOk(settings.threshold)) problems.push({ pointer: '/threshold', detail: 'an integer from 0 (only private feedback alerts) to 5' });
  if (!Number.isInteger(settings.responseTargetMinutes) || settings.responseTargetMinutes < 1 || settings.responseTargetMinutes > MAX_RESPONSE_TARGET_MINUTES) {
    problems.push({ pointer: '/responseTargetMinutes', detail: `an integer from 1 to ${MAX_RESPONSE_TARGET_MINUTES} (30 days)` });
  }
  const hours: WorkingHours = { start: settings.workStart, end: settings.workEnd, days: settings.workDays };
  for (const problem of workingHoursProblems(hours)) problems.push({ pointer: `/workingHours/${problem.field}`, detail: problem.detail });
  if (settings.replyTo !== '' && (settings.replyTo.length > 254 || !EMAIL.test(settings.replyTo))) problems.push({ pointer: '/replyTo', detail: 'an email address, or empty for the replying member\'s' });
  const seen = new Set<string>();
  settings.locationThresholds.forEach((entry, index) => {
    if (!entry.locationId || entry.locationId.length > 64 || seen.has(entry.locationId)) problems.push({ pointer: `/locationThresholds/${index}/locationId`, detail: 'a location of the organization, once' });
    seen.add(entry.locationId);
    if (!thresholdOk(entry.threshold)) problems.push({ pointer: `/locationThresholds/${index}/threshold`, detail: 'an integer from 0 to 5' });
  });
  if (problems.length === 0) {
    await Promise.all(
      settings.locationThresholds.map((entry, index) =>
        profiles.getLocation(settings.organizationId, entry.locationId).catch((err: unknown) => {
          if (!(err instanceof DomainError && err.kind === 'not_found')) throw err;
          problems.push({ pointer: `/locationThresholds/${index}/locationId`, detail: 'a location of the organization' });
        }),
      ),
    );
  }
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.pointer} ${p.detail}`).join('; ') });
  await inTransaction(pool, async (client) => {
    await client.query(
      `INSERT INTO organization_settings (organization_id, alert_threshold, response_target_minutes, work_start, work_end, work_days, reply_to) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (organization_id) DO UPDATE SET alert_threshold = excluded.alert_threshold, response_target_minutes = excluded.response_target_minutes,
         work_start = excluded.work_start, work_end = excluded.work_end, work_days = excluded.work_days, reply_to = excluded.reply_to, updated_at = now()`,
      [settings.organizationId, settings.threshold, settings.responseTargetMinutes, hours.start, hours.end, hours.days, settings.replyTo],
    );
    await client.query('UPDATE location_snapshots SET alert_threshold = NULL WHERE organization_id = $1 AND alert_threshold IS NOT NULL', [settings.organizationId]);
    for (const entry of settings.locationThresholds) {
      // A location nobody has sent to yet has no snapshot: its row starts with the threshold alone.
      await client.query(
        `INSERT INTO location_snapshots (organization_id, location_id, name, alert_threshold) VALUES ($1, $2, '', $3)
         ON CONFLICT (organization_id, location_id) DO UPDATE SET alert_threshold = excluded.alert_threshold`,
        [settings.organizationId, entry.locationId, entry.threshold],
      );
    }
  });
  return getAlertSettings(pool, settings.organizationId);
}

/** A member's choice of email alerts; the member must be the organization's (asked of the directory). */
export async function setMemberAlerts(pool: Pool, profiles: OrganizationProfiles, request: schedulerV1.SetMemberAlertsRequest): Promise<schedulerV1.AlertSettings> {
  if (!isUuid(request.organizationId)) throw InvalidError.field('/organizationId', 'an organization id');
  if (!isOneOf(ALERT_EMAIL_CHOICES, request.email)) throw InvalidError.field('/email', `one of ${ALERT_EMAIL_CHOICES.join(', ')}`);
  const members = await profiles.listMembers(request.organizationId);
  if (!members.some((member) => member.id === request.memberId)) throw InvalidError.field('/memberId', 'a member of the organization');
  await pool.query(
    `INSERT INTO member_alerts (organization_id, member_id, email) VALUES ($1, $2, $3)
     ON CONFLICT (organization_id, member_id) DO UPDATE SET email = excluded.email, updated_at = now()`,
    [request.organizationId, request.memberId, request.email],
  );
  return getAlertSettings(pool, request.organizationId);
}
