#!/usr/bin/env node
// Fails when `npm ci` would refuse the lockfile on a fresh clone. The registry mirror this project is
// built from can lag behind for some platform-specific optional packages; a lockfile produced by
// `npm install` then misses their entries, and `npm ci` rejects it. Checked offline with --dry-run
// on a copy of the manifests.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => /(^|\/)package(-lock)?\.json$/.test(f) && !f.includes('node_modules/'));
const dir = mkdtempSync(join(tmpdir(), 'rrs-lock-'));
try {
  for (const f of files) {
    mkdirSync(join(dir, dirname(f)), { recursive: true });
    cpSync(join(root, f), join(dir, f));
  }
  try {
    execFileSync('npm', ['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'pipe', encoding: 'utf8' });
  } catch (err) {
    const missing = String(err.stderr).split('\n').filter((l) => /Missing:|error/.test(l) && !/nodedir/.test(l));
    console.error('check-lock: `npm ci` would fail on a fresh clone:\n' + missing.slice(0, 20).join('\n'));
    console.error('Pin the package (or an override) to a version whose platform packages all exist in the registry.');
    process.exit(1);
  }
  console.log(`check-lock: package-lock.json installs with npm ci (${files.length} manifests)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
