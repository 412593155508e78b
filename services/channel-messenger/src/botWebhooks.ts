import { sameSecret, type ReceiptResult, type ReceiptRoute } from '@rrs/sender-kit';
import { applyBotEvent, type BotLinkingDeps } from './botLinking';
import { botWebhookPath } from './bots';

/**
 * One bot's webhook route: `POST /bots/<channel>`. The platform sends the secret given at registration
 * in a header (Telegram `X-Telegram-Bot-Api-Secret-Token`, MAX `X-Max-Bot-Api-Secret`); a missing or
 * wrong one is 401 and the body is not read. An update we do not act on is answered 200, so the
 * platform does not send it again; a failure to apply it is 503, so it does.
 */
export function botWebhookRoute(deps: BotLinkingDeps & { secret: string }): ReceiptRoute {
  const path = botWebhookPath(deps.bot.channel);
  return {
    provider: deps.bot.provider,
    methods: ['POST'],
    matches: (pathname) => pathname === path,
    authorize: (req) => {
      const given = req.headers[deps.bot.secretHeader];
      return typeof given === 'string' && sameSecret(given, deps.secret);
    },
    refusedStatus: 401,
    async handle(body): Promise<ReceiptResult> {
      let update: unknown;
      try {
        update = JSON.parse(body.toString('utf8'));
      } catch {
        return 'bad_request';
      }
      if (typeof update !== 'object' || update === null) return 'bad_request';
      const result = await applyBotEvent(deps, deps.bot.parseUpdate(update));
      return result === 'linked' || result === 'unlinked' ? 'recorded' : 'not_final';
    },
  };
}
