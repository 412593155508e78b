import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv from 'ajv';
import YAML from 'yaml';
import {
  CHART,
  chartEnv,
  chartValues,
  configEnv,
  defines,
  literalEnvValue,
  read,
  runtimeEnv,
  serviceKeys,
  serviceNames,
  staticDefine,
  stripComments,
  template,
  templateBlockErrors,
} from './helmChart';

const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

function merged(...overrides: Array<Record<string, unknown>>): Record<string, unknown> {
  const merge = (a: any, b: any): any => {
    for (const [k, v] of Object.entries(b)) {
      if (v && typeof v === 'object' && !Array.isArray(v) && a[k] && typeof a[k] === 'object' && !Array.isArray(a[k])) merge(a[k], v);
      else a[k] = v;
    }
    return a;
  };
  return overrides.reduce((acc, o) => merge(acc, o), chartValues());
}

const services = serviceNames();
const grpcServices = services.filter((s) => configEnv(s).some((v) => v.name === 'GRPC_PORT'));

/** The default of a `port` field in a service's config, e.g. GRPC_PORT: envField.port(50051). */
function defaultPort(service: string, variable: string): number | undefined {
  const shapes = [stripComments(read('services', service, 'src', 'config.ts')), stripComments(read('packages', 'sender-kit', 'src', 'config.ts'))];
  for (const text of shapes) {
    const m = new RegExp(`${variable}:\\s*envField\\.port\\((\\d+)\\)`).exec(text);
    if (m) return Number(m[1]);
  }
  return undefined;
}

