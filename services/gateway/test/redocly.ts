import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REDOCLY = join(__dirname, '..', '..', '..', 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

export interface LintResult {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
}

/** `redocly lint` with the strict recommended rules (warnings count as errors), offline. */
export async function lint(doc: unknown): Promise<LintResult> {
  const dir = mkdtempSync(join(tmpdir(), 'rrs-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const out = await run(process.execPath, [REDOCLY, 'lint', file, '--format=json', '--extends=recommended-strict'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 60_000,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    return JSON.parse(out.stdout) as LintResult;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
