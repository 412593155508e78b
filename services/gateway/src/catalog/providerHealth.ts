import { isOneOf } from '@rrs/proto';
import { CIRCUIT_STATES, SINK_PROVIDER, type ChannelCatalogEntry, type CircuitState } from '@rrs/sender-kit';

/**
 * One provider of a channel across the sender's live replicas. Each replica keeps its own circuit
 * breakers and all of them put the channel's one catalog key, so the gateway gathers every replica's
 * announcement as it sees it and answers the worst state: a provider open on any replica is `open`.
 */
export interface ProviderHealthSummary {
  name: string;
  /** The worst state among the replicas: open, then half_open, then closed. */
  state: CircuitState;
  /** Since when the longest of the replicas in `state` has been in it. */
  since: Date;
  /** The most recent provider fault's reason code over the replicas, if any. */
  lastFailureCode: string | null;
  lastFailureAt: Date | null;
  /** Replicas that announced this provider, and how many of them are in `state`. */
  replicas: number;
  replicasInState: number;
}

const RANK: Record<CircuitState, number> = { closed: 0, half_open: 1, open: 2 };
/** A state this gateway does not know (a newer sender's) reads as closed: nothing known against the provider. */
const stateOf = (state: string): CircuitState => (isOneOf(CIRCUIT_STATES, state) ? state : 'closed');

interface ReplicaView {
  announcedAt: number;
  /** When the gateway first saw this announcement: the view lives a TTL from then. */
  seenAt: number;
  providers: ChannelCatalogEntry['providers'];
}

/** Every live replica's provider health, by channel key and replica. */
export class ProviderHealthBoard {
  private readonly views = new Map<string, Map<string, ReplicaView>>();

  constructor(private readonly ttlMs: number) {}

  /** Takes an announcement in (every put the watch sees, and the latest entries read on refresh). */
  record(entry: ChannelCatalogEntry, now = Date.now()): void {
    if (entry.providers.length === 0) return;
    const replica = entry.providers[0].replica;
    const announcedAt = entry.announcedAt?.getTime() ?? 0;
    let byReplica = this.views.get(entry.key);
    if (!byReplica) this.views.set(entry.key, (byReplica = new Map()));
    const known = byReplica.get(replica);
    if (known && known.announcedAt > announcedAt) return;
    const seenAt = known && known.announcedAt === announcedAt ? known.seenAt : now;
    byReplica.set(replica, { announcedAt, seenAt, providers: entry.providers });
    this.prune(byReplica, now);
  }

  /** The channel's providers in the failover order of its latest announcement, each summed over the live replicas. */
  of(key: string, now = Date.now()): ProviderHealthSummary[] {
    const byReplica = this.views.get(key);
    if (!byReplica) return [];
    this.prune(byReplica, now);
    const live = [...byReplica.values()].sort((a, b) => b.announcedAt - a.announcedAt);
    if (live.length === 0) return [];
    return live[0].providers.map((provider) => {
      const reports = live.flatMap((view) => view.providers.filter((p) => p.name === provider.name));
      const state = reports.map((p) => stateOf(p.state)).reduce((worst, s) => (RANK[s] > RANK[worst] ? s : worst), 'closed' as CircuitState);
      const inState = reports.filter((p) => stateOf(p.state) === state);
      const failures = reports.filter((p) => p.lastFailureCode && p.lastFailureAt).sort((a, b) => b.lastFailureAt!.getTime() - a.lastFailureAt!.getTime());
      return {
        name: provider.name,
        state,
        since: new Date(Math.min(...inState.map((p) => p.since?.getTime() ?? now))),
        lastFailureCode: failures[0]?.lastFailureCode ?? null,
        lastFailureAt: failures[0]?.lastFailureAt ?? null,
        replicas: reports.length,
        replicasInState: inState.length,
      };
    });
  }

  /** Replicas restart under new names (pod, pid): views a TTL old are dropped whenever the key is touched. */
  private prune(byReplica: Map<string, ReplicaView>, now: number): void {
    for (const [replica, view] of byReplica) if (view.seenAt + this.ttlMs <= now) byReplica.delete(replica);
  }
}

/** A provider's health in the public catalog (GET /api/v1/channels), in words rather than breaker states. */
export const PROVIDER_STATES = ['ok', 'degraded', 'down'] as const;
export type ProviderState = (typeof PROVIDER_STATES)[number];
const PUBLIC_STATE: Record<CircuitState, ProviderState> = { closed: 'ok', half_open: 'degraded', open: 'down' };
export const publicProviderState = (state: CircuitState): ProviderState => PUBLIC_STATE[state];

/**
 * Whether a channel's messages reach anyone: false when its sender sends through the sink alone (a
 * staging that named it, "Production never pretends"); senders never list the sink beside real ones.
 * No provider health announced (an older sender) = nothing known against it.
 */
export const deliversMessages = (providers: readonly { name: string }[]): boolean => !(providers.length > 0 && providers.every((p) => p.name === SINK_PROVIDER));
