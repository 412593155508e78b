import { accountUnavailableReason } from '@rrs/proto';
import { collapseRepeats, gauge, type Logger } from '@rrs/runtime';
import { providerFetch, providerJson } from '@rrs/sender-kit';
import type { MessengerAccount } from './config';

/**
 * GREEN-API instance states (`getStateInstance`, https://green-api.com/en/docs/api/account/GetStateInstance,
 * and the Telegram page) in which the account can't send: not logged in, banned, restricted, warned for
 * spam (messages are only queued), or waiting for a 2FA password. `authorized` sends; `starting` and
 * `sleepMode` are passing (up to ~5 min, messages queue and go out), so they keep the channel.
 */
export const ACCOUNT_DOWN_STATES: ReadonlySet<string> = new Set(['notAuthorized', 'blocked', 'suspended', 'yellowCard', 'pendingPassword']);

/** The reason a step and the catalog get for a down account, e.g. `account_blocked` (the rule lives in proto). */
export const accountDownReason = accountUnavailableReason;

const available = gauge({ name: 'messenger_account_available', help: 'Whether a messenger working account can send (1) or its channel is out of the catalog (0), by channel and instance.', labelNames: ['channel', 'instance'] });
const stateGauge = gauge({ name: 'messenger_account_state', help: 'The last GREEN-API instance state of a messenger working account (1 for the current state).', labelNames: ['channel', 'instance', 'state'] });

export interface AccountHealthOptions {
  channel: string;
  account: MessengerAccount;
  /** Pause between two state checks (GREEN-API recommends one a minute); never shorter than `minIntervalMs`. */
  intervalMs: number;
  logger: Logger;
  /** Told of every change of availability (the catalog entry follows it). */
  onChange: (usable: boolean, reason: string) => Promise<void> | void;
}

/** The floor between two checks of one account, whatever the config: frequent calls draw restrictions. */
export const MIN_HEALTH_INTERVAL_MS = 5_000;

/**
 * The health of one working account: its instance state, asked on start and then every `intervalMs`,
 * one call at a time. A check that fails (the gateway unreachable) keeps the last known state: a gateway
 * hiccup must not take the channel out. Until the first answer the account counts as usable.
 */
export class AccountHealth {
  private state = 'unknown';
  private down = false;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private readonly failures;

  constructor(private readonly options: AccountHealthOptions) {
    this.failures = collapseRepeats(options.logger);
    available.set({ channel: options.channel, instance: options.account.idInstance }, 1);
  }

  /** Whether steps may go to this account now; when not, why (`account_<state>`). */
  get usable(): { usable: true } | { usable: false; reason: string } {
    return this.down ? { usable: false, reason: accountDownReason(this.state) } : { usable: true };
  }

  get lastState(): string {
    return this.state;
  }

  /** Checks now (or joins the check in flight), then every interval until `stop`. */
  async start(): Promise<void> {
    await this.check();
    const every = Math.max(MIN_HEALTH_INTERVAL_MS, this.options.intervalMs);
    this.timer = setInterval(() => void this.check(), every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.failures.flush();
  }

  check(): Promise<void> {
    this.checking ??= this.ask().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async ask(): Promise<void> {
    const { account, channel } = this.options;
    let next: string;
    try {
      const res = await providerFetch(`${account.apiUrl.replace(/\/$/, '')}/waInstance${account.idInstance}/getStateInstance/${account.apiToken}`, { method: 'GET' }, { provider: channel.toLowerCase(), timeoutMs: account.timeoutMs });
      // A wrong token is the account's fault as much as a ban: the channel can't send.
      if (res.status === 401 || res.status === 403) {
        await res.body?.cancel();
        next = 'notAuthorized';
      } else if (!res.ok) {
        await res.body?.cancel();
        throw new Error(`getStateInstance: HTTP ${res.status}`);
      } else {
        const answer = await providerJson<{ stateInstance?: unknown }>(res, channel.toLowerCase());
        if (typeof answer.stateInstance !== 'string' || answer.stateInstance === '') throw new Error('getStateInstance: answer without stateInstance');
        next = answer.stateInstance;
      }
    } catch (err) {
      this.failures.warn({ err, channel, instance: account.idInstance }, 'checking the messenger account state failed; keeping the last known state');
      return;
    }
    if (next !== this.state) {
      stateGauge.remove({ channel, instance: account.idInstance, state: this.state });
      stateGauge.set({ channel, instance: account.idInstance, state: next }, 1);
      this.options.logger.info({ channel, instance: account.idInstance, from: this.state, to: next }, 'messenger account state');
    }
    this.state = next;
    const down = ACCOUNT_DOWN_STATES.has(next);
    if (down === this.down) return;
    this.down = down;
    available.set({ channel, instance: account.idInstance }, down ? 0 : 1);
    if (down) this.options.logger.error({ channel, instance: account.idInstance, state: next }, 'messenger account can not send: its channel leaves the catalog and its steps go to the next phone channel');
    try {
      await this.options.onChange(!down, down ? accountDownReason(next) : '');
    } catch (err) {
      this.failures.error({ err, channel }, 'updating the channel catalog after an account state change failed; the next refresh puts it');
    }
  }
}
