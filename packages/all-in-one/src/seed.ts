import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { DomainError, randomBase62, type Logger } from '@rrs/runtime';
import type { ChannelSettings, Directory, Members, Templates } from '@rrs/contacts';
import type { Flows } from '@rrs/cascade-scheduler';

export interface DemoState {
  organizationId: string;
  apiKey: string;
  adminToken: string;
  /** The demo organization's console person (an owner), signing in at /app. */
  email: string;
  password: string;
}

/**
 * First start: a demo organization on a paid plan with a confirmed email and an SMS balance, one
 * location, a default flow of EMAIL at once then SMS after 60 minutes, every channel configured (MAX and
 * TELEGRAM too, so an SMS step without balance can be rerouted) and its own EMAIL and SMS templates. Its key and the admin token
 * are kept in the data folder (only a hash of the key is in the database) so later starts print them.
 * With `members`, the demo person (DEMO_EMAIL, an owner) signs in to the console with DEMO_PASSWORD, or
 * with a password generated once and kept in the same file (the database has only its argon2id hash).
 */
export async function seedDemo(options: {
  stateFile: string; directory: Directory; templates?: Templates; channels?: ChannelSettings; flows: Flows; demoApiKey?: string; adminToken?: string; logger: Logger;
  members?: Members; demoEmail?: string; demoPassword?: string;
}): Promise<DemoState> {
  const saved = readState(options.stateFile);
  if (saved && (await organizationExists(options.directory, saved.organizationId))) {
    const state = { ...saved, adminToken: options.adminToken ?? saved.adminToken };
    if (options.demoApiKey && options.demoApiKey !== saved.apiKey) {
      await issueKeyIfNew(options.directory, saved.organizationId, options.demoApiKey);
      state.apiKey = options.demoApiKey;
    }
    Object.assign(state, await seedDemoPerson(options, saved.organizationId, saved));
    writeState(options.stateFile, state);
    return state;
  }

  const organization = await options.directory.createOrganization({
    name: 'Demo Coffee',
    plan: 'standard',
    emailConfirmed: true,
    smsBalance: 1000,
    timeZone: 'Europe/Moscow',
    locale: 'ru',
    defaultRegion: 'RU',
    // The demo answers at any hour, so that a first try at night shows its SMS, and asks the same
    // address as often as one tries it; organizations created through the admin API get the default
    // send window and the 30-day cooldown (docs/customer-respect.md).
    sendWindow: null,
    cooldownDays: 0,
  });
  await options.directory.createLocation({
    organizationId: organization.id,
    name: 'Demo Coffee on Tverskaya',
    address: 'Tverskaya st. 1',
    city: 'Moscow',
    timeZone: 'Europe/Moscow',
    reviewLinks: [
      { provider: 'google', url: 'https://maps.google.com/?cid=0' },
      { provider: 'yandex', url: 'https://yandex.ru/maps/org/0/reviews/' },
      { provider: '2gis', url: 'https://2gis.ru/moscow/firm/0/tab/reviews' },
    ],
  });
  await options.flows.create({
    organizationId: organization.id,
    name: 'Email, then SMS an hour later',
    isDefault: true,
    steps: [
      { channel: 'EMAIL', delayMinutes: 0 },
      { channel: 'SMS', delayMinutes: 60 },
    ],
  });
  for (const channel of ['EMAIL', 'SMS', 'MAX', 'TELEGRAM']) await options.channels?.set({ organizationId: organization.id, channel, configured: true });
  await options.templates?.set({
    organizationId: organization.id,
    channel: 'EMAIL',
    subject: 'Как вам кофе в {{location}}?',
    body: 'Здравствуйте, {{name}}!\n\nСпасибо, что заглянули в {{location}}. Оцените, пожалуйста, ваш визит — это займёт минуту:\n\n{{link}}\n\nDemo Coffee',
  });
  await options.templates?.set({ organizationId: organization.id, channel: 'SMS', body: 'Demo Coffee: оцените визит {{link}}' });
  const { secret } = await options.directory.issueApiKey({ organizationId: organization.id, name: 'demo', secret: options.demoApiKey });
  const person = await seedDemoPerson(options, organization.id, null);
  const state: DemoState = { organizationId: organization.id, apiKey: secret, adminToken: options.adminToken ?? `adm_${randomBase62(32)}`, ...person };
  writeState(options.stateFile, state);
  options.logger.info({ organizationId: organization.id }, 'demo organization seeded');
  return state;
}

/**
 * The demo person: DEMO_EMAIL with DEMO_PASSWORD, else the password kept from an earlier start, else a
 * new one. Set on every start, so a changed DEMO_PASSWORD (or a DEMO_EMAIL) takes effect at once.
 */
async function seedDemoPerson(
  options: { members?: Members; demoEmail?: string; demoPassword?: string },
  organizationId: string,
  saved: Partial<DemoState> | null,
): Promise<{ email: string; password: string }> {
  const email = options.demoEmail ?? saved?.email ?? DEFAULT_DEMO_EMAIL;
  const password = options.demoPassword ?? saved?.password ?? randomBase62(20);
  await options.members?.ensureMember({ organizationId, email, name: 'Demo', role: 'owner', password });
  return { email, password };
}

export const DEFAULT_DEMO_EMAIL = 'demo@example.com';

async function organizationExists(directory: Directory, id: string): Promise<boolean> {
  try {
    await directory.getOrganization(id);
    return true;
  } catch (err) {
    if (err instanceof DomainError && err.kind === 'not_found') return false;
    throw err;
  }
}

async function issueKeyIfNew(directory: Directory, organizationId: string, secret: string): Promise<void> {
  try {
    await directory.issueApiKey({ organizationId, name: 'demo (DEMO_API_KEY)', secret });
  } catch (err) {
    if (!(err instanceof DomainError && err.kind === 'conflict')) throw err;
  }
}

function readState(file: string): DemoState | null {
  if (!existsSync(file)) return null;
  return JSON.parse(readFileSync(file, 'utf8')) as DemoState;
}

function writeState(file: string, state: DemoState): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
}
