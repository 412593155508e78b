/**
 * Reading the chart and the services' sources for test/helm*.test.ts. There is no helm binary here, so
 * the templates are checked on their non-templated parts, and what the services read is taken from
 * their own code (the `readEnv` shapes in `services/<name>/src/config.ts`), so a variable added to a
 * service and not to the chart — or the reverse — fails the tests without anyone updating a list.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';

export const ROOT = join(__dirname, '..');
export const CHART = join(ROOT, 'deploy', 'helm');

export const read = (...parts: string[]) => readFileSync(join(ROOT, ...parts), 'utf8');

/** The services: every folder of services/ with a Dockerfile. */
export function serviceNames(): string[] {
  return readdirSync(join(ROOT, 'services'))
    .filter((name) => existsSync(join(ROOT, 'services', name, 'Dockerfile')))
    .sort();
}

// ---------------------------------------------------------------------------------------------------
// TypeScript source scanning: just enough to read object literals of env shapes.

/** The source with comments blanked out (strings and regex literals kept), same length. */
export function stripComments(src: string): string {
  let out = '';
  let i = 0;
  let lastSignificant = '';
  while (i < src.length) {
    const c = src[i];
    const next = src[i + 1];
    if (c === '/' && next === '/') {
      while (i < src.length && src[i] !== '\n') {
        out += ' ';
        i++;
      }
      continue;
    }
    if (c === '/' && next === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? src.length : end + 2;
      out += src.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop;
      continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      out += src.slice(i, j + 1);
      i = j + 1;
      lastSignificant = c;
      continue;
    }
    if (c === '/' && '(,:=[!&|?{};'.includes(lastSignificant)) {
      // A regex literal: to the closing unescaped slash outside a character class.
      let j = i + 1;
      let inClass = false;
      while (j < src.length) {
        const d = src[j];
        if (d === '\\') {
          j += 2;
          continue;
        }
        if (d === '[') inClass = true;
        else if (d === ']') inClass = false;
        else if (d === '/' && !inClass) break;
        j++;
      }
      out += src.slice(i, j + 1);
      i = j + 1;
      lastSignificant = '/';
      continue;
    }
    out += c;
    if (!/\s/.test(c)) lastSignificant = c;
    i++;
  }
  return out;
}

/** The text between the brace at `open` and its match (exclusive), skipping strings and regexes. */
function balanced(src: string, open: number): string {
  const pairs: Record<string, string> = { '{': '}', '(': ')', '[': ']' };
  const stack: string[] = [];
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      i = j;
      continue;
    }
    if (c === '/' && i > open && /[(,:]\s*$/.test(src.slice(Math.max(open, i - 20), i))) {
      let j = i + 1;
      let inClass = false;
      while (j < src.length) {
        const d = src[j];
        if (d === '\\') {
          j += 2;
          continue;
        }
        if (d === '[') inClass = true;
        else if (d === ']') inClass = false;
        else if (d === '/' && !inClass) break;
        j++;
      }
      i = j;
      continue;
    }
    if (pairs[c]) stack.push(pairs[c]);
    else if (c === '}' || c === ')' || c === ']') {
      if (stack.pop() !== c) throw new Error(`unbalanced ${c} at ${i}`);
      if (stack.length === 0) return src.slice(open + 1, i);
    }
  }
  throw new Error('unterminated literal');
}

/** Top-level entries of an object literal body, split on commas outside brackets, strings and regexes. */
function entries(body: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < body.length && body[j] !== c) j += body[j] === '\\' ? 2 : 1;
      i = j;
      continue;
    }
    if (c === '/' && /[(,:]\s*$/.test(body.slice(Math.max(0, i - 20), i))) {
      let j = i + 1;
      let inClass = false;
      while (j < body.length) {
        const d = body[j];
        if (d === '\\') {
          j += 2;
          continue;
        }
        if (d === '[') inClass = true;
        else if (d === ']') inClass = false;
        else if (d === '/' && !inClass) break;
        j++;
      }
      i = j;
      continue;
    }
    if ('({['.includes(c)) depth++;
    else if (')}]'.includes(c)) depth--;
    else if (c === ',' && depth === 0) {
      out.push(body.slice(start, i).trim());
      start = i + 1;
    }
  }
  const last = body.slice(start).trim();
  if (last) out.push(last);
  return out.filter(Boolean);
}

