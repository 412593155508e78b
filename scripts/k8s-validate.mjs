#!/usr/bin/env node
/**
 * Validates Kubernetes objects (multi-document YAML, such as `helm template` prints) against the JSON
 * schemas of the Kubernetes versions the chart supports (`kubeVersion` in deploy/helm/Chart.yaml):
 *
 *   - Kubernetes 1.27, the oldest: the schemas of `kubernetes-models-1.27` (kubernetes-models 4.3.1,
 *     generated from the Kubernetes 1.27.1 OpenAPI document), made strict: an object with a field the
 *     schema does not declare is refused, as `kubectl apply` refuses it (`--validate=strict`). A field
 *     added after 1.27, or a misspelt one, fails here.
 *   - Kubernetes 1.36, the newest: the validators of `kubernetes-models` 5.1.0 (the Kubernetes 1.36.0
 *     OpenAPI document): types, required fields, enums and formats.
 *   - Custom resources (the Prometheus Operator's ServiceMonitor): `@kubernetes-models/prometheus-operator`.
 *
 * An object whose apiVersion/kind has no schema is an error too, so nothing passes unchecked. Whether an
 * API still exists in a given version is Helm's part: `helm lint --strict --kube-version 1.X.0` fails on
 * an API that version no longer serves (see deploy/helm/README.md).
 *
 *   helm template rrs deploy/helm -f deploy/helm/ci/external-values.yaml | node scripts/k8s-validate.mjs
 *   node scripts/k8s-validate.mjs [--json] [--kubernetes 1.27|1.36] rendered.yaml…
 *
 * Prints one line per error (or, with --json, a JSON report) and exits 1 when any object is invalid.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import YAML from 'yaml';

const require = createRequire(import.meta.url);

export const OLDEST = { kubernetes: '1.27', models: 'kubernetes-models-1.27 (kubernetes-models 4.3.1)' };
export const NEWEST = { kubernetes: '1.36', models: 'kubernetes-models 5.1.0' };
const CUSTOM = '@kubernetes-models/prometheus-operator 6.0.0';

// --------------------------------------------------------------------------------------------------
// Kubernetes 1.27: the package's raw JSON schemas, compiled strict.

/**
 * The schemas of kubernetes-models 4.x, as the package registers them: each `_schemas/*.js` module
 * hands `(id, schema)` to `register` of its own copy of @kubernetes-models/validate. We take that
 * copy's `register` for the time of the registrations and keep what it is given.
 */
function oldestSchemas() {
  const packageJson = require.resolve('kubernetes-models-1.27/package.json');
  const fromPackage = createRequire(packageJson);
  const validateModule = fromPackage('@kubernetes-models/validate');
  const schemas = new Map();
  const original = validateModule.register;
  validateModule.register = (id, schema) => {
    if (!schemas.has(id)) schemas.set(id, schema);
  };
  try {
    const dir = join(dirname(packageJson), '_schemas');
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.js'))) fromPackage(join(dir, file)).addSchema();
  } finally {
    validateModule.register = original;
  }
  if (schemas.size < 500) throw new Error(`kubernetes-models-1.27 registered only ${schemas.size} schemas: has its layout changed?`);
  return schemas;
}

