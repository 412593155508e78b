import { type SendWindow } from '@rrs/proto';
import { waitFor } from '@rrs/testkit';
import { FakeProfiles, LOCATION, ORG, startHarness, type Harness } from './harness';

/** HH:MM in `timeZone`, `aheadMinutes` from now (wrapping past midnight). */
function localClock(timeZone: string, aheadMinutes: number): string {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone, hourCycle: 'h23', hour: '2-digit', minute: '2-digit' }).formatToParts(new Date());
  const minutes = (Number(parts.find((p) => p.type === 'hour')!.value) * 60 + Number(parts.find((p) => p.type === 'minute')!.value) + aheadMinutes) % 1440;
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

/** A window that is closed now and opens in about two hours, in the zone's real local time. */
const closedForTwoHours = (timeZone: string): SendWindow => ({ start: localClock(timeZone, 120), end: localClock(timeZone, 180) });

/** The dispatcher against real PostgreSQL and JetStream, with the organization's and locations' windows in real time zones. */
describe('send windows (Postgres + JetStream)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL', 'SMS'] } });
  });
  afterAll(async () => {
    await h.close();
  });

  const useOrganizationHours = (timeZone: string, sendWindow: SendWindow | null) => h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { timeZone, sendWindow }));

  async function startOne(channel: string, locationId = LOCATION) {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId, name: 'win', flowId: '', channel, externalId: '',
      recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+79990001122' }],
    });
    return result.id;
  }
  const stepOf = async (cascadeId: string) =>
    (await h.pool.query<{ status: string; due_at: Date; reason: string | null; attempt: number }>('SELECT status, due_at, reason, attempt FROM recipient_steps WHERE cascade_id = $1', [cascadeId])).rows[0];

  it("holds an SMS due outside the organization's window as scheduled until the window opens, in the organization's time zone, and shows why", async () => {
    useOrganizationHours('Asia/Tokyo', closedForTwoHours('Asia/Tokyo'));
    const before = Date.now();
    const cascadeId = await startOne('SMS');
    await waitFor(async () => (await stepOf(cascadeId)).reason === 'send_window', { timeoutMs: 10_000 });
    const step = await stepOf(cascadeId);
    expect(step).toMatchObject({ status: 'scheduled', attempt: 0 });
    // The window opens at the next whole local minute two hours on: 119 to 120 minutes from now.
    expect(step.due_at.getTime() - before).toBeGreaterThan(118 * 60_000);
    expect(step.due_at.getTime() - before).toBeLessThanOrEqual(120 * 60_000 + 5_000);
    expect(h.sender.received.filter((s) => s.channel === 'SMS')).toHaveLength(0);
    const shown = await h.scheduler.cascades.get(ORG, cascadeId);
    expect(shown.recipients[0].steps[0]).toMatchObject({ status: 'scheduled', reason: 'send_window', dueAt: step.due_at });
    expect(shown.recipients[0].status).toBe('running');
  });

  it('lets email through the default window, which holds only the phone channels', async () => {
    useOrganizationHours('Asia/Tokyo', closedForTwoHours('Asia/Tokyo'));
    const cascadeId = await startOne('EMAIL');
    await waitFor(async () => (await stepOf(cascadeId)).status === 'sent', { timeoutMs: 10_000 });
    expect((await stepOf(cascadeId)).reason).toBeNull();
  });

  it("uses the location's own window and time zone over the organization's", async () => {
    useOrganizationHours('Asia/Tokyo', closedForTwoHours('Asia/Tokyo'));
    // This location holds only email, so its SMS goes at once although the organization's window is closed.
    h.profiles.locationSettings.set(`${LOCATION}-open`, { timeZone: 'America/New_York', sendWindow: { ...closedForTwoHours('America/New_York'), channels: ['EMAIL'] } });
    const open = await startOne('SMS', `${LOCATION}-open`);
    await waitFor(async () => (await stepOf(open)).status === 'sent', { timeoutMs: 10_000 });
    // This one is closed in its own zone (New York), while the organization's (Tokyo) is open now.
    useOrganizationHours('Asia/Tokyo', null);
    h.profiles.locationSettings.set(`${LOCATION}-ny`, { timeZone: 'America/New_York', sendWindow: closedForTwoHours('America/New_York') });
    const held = await startOne('SMS', `${LOCATION}-ny`);
    await waitFor(async () => (await stepOf(held)).reason === 'send_window', { timeoutMs: 10_000 });
    expect((await stepOf(held)).status).toBe('scheduled');
  });

  it('sends at any time when no window is set', async () => {
    useOrganizationHours('Asia/Tokyo', null);
    const cascadeId = await startOne('SMS');
    await waitFor(async () => (await stepOf(cascadeId)).status === 'sent', { timeoutMs: 10_000 });
  });
});
