import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { GatewayClients } from '../src/clients';
import { buildAdminOpenApi } from '../src/admin/openapi';
import { adminRoutes } from '../src/admin/routes';

const run = promisify(execFile);
const REDOCLY = join(__dirname, '..', '..', '..', 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

async function lint(doc: unknown): Promise<{ totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }> }> {
  const dir = mkdtempSync(join(tmpdir(), 'rrs-admin-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const out = await run(process.execPath, [REDOCLY, 'lint', file, '--format=json', '--extends=recommended-strict'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 60_000,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    return JSON.parse(out.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the admin API OpenAPI document', () => {
  const doc = buildAdminOpenApi(adminRoutes({} as GatewayClients));

  it('passes redocly lint (recommended-strict) with no problem', async () => {
    const result = await lint(doc);
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('lint does report a broken document (the check can fail)', async () => {
    const broken = JSON.parse(JSON.stringify(doc));
    delete broken.paths['/organizations'].post.operationId;
    expect((await lint(broken)).totals.errors).toBeGreaterThan(0);
  }, 60_000);

  it('lists the admin error codes per operation as enums', () => {
    const op = (doc.paths as Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { allOf: Array<{ properties?: { code?: { enum: string[] } } }> } }> }> }>>)['/organizations'].post;
    expect(op.responses['401'].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum).toEqual(['missing_admin_token', 'invalid_admin_token']);
    expect(op.responses['400'].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum).toEqual(['invalid_request', 'malformed_json']);
  });
});
