import { busV1 } from '@rrs/proto';
import { deliversMessages, ProviderHealthBoard, publicProviderState } from '../src/catalog/providerHealth';

const ttlMs = 30_000;
const t0 = Date.parse('2026-03-01T10:00:00Z');

/** One replica's put of the SMS entry: its providers as `[name, state, lastFailure?]`. */
function put(replica: string, announcedAt: number, providers: Array<[string, string, { code: string; at: number }?]>): busV1.ChannelCatalogEntry {
  return busV1.ChannelCatalogEntry.fromPartial({
    key: 'SMS', slug: 'sms', label: 'SMS', contactField: 'phone', capabilities: ['send'], sender: 'channel-sms', position: 20, announcedAt: new Date(announcedAt),
    providers: providers.map(([name, state, failure]) => ({ name, state, since: new Date(t0), replica, lastFailureCode: failure?.code, lastFailureAt: failure ? new Date(failure.at) : undefined })),
  });
}

describe('provider health over a sender\'s replicas (ProviderHealthBoard)', () => {
  it('answers the worst state per provider, how many replicas are in it, and the latest fault', () => {
    const board = new ProviderHealthBoard(ttlMs);
    board.record(put('pod-a', t0 + 1_000, [['smsc', 'open', { code: 'provider_unavailable', at: t0 + 900 }], ['smsru', 'closed']]), t0 + 1_000);
    board.record(put('pod-b', t0 + 2_000, [['smsc', 'half_open', { code: 'provider_timeout', at: t0 + 1_500 }], ['smsru', 'closed']]), t0 + 2_000);
    board.record(put('pod-c', t0 + 3_000, [['smsc', 'closed'], ['smsru', 'closed']]), t0 + 3_000);
    expect(board.of('SMS', t0 + 3_000)).toEqual([
      { name: 'smsc', state: 'open', since: new Date(t0), lastFailureCode: 'provider_timeout', lastFailureAt: new Date(t0 + 1_500), replicas: 3, replicasInState: 1 },
      { name: 'smsru', state: 'closed', since: new Date(t0), lastFailureCode: null, lastFailureAt: null, replicas: 3, replicasInState: 3 },
    ]);
    expect(board.of('EMAIL', t0 + 3_000)).toEqual([]);
  });

  it("drops a departed replica's view a TTL after its last announcement was first seen, not when it is read again", () => {
    const board = new ProviderHealthBoard(ttlMs);
    board.record(put('pod-a', t0, [['smsc', 'open']]), t0);
    board.record(put('pod-b', t0, [['smsc', 'closed']]), t0);
    // pod-b keeps announcing; pod-a's last put is read again on every poll but is the same announcement.
    board.record(put('pod-b', t0 + 20_000, [['smsc', 'closed']]), t0 + 20_000);
    board.record(put('pod-a', t0, [['smsc', 'open']]), t0 + 20_000);
    expect(board.of('SMS', t0 + 29_000)[0]).toMatchObject({ state: 'open', replicas: 2 });
    expect(board.of('SMS', t0 + 30_000)[0]).toMatchObject({ state: 'closed', replicas: 1, replicasInState: 1 });
  });

  it('keeps the newer announcement of a replica, skips senders without providers, and reads an unknown state as closed', () => {
    const board = new ProviderHealthBoard(ttlMs);
    board.record(put('pod-a', t0 + 5_000, [['smsc', 'closed']]), t0 + 5_000);
    // An older put seen late (the watch and a poll racing) does not bring the open state back.
    board.record(put('pod-a', t0 + 1_000, [['smsc', 'open']]), t0 + 6_000);
    board.record(put('pod-b', t0 + 6_000, [['smsc', 'melting']]), t0 + 6_000);
    board.record(put('pod-c', t0 + 6_000, []), t0 + 6_000);
    expect(board.of('SMS', t0 + 6_000)).toEqual([expect.objectContaining({ name: 'smsc', state: 'closed', replicas: 2, replicasInState: 2 })]);
  });

  it('says the public state in words (closed ok, half_open degraded, open down), and that a sink alone delivers nothing', () => {
    expect(['closed', 'half_open', 'open'].map((state) => publicProviderState(state as 'closed'))).toEqual(['ok', 'degraded', 'down']);
    expect(deliversMessages([{ name: 'sink' }])).toBe(false);
    expect(deliversMessages([{ name: 'smsc' }, { name: 'sink' }])).toBe(true);
    // Nothing announced (a sender of an earlier version): nothing known against it.
    expect(deliversMessages([])).toBe(true);
  });
});