/** Where `export const <name> = {…}` is defined among the workspace packages. */
function findExportedObject(name: string): string {
  for (const base of ['packages', 'services']) {
    for (const ws of readdirSync(join(ROOT, base))) {
      const src = join(ROOT, base, ws, 'src');
      if (!existsSync(src)) continue;
      for (const file of readdirSync(src).filter((f) => f.endsWith('.ts'))) {
        const text = stripComments(readFileSync(join(src, file), 'utf8'));
        const m = new RegExp(`export const ${name}\\s*(?::[^=]+)?=\\s*\\{`).exec(text);
        if (m) return balanced(text, m.index + m[0].length - 1);
      }
    }
  }
  throw new Error(`export const ${name} = { … } not found`);
}

/** envField helpers whose fields carry a default (so a variable read through them is never required). */
function envFieldsWithDefault(): Set<string> {
  const body = findExportedObject('envField');
  const out = new Set<string>();
  for (const entry of entries(body)) {
    const m = /^([a-zA-Z]+)\s*:/.exec(entry);
    if (m && entry.includes('.default(')) out.add(m[1]);
  }
  return out;
}

export interface EnvVar {
  name: string;
  required: boolean;
}

/** Whether a field helper declared in the same file (`const scheduleField = () => z….optional()`) gives a default. */
function localHelperHasDefault(file: string, name: string): boolean {
  const m = new RegExp(`(?:const|function)\\s+${name}\\b[^=]*=?\\s*\\([^)]*\\)\\s*(?:=>)?([\\s\\S]*?);\\s*\\n(?=\\S|$)`).exec(file);
  return m !== null && /\.default\(|\.optional\(\)/.test(m[1]);
}

function shapeVars(body: string, withDefault: Set<string>, file = ''): EnvVar[] {
  const vars: EnvVar[] = [];
  for (const entry of entries(body)) {
    const spread = /^\.\.\.\s*([A-Za-z_$][\w$]*)$/.exec(entry);
    if (spread) {
      vars.push(...shapeVars(findExportedObject(spread[1]), withDefault));
      continue;
    }
    const m = /^([A-Z][A-Z0-9_]*)\s*:\s*([\s\S]+)$/.exec(entry);
    if (!m) throw new Error(`cannot read env shape entry: ${entry.slice(0, 80)}`);
    const expr = m[2];
    const helper = /^envField\.([a-zA-Z]+)\(/.exec(expr);
    const local = /^([a-zA-Z_$][\w$]*)\(/.exec(expr);
    const hasDefault =
      /\.default\(/.test(expr) ||
      /\.optional\(\)/.test(expr) ||
      (helper !== null && withDefault.has(helper[1])) ||
      (local !== null && local[1] !== 'z' && localHelperHasDefault(file, local[1]));
    vars.push({ name: m[1], required: !hasDefault });
  }
  return vars;
}

/** The env variables a service's config reads (the keys of its `readEnv` shapes, spreads followed). */
export function configEnv(service: string): EnvVar[] {
  const text = stripComments(read('services', service, 'src', 'config.ts'));
  const withDefault = envFieldsWithDefault();
  const vars: EnvVar[] = [];
  const re = /readEnv\s*\(\s*\{/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text))) vars.push(...shapeVars(balanced(text, m.index + m[0].length - 1), withDefault, text));
  if (vars.length === 0) throw new Error(`${service}: no readEnv({ … }) shape in src/config.ts`);
  return vars;
}

/** Env variables read by the runtime itself, outside the services' configs (the OpenTelemetry SDK). */
export function runtimeEnv(): Set<string> {
  return new Set(read('packages', 'runtime', 'src', 'otel.ts').match(/OTEL_[A-Z_]+/g) ?? []);
}

// ---------------------------------------------------------------------------------------------------
// The chart.

export const template = (file: string) => readFileSync(join(CHART, 'templates', file), 'utf8');

export function chartValues(): Record<string, any> {
  return YAML.parse(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
}

/** Bodies of the named templates in _helpers.tpl. */
export function defines(): Map<string, string> {
  const text = template('_helpers.tpl');
  const out = new Map<string, string>();
  const re = /\{\{-?\s*define\s+"([^"]+)"\s*-?\}\}([\s\S]*?)\{\{-?\s*end\s*-?\}\}\s*(?=\{\{-?\s*define|\{\{\/\*|$)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text))) out.set(m[1], m[2]);
  return out;
}

/** A static YAML define (rrs.services, rrs.migrationPlans, rrs.grpcArrows). */
export function staticDefine<T>(name: string): T {
  const body = defines().get(name);
  if (body === undefined) throw new Error(`define ${name} not found`);
  if (/\{\{/.test(body)) throw new Error(`define ${name} is not static YAML`);
  return YAML.parse(body) as T;
}

/** Values key of each service (rrs.services). */
export function serviceKeys(): Record<string, string> {
  return staticDefine<Record<string, string>>('rrs.services');
}

/** Env variable names a service template sets: literal entries, secretEnv includes, commonEnv, and the values' env map. */
export function chartEnv(service: string): Set<string> {
  const text = template(`${service}.yaml`);
  const names = new Set<string>();
  for (const m of text.matchAll(/^\s*- name: ([A-Z][A-Z0-9_]*)\s*$/gm)) names.add(m[1]);
  for (const m of text.matchAll(/include "rrs\.secretEnv" \(list [^"]*"([A-Z][A-Z0-9_]*)"/g)) names.add(m[1]);
  for (const m of text.matchAll(/include "([\w.]+)"/g)) {
    const body = defines().get(m[1]);
    if (body && m[1] !== 'rrs.secretEnv') for (const n of body.matchAll(/^\s*- name: ([A-Z][A-Z0-9_]*)\s*$/gm)) names.add(n[1]);
  }
  const key = serviceKeys()[service];
  for (const name of Object.keys(chartValues()[key]?.env ?? {})) names.add(name);
  return names;
}

/** Literal `- name: X` / `value: "…"` pairs of a template's env entries. */
export function literalEnvValue(service: string, name: string): string | undefined {
  const m = new RegExp(`- name: ${name}\\s*\\n\\s*value: "([^"]*)"`).exec(template(`${service}.yaml`));
  return m?.[1];
}

/** The Go-template actions of a file, checked for balance: every if/range/with/define has its end. */
export function templateBlockErrors(text: string): string[] {
  const errors: string[] = [];
  const stack: string[] = [];
  for (const m of text.matchAll(/\{\{-?\s*([\s\S]*?)\s*-?\}\}/g)) {
    const action = m[1];
    if (action.startsWith('/*')) {
      if (!action.endsWith('*/')) errors.push(`unterminated comment at ${m.index}`);
      continue;
    }
    const word = /^(\w+)/.exec(action)?.[1];
    if (word === 'if' || word === 'range' || word === 'with' || word === 'define' || word === 'block') stack.push(word);
    else if (word === 'else') {
      if (!['if', 'with', 'range'].includes(stack[stack.length - 1] ?? '')) errors.push(`else outside if/with/range at ${m.index}`);
    } else if (word === 'end') {
      if (!stack.pop()) errors.push(`end without a block at ${m.index}`);
    }
    const quotes = (action.match(/"/g) ?? []).length - (action.match(/\\"/g) ?? []).length;
    if (quotes % 2 !== 0) errors.push(`unbalanced quotes in {{ ${action.slice(0, 40)} }}`);
    let depth = 0;
    for (const c of action.replace(/"(?:[^"\\]|\\.)*"/g, '')) {
      if (c === '(') depth++;
      if (c === ')') depth--;
      if (depth < 0) break;
    }
    if (depth !== 0) errors.push(`unbalanced parentheses in {{ ${action.slice(0, 40)} }}`);
  }
  if (stack.length) errors.push(`unclosed ${stack.join(', ')}`);
  return errors;
}

/** Names of the metrics the code registers (counter/gauge/histogram `name:`). */
export function registeredMetrics(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name === 'test') continue;
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith('.ts')) {
        const text = readFileSync(p, 'utf8');
        for (const m of text.matchAll(/\b(?:counter|gauge|histogram)\s*(?:<[^>]*>)?\s*\(\s*\{\s*name:\s*'([a-z_:][a-z0-9_:]*)'/g)) names.add(m[1]);
        for (const m of text.matchAll(/new (?:Counter|Gauge|Histogram)\s*\(\s*\{\s*name:\s*'([a-z_:][a-z0-9_:]*)'/g)) names.add(m[1]);
      }
    }
  };
  walk(join(ROOT, 'packages'));
  walk(join(ROOT, 'services'));
  return names;
}
