#!/usr/bin/env node
// CI stand-in for building and starting every image: for each service (and the all-in-one) it runs
// what the Dockerfile's build stage runs, scripts/pack-service.mjs into a fresh temporary folder, then
// starts that folder with scripts/smoke-service.mjs. Assumes `npm run build` ran (or pass --build).
// Needs PostgreSQL and NATS as smoke-service.mjs describes.
//
// Usage: node scripts/smoke-images.mjs [--build] [--keep] [--only gateway,contacts]
// Exits 1 when any service fails to pack or to start and stop cleanly.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packService, repoRoot } from './pack-service.mjs';
import { SERVICES, smokeService } from './smoke-service.mjs';

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const onlyIdx = args.indexOf('--only');
const all = Object.keys(SERVICES);
const targets = onlyIdx >= 0 ? args[onlyIdx + 1].split(',') : all;
for (const t of targets) {
  if (!SERVICES[t]) {
    console.error(`smoke-images: unknown service ${t} (known: ${all.join(', ')})`);
    process.exit(2);
  }
}

if (flag('--build')) execFileSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, stdio: 'inherit' });

function diskUsage(dir) {
  try {
    return Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8' }).split('\t')[0]) * 1024;
  } catch {
    let total = 0;
    const walk = (d) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(d, e.name));
        else if (e.isFile()) total += statSync(join(d, e.name)).size;
      }
    };
    walk(dir);
    return total;
  }
}

// Under the OS temp dir, away from the repository's node_modules, so the run proves self-containment.
const work = mkdtempSync(join(tmpdir(), 'rrs-images-'));
const started = Date.now();
const rows = [];
try {
  for (const service of targets) {
    const outDir = join(work, service);
    const row = { service, packS: null, size: null, readyMs: null, exit: null, stopMs: null, ok: false };
    rows.push(row);
    const t0 = Date.now();
    try {
      packService(service, outDir);
    } catch (err) {
      console.log(`FAIL ${service}: pack: ${err.message}`);
      continue;
    }
    row.packS = (Date.now() - t0) / 1000;
    row.size = diskUsage(outDir);
    const r = await smokeService(outDir, service);
    Object.assign(row, { readyMs: r.readyMs, exit: r.exitCode, stopMs: r.stopMs, ok: r.ok });
    if (!flag('--keep')) rmSync(outDir, { recursive: true, force: true });
  }
} finally {
  if (!flag('--keep')) rmSync(work, { recursive: true, force: true });
}

const mb = (b) => (b === null ? '-' : `${(b / 1024 / 1024).toFixed(1)}M`);
console.log('\nservice              pack   size     ready    exit  stop    result');
for (const r of rows) {
  console.log(
    [
      r.service.padEnd(20),
      (r.packS === null ? '-' : `${r.packS.toFixed(1)}s`).padEnd(6),
      mb(r.size).padEnd(8),
      (r.readyMs === null ? '-' : `${r.readyMs}ms`).padEnd(8),
      String(r.exit ?? '-').padEnd(5),
      (r.stopMs === null ? '-' : `${r.stopMs}ms`).padEnd(7),
      r.ok ? 'PASS' : 'FAIL',
    ].join(' '),
  );
}
const failed = rows.filter((r) => !r.ok).map((r) => r.service);
console.log(`\nsmoke-images: ${rows.length - failed.length}/${rows.length} passed in ${((Date.now() - started) / 1000).toFixed(1)} s${flag('--keep') ? `; folders kept in ${work}` : ''}`);
if (failed.length) {
  console.log(`smoke-images: failed: ${failed.join(', ')}`);
  process.exit(1);
}
