// Runs a TypeScript entry point of this repository from source in a child process (tests that must
// SIGKILL a real service process): `.ts` is compiled by swc on require, and `@rrs/<name>` resolves to
// the workspace's src/, as jest's moduleNameMapper does. Usage: node runFromSource.js <entry.ts>
'use strict';
const Module = require('node:module');
const fs = require('node:fs');
const path = require('node:path');
const swc = require('@swc/core');

const root = path.resolve(__dirname, '..', '..', '..', '..');

function workspaceEntry(name) {
  if (name === 'proto') return path.join(root, 'proto', 'src', 'index.ts');
  for (const dir of ['services', 'packages']) {
    const entry = path.join(root, dir, name, 'src', 'index.ts');
    if (fs.existsSync(entry)) return entry;
  }
  return undefined;
}

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  const m = /^@rrs\/([a-z-]+)$/.exec(request);
  const entry = m && workspaceEntry(m[1]);
  return resolveFilename.call(this, entry ?? request, ...rest);
};

Module._extensions['.ts'] = (module, filename) => {
  const { code } = swc.transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    jsc: { parser: { syntax: 'typescript' }, target: 'es2022', keepClassNames: true },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};

require(path.resolve(process.argv[2]));
