import { generateKeyPairSync } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { CHART, CI_VALUES, helm, KUBERNETES, KUBERNETES_MINORS, template, templateRefused, validate, type K8sObject } from './helmRender';

/*
 * The chart through real Helm (scripts/helm.mjs): `helm lint --strict` and `helm template` for every
 * values file in deploy/helm/ci, at every Kubernetes version the chart supports, and every rendered
 * object checked against the Kubernetes schemas of the oldest and newest of them (scripts/k8s-validate.mjs).
 * What the objects say (probes, env, policies, Jobs) is checked in helm-chart.test.ts.
 */

const chartYaml = YAML.parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'));
/** Values of the ci files plus the least a real install needs: the chart's defaults, the three URLs and the connectors' credential key. */
const CONNECTOR_KEY = 'secrets.connectorSecretKeys="' + Buffer.alloc(32, 7).toString('base64') + '"';
const WEBHOOK_KEY = 'secrets.webhookSecretKeys="' + Buffer.alloc(32, 8).toString('base64') + '"';
const PERSON_HASH_KEY = 'secrets.personHashKey="' + Buffer.alloc(32, 9).toString('base64') + '"';
/** A provider for each enabled sender (the chart refuses a sender without one, "Production never pretends"). */
const EMAIL_PROVIDER = 'secrets.postmarkServerToken="pm-server-token"';
const SMS_PROVIDER = ['secrets.smscLogin="reviews"', 'secrets.smscPassword="smsc-password"'];
const MESSENGER_PROVIDER = ['secrets.maxIdInstance="1101000001"', 'secrets.maxApiToken="max-api-token"'];
const PROVIDERS = [EMAIL_PROVIDER, ...SMS_PROVIDER, ...MESSENGER_PROVIDER];
const MINIMAL = ['image.registry="registry.example.com/rrs"', 'postgresql.url="postgres://rrs:pw@postgres:5432/rrs"', 'nats.url="nats://nats:4222"', 'redis.url="redis://redis:6379"', CONNECTOR_KEY, WEBHOOK_KEY, PERSON_HASH_KEY, ...PROVIDERS];
const without = (settings: readonly string[]) => MINIMAL.filter((s) => !settings.includes(s));
const DKIM_KEY = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const SCENARIOS: Array<[string, { values?: string[]; set?: string[] }]> = [
  ...CI_VALUES.map((file): [string, { values: string[] }] => [file, { values: [file] }]),
  ['defaults with the connection URLs', { set: MINIMAL }],
];

describe('Chart.yaml', () => {
  it('declares the Kubernetes versions the checks cover, from the oldest on', () => {
    expect(chartYaml.apiVersion).toBe('v2');
    expect(chartYaml.kubeVersion).toBe(`>=${KUBERNETES.oldest}.0-0`);
  });

  it('refuses a Kubernetes older than the oldest supported', () => {
    expect(templateRefused({ values: ['ci/external-values.yaml'], kubeVersion: '1.26' })).toMatch(/chart requires kubeVersion: >=1\.27\.0-0 which is incompatible with Kubernetes v1\.26\.0/);
  });
});

