import { sendWindowOpensAt } from '@rrs/proto';
import { sqlArray, type PoolClient } from '@rrs/runtime';
import { addressFor, PHONE_CHAIN, type FireChecks } from './engine';
import type { ConfiguredChannels } from './organizationProfiles';
import type { LoadedRecipient } from './recipientStore';

/**
 * What the steps of these recipients may use when they fire, read once for the whole batch: the
 * channels each organization has configured and the send windows of their locations (cached), and
 * the opt-outs of their addresses.
 */
export async function fireChecksFor(client: PoolClient, channels: ConfiguredChannels, states: Iterable<LoadedRecipient>, now: Date): Promise<(state: LoadedRecipient) => FireChecks> {
  const list = [...states];
  const configured = await channels.forOrganizations(list.map((state) => state.recipient.organizationId));
  const hours = await channels.sendingHours(list.map((state) => ({ organizationId: state.recipient.organizationId, locationId: state.meta.locationId })));
  const organizations = new Set<string>();
  const addresses = new Set<string>();
  // Every channel a step of these recipients may fire on, so the lookup stays on the whole primary key.
  const channelKeys = new Set<string>(PHONE_CHAIN);
  for (const state of list) {
    organizations.add(state.recipient.organizationId);
    for (const address of [addressFor('EMAIL', state.recipient), addressFor('SMS', state.recipient)]) if (address) addresses.add(address);
    for (const step of state.steps) channelKeys.add(step.channel).add(step.sentChannel);
  }
  const optedOut = new Set<string>();
  if (addresses.size) {
    // Organizations × addresses may pair an address with another organization than its recipient's;
    // the lookup below is by the recipient's own organization, so such a row is never consulted.
    const { rows } = await client.query<{ organization_id: string; channel: string; address: string }>(
      'SELECT organization_id, channel, address FROM opt_outs WHERE organization_id = ANY($1::uuid[]) AND channel = ANY($2::text[]) AND address = ANY($3::text[])',
      [sqlArray([...organizations]), sqlArray([...channelKeys]), sqlArray([...addresses])],
    );
    for (const row of rows) optedOut.add(`${row.organization_id}|${row.channel}|${row.address}`);
  }
  return (state) => {
    const organizationId = state.recipient.organizationId;
    const sendingHours = hours.get(`${organizationId}|${state.meta.locationId}`);
    return {
      configured: (channel) => configured.get(organizationId)?.has(channel) ?? false,
      optedOut: (channel, address) => optedOut.has(`${organizationId}|${channel}|${address}`),
      windowOpensAt: (channel) => (sendingHours ? sendWindowOpensAt(sendingHours.window, sendingHours.timeZone, channel, now) : null),
    };
  };
}
