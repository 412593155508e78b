#!/usr/bin/env node
// Protobuf contracts: `generate` writes proto/src/gen; `check` runs buf lint, fails when the committed
// generated code differs from a fresh generation, and runs buf breaking against the previous commit.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, cpSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const protoDir = join(root, 'proto');
const buf = join(root, 'node_modules', '.bin', 'buf');
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { cwd: protoDir, stdio: 'inherit', ...opts });

function generate(outDir) {
  rmSync(join(protoDir, 'src', 'gen'), { recursive: true, force: true });
  run(buf, ['generate']);
  if (outDir) cpSync(join(protoDir, 'src', 'gen'), outDir, { recursive: true });
}

const mode = process.argv[2] ?? 'generate';
if (mode === 'generate') {
  run(buf, ['lint']);
  generate();
} else if (mode === 'check') {
  run(buf, ['lint']);
  console.log('proto: buf lint clean');
  const committed = mkdtempSync(join(tmpdir(), 'rrs-proto-'));
  cpSync(join(protoDir, 'src', 'gen'), committed, { recursive: true });
  try {
    generate();
    try {
      execFileSync('git', ['diff', '--no-index', '--stat', committed, join(protoDir, 'src', 'gen')], { stdio: 'inherit' });
    } catch {
      console.error('proto: generated code is out of date; run `npm run proto:generate` and commit the result');
      process.exit(1);
    }
    console.log('proto: generated code is up to date');
  } finally {
    rmSync(committed, { recursive: true, force: true });
  }
  let previous = '';
  try {
    previous = execFileSync('git', ['rev-parse', '--verify', '--quiet', 'HEAD~1'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    /* no previous commit */
  }
  const hadProto = previous && (() => {
    try {
      execFileSync('git', ['cat-file', '-e', `${previous}:proto/buf.yaml`], { cwd: root, stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (hadProto) {
    run(buf, ['breaking', '--against', `${join(root, '.git')}#ref=${previous},subdir=proto`]);
    console.log(`proto: no breaking change against ${previous.slice(0, 12)}`);
  } else {
    console.log('proto: no previous commit with proto/, buf breaking has nothing to compare');
  }
} else {
  console.error(`usage: proto.mjs generate|check`);
  process.exit(2);
}