describe('helm lint --strict', () => {
  const lint = (args: string[], kubernetes: string) => helm(['lint', CHART, '--strict', '--kube-version', `${kubernetes}.0`, ...args]);

  it.each(SCENARIOS)('%s passes at the oldest and newest supported Kubernetes', (_name, { values = [], set = [] }) => {
    for (const kubernetes of [KUBERNETES.oldest, KUBERNETES.newest]) {
      const run = lint([...values.flatMap((f) => ['-f', join(CHART, f)]), ...set.flatMap((s) => ['--set-json', s])], kubernetes);
      expect({ kubernetes, status: run.status, out: run.stdout + run.stderr }).toEqual({ kubernetes, status: 0, out: expect.stringContaining('1 chart(s) linted, 0 chart(s) failed') });
    }
  });

  it('fails for real on the default values, naming every value a real install must set (not only "[INFO] Fail:" lines)', () => {
    // The plain command, as an operator types it: without --strict and without a values file.
    const run = helm(['lint', CHART]);
    const out = run.stdout + run.stderr;
    expect(run.status).not.toBe(0);
    expect(out).toContain('1 chart(s) linted, 1 chart(s) failed');
    for (const refusal of [
      'image.registry is required', 'postgresql.url is required', 'nats.url is required', 'redis.url is required when the gateway runs more than one replica', 'secrets.connectorSecretKeys is required', 'secrets.webhookSecretKeys is required', 'secrets.personHashKey is required',
      'channel-email is enabled without a provider', 'channel-sms is enabled without a provider', 'channel-messenger is enabled without a provider',
    ]) {
      expect(out).toMatch(new RegExp(`\\[ERROR\\] templates/validate\\.yaml: [^\\n]*values refused: ${refusal.replace(/[.]/g, '\\.')}`));
    }
  });

  it('passes with a single refused value set right, and fails while one is still missing', () => {
    const missingOne = helm(['lint', CHART, ...MINIMAL.filter((s) => s !== WEBHOOK_KEY).flatMap((s) => ['--set-json', s])]);
    expect(missingOne.status).not.toBe(0);
    expect(missingOne.stdout).toMatch(/\[ERROR\] templates\/validate\.yaml: [^\n]*values refused: secrets\.webhookSecretKeys is required/);
    expect(missingOne.stdout).not.toContain('postgresql.url is required');
    const complete = helm(['lint', CHART, ...MINIMAL.flatMap((s) => ['--set-json', s])]);
    expect({ status: complete.status, out: complete.stdout }).toEqual({ status: 0, out: expect.stringContaining('1 chart(s) linted, 0 chart(s) failed') });
  });

  // Helm's deprecation check fails an API that the given version no longer serves; full-values renders every kind.
  it.each(KUBERNETES_MINORS)('finds no API that Kubernetes %s does not serve', (kubernetes) => {
    const run = lint(['-f', join(CHART, 'ci', 'full-values.yaml')], kubernetes);
    expect(run.stdout).not.toMatch(/deprecated|unavailable/);
    expect(run.status).toBe(0);
  });
});