/** A copy of the schema in which every object that lists its properties admits no other property. */
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (!schema || typeof schema !== 'object') return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    // Under `properties` the keys are field names, not keywords: only their values are schemas.
    out[key] = key === 'properties' ? Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, strict(sub)])) : strict(value);
  }
  if (out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

const INT32 = 2 ** 31;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// The resource.Quantity grammar: a signed decimal number, then a binary-SI, decimal-SI or exponent suffix.
const QUANTITY = /^[+-]?(?:\d+|\d+\.\d*|\.\d+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

function oldestValidators() {
  const ajv = new Ajv({ allErrors: true, strictTypes: false, strictTuples: false });
  ajv.addFormat('int32', { type: 'number', validate: (n) => Number.isInteger(n) && n >= -INT32 && n < INT32 });
  ajv.addFormat('int64', { type: 'number', validate: (n) => Number.isSafeInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: (n) => Number.isFinite(n) });
  ajv.addFormat('byte', { type: 'string', validate: (s) => BASE64.test(s) });
  ajv.addFormat('quantity', { type: 'string', validate: (s) => QUANTITY.test(s) });
  ajv.addFormat('date-time', { type: 'string', validate: (s) => RFC3339.test(s) });
  const byKind = new Map();
  for (const [id, schema] of oldestSchemas()) {
    ajv.addSchema(strict(schema), id);
    const apiVersion = schema.properties?.apiVersion?.enum;
    const kind = schema.properties?.kind?.enum;
    if (apiVersion?.length === 1 && kind?.length === 1) byKind.set(`${apiVersion[0]} ${kind[0]}`, id);
  }
  return (object) => {
    const id = byKind.get(`${object.apiVersion} ${object.kind}`);
    if (!id) return undefined;
    const validate = ajv.getSchema(id);
    if (validate(object)) return [];
    return withoutNullBranches(validate.errors);
  };
}

/**
 * The schemas spell an optional reference as `oneOf: [{$ref}, {type: null}]`; when the reference fails,
 * Ajv also reports "must be null" and "must match exactly one schema". The reference's own errors say
 * what is wrong, so those two are dropped (as @kubernetes-models/validate drops them).
 */
function withoutNullBranches(errors) {
  const nullBranch = (err) => err.keyword === 'type' && err.params.type === 'null' && /\/oneOf\/\d+\/type$/.test(err.schemaPath);
  const dropped = new Set(errors.filter(nullBranch).map((err) => `${err.instancePath} ${err.schemaPath.replace(/\/\d+\/type$/, '')}`));
  return errors.filter((err) => !nullBranch(err) && !(err.keyword === 'oneOf' && dropped.has(`${err.instancePath} ${err.schemaPath}`)));
}

// --------------------------------------------------------------------------------------------------
// Kubernetes 1.36 and the custom resources: the packages' compiled validators, imported per kind.

/** API groups served by custom resources, and the package of their models. */
const CUSTOM_GROUPS = { 'monitoring.coreos.com': '@kubernetes-models/prometheus-operator' };
const groupOf = (apiVersion) => (apiVersion.includes('/') ? apiVersion.split('/')[0] : '');
const isCustom = (object) => groupOf(object.apiVersion) in CUSTOM_GROUPS;

/**
 * The validator of the model `<package>/<apiVersion>/<Kind>` (kubernetes-models lays its models out so:
 * `kubernetes-models/apps/v1/Deployment`, `kubernetes-models/v1/Service`), or undefined when the package
 * has no such kind.
 */
function modelValidators(packageName) {
  const loaded = new Map();
  const load = async (apiVersion, kind) => {
    try {
      const mod = await import(`${packageName}/${apiVersion}/${kind}`);
      const Model = mod[kind];
      return Model?.apiVersion === apiVersion && Model?.kind === kind ? Model : undefined;
    } catch (err) {
      if (err.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED' || err.code === 'ERR_MODULE_NOT_FOUND') return undefined;
      throw err;
    }
  };
  return async (object) => {
    const key = `${object.apiVersion} ${object.kind}`;
    if (!/^[\w.]+(\/\w+)?$/.test(object.apiVersion) || !/^\w+$/.test(object.kind)) return undefined;
    if (!loaded.has(key)) loaded.set(key, await load(object.apiVersion, object.kind));
    const Model = loaded.get(key);
    if (!Model) return undefined;
    try {
      new Model(object).validate();
      return [];
    } catch (err) {
      if (!Array.isArray(err.errors)) throw err;
      return err.errors;
    }
  };
}

// --------------------------------------------------------------------------------------------------

/**
 * The validators: [{ target, kubernetes, validate(object) → errors, or undefined when the kind is
 * unknown }]. `kubernetes` ('1.27', '1.36') keeps only that version's target (custom resources stay).
 */
export function loadValidators(kubernetes) {
  const builtIn = (o) => !isCustom(o);
  const targets = [
    { target: `Kubernetes ${OLDEST.kubernetes}`, kubernetes: OLDEST.kubernetes, models: OLDEST.models, load: oldestValidators, appliesTo: builtIn },
    { target: `Kubernetes ${NEWEST.kubernetes}`, kubernetes: NEWEST.kubernetes, models: NEWEST.models, load: () => modelValidators('kubernetes-models'), appliesTo: builtIn },
    ...Object.entries(CUSTOM_GROUPS).map(([group, packageName]) => ({
      target: `custom resource (${group})`,
      models: CUSTOM,
      load: () => modelValidators(packageName),
      appliesTo: (o) => groupOf(o.apiVersion) === group,
    })),
  ];
  if (kubernetes && !targets.some((t) => t.kubernetes === kubernetes)) {
    throw new Error(`no schemas for Kubernetes ${kubernetes}: ${OLDEST.kubernetes} and ${NEWEST.kubernetes} are checked`);
  }
  return targets
    .filter((t) => !kubernetes || !t.kubernetes || t.kubernetes === kubernetes)
    .map(({ load, ...t }) => ({ ...t, validate: load() }));
}

/** The objects of a multi-document YAML text, each with its file and the template it came from (Helm's `# Source:`). */
export function parseManifests(text, file = '') {
  const objects = [];
  for (const doc of YAML.parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0].message}`);
    const object = doc.toJSON();
    if (object === null || object === undefined) continue;
    const comment = `${doc.commentBefore ?? ''}\n${doc.contents?.commentBefore ?? ''}`;
    const source = /Source: (\S+)/.exec(comment)?.[1] ?? '';
    objects.push({ file, source, object });
  }
  return objects;
}

/** Errors of every object against every target that applies to it; an object no target knows is one too. */
export async function validateManifests(manifests, validators = loadValidators()) {
  const errors = [];
  for (const { file, source, object } of manifests) {
    const where = { file, source, kind: object?.kind, name: object?.metadata?.name };
    if (!object || typeof object !== 'object' || typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') {
      errors.push({ ...where, target: 'any', path: '', message: 'is not a Kubernetes object (no apiVersion and kind)' });
      continue;
    }
    for (const { target, validate, appliesTo } of validators) {
      if (!appliesTo(object)) continue;
      const found = await validate(object);
      if (found === undefined) {
        errors.push({ ...where, target, path: '', message: `${object.apiVersion} ${object.kind} has no schema in ${target}` });
        continue;
      }
      for (const err of found) errors.push({ ...where, target, path: err.instancePath, message: describe(err) });
    }
  }
  return errors;
}

function describe(err) {
  if (err.keyword === 'additionalProperties') return `has a field the schema does not declare: ${err.params.additionalProperty}`;
  if (err.keyword === 'required') return `misses the required field ${err.params.missingProperty}`;
  if (err.keyword === 'enum') return `${err.message}: ${(err.params.allowedValues ?? []).join(', ')}`;
  return err.message ?? err.keyword;
}

async function main(argv) {
  const args = [...argv];
  const take = (flag) => {
    const i = args.indexOf(flag);
    return i < 0 ? undefined : args.splice(i, flag === '--json' ? 1 : 2)[flag === '--json' ? 0 : 1];
  };
  const json = take('--json') !== undefined;
  const kubernetes = take('--kubernetes');
  const manifests = args.length
    ? args.flatMap((file) => parseManifests(readFileSync(file, 'utf8'), file))
    : parseManifests(readFileSync(0, 'utf8'), 'stdin');
  const validators = loadValidators(kubernetes);
  const errors = await validateManifests(manifests, validators);
  if (json) {
    process.stdout.write(JSON.stringify({ objects: manifests.length, targets: validators.map((v) => `${v.target}: ${v.models}`), errors }) + '\n');
  } else {
    for (const e of errors) console.error(`${e.file}: ${e.source} ${e.kind}/${e.name} [${e.target}] ${e.path || '/'}: ${e.message}`);
    console.log(`k8s-validate: ${manifests.length} objects, ${errors.length} errors (${validators.map((v) => v.target).join(', ')})`);
  }
  process.exitCode = errors.length ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err);
    process.exit(2);
  });
}
