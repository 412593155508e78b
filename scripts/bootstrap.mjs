#!/usr/bin/env node
// Runs before `npm start` and `npm test`: installs dependencies when node_modules is missing or was
// installed from another lockfile, then compiles. Uses only Node's standard library, so it works on a
// fresh clone.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const lock = join(root, 'package-lock.json');
const stamp = join(root, 'node_modules', '.rrs-lock-sha256');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const wanted = createHash('sha256').update(readFileSync(lock)).digest('hex');
const have = existsSync(stamp) ? readFileSync(stamp, 'utf8').trim() : '';
if (have !== wanted) {
  console.log('bootstrap: installing dependencies (npm ci)');
  execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  writeFileSync(stamp, wanted + '\n');
}
execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'inherit' });