describe('chart values', () => {
  it('values.yaml validates against values.schema.json', () => {
    const ok = validate(chartValues());
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it.each(readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('.yaml')))('ci/%s validates merged over values.yaml', (file) => {
    const ok = validate(merged(YAML.parse(readFileSync(join(CHART, 'ci', file), 'utf8'))));
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it.each([
    ['an unknown top-level key', { replicas: 3 }, ''],
    ['a bus prefix the runtime refuses', { busPrefix: 'Prod-1' }, '/busPrefix'],
    ['a database URL that is not postgres', { postgresql: { url: 'mysql://db/rrs' } }, '/postgresql/url'],
    ['an ingress path exposing /metrics', { gateway: { ingress: { paths: ['/api', '/metrics'] } } }, '/gateway/ingress/paths'],
    ['a service env name that is not a variable name', { webhooks: { env: { 'webhook-concurrency': '4' } } }, '/webhooks/env'],
    ['an unknown service setting', { contacts: { replica: 2 } }, '/contacts'],
    ['a memory quantity with a typo', { gateway: { resources: { requests: { cpu: '100m', memory: '128MB' } } } }, '/gateway/resources/requests/memory'],
  ])('rejects %s', (_what, override, path) => {
    expect(validate(merged(override))).toBe(false);
    expect(validate.errors?.some((e) => e.instancePath === path || e.instancePath.startsWith(`${path}/`))).toBe(true);
  });

  it('has a values block for every service the chart knows, and the chart knows every service', () => {
    const keys = serviceKeys();
    expect(Object.keys(keys).sort()).toEqual(services);
    const values = chartValues();
    for (const [service, key] of Object.entries(keys)) {
      expect({ service, enabled: values[key]?.enabled }).toEqual({ service, enabled: true });
      expect(values[key].image).toEqual({});
      expect(values[key].resources.requests).toBeDefined();
      expect(values[key].resources.limits).toBeDefined();
    }
  });
});

describe('templates', () => {
  it.each(readdirSync(join(CHART, 'templates')))('%s has balanced template actions', (file) => {
    expect(templateBlockErrors(template(file))).toEqual([]);
  });

  it.each(services)('%s has its own template: a Deployment and a Service, switched by its enabled flag, with its own image', (service) => {
    const file = join(CHART, 'templates', `${service}.yaml`);
    expect(existsSync(file)).toBe(true);
    const text = template(`${service}.yaml`);
    const key = serviceKeys()[service];
    expect(text).toContain(`{{- $svc := .Values.${key} }}`);
    expect(text).toContain('{{- if $svc.enabled }}');
    expect(text).toContain(`{{- $name := "${service}" }}`);
    expect(text).toMatch(/^kind: Deployment$/m);
    expect(text).toMatch(/^kind: Service$/m);
    expect(text).toContain('image: {{ include "rrs.image" (list . $name $svc) | quote }}');
    // Replicas are left to the HPA when it is on.
    expect(text).toMatch(/\{\{- if not \$svc\.autoscaling\.enabled \}\}\s*\n\s*replicas: \{\{ \$svc\.replicaCount \}\}/);
    expect(text).toContain('{{- toYaml $svc.resources | nindent 12 }}');
  });

  it.each(services)('%s runs non-root on a read-only root filesystem with every capability dropped and /tmp writable', (service) => {
    const text = template(`${service}.yaml`);
    expect(text).toContain('{{- include "rrs.containerSecurityContext" . | nindent 12 }}');
    expect(text).toContain('{{- include "rrs.podSpecCommon" (list . $svc $name) | nindent 6 }}');
    expect(text).toContain('{{- include "rrs.tmpVolumeMount" . | nindent 12 }}');
    const helpers = defines();
    const container = YAML.parse(helpers.get('rrs.containerSecurityContext') ?? '');
    expect(container).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(YAML.parse(helpers.get('rrs.podSecurityContext') ?? '')).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    expect(helpers.get('rrs.podSpecCommon')).toContain('{{- include "rrs.podSecurityContext" $root | nindent 2 }}');
    expect(helpers.get('rrs.podSpecCommon')).toContain('{{- include "rrs.tmpVolume" $root | nindent 2 }}');
    expect(YAML.parse(helpers.get('rrs.tmpVolumeMount') ?? '')).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    // The images run as uid 1000 too.
    expect(read('services', service, 'Dockerfile')).toMatch(/^USER 1000:1000$/m);
  });

  it.each(grpcServices)('%s (gRPC) is probed with the native gRPC health probe on the port it listens on', (service) => {
    const text = template(`${service}.yaml`);
    const port = Number(literalEnvValue(service, 'GRPC_PORT'));
    expect(port).toBe(defaultPort(service, 'GRPC_PORT'));
    expect(text).toMatch(new RegExp(`readinessProbe:\\s*\\n\\s*grpc: \\{ port: ${port} \\}`));
    expect(text).toMatch(new RegExp(`startupProbe:\\s*\\n\\s*grpc: \\{ port: ${port} \\}`));
    expect(text).toMatch(new RegExp(`- name: grpc\\s*\\n\\s*containerPort: ${port}`));
    // Liveness is the ops port's /healthz: a dependency outage must not restart the pod.
    const ops = Number(literalEnvValue(service, 'OPS_PORT'));
    expect(text).toMatch(new RegExp(`- name: ops\\s*\\n\\s*containerPort: ${ops}`));
    expect(text).toMatch(/livenessProbe:\s*\n\s*httpGet: \{ path: \/healthz, port: ops \}/);
  });

  it.each(services.filter((s) => !grpcServices.includes(s)))('%s (HTTP) is probed on /healthz and /readyz of the port it serves them on', (service) => {
    const text = template(`${service}.yaml`);
    const portName = service === 'gateway' ? 'http' : 'ops';
    const port = Number(literalEnvValue(service, service === 'gateway' ? 'PORT' : 'OPS_PORT'));
    expect(port).toBeGreaterThan(0);
    expect(text).toMatch(new RegExp(`- name: ${portName}\\s*\\n\\s*containerPort: ${port}`));
    expect(text).toMatch(new RegExp(`livenessProbe:\\s*\\n\\s*httpGet: \\{ path: /healthz, port: ${portName} \\}`));
    expect(text).toMatch(new RegExp(`readinessProbe:\\s*\\n\\s*httpGet: \\{ path: /readyz, port: ${portName} \\}`));
  });

  it('gives every service a distinct ops port, and the one its image expects', () => {
    const ports = services.map((s) => Number(literalEnvValue(s, s === 'gateway' ? 'PORT' : 'OPS_PORT')));
    expect(new Set(ports).size).toBe(services.length);
    for (const [i, service] of services.entries()) {
      // The image's HEALTHCHECK and EXPOSE name the port it is told to use.
      expect(read('services', service, 'Dockerfile')).toContain(`|| ${ports[i]})`);
    }
  });

  it('has one ServiceAccount, HPA and PodDisruptionBudget per enabled service', () => {
    for (const file of ['serviceaccounts.yaml', 'hpa.yaml', 'pdb.yaml']) {
      expect(template(file)).toContain('{{- range $name, $key := (include "rrs.services" $ | fromYaml) }}');
    }
    expect(template('hpa.yaml')).toMatch(/kind: HorizontalPodAutoscaler/);
    expect(template('hpa.yaml')).toContain('{{- if and $svc.enabled $svc.autoscaling.enabled }}');
    expect(template('pdb.yaml')).toMatch(/kind: PodDisruptionBudget/);
    expect(template('serviceaccounts.yaml')).toMatch(/kind: ServiceAccount/);
    expect(defines().get('rrs.podSpecCommon')).toContain('serviceAccountName: {{ include "rrs.componentName" (list $root (index . 2)) }}');
  });

  it('has an Ingress for the gateway only', () => {
    const withIngress = readdirSync(join(CHART, 'templates')).filter((f) => /kind: Ingress\b/.test(template(f)));
    expect(withIngress).toEqual(['ingress.yaml']);
    const backends = [...template('ingress.yaml').matchAll(/name: \{\{ include "rrs\.componentName" \(list \S+ "([a-z-]+)"\) \}\}/g)].map((m) => m[1]);
    // The SMS receipts path is optional and off by default (values: channelSms.receipts.ingress.enabled).
    expect(backends).toEqual(['gateway', 'gateway', 'channel-sms']);
    expect(chartValues().channelSms.receipts.ingress.enabled).toBe(false);
  });
});

describe('env variables: the chart and the services agree', () => {
  const runtime = runtimeEnv();

  it('reads the env shapes of the services (sanity of the parser)', () => {
    const sms = configEnv('channel-sms');
    expect(sms.find((v) => v.name === 'DATABASE_URL')).toEqual({ name: 'DATABASE_URL', required: true });
    expect(sms.find((v) => v.name === 'NATS_URL')).toEqual({ name: 'NATS_URL', required: false });
    expect(sms.find((v) => v.name === 'SMSC_LOGIN')).toEqual({ name: 'SMSC_LOGIN', required: false });
    expect(sms.find((v) => v.name === 'SENDER_CONCURRENCY')).toBeDefined();
    expect(configEnv('gateway').find((v) => v.name === 'PUBLIC_BASE_URL')).toEqual({ name: 'PUBLIC_BASE_URL', required: false });
    // A field helper of the config file itself (`scheduleField()` ends in `.optional()`).
    expect(configEnv('webhooks').find((v) => v.name === 'WEBHOOK_RETRY_SCHEDULE_MS')).toEqual({ name: 'WEBHOOK_RETRY_SCHEDULE_MS', required: false });
    expect(runtime.has('OTEL_EXPORTER_OTLP_ENDPOINT')).toBe(true);
  });

  it.each(services)('%s: every variable the chart sets is one the service (or the runtime) reads', (service) => {
    const reads = new Set(configEnv(service).map((v) => v.name));
    const unknown = [...chartEnv(service)].filter((name) => !reads.has(name) && !runtime.has(name));
    expect(unknown).toEqual([]);
  });

  it.each(services)('%s: every required variable of the service is set by the chart', (service) => {
    const set = chartEnv(service);
    const missing = configEnv(service).filter((v) => v.required && !set.has(v.name)).map((v) => v.name);
    expect(missing).toEqual([]);
  });

  it.each(services)('%s: every secret it reads is one the chart Secret can hold', (service) => {
    const secretKeys = new Set([...(defines().get('rrs.secretData') ?? '').matchAll(/set \$data "([A-Z_]+)"/g)].map((m) => m[1]));
    for (const m of template(`${service}.yaml`).matchAll(/include "rrs\.secretEnv" \(list [^"]*"([A-Z][A-Z0-9_]*)"/g)) {
      expect({ service, key: m[1], inSecret: secretKeys.has(m[1]) }).toEqual({ service, key: m[1], inSecret: true });
    }
  });

  it('never turns the fast clock on', () => {
    for (const service of services) expect(chartEnv(service).has('DELAY_MINUTE_MS')).toBe(false);
  });
});

describe('architecture: arrows, migrations, jobs', () => {
  const ADDR_OF: Record<string, string> = { CONTACTS_ADDR: 'contacts', SCHEDULER_ADDR: 'cascade-scheduler', WEBHOOKS_ADDR: 'webhooks' };
  const arrows = staticDefine<Record<string, { key: string; port: number; from: string[] }>>('rrs.grpcArrows');

  it('allows exactly the gRPC calls the services make (from the *_ADDR variables they read)', () => {
    const calls: Record<string, string[]> = {};
    for (const service of services) {
      for (const v of configEnv(service)) {
        const callee = ADDR_OF[v.name];
        if (callee) (calls[callee] ??= []).push(service);
      }
    }
    expect(Object.keys(arrows).sort()).toEqual(Object.keys(calls).sort());
    for (const [callee, arrow] of Object.entries(arrows)) {
      expect({ callee, from: [...arrow.from].sort() }).toEqual({ callee, from: calls[callee].sort() });
      expect({ callee, port: arrow.port }).toEqual({ callee, port: defaultPort(callee, 'GRPC_PORT') });
      expect(arrow.key).toBe(serviceKeys()[callee]);
    }
    // Whoever calls sets the address to this release's Service (or the callee's externalAddress).
    for (const [callee, arrow] of Object.entries(arrows)) {
      for (const caller of arrow.from) {
        const variable = Object.keys(ADDR_OF).find((k) => ADDR_OF[k] === callee) as string;
        expect(template(`${caller}.yaml`)).toContain(`- name: ${variable}\n              value: {{ include "rrs.address" (list . "${callee}" .Values.${arrow.key} ${arrow.port}) | quote }}`);
      }
    }
  });

  it('lets only the gateway take traffic from the ingress controller, and only senders and webhooks leave the cluster', () => {
    const policies = template('networkpolicies.yaml');
    expect(policies.match(/\$np\.ingressControllerFrom/g)).toHaveLength(2);
    expect(policies).toContain('{{- if eq $name "gateway" }}');
    expect(policies).toContain('{{- if and (eq $name "channel-sms") $svc.receipts.ingress.enabled }}');
    expect(policies).toContain('{{- $leavesCluster := list "webhooks" "channel-email" "channel-sms" "channel-messenger" }}');
    expect(policies).toMatch(/policyTypes: \[Ingress, Egress\]/);
  });

  it('migrates, in each service image, exactly what the service migrates at start', () => {
    const plans = staticDefine<Record<string, { key: string; args: string[] }>>('rrs.migrationPlans');
    const idempotencyComponent = /IDEMPOTENCY_COMPONENT = '([a-z-]+)'/.exec(read('packages', 'idempotency', 'src', 'idempotency.ts'))?.[1];
    const senderKitComponent = /component: '([a-z-]+)'/.exec(read('packages', 'sender-kit', 'src', 'sendLog.ts'))?.[1];
    expect(idempotencyComponent).toBe('idempotency');
    expect(senderKitComponent).toBe('sender-kit');
    for (const service of services) {
      const code = stripComments(read('services', service, 'src', 'service.ts'));
      const schema = /export const SCHEMA = '([a-z_]+)'/.exec(code)?.[1];
      if (!schema) {
        expect({ service, plan: plans[service] }).toEqual({ service, plan: undefined });
        continue;
      }
      const expected = ['--schema', schema];
      if (/migrate\(pool, \{[^}]*dir: MIGRATIONS_DIR/.test(code) || /migrations: \[\{ dir: MIGRATIONS_DIR \}/.test(code)) {
        expect(existsSync(join(__dirname, '..', 'services', service, 'migrations'))).toBe(true);
        expected.push('service=migrations');
      }
      if (/IDEMPOTENCY_MIGRATIONS(_DIR)?\b/.test(code)) expected.push(`${idempotencyComponent}=node_modules/@rrs/idempotency/migrations`);
      if (/startChannelSender|openSendLog/.test(code)) expected.push(`${senderKitComponent}=node_modules/@rrs/sender-kit/migrations`);
      expect({ service, args: plans[service]?.args }).toEqual({ service, args: expected });
      expect(plans[service].key).toBe(serviceKeys()[service]);
    }
    // The folders the Job points at are the ones the packages ship (pack-service copies migrations/).
    expect(existsSync(join(__dirname, '..', 'packages', 'idempotency', 'migrations'))).toBe(true);
    expect(existsSync(join(__dirname, '..', 'packages', 'sender-kit', 'migrations'))).toBe(true);
  });

  it('runs the migrations and the bus provisioning as pre-install/pre-upgrade hooks with the runtime scripts', () => {
    const jobs = template('jobs.yaml');
    expect(jobs).toContain('command: ["node", "node_modules/@rrs/runtime/dist/bin/migrate.js"]');
    expect(jobs).toContain('command: ["node", "node_modules/@rrs/runtime/dist/bin/provision-bus.js"]');
    expect(existsSync(join(__dirname, '..', 'packages', 'runtime', 'src', 'bin', 'migrate.ts'))).toBe(true);
    expect(existsSync(join(__dirname, '..', 'packages', 'runtime', 'src', 'bin', 'provision-bus.ts'))).toBe(true);
    expect(jobs.match(/"helm\.sh\/hook": pre-install,pre-upgrade/g)).toHaveLength(3);
    // The Secret the Jobs read exists before them.
    expect(template('secret.yaml')).toContain('"helm.sh/hook": pre-install,pre-upgrade');
    expect(template('secret.yaml')).toContain('"helm.sh/hook-weight": "-20"');
    // The provisioning Job's TTL is the one the gateway and the senders are given.
    expect(jobs).toMatch(/- name: CHANNEL_TTL_MS\s*\n\s*value: \{\{ \.Values\.channelTtlMs \| quote \}\}/);
    for (const service of services.filter((s) => chartEnv(s).has('CHANNEL_TTL_MS'))) {
      expect(template(`${service}.yaml`)).toMatch(/- name: CHANNEL_TTL_MS\s*\n\s*value: \{\{ \.Values\.channelTtlMs \| quote \}\}/);
    }
  });
});
