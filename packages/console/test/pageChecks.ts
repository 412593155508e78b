import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';

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
    const page = globalThis as unknown as { axe: { run(context: unknown, options: object): Promise<{ violations: AxeViolation[] }> }; document: unknown };
    return (await page.axe.run(page.document, { resultTypes: ['violations'] })).violations;
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** The page at desktop and phone sizes, as `<dir>/<file>-desktop.png` and `-phone.png` (docs/console.md shows them). */
export async function saveScreenshots(page: Page, dir: string, file: string): Promise<void> {
  const before = page.viewportSize();
  for (const [size, viewport] of [['desktop', { width: 1280, height: 800 }], ['phone', { width: 390, height: 844 }]] as const) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: `${dir}/${file}-${size}.png`, fullPage: true });
  }
  if (before) await page.setViewportSize(before);
}
