import { phoneRefusal, sendWindowOpensAt } from '@rrs/proto';
import type { PoolClient } from '@rrs/runtime';
import type { FireChecks } from './engine';
import { suppressedAmong } from './optOutLedger';
import type { ConfiguredChannels } from './organizationProfiles';
import { personAddresses } from './personAddresses';
import type { LoadedRecipient } from './recipientStore';
import type { AddressHasher } from './personHash';

/**
 * What the steps of these recipients may use when they fire, read once for the whole batch: the
 * channels each organization has configured and the send windows of their locations (cached), and
 * the opt-out ledger's entries for their addresses.
 */
export async function fireChecksFor(client: PoolClient, channels: ConfiguredChannels, hasher: AddressHasher, states: Iterable<LoadedRecipient>, now: Date): Promise<(state: LoadedRecipient) => FireChecks> {
  const list = [...states];
  const configured = await channels.forOrganizations(list.map((state) => state.recipient.organizationId));
  const hours = await channels.sendingHours(list.map((state) => ({ organizationId: state.recipient.organizationId, locationId: state.meta.locationId })));
  const suppressed = await suppressedAmong(client, hasher, list.map((state) => state.recipient.organizationId), list.flatMap((state) => personAddresses(state.recipient)));
  return (state) => {
    const organizationId = state.recipient.organizationId;
    const sendingHours = hours.get(`${organizationId}|${state.meta.locationId}`);
    // An opt-out through any channel stops the person on every channel: one suppressed address suffices.
    const personOptedOut = personAddresses(state.recipient).some((address) => suppressed.has(`${organizationId}|${address}`));
    // Read when the step fires: allowed countries changed since intake apply to the steps still to go.
    const phone = state.recipient.phone;
    const phoneRefused = phone !== '' && phoneRefusal(phone, channels.phoneCountries(organizationId)) !== null;
    return {
      phoneRefused: () => phoneRefused,
      configured: (channel) => configured.get(organizationId)?.has(channel) ?? false,
      optedOut: () => personOptedOut,
      windowOpensAt: (channel) => (sendingHours ? sendWindowOpensAt(sendingHours.window, sendingHours.timeZone, channel, now) : null),
    };
  };
}
