import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

/*
 * What a browser test of the console checks on every page it builds: axe-core's serious and critical
 * violations, and (with CONSOLE_SCREENSHOTS_DIR) a screenshot at desktop and phone sizes for the docs.
 */

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

/** axe-core on the page as it is now: the serious and critical violations (none expected). */
export async function seriousViolations(page: Page): Promise<string[]> {
  // Through the DevTools protocol, so the page's CSP (script-src 'self') stays on while axe runs.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const scope = globalThis as unknown as { axe: { run(context: unknown, options: object): Promise<{ violations: AxeViolation[] }> }; document: unknown };
    return (await scope.axe.run(scope.document, { resultTypes: ['violations'] })).violations;
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** Saves `<file>-desktop.png` and `<file>-phone.png` into CONSOLE_SCREENSHOTS_DIR, when it is set. */
export async function screenshotSizes(page: Page, file: string): Promise<void> {
  const dir = process.env.CONSOLE_SCREENSHOTS_DIR;
  if (!dir) return;
  const before = page.viewportSize();
  for (const [size, viewport] of [['desktop', { width: 1280, height: 800 }], ['phone', { width: 390, height: 844 }]] as const) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: join(dir, `${file}-${size}.png`), fullPage: true });
  }
  if (before) await page.setViewportSize(before);
}
