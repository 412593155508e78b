import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium; `scripts/ensure-servers.sh` installs it when it is missing. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Headless Chromium for tests that drive a page as a person would. The flags keep it off the network
 * (this machine has none beyond loopback) and working as root.
 */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}
