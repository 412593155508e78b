// The console's build, run by scripts/build.mjs (`npm run build`): esbuild bundles src/main.tsx (Preact)
// into dist/app.js and src/style.css into dist/app.css, and copies src/index.html. Everything the page
// needs is in dist/, which the gateway serves at /app; nothing is fetched from elsewhere at run time.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as esbuild } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));

export async function build() {
  const out = join(here, 'dist');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await esbuild({
    entryPoints: { app: join(here, 'src', 'main.tsx') },
    outdir: out,
    bundle: true,
    minify: true,
    sourcemap: true,
    format: 'iife',
    target: ['es2020'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  await esbuild({ entryPoints: { app: join(here, 'src', 'style.css') }, outdir: out, bundle: true, minify: true, logLevel: 'warning' });
  copyFileSync(join(here, 'src', 'index.html'), join(out, 'index.html'));
  // The CSV the send page offers as a sample to fill in.
  copyFileSync(join(here, 'src', 'sample-recipients.csv'), join(out, 'sample-recipients.csv'));
  return 4;
}
