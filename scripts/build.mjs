#!/usr/bin/env node
// Compiles every workspace's src/ to dist/ with swc (except a workspace whose build script is another tool, or that has a build.mjs of its own) (types are checked separately by `npm run typecheck`).
// Usage: node scripts/build.mjs [--only <workspace dir>]
import { readFileSync, readdirSync, mkdirSync, writeFileSync, rmSync, existsSync, statSync } from 'node:fs';
import { join, dirname, resolve, relative } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));
const swc = require('@swc/core');
const swcrc = JSON.parse(readFileSync(join(root, '.swcrc'), 'utf8'));
delete swcrc.$schema;

function workspaces() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const dirs = [];
  for (const pattern of pkg.workspaces) {
    if (pattern.endsWith('/*')) {
      const base = join(root, pattern.slice(0, -2));
      for (const name of readdirSync(base)) {
        if (existsSync(join(base, name, 'package.json'))) dirs.push(join(base, name));
      }
    } else dirs.push(join(root, pattern));
  }
  return dirs;
}

function* tsFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(p);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield p;
  }
}

async function buildWorkspace(dir) {
  const src = join(dir, 'src');
  if (!existsSync(src)) return 0;
  // A workspace that is not Node code (packages/console, a web page) brings its own build.mjs.
  if (existsSync(join(dir, 'build.mjs'))) return (await import(pathToFileURL(join(dir, 'build.mjs')).href)).build();
  // A published package (packages/client) builds itself with tsc, declarations included (`npm run build
  // -w <dir>`, run by `npm pack`); no service runs it, and rebuilding its dist here would race a pack.
  const ownBuild = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).scripts?.build;
  if (ownBuild && !ownBuild.includes('scripts/build.mjs')) return 0;
  const out = join(dir, 'dist');
  rmSync(out, { recursive: true, force: true });
  let n = 0;
  for (const file of tsFiles(src)) {
    const rel = relative(src, file).replace(/\.ts$/, '.js');
    const target = join(out, rel);
    const { code, map } = await swc.transformFile(file, {
      ...swcrc,
      swcrc: false,
      filename: file,
      sourceFileName: relative(dirname(target), file),
    });
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, code + `\n//# sourceMappingURL=${rel.split('/').pop()}.map\n`);
    if (map) writeFileSync(target + '.map', map);
    n++;
  }
  return n;
}

const onlyIdx = process.argv.indexOf('--only');
const targets = onlyIdx > 0 ? [resolve(process.argv[onlyIdx + 1])] : workspaces();
const started = Date.now();
let files = 0;
for (const dir of targets) {
  if (!statSync(dir).isDirectory()) throw new Error(`not a workspace: ${dir}`);
  files += await buildWorkspace(dir);
}
console.log(`build: ${files} files in ${targets.length} workspaces, ${Date.now() - started} ms`);
