import type { busV1 } from '@rrs/proto';

/** What the thank-you page needs of the channel catalog: channel → its official bot's deep-link base. */
export type BotLinkSource = () => ReadonlyMap<string, string>;

/**
 * The official bots the thank-you page can offer now: the live catalog entries that announce a bot
 * (`bot_link`), in catalog order. An entry `unavailable` for its working account still offers its bot:
 * the bot sends to linked contacts whatever the working account's state.
 */
export function botLinksOf(catalog: { list(): readonly busV1.ChannelCatalogEntry[] }): BotLinkSource {
  return () => new Map(catalog.list().filter((entry) => entry.botLink).map((entry) => [entry.key, entry.botLink!] as const));
}