describe('helm template, validated against the Kubernetes schemas', () => {
  const reports = new Map<string, ReturnType<typeof validate>>();
  const counts = new Map<string, number>();

  beforeAll(() => {
    for (const kubernetes of [KUBERNETES.oldest, KUBERNETES.newest]) {
      const renders: Record<string, string> = {};
      for (const [name, scenario] of SCENARIOS) {
        const render = template({ ...scenario, kubeVersion: kubernetes });
        renders[name] = render.text;
        counts.set(`${name} ${kubernetes}`, render.objects.length);
      }
      reports.set(kubernetes, validate(renders, kubernetes));
    }
  });

  it.each([KUBERNETES.oldest, KUBERNETES.newest])('checks every rendered object against the Kubernetes %s schemas', (kubernetes) => {
    const report = reports.get(kubernetes)!;
    expect(report.objects).toBe(SCENARIOS.reduce((sum, [name]) => sum + (counts.get(`${name} ${kubernetes}`) ?? 0), 0));
    expect(report.targets.some((t) => t.startsWith(`Kubernetes ${kubernetes}:`))).toBe(true);
  });

  it.each(SCENARIOS)('%s: every object is valid in the oldest and the newest supported Kubernetes', (name) => {
    for (const kubernetes of [KUBERNETES.oldest, KUBERNETES.newest]) {
      expect(counts.get(`${name} ${kubernetes}`)).toBeGreaterThan(5);
      expect(reports.get(kubernetes)!.errors.filter((e) => e.file === name)).toEqual([]);
    }
  });

  it('gives every object a valid, unique name, even under the longest release name Helm accepts', () => {
    const release = 'reviews-production-eu-west-1-blue-green-canary-abcdef';
    expect(release).toHaveLength(53);
    const { objects } = template({ release, values: ['ci/full-values.yaml'] });
    const seen = new Set<string>();
    for (const o of objects) {
      const id = `${o.kind}/${o.metadata.name}`;
      expect({ id, unique: !seen.has(id) }).toEqual({ id, unique: true });
      seen.add(id);
      // DNS-1123 subdomain; Services (DNS-1035 labels) and Jobs (their name is their pods' job-name label) at most 63.
      expect(o.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
      const limit = o.kind === 'Service' || o.kind === 'Job' || o.kind === 'Deployment' ? 63 : 253;
      expect({ id, length: o.metadata.name.length <= limit }).toEqual({ id, length: true });
      for (const [key, value] of Object.entries(labelsOf(o))) {
        expect({ id, key, value, valid: /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(value) && value.length <= 63 }).toEqual({ id, key, value, valid: true });
      }
    }
  });

  it('renders the same objects for every supported Kubernetes version (the templates do not branch on it)', () => {
    const oldest = template({ values: ['ci/full-values.yaml'], kubeVersion: KUBERNETES.oldest }).text;
    expect(template({ values: ['ci/full-values.yaml'], kubeVersion: KUBERNETES.newest }).text).toBe(oldest);
  });
});

function labelsOf(o: K8sObject): Record<string, string> {
  return { ...(o.metadata.labels ?? {}), ...(o.spec?.template?.metadata?.labels ?? {}) };
}

describe('values: Helm refuses what values.schema.json and the chart refuse', () => {
  it.each([
    ['an unknown top-level key', 'replicas=3', '(root): Additional property replicas is not allowed'],
    ['a bus prefix the runtime refuses', 'busPrefix="Prod-1"', 'busPrefix: Does not match pattern'],
    ['a database URL that is not postgres', 'postgresql.url="mysql://db/rrs"', 'postgresql.url: Does not match pattern'],
    ['an ingress path exposing /metrics', 'gateway.ingress.paths=["/api","/metrics"]', 'gateway.ingress.paths: Must not validate'],
    ['/admin among the ingress paths (only gateway.ingress.exposeAdmin routes it)', 'gateway.ingress.paths=["/api","/admin"]', 'gateway.ingress.paths: Must not validate'],
    ['a gateway trusting any proxy', 'gateway.trustProxy=true', 'gateway.trustProxy: Must not validate'],
    ['a service env name that is not a variable name', 'webhooks.env={"webhook-concurrency":"4"}', 'webhooks.env: Property name of "webhook-concurrency" does not match'],
    ['an unknown service setting', 'contacts.replica=2', 'contacts: Additional property replica is not allowed'],
    ['a memory quantity with a typo', 'gateway.resources.requests={"cpu":"100m","memory":"128MB"}', 'gateway.resources.requests.memory: Does not match pattern'],
    ['a connector key that is not base64 of 32 bytes', 'secrets.connectorSecretKeys="c2hvcnQ="', 'secrets.connectorSecretKeys: Does not match pattern'],
    ['a person hash key shorter than the scheduler accepts', 'secrets.personHashKey="short"', 'secrets.personHashKey: Does not match pattern'],
  ])('rejects %s', (_what, setting, message) => {
    expect(templateRefused({ values: ['ci/external-values.yaml'], set: [setting] })).toContain(message);
  });

  it.each([
    ['the default values (no registry: the chart has none of its own)', [], 'image.registry is required'],
    ['no database', [MINIMAL[0]], 'postgresql.url is required'],
    ['no NATS', [MINIMAL[0], 'postgresql.url="postgres://db/rrs"'], 'nats.url is required'],
    ['several gateway replicas without Redis', [MINIMAL[0], 'postgresql.url="postgres://db/rrs"', 'nats.url="nats://nats:4222"'], 'redis.url is required when the gateway runs more than one replica'],
    ['a service without an image where no registry is set', [...MINIMAL.slice(1), 'gateway.image={"repository":"registry.example.com/rrs/gateway"}'], 'image.registry is required'],
    ['receipts on an Ingress that is off', [...MINIMAL, 'channelSms.receipts.ingress.enabled=true', 'gateway.ingress.enabled=false'], 'channelSms.receipts.ingress needs gateway.ingress'],
    ['Postmark receipts on an Ingress that is off', [...MINIMAL, 'channelEmail.receipts.ingress.enabled=true', 'gateway.ingress.enabled=false'], 'channelEmail.receipts.ingress needs gateway.ingress'],
    ['a disabled directory that its callers cannot reach', [...MINIMAL, 'contacts.enabled=false'], 'contacts is disabled: set contacts.externalAddress'],
    ['a disabled scheduler that the gateway cannot reach', [...MINIMAL, 'cascadeScheduler.enabled=false'], 'cascadeScheduler is disabled: set cascadeScheduler.externalAddress'],
    ['connectors without the keys that seal CRM credentials', MINIMAL.filter((s) => s !== CONNECTOR_KEY), 'secrets.connectorSecretKeys is required while connectors is enabled'],
    ['webhooks without the keys that seal signing secrets', MINIMAL.filter((s) => s !== WEBHOOK_KEY), 'secrets.webhookSecretKeys is required while webhooks is enabled'],
    ['a scheduler without the key of the opt-out hashes', MINIMAL.filter((s) => s !== PERSON_HASH_KEY), 'secrets.personHashKey is required while cascadeScheduler is enabled'],
    ['several connectors replicas without Redis', [...MINIMAL.filter((s) => !s.startsWith('redis.')), 'gateway.autoscaling.enabled=false', 'gateway.replicaCount=1'], 'redis.url is required when connectors runs more than one replica'],
    ['CRM webhooks on an Ingress that is off', [...MINIMAL, 'gateway.ingress.enabled=false'], 'connectors.hooks.ingress needs gateway.ingress'],
    ['SMTP without DKIM keys or the relay opt-out', [...MINIMAL, 'secrets.smtpUrl="smtp://m:p@smtp.example.com:587"'], 'secrets.dkimPrivateKeys is required with secrets.smtpUrl'],
    ['DKIM keys without their selectors', [...MINIMAL, 'secrets.smtpUrl="smtp://m:p@smtp.example.com:587"', `secrets.dkimPrivateKeys=${JSON.stringify(DKIM_KEY)}`], 'channelEmail.env.DKIM_SELECTORS is required with secrets.dkimPrivateKeys'],
    ['an email sender without a provider', without([EMAIL_PROVIDER]), 'channel-email is enabled without a provider: set secrets.smtpUrl or secrets.postmarkServerToken (Email: no message would be delivered), or channelEmail.env.EMAIL_PROVIDERS=sink for a staging'],
    ['an SMS sender without a provider', without(SMS_PROVIDER), 'channel-sms is enabled without a provider: set secrets.smscLogin and secrets.smscPassword, or secrets.smsruApiId (SMS: no message would be delivered), or channelSms.env.SMS_PROVIDERS=sink'],
    ['a messenger sender without a working account', without(MESSENGER_PROVIDER), 'channel-messenger is enabled without a provider: set secrets.maxIdInstance and secrets.maxApiToken, or secrets.telegramIdInstance and secrets.telegramApiToken'],
    ['a messenger account without its token', [...without(MESSENGER_PROVIDER), 'secrets.maxIdInstance="1101000001"'], 'channel-messenger is enabled without a provider'],
  ])('refuses %s with a message naming the setting', (_what, set, message) => {
    expect(templateRefused({ set })).toContain(message);
  });

  it.each([
    ['the sinks named (a staging)', [...without(PROVIDERS), 'channelEmail.env={"EMAIL_FROM":"Reviews <r@example.com>","EMAIL_PROVIDERS":"sink"}', 'channelSms.env={"SMS_PROVIDERS":"sink"}', 'channelMessenger.env={"MESSENGER_SINK":"max,telegram"}']],
    ['the senders disabled', [...without(PROVIDERS), 'channelEmail.enabled=false', 'channelSms.enabled=false', 'channelMessenger.enabled=false']],
    ['credentials given through extraEnv (a Secret of your own)', [...without([EMAIL_PROVIDER, ...SMS_PROVIDER]), 'channelEmail.extraEnv=[{"name":"POSTMARK_SERVER_TOKEN","valueFrom":{"secretKeyRef":{"name":"mail","key":"token"}}}]', 'channelSms.extraEnv=[{"name":"SMSRU_API_ID","valueFrom":{"secretKeyRef":{"name":"sms","key":"id"}}}]']],
    ['SMS.ru alone', [...without(SMS_PROVIDER), 'secrets.smsruApiId="smsru-api-id"']],
  ])('renders with %s', (_what, set) => {
    expect(template({ set }).objects.length).toBeGreaterThan(0);
  });
});

/**
 * NOTES.txt as Helm renders it: the chart is copied and its NOTES.txt rendered as a template whose text
 * is one field (`helm template` leaves NOTES.txt out; `install --dry-run` needs a cluster).
 */
describe('NOTES.txt', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'rrs-notes-'));
    cpSync(CHART, dir, { recursive: true });
    const notes = readFileSync(join(dir, 'templates', 'NOTES.txt'), 'utf8');
    writeFileSync(join(dir, 'templates', '_notes.tpl'), `{{- define "test.notes" -}}\n${notes}\n{{- end -}}\n`);
    rmSync(join(dir, 'templates', 'NOTES.txt'));
    writeFileSync(join(dir, 'templates', 'notes.yaml'), 'kind: Notes\ntext: {{ include "test.notes" . | toJson }}\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const notes = (set: string[]) => template({ chart: dir, values: [join(CHART, 'ci', 'external-values.yaml')], set }).objects.find((o) => o.kind === 'Notes')!.text as string;
  const channelLines = (text: string) => text.slice(text.indexOf('Channels and their providers')).split('\n\n')[0].split('\n');

  it('lists each channel with its providers in failover order, and says which one does not deliver', () => {
    expect(channelLines(notes([]))).toEqual([
      'Channels and their providers (failover order):',
      '  - Email (channel-email): smtp',
      '  - SMS (channel-sms): smsc',
      '  - MAX (channel-messenger): GREEN-API working account',
      '  - Telegram (channel-messenger): none — unavailable (no working account)',
    ]);
    expect(channelLines(notes(['secrets.smscLogin=""', 'secrets.smsruApiId="smsru-api-id"', 'secrets.postmarkServerToken="pm"', 'channelEmail.env={"DKIM_SIGNED_BY_RELAY":"true","EMAIL_PROVIDERS":"postmark,smtp"}', 'channelMessenger.env={"MESSENGER_SINK":"telegram"}']))).toEqual([
      'Channels and their providers (failover order):',
      '  - Email (channel-email): postmark, smtp',
      '  - SMS (channel-sms): smsru',
      '  - MAX (channel-messenger): GREEN-API working account',
      '  - Telegram (channel-messenger): sink — MESSAGES ARE NOT DELIVERED (MESSENGER_SINK; the console marks it red)',
    ]);
    expect(channelLines(notes(['secrets.smscLogin=""', 'channelSms.env={"SMS_PROVIDERS":"sink"}', 'channelEmail.enabled=false']))).toEqual([
      'Channels and their providers (failover order):',
      '  - SMS (channel-sms): sink — MESSAGES ARE NOT DELIVERED (SMS_PROVIDERS=sink; the console marks it red)',
      '  - MAX (channel-messenger): GREEN-API working account',
      '  - Telegram (channel-messenger): none — unavailable (no working account)',
    ]);
  });

  it('names the Secret when the credentials come from one the chart does not read', () => {
    const text = notes(['secrets.existingSecret="rrs-credentials"']);
    expect(channelLines(text)[1]).toBe('  - Email (channel-email): from Secret rrs-credentials (the sender refuses to start without a provider)');
  });
});

