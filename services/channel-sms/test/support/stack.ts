import { startContacts } from '@rrs/contacts';
import { startScheduler } from '@rrs/cascade-scheduler';
import type { Bus, ServiceContext } from '@rrs/runtime';

/** contacts and the scheduler (40 ms flow minutes) on one database and bus: the stack channel-sms's end-to-end tests send for. */
export async function startCascadeStack(databaseUrl: string, bus: Bus, ctx: ServiceContext) {
  const contacts = await startContacts({ databaseUrl, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const scheduler = await startScheduler(
    { databaseUrl, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
    ctx,
    { bus, channelsCacheMs: 0 },
  );
  /** An organization with SMS configured and `smsBalance` parts, and one location in Moscow. */
  const smsOrganization = async (name: string, smsBalance: number) => {
    const organization = await contacts.directory.createOrganization({ name, plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', smsBalance, sendWindow: null, cooldownDays: 0 });
    await contacts.channels.set({ organizationId: organization.id, channel: 'SMS', configured: true });
    const location = await contacts.directory.createLocation({ organizationId: organization.id, name: 'Кофейня', address: 'Тверская 1', city: 'Москва', timeZone: 'Europe/Moscow', reviewLinks: [] });
    return { organization, location };
  };
  return { contacts, scheduler, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, smsOrganization };
}
