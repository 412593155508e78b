import { ConfigError } from '@rrs/runtime';

/**
 * The provider that records messages in the dev inbox instead of delivering them. "Production never
 * pretends" (docs/channels.md, "The sink and production"): in production a sender uses it only when its
 * provider list names it, and then the channel catalog says its messages are not delivered.
 */
export const SINK_PROVIDER = 'sink';
export type SinkProviderName = typeof SINK_PROVIDER;

/** One provider adapter a sender has, as the order is built from it. */
export interface ProviderAdapterSpec<Name extends string> {
  name: Name;
  /** Its credentials are given. */
  configured: boolean;
  /** The variable(s) that configure it, as the error names them, e.g. `SMTP_URL`. */
  needs: string;
}

export interface ProviderOrderSpec<Name extends string> {
  /** The variable listing the order, e.g. `EMAIL_PROVIDERS`. */
  variable: string;
  /** Its value; unset = every configured adapter, in the order of `adapters`. */
  listed: string | undefined;
  adapters: readonly ProviderAdapterSpec<Name>[];
  /** NODE_ENV=production: no silent sink. */
  production: boolean;
}

/**
 * A channel's providers in failover order, the one rule every sender (and the all-in-one, which builds
 * the senders' configs with their own functions) applies:
 * - the list names known adapters once each, each with its credentials, or `sink` alone;
 * - unset, it is every configured adapter in the default order; none configured = the sink outside
 *   production, and in production a ConfigError naming the variables to set (nothing is ever sent
 *   "successfully" to nowhere).
 */
export function providerOrder<Name extends string>(spec: ProviderOrderSpec<Name>): (Name | SinkProviderName)[] {
  const { variable, adapters } = spec;
  const known = adapters.map((a) => a.name as string);
  if (spec.listed === undefined) {
    const configured = adapters.filter((a) => a.configured).map((a) => a.name);
    if (configured.length > 0) return configured;
    if (!spec.production) return [SINK_PROVIDER];
    throw new ConfigError(
      adapters[0].needs.split(/[ ,]+/)[0],
      `no provider is configured and NODE_ENV=production: set ${adapters.map((a) => a.needs).join(' or ')} (or ${variable}=${SINK_PROVIDER} for a staging whose messages are not delivered)`,
    );
  }
  const names = spec.listed.split(',');
  if (names.includes(SINK_PROVIDER)) {
    if (names.length > 1) throw new ConfigError(variable, `${SINK_PROVIDER} delivers nothing and cannot be listed with other providers`);
    return [SINK_PROVIDER];
  }
  const order: Name[] = [];
  for (const name of names) {
    const adapter = adapters.find((a) => a.name === name);
    if (!adapter) throw new ConfigError(variable, `unknown provider ${JSON.stringify(name)} (known: ${[...known, SINK_PROVIDER].join(', ')})`);
    if (order.includes(adapter.name)) throw new ConfigError(variable, `lists ${name} twice`);
    if (!adapter.configured) throw new ConfigError(variable, `lists ${name} but ${adapter.needs} is not set`);
    order.push(adapter.name);
  }
  return order;
}