describe('the checks can fail: a chart with broken objects', () => {
  let dir: string;
  const broken = (file: string, from: string, to: string) => {
    const path = join(dir, 'templates', file);
    const text = readFileSync(path, 'utf8');
    expect(text).toContain(from);
    writeFileSync(path, text.replace(from, to));
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'rrs-chart-'));
    cpSync(CHART, dir, { recursive: true });
    broken('gateway.yaml', 'readinessProbe:', 'readinesProbe:');
    broken('contacts.yaml', 'containerPort: 50051', 'containerPort: "50051"');
    broken('hpa.yaml', '  maxReplicas: {{ $svc.autoscaling.maxReplicas }}\n', '');
    broken('webhooks.yaml', '  type: ClusterIP\n', '  type: ClusterIP\n  trafficDistribution: PreferClose\n');
    broken('servicemonitor.yaml', '    - port: ops', '    - port: 9464');
    broken('pdb.yaml', 'apiVersion: policy/v1', 'apiVersion: policy/v1beta1');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports each broken field, in the Kubernetes version whose schema it breaks', () => {
    const errors = (kubernetes: string) => {
      const render = template({ chart: dir, values: ['ci/full-values.yaml'], kubeVersion: kubernetes });
      return validate({ broken: render.text }, kubernetes).errors.map((e) => `${e.kind}/${e.name} ${e.path}: ${e.message}`);
    };
    const oldest = errors(KUBERNETES.oldest);
    const newest = errors(KUBERNETES.newest);
    const gateway = 'Deployment/rrs-reviews-gateway /spec/template/spec/containers/0';
    // A misspelt field: only the strict schema (the oldest) knows every field.
    expect(oldest).toContain(`${gateway}: has a field the schema does not declare: readinesProbe`);
    // A port as a string, a required field left out: both versions.
    for (const found of [oldest, newest]) {
      expect(found).toContain('Deployment/rrs-reviews-contacts /spec/template/spec/containers/0/ports/0/containerPort: must be integer');
      expect(found).toContain('HorizontalPodAutoscaler/rrs-reviews-contacts /spec: misses the required field maxReplicas');
      expect(found).toContain('ServiceMonitor/rrs-reviews /spec/endpoints/0/port: must be string');
    }
    // A field newer than the oldest supported version (Service.spec.trafficDistribution, 1.30).
    expect(oldest).toContain('Service/rrs-reviews-webhooks /spec: has a field the schema does not declare: trafficDistribution');
    expect(newest.filter((e) => e.includes('trafficDistribution'))).toEqual([]);
  });

  it('fails helm lint on an API the supported versions no longer serve', () => {
    const run = helm(['lint', dir, '--strict', '--kube-version', `${KUBERNETES.oldest}.0`, '-f', join(dir, 'ci', 'external-values.yaml')]);
    expect(run.stdout).toContain('policy/v1beta1 PodDisruptionBudget is deprecated in v1.21+, unavailable in v1.25+; use policy/v1 PodDisruptionBudget');
    expect(run.status).not.toBe(0);
  });
});
