import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/*
 * What `npm pack` (and so `npm publish`) would ship: the compiled JS with its declarations, built by the
 * package's prepack, and nothing else; and the tarball, unpacked as a consumer's dependency, compiles
 * under `tsc --strict` and loads.
 */
const PACKAGE = join(__dirname, '..');
const ROOT = join(PACKAGE, '..', '..');
const TSC = join(ROOT, 'node_modules', '.bin', 'tsc');

describe('npm pack', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rrs-client-pack-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  let tarball: string;
  it('ships dist/ (JS and declarations, the generated types included), the README and package.json, nothing else', () => {
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: PACKAGE, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })) as Array<{ name: string; filename: string; files: Array<{ path: string }> }>;
    expect(packed.name).toBe('@rrs/client');
    const files = packed.files.map((f) => f.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/client.js', 'dist/retry.js', 'dist/webhooks.js', 'dist/generated/api.d.ts']));
    expect(files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md'].includes(f))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    tarball = join(dir, packed.filename);
  }, 60_000);

  it('unpacked as a dependency, compiles in a strict consumer and runs', () => {
    const consumer = join(dir, 'consumer');
    const installed = join(consumer, 'node_modules', '@rrs', 'client');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['xzf', tarball, '-C', installed, '--strip-components=1']);
    // Its dependencies, as npm would install them (from this repository's node_modules: offline).
    for (const dependency of ['openapi-fetch', 'openapi-typescript-helpers', 'standardwebhooks', '@stablelib', 'fast-sha256', '@types']) {
      symlinkSync(join(ROOT, 'node_modules', dependency), join(consumer, 'node_modules', dependency));
    }
    writeFileSync(join(consumer, 'index.ts'), `
import { createReviewRequestClient, verifyWebhook, type Schemas, type WebhookEvent } from '@rrs/client';
const client = createReviewRequestClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'rrs_x' });
export async function status(id: string): Promise<Schemas['CascadeStatus'] | undefined> {
  const { data } = await client.GET('/cascades/{id}', { params: { path: { id } } });
  return data?.status;
}
export function rating(event: WebhookEvent): number | null {
  return event.type === 'review_request.rated' ? event.data.rating : null;
}
console.log(typeof verifyWebhook, typeof client.POST);
`);
    execFileSync(TSC, ['--strict', '--module', 'node16', '--moduleResolution', 'node16', '--target', 'es2022', '--types', 'node', '--skipLibCheck', 'false', 'index.ts'], { cwd: consumer, stdio: 'pipe' });
    expect(execFileSync(process.execPath, ['index.js'], { cwd: consumer, encoding: 'utf8' }).trim()).toBe('function function');
  }, 60_000);
});
