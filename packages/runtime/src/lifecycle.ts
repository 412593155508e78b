import type { Logger } from 'pino';

type StopFn = () => Promise<void> | void;

/**
 * Graceful shutdown. Parts register a stop function as they start; on shutdown the functions run in
 * reverse order of registration, so whatever takes work (servers, consumers) stops before what it
 * depends on (bus, pool) closes, and in-flight work finishes in between.
 */
export class Lifecycle {
  private readonly stops: Array<{ name: string; fn: StopFn }> = [];
  private stopping: Promise<void> | null = null;

  constructor(private readonly logger: Logger, private readonly stepTimeoutMs = 25_000) {}

  get isStopping(): boolean {
    return this.stopping !== null;
  }

  onStop(name: string, fn: StopFn): void {
    this.stops.push({ name, fn });
  }

  shutdown(reason = 'shutdown'): Promise<void> {
    if (!this.stopping) this.stopping = this.runStops(reason);
    return this.stopping;
  }

  private async runStops(reason: string): Promise<void> {
    this.logger.info({ reason }, 'shutting down');
    for (const { name, fn } of [...this.stops].reverse()) {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          Promise.resolve().then(fn),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${this.stepTimeoutMs} ms`)), this.stepTimeoutMs);
            timer.unref();
          }),
        ]);
      } catch (err) {
        this.logger.error({ err, part: name }, 'part failed to stop cleanly');
      } finally {
        clearTimeout(timer);
      }
    }
    this.logger.info('stopped');
  }

  /** SIGTERM/SIGINT → shutdown → exit. A second signal exits at once. */
  handleSignals(exit: (code: number) => void = (code) => process.exit(code)): void {
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.stopping) {
        this.logger.warn({ signal }, 'second signal, exiting now');
        exit(1);
        return;
      }
      this.shutdown(signal).then(() => exit(0), () => exit(1));
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }
}
