// Lets a child process run the TypeScript sources directly, as jest does: .ts files are compiled by
// swc on load, and @rrs/* imports resolve to the workspace sources (the same mapping as jest.config).
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { transformSync } = require('@swc/core');

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const SERVICES = new Set(['gateway', 'contacts', 'cascade-scheduler', 'channel-email', 'channel-sms', 'channel-messenger', 'webhooks']);

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, parent, ...rest) {
  const m = /^@rrs\/([a-z-]+)$/.exec(request);
  if (m) {
    const name = m[1];
    const file = name === 'proto' ? path.join(ROOT, 'proto', 'src', 'index.ts') : path.join(ROOT, SERVICES.has(name) ? 'services' : 'packages', name, 'src', 'index.ts');
    return file;
  }
  if (parent && parent.filename && parent.filename.endsWith('.ts') && request.startsWith('.')) {
    const base = path.resolve(path.dirname(parent.filename), request);
    for (const candidate of [`${base}.ts`, path.join(base, 'index.ts')]) if (fs.existsSync(candidate)) return candidate;
  }
  return resolve.call(this, request, parent, ...rest);
};

require.extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    jsc: { target: 'es2022', parser: { syntax: 'typescript' }, keepClassNames: true },
    module: { type: 'commonjs' },
    sourceMaps: 'inline',
  });
  module._compile(code, filename);
};
