import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { CHART, CI_VALUES, componentOf, envOf, mainContainer, ofKind, podSpec, renderedSecrets, resolvedEnv, template, theOne, type K8sObject, type Render } from './helmRender';
import { imageEnv, read, ROOT, runtimeEnv, serviceNames } from './repo';
import { JOB_CONFIG, runConfig, serviceConfig, type ConfigRun } from './serviceConfig';

/*
 * What the chart's objects say, read from real `helm template` output (test/helmRender.ts) for every
 * values file in deploy/helm/ci: each service's Deployment, pods, probes and env, checked against the
 * service's own code (its buildConfig run on the env the chart gives it), the NetworkPolicy arrows
 * against the addresses the services read, and the hook Jobs against what the services migrate.
 */

const services = serviceNames();
/** Values key of a service: its name in camelCase (cascade-scheduler → cascadeScheduler). */
const keyOf = (service: string) => service.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const chartValues = YAML.parse(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
const appVersion = YAML.parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')).appVersion;

/** values.yaml with a ci file over it, as Helm merges them (maps merge, anything else replaces). */
function valuesOf(file: string): Record<string, any> {
  const merge = (a: any, b: any): any => {
    const out = { ...a };
    for (const [k, v] of Object.entries(b ?? {})) out[k] = v && typeof v === 'object' && !Array.isArray(v) && a?.[k] && typeof a[k] === 'object' && !Array.isArray(a[k]) ? merge(a[k], v) : v;
    return out;
  };
  return merge(chartValues, YAML.parse(readFileSync(join(CHART, file), 'utf8')));
}

/** What the Secrets named by ci/*-values.yaml's existingSecret hold: only the keys the README says are required. */
const REQUIRED_ONLY = { DATABASE_URL: 'postgres://rrs:pw@postgres.databases.svc:5432/rrs', NATS_URL: 'nats://nats.messaging.svc:4222', CONNECTOR_SECRET_KEYS: Buffer.alloc(32, 1).toString('base64'), WEBHOOK_SECRET_KEYS: Buffer.alloc(32, 2).toString('base64'), PERSON_HASH_KEY: Buffer.alloc(32, 3).toString('base64') };
/** And a provider for each sender (deploy/helm/README.md: a sender without one refuses to start in production). */
const PROVIDER_KEYS = { POSTMARK_SERVER_TOKEN: 'pm-server-token', SMSC_LOGIN: 'reviews', SMSC_PASSWORD: 'smsc-password', MAX_ID_INSTANCE: '1101000001', MAX_API_TOKEN: 'max-api-token' };
const EXTERNAL_SECRETS: Record<string, Record<string, string>> = { 'rrs-credentials': { ...REQUIRED_ONLY, ...PROVIDER_KEYS }, 'rrs-sms-credentials': { ...REQUIRED_ONLY, ...PROVIDER_KEYS } };

const renders = new Map<string, Render>(CI_VALUES.map((file) => [file, template({ values: [file] })]));
const main = renders.get('ci/external-values.yaml')!;
const full = renders.get('ci/full-values.yaml')!;
const secretsOf = (render: Render) => ({ ...EXTERNAL_SECRETS, ...renderedSecrets(render.objects) });
const deployments = (render: Render) => ofKind(render.objects, 'Deployment');

/** The service's config run on the env its container gets in a render (the image's ENV lines under the chart's). */
function configIn(render: Render, service: string): ConfigRun {
  const env = { ...imageEnv(service), ...resolvedEnv(theOne(render.objects, 'Deployment', service), secretsOf(render)) };
  return runConfig(serviceConfig(service), env);
}
const readsOf = (service: string) => configIn(main, service).reads;
const grpcServices = services.filter((s) => readsOf(s).has('GRPC_PORT'));

describe('services: one Deployment each, from its values block', () => {
  it('has a values block for every service, and a Deployment, Service, ServiceAccount and PodDisruptionBudget for each', () => {
    expect(deployments(main).map(componentOf).sort()).toEqual(services);
    for (const service of services) {
      const values = chartValues[keyOf(service)];
      expect({ service, enabled: values?.enabled, image: values?.image }).toEqual({ service, enabled: true, image: {} });
      expect(values.resources.requests).toBeDefined();
      expect(values.resources.limits).toBeDefined();
      const deployment = theOne(main.objects, 'Deployment', service);
      expect(deployment.metadata.name).toBe(`rrs-review-request-service-${service}`);
      expect(mainContainer(deployment).image).toBe(`registry.example.com/rrs/${service}:${appVersion}`);
      expect(mainContainer(deployment).resources).toEqual(values.resources);
      for (const kind of ['Service', 'ServiceAccount', 'PodDisruptionBudget']) expect(theOne(main.objects, kind, service).metadata.name).toBe(deployment.metadata.name);
      expect(podSpec(deployment).serviceAccountName).toBe(deployment.metadata.name);
    }
  });

  it.each(services)('%s is switched off by its enabled flag, and nothing of it is left', (service) => {
    const key = keyOf(service);
    const set = [`${key}.enabled=false`, ...(chartValues[key].externalAddress !== undefined ? [`${key}.externalAddress="${service}.elsewhere:50051"`] : [])];
    const { objects } = template({ values: ['ci/external-values.yaml'], set });
    expect(objects.filter((o) => componentOf(o) === service || o.metadata.labels?.['rrs.example.com/service'] === service).map((o) => o.kind)).toEqual([]);
    expect(ofKind(objects, 'Deployment').map(componentOf).sort()).toEqual(services.filter((s) => s !== service));
  });

  it('takes each image from the registry and tag, or the service’s own repository, tag and pull policy', () => {
    for (const deployment of deployments(full)) {
      const service = componentOf(deployment)!;
      const expected = { gateway: ['registry.example.com/rrs/gateway:1.2.4', 'IfNotPresent'], webhooks: ['registry.example.com/other/webhooks:1.2.3', 'Always'] }[service] ?? [`registry.example.com/rrs/${service}:1.2.3`, 'Always'];
      expect([service, mainContainer(deployment).image, mainContainer(deployment).imagePullPolicy]).toEqual([service, ...expected]);
    }
    expect(mainContainer(ofKind(full.objects, 'Job').find((j) => componentOf(j) === 'provision-bus')!).image).toBe('registry.example.com/rrs/cascade-scheduler:1.2.2');
  });

  it.each(CI_VALUES)('%s: replicas are left to the HorizontalPodAutoscaler when it is on', (file) => {
    const values = valuesOf(file);
    const render = renders.get(file)!;
    for (const deployment of deployments(render)) {
      const service = componentOf(deployment)!;
      const { autoscaling, replicaCount } = values[keyOf(service)];
      const hpa = ofKind(render.objects, 'HorizontalPodAutoscaler').filter((h) => componentOf(h) === service);
      if (autoscaling.enabled) {
        expect({ service, replicas: deployment.spec.replicas, hpas: hpa.length }).toEqual({ service, replicas: undefined, hpas: 1 });
        expect(hpa[0].spec).toMatchObject({ scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name }, minReplicas: autoscaling.minReplicas, maxReplicas: autoscaling.maxReplicas });
      } else {
        expect({ service, replicas: deployment.spec.replicas, hpas: hpa.length }).toEqual({ service, replicas: replicaCount, hpas: 0 });
      }
    }
  });
});

describe('pods: non-root, read-only root filesystem, no capabilities, /tmp writable', () => {
  const workloads = [...renders.entries()].flatMap(([file, r]) => [...deployments(r), ...ofKind(r.objects, 'Job')].map((w): [string, K8sObject, Render] => [`${file} ${w.kind}/${w.metadata.name}`, w, r]));

  it.each(workloads)('%s', (_name, workload, render) => {
    const spec = podSpec(workload);
    expect(mainContainer(workload).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(spec.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    expect(mainContainer(workload).volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(spec.volumes).toEqual([{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }]);
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(ofKind(render.objects, 'ServiceAccount').map((sa) => sa.metadata.name)).toContain(spec.serviceAccountName);
  });

  it.each(services)('%s: the image runs as uid 1000 too', (service) => {
    expect(read('services', service, 'Dockerfile')).toMatch(/^USER 1000:1000$/m);
  });
});

describe('ports and probes', () => {
  const portOf = (deployment: K8sObject, name: string) => mainContainer(deployment).ports.find((p: { name: string }) => p.name === name)?.containerPort;
  const envValue = (deployment: K8sObject, name: string) => envOf(deployment).find((v) => v.name === name)?.value;
  /** The chart sets the variable to the service's own default (the image's HEALTHCHECK and the all-in-one use that). */
  const isDefault = (service: string, variable: string) => {
    const env = { ...imageEnv(service), ...resolvedEnv(theOne(main.objects, 'Deployment', service), secretsOf(main)) };
    const { [variable]: _dropped, ...without } = env;
    return JSON.stringify(runConfig(serviceConfig(service), without).config) === JSON.stringify(runConfig(serviceConfig(service), env).config);
  };

  it.each(grpcServices)('%s (gRPC) is probed with the native gRPC health probe on the port it listens on', (service) => {
    const deployment = theOne(main.objects, 'Deployment', service);
    const container = mainContainer(deployment);
    const port = Number(envValue(deployment, 'GRPC_PORT'));
    expect(isDefault(service, 'GRPC_PORT')).toBe(true);
    expect(portOf(deployment, 'grpc')).toBe(port);
    expect(container.readinessProbe.grpc).toEqual({ port });
    expect(container.startupProbe.grpc).toEqual({ port });
    // Liveness is the ops port's /healthz: a dependency outage must not restart the pod.
    expect(portOf(deployment, 'ops')).toBe(Number(envValue(deployment, 'OPS_PORT')));
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'ops' });
    expect(theOne(main.objects, 'Service', service).spec.ports).toContainEqual({ name: 'grpc', port, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' });
  });

  it.each(services.filter((s) => !grpcServices.includes(s)))('%s (HTTP) is probed on /healthz and /readyz of the port it serves them on', (service) => {
    const deployment = theOne(main.objects, 'Deployment', service);
    const container = mainContainer(deployment);
    const portName = service === 'gateway' ? 'http' : 'ops';
    expect(portOf(deployment, portName)).toBe(Number(envValue(deployment, service === 'gateway' ? 'PORT' : 'OPS_PORT')));
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: portName });
    expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: portName });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: portName });
  });

  /** The variable of a service's ops port: the gateway's is METRICS_PORT (its public port never serves /metrics). */
  const opsVariable = (service: string) => (service === 'gateway' ? 'METRICS_PORT' : 'OPS_PORT');

  it('gives every service a distinct ops port: the default its code and its image expect', () => {
    const ports = services.map((s) => Number(envValue(theOne(main.objects, 'Deployment', s), opsVariable(s))));
    expect(new Set(ports).size).toBe(services.length);
    for (const [i, service] of services.entries()) {
      expect(portOf(theOne(main.objects, 'Deployment', service), 'ops')).toBe(ports[i]);
      expect(theOne(main.objects, 'Service', service).spec.ports).toContainEqual(expect.objectContaining({ name: 'ops', targetPort: 'ops' }));
      expect({ service, isDefault: isDefault(service, opsVariable(service)) }).toEqual({ service, isDefault: true });
      // The image's HEALTHCHECK and EXPOSE name the port it is told to use.
      expect(read('services', service, 'Dockerfile')).toContain(`|| ${ports[i]})`);
    }
  });
});

describe('rolling restarts: the gateway drains before it stops', () => {
  it('keeps serving for preStopSeconds (sleep in preStop) while it leaves the endpoints, within the termination grace', () => {
    const deployment = theOne(main.objects, 'Deployment', 'gateway');
    expect(mainContainer(deployment).lifecycle).toEqual({ preStop: { exec: { command: ['sleep', String(chartValues.gateway.preStopSeconds)] } } });
    // preStop, then SIGTERM: the shutdown's steps (25 s at most each, the HTTP server's 5 s grace first) fit in what is left.
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(chartValues.gateway.preStopSeconds + 25);
  });

  it('sets BUS_STREAM_REPLICAS from nats.streamReplicas on every service that reads NATS_URL, and on the bus provisioning Job', () => {
    const replicas = template({ values: ['ci/external-values.yaml'], set: ['nats.streamReplicas=3'] });
    const withBus = [...deployments(replicas), ...ofKind(replicas.objects, 'Job')].filter((d) => envOf(d).some((v) => v.name === 'NATS_URL'));
    expect(withBus.map((d) => d.kind)).toContain('Job');
    expect(withBus.length).toBeGreaterThan(6);
    for (const d of withBus) expect({ service: componentOf(d), value: envOf(d).find((v) => v.name === 'BUS_STREAM_REPLICAS')?.value }).toEqual({ service: componentOf(d), value: '3' });
  });
});

describe('env: what the chart gives each service is what the service reads', () => {
  const runtime = runtimeEnv();
  const cases = CI_VALUES.flatMap((file) => deployments(renders.get(file)!).map((d): [string, string] => [file, componentOf(d)!]));

  it.each(cases)('%s: %s starts with it, on no loopback default, reading every variable set', (file, service) => {
    const render = renders.get(file)!;
    const run = configIn(render, service);
    expect(run.error).toBeUndefined();
    // An address or URL left at its default would point the pod at itself.
    expect(JSON.stringify(run.config)).not.toMatch(/127\.0\.0\.1|localhost/);
    const userSet = new Set<string>((valuesOf(file)[keyOf(service)].extraEnv ?? []).map((v: { name: string }) => v.name));
    const unread = envOf(theOne(render.objects, 'Deployment', service))
      .map((v) => v.name)
      .filter((name) => !run.reads.has(name) && !runtime.has(name) && !userSet.has(name));
    expect(unread).toEqual([]);
    // The fast clock is for demos and tests.
    expect(envOf(theOne(render.objects, 'Deployment', service)).map((v) => v.name)).not.toContain('DELAY_MINUTE_MS');
  });

  it.each(CI_VALUES)('%s: the hook Jobs start with their env, and agree with the services on the bus', (file) => {
    const render = renders.get(file)!;
    for (const job of ofKind(render.objects, 'Job')) {
      const run = runConfig(JOB_CONFIG[componentOf(job) as keyof typeof JOB_CONFIG], resolvedEnv(job, secretsOf(render)));
      expect({ job: job.metadata.name, error: run.error }).toEqual({ job: job.metadata.name, error: undefined });
      expect(envOf(job).map((v) => v.name).filter((name) => !run.reads.has(name))).toEqual([]);
    }
    // The provisioning Job creates the bucket with the TTL the gateway and the senders are given.
    const provision = ofKind(render.objects, 'Job').find((j) => componentOf(j) === 'provision-bus');
    for (const variable of ['CHANNEL_TTL_MS', 'BUS_PREFIX']) {
      const values = new Set([provision, ...deployments(render)].filter((w): w is K8sObject => !!w).flatMap((w) => envOf(w).filter((v) => v.name === variable).map((v) => v.value)));
      expect({ variable, values: [...values] }).toEqual({ variable, values: [String(valuesOf(file)[variable === 'BUS_PREFIX' ? 'busPrefix' : 'channelTtlMs'])] });
    }
  });

  it('reads every secret from a key the chart’s Secret holds when every credential is set', () => {
    const [secret] = ofKind(full.objects, 'Secret');
    const refs = [...deployments(full), ...ofKind(full.objects, 'Job')].flatMap((w) => envOf(w).flatMap((v) => (v.valueFrom?.secretKeyRef ? [v.valueFrom.secretKeyRef] : [])));
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of refs) expect({ ref, held: ref.name === secret.metadata.name && ref.key in secret.stringData }).toEqual({ ref, held: true });
    // And a changed Secret rolls the pods that read it.
    for (const d of deployments(full)) expect(d.spec.template.metadata.annotations['checksum/secret']).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('architecture: the NetworkPolicies are the arrows the services call', () => {
  const ADDR_OF: Record<string, string> = { CONTACTS_ADDR: 'contacts', SCHEDULER_ADDR: 'cascade-scheduler', WEBHOOKS_ADDR: 'webhooks', CONNECTORS_ADDR: 'connectors' };
  const policies = (render: Render) => ofKind(render.objects, 'NetworkPolicy');
  const policyOf = (render: Render, service: string) => theOne(render.objects, 'NetworkPolicy', service);
  const values = valuesOf('ci/external-values.yaml');

  it('lets each gRPC service be called by exactly the services that read its address', () => {
    const callers: Record<string, string[]> = {};
    for (const service of services) for (const variable of readsOf(service)) if (ADDR_OF[variable]) (callers[ADDR_OF[variable]] ??= []).push(service);
    expect(Object.keys(callers).sort()).toEqual([...grpcServices].sort());
    for (const [callee, from] of Object.entries(callers)) {
      const service = theOne(main.objects, 'Service', callee);
      const port = service.spec.ports.find((p: { name: string }) => p.name === 'grpc').port;
      const variable = Object.keys(ADDR_OF).find((k) => ADDR_OF[k] === callee)!;
      const admitted = policyOf(main, callee).spec.ingress.filter((rule: any) => rule.ports.some((p: any) => p.port === port));
      expect(admitted.flatMap((rule: any) => rule.from.map((peer: any) => peer.podSelector.matchLabels['app.kubernetes.io/component'])).sort()).toEqual([...from].sort());
      for (const caller of from) {
        const env = envOf(theOne(main.objects, 'Deployment', caller)).find((v) => v.name === variable);
        // The headless Service: the caller resolves every ready replica and balances round robin.
        expect(env?.value).toBe(`dns:///${service.metadata.name}-grpc:${port}`);
        const headless = theOne(main.objects, 'Service', `${callee}-grpc`);
        expect(headless.metadata.name).toBe(`${service.metadata.name}-grpc`);
        expect(headless.spec.clusterIP).toBe('None');
        expect(headless.spec.selector).toEqual(service.spec.selector);
        expect(headless.spec.ports).toEqual([{ name: 'grpc', port, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }]);
        const egress = policyOf(main, caller).spec.egress.filter((rule: any) => rule.to?.some((peer: any) => peer.podSelector?.matchLabels['app.kubernetes.io/component'] === callee));
        expect({ caller, callee, ports: egress.flatMap((rule: any) => rule.ports) }).toEqual({ caller, callee, ports: [{ protocol: 'TCP', port }] });
      }
    }
  });

  it('lets a service reach PostgreSQL, NATS and Redis exactly when it reads their URL, at the addresses set', () => {
    const fullValues = valuesOf('ci/full-values.yaml');
    for (const service of services) {
      const egress = policyOf(full, service).spec.egress;
      for (const [variable, store, peers] of [['DATABASE_URL', 'postgresql', 'postgresqlTo'], ['NATS_URL', 'nats', 'natsTo'], ['REDIS_URL', 'redis', 'redisTo']]) {
        const rules = egress.filter((rule: any) => rule.ports?.some((p: any) => p.port === fullValues[store].port));
        expect({ service, variable, rules: rules.length }).toEqual({ service, variable, rules: readsOf(service).has(variable) ? 1 : 0 });
        for (const rule of rules) expect(rule).toEqual({ to: fullValues.networkPolicy[peers], ports: [{ protocol: 'TCP', port: fullValues[store].port }] });
      }
    }
  });

  it('lets only the gateway, the CRM webhooks of connectors (and SMSC and Postmark receipts and the bots’ webhooks, when on) take traffic from the ingress controller', () => {
    const fromController = (render: Render) =>
      policies(render).flatMap((np) => (np.spec.ingress ?? []).filter((rule: any) => JSON.stringify(rule.from) === JSON.stringify(values.networkPolicy.ingressControllerFrom)).map((rule: any) => `${componentOf(np)}:${rule.ports[0].port}`));
    expect(fromController(main).sort()).toEqual(['connectors:8090', 'gateway:8080']);
    expect(fromController(renders.get('ci/existing-secret-values.yaml')!).sort()).toEqual(['channel-email:9473', 'channel-messenger:9474', 'channel-sms:9470', 'connectors:8090', 'gateway:8080']);
    expect(chartValues.channelEmail.receipts.ingress.enabled).toBe(false);
    expect(chartValues.channelMessenger.bots.ingress.enabled).toBe(false);
    expect(chartValues.channelMessenger.greenapiReceipts.ingress.enabled).toBe(false);
    // GREEN-API's receipts share the bots' port: its route alone opens that port, once.
    const receiptsOnly = template({ values: ['ci/external-values.yaml'], set: ['channelMessenger.greenapiReceipts.ingress.enabled=true'] });
    expect(fromController(receiptsOnly).filter((rule) => rule.startsWith('channel-messenger'))).toEqual(['channel-messenger:9474']);
    expect(chartValues.channelSms.receipts.ingress.enabled).toBe(false);
  });

  it('lets only the senders, webhooks and connectors leave the cluster, and not into its private ranges', () => {
    const leaving = policies(main).filter((np) => (np.spec.egress ?? []).some((rule: any) => rule.to?.some((p: any) => p.ipBlock)));
    expect(leaving.map(componentOf).sort()).toEqual(['channel-email', 'channel-messenger', 'channel-sms', 'connectors', 'webhooks']);
    for (const np of leaving) expect(np.spec.egress.flatMap((r: any) => r.to ?? []).filter((p: any) => p.ipBlock)).toEqual([{ ipBlock: { cidr: '0.0.0.0/0', except: values.networkPolicy.externalEgressExcept } }]);
    // The connectors reach the CRM APIs on their https ports only.
    for (const render of [main, full]) {
      const outside = policyOf(render, 'connectors').spec.egress.filter((r: any) => r.to?.some((p: any) => p.ipBlock?.cidr === '0.0.0.0/0'));
      expect(outside.map((r: any) => r.ports)).toEqual([(render === full ? valuesOf('ci/full-values.yaml') : values).connectors.crmPorts.map((port: number) => ({ protocol: 'TCP', port }))]);
    }
  });

  it('denies everything else: one default-deny policy for every pod of the release, metrics scrapers on the ops ports only', () => {
    const deny = policies(main).filter((np) => !np.spec.ingress && !np.spec.egress);
    expect(deny.map((np) => [np.spec.podSelector, np.spec.policyTypes])).toEqual([[{ matchLabels: { 'app.kubernetes.io/name': 'review-request-service', 'app.kubernetes.io/instance': 'rrs' } }, ['Ingress', 'Egress']]]);
    for (const service of services) {
      const opsPort = theOne(main.objects, 'Deployment', service).spec.template.spec.containers[0].ports.find((p: any) => p.name === 'ops').containerPort;
      expect(policyOf(main, service).spec.ingress).toContainEqual({ from: values.networkPolicy.metricsFrom, ports: [{ protocol: 'TCP', port: opsPort }] });
    }
    // The scrapers never reach the gateway's public port, nor does the ServiceMonitor scrape it.
    const fromScrapers = policyOf(main, 'gateway').spec.ingress.filter((rule: any) => JSON.stringify(rule.from) === JSON.stringify(values.networkPolicy.metricsFrom));
    expect(fromScrapers.flatMap((rule: any) => rule.ports.map((p: any) => p.port))).toEqual([9472]);
    expect(ofKind(full.objects, 'ServiceMonitor').flatMap((m) => m.spec.endpoints.map((e: any) => e.port))).toEqual(['ops']);
  });

  it('keeps what leaves the cluster out of every IANA special-purpose IPv4 range', () => {
    const SPECIAL = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4'];
    for (const np of policies(main)) {
      for (const block of np.spec.egress?.flatMap((r: any) => r.to ?? []).filter((p: any) => p.ipBlock) ?? []) {
        expect({ policy: np.metadata.name, except: [...block.ipBlock.except].sort() }).toEqual({ policy: np.metadata.name, except: [...SPECIAL].sort() });
      }
    }
  });

  it('routes the Ingress to the gateway’s public paths, the CRM webhooks to connectors, and SMSC and Postmark receipts and the bots’ webhooks to their senders when on', () => {
    const backends = (render: Render) => {
      const [ingress, ...others] = ofKind(render.objects, 'Ingress');
      expect(others).toEqual([]);
      return ingress.spec.rules[0].http.paths.map((p: any) => {
        const service = ofKind(render.objects, 'Service').find((s) => s.metadata.name === p.backend.service.name)!;
        expect(service.spec.ports.map((port: any) => port.name)).toContain(p.backend.service.port.name);
        return `${p.path} → ${componentOf(service)}`;
      });
    };
    expect(backends(main)).toEqual([...chartValues.gateway.ingress.paths.map((p: string) => `${p} → gateway`), '/hooks/crm → connectors']);
    expect(backends(renders.get('ci/existing-secret-values.yaml')!)).toEqual(expect.arrayContaining(['/receipts/smsc → channel-sms', '/receipts/postmark → channel-email', '/bots → channel-messenger', '/receipts/greenapi → channel-messenger']));
  });

  it('routes the console (/app) and its account API (/account) to the gateway, so the console and every emailed console link work', () => {
    const gatewayPaths = ofKind(main.objects, 'Ingress')[0].spec.rules[0].http.paths.filter((p: any) => p.backend.service.name === theOne(main.objects, 'Service', 'gateway').metadata.name);
    for (const path of ['/app', '/account']) expect(gatewayPaths.find((p: any) => p.path === path)).toMatchObject({ pathType: 'Prefix', backend: { service: { port: { name: 'http' } } } });
  });

  it('routes the admin API on the Ingress only when the operator opts in (gateway.ingress.exposeAdmin)', () => {
    const paths = (render: Render) => ofKind(render.objects, 'Ingress')[0].spec.rules[0].http.paths.map((p: any) => p.path);
    expect(chartValues.gateway.ingress.exposeAdmin).toBe(false);
    for (const render of renders.values()) if (ofKind(render.objects, 'Ingress').length) expect(paths(render).some((p: string) => p.startsWith('/admin'))).toBe(false);
    const opted = template({ values: ['ci/external-values.yaml'], set: ['gateway.ingress.exposeAdmin=true'] });
    const admin = ofKind(opted.objects, 'Ingress')[0].spec.rules[0].http.paths.find((p: any) => p.path === '/admin');
    expect(admin.backend.service).toEqual({ name: theOne(opted.objects, 'Service', 'gateway').metadata.name, port: { name: 'http' } });
  });

  it('gives channel-email its DKIM keys from the Secret: it starts signing with every selector; a relay that signs is the explicit opt-out', () => {
    const email = theOne(full.objects, 'Deployment', 'channel-email');
    expect(envOf(email).find((v) => v.name === 'DKIM_PRIVATE_KEYS')).toMatchObject({ valueFrom: { secretKeyRef: { key: 'DKIM_PRIVATE_KEYS' } } });
    const signing = configIn(full, 'channel-email').config as { authentication: { dkim: { domain: string; keys: Array<{ selector: string }> } } };
    expect(signing.authentication.dkim.domain).toBe('example.com');
    expect(signing.authentication.dkim.keys.map((k) => k.selector)).toEqual(['rrs2026b', 'rrs2026a']);
    expect(configIn(main, 'channel-email').config).toMatchObject({ authentication: { dkim: undefined, dkimSignedByRelay: true } });
  });

  it('gives the gateway TRUST_PROXY: the one ingress hop by default, as the operator sets it', () => {
    expect(envOf(theOne(main.objects, 'Deployment', 'gateway')).find((v) => v.name === 'TRUST_PROXY')?.value).toBe('1');
    expect(configIn(main, 'gateway').config).toMatchObject({ trustProxy: 1 });
    const cidrs = template({ values: ['ci/external-values.yaml'], set: ['gateway.trustProxy="10.0.0.0/8"'] });
    expect(envOf(theOne(cidrs.objects, 'Deployment', 'gateway')).find((v) => v.name === 'TRUST_PROXY')?.value).toBe('10.0.0.0/8');
  });
});

describe('hook Jobs: the migrations the services apply, and the bus provisioning', () => {
  const jobs = ofKind(main.objects, 'Job');
  const hooks = (o: K8sObject) => [o.metadata.annotations?.['helm.sh/hook'], o.metadata.annotations?.['helm.sh/hook-weight']];

  it('migrates, in each service image, exactly what the service migrates at start', () => {
    const idempotencyComponent = /IDEMPOTENCY_COMPONENT = '([a-z-]+)'/.exec(read('packages', 'idempotency', 'src', 'idempotency.ts'))?.[1];
    const senderKitComponent = /component: '([a-z-]+)'/.exec(read('packages', 'sender-kit', 'src', 'sendLog.ts'))?.[1];
    expect([idempotencyComponent, senderKitComponent]).toEqual(['idempotency', 'sender-kit']);
    for (const service of services) {
      const code = read('services', service, 'src', 'service.ts');
      const schema = /export const SCHEMA = '([a-z_]+)'/.exec(code)?.[1];
      const job = jobs.filter((j) => j.metadata.labels?.['rrs.example.com/service'] === service);
      if (!schema) {
        expect({ service, jobs: job.length }).toEqual({ service, jobs: 0 });
        continue;
      }
      const expected = ['--schema', schema];
      if (/migrate\(pool, \{[^}]*dir: MIGRATIONS_DIR/.test(code) || /migrations: \[\{ dir: MIGRATIONS_DIR \}/.test(code)) {
        expect(existsSync(join(ROOT, 'services', service, 'migrations'))).toBe(true);
        expected.push('service=migrations');
      }
      if (/IDEMPOTENCY_MIGRATIONS(_DIR)?\b/.test(code)) expected.push(`${idempotencyComponent}=node_modules/@rrs/idempotency/migrations`);
      if (/startChannelSender|openSendLog/.test(code)) expected.push(`${senderKitComponent}=node_modules/@rrs/sender-kit/migrations`);
      expect({ service, jobs: job.length, args: mainContainer(job[0]).args }).toEqual({ service, jobs: 1, args: expected });
      expect(mainContainer(job[0]).command).toEqual(['node', 'node_modules/@rrs/runtime/dist/bin/migrate.js']);
      expect(mainContainer(job[0]).image).toBe(mainContainer(theOne(main.objects, 'Deployment', service)).image);
      expect(hooks(job[0])).toEqual(['pre-install,pre-upgrade', '0']);
    }
    // The folders the Jobs point at are the ones the packages ship (pack-service copies migrations/).
    expect(existsSync(join(ROOT, 'packages', 'idempotency', 'migrations'))).toBe(true);
    expect(existsSync(join(ROOT, 'packages', 'sender-kit', 'migrations'))).toBe(true);
  });

  it('provisions the bus before the migrations, after the Secret and ServiceAccount they use exist', () => {
    const provision = jobs.find((j) => componentOf(j) === 'provision-bus')!;
    expect(mainContainer(provision).command).toEqual(['node', 'node_modules/@rrs/runtime/dist/bin/provision-bus.js']);
    expect(existsSync(join(ROOT, 'packages', 'runtime', 'src', 'bin', 'provision-bus.ts'))).toBe(true);
    expect(existsSync(join(ROOT, 'packages', 'runtime', 'src', 'bin', 'migrate.ts'))).toBe(true);
    expect(hooks(provision)).toEqual(['pre-install,pre-upgrade', '-10']);
    const [secret] = ofKind(main.objects, 'Secret');
    expect(hooks(secret)).toEqual(['pre-install,pre-upgrade', '-20']);
    const jobAccount = ofKind(main.objects, 'ServiceAccount').find((sa) => sa.metadata.name === podSpec(provision).serviceAccountName)!;
    expect(hooks(jobAccount)).toEqual(['pre-install,pre-upgrade', '-20']);
    for (const job of jobs) expect(podSpec(job).serviceAccountName).toBe(jobAccount.metadata.name);
  });

  it('alerts on a messenger account that cannot send, by the gauge channel-messenger exports, when the PrometheusRule is on', () => {
    const full = renders.get('ci/full-values.yaml')!;
    const [rule] = ofKind(full.objects, 'PrometheusRule');
    const alerts = (rule.spec as { groups: Array<{ rules: Array<{ alert: string; expr: string; for: string }> }> }).groups.flatMap((group) => group.rules);
    expect(alerts.map((alert) => alert.alert)).toEqual(['MessengerAccountUnavailable']);
    const metric = /name: '([a-z_]+)'/.exec(read('services/channel-messenger/src/health.ts'))![1];
    expect(alerts[0]).toMatchObject({ expr: `max by (channel, instance) (${metric}) == 0`, for: '5m' });
    for (const [file, render] of renders) if (!valuesOf(file).metrics?.prometheusRule?.enabled) expect(ofKind(render.objects, 'PrometheusRule')).toEqual([]);
  });
});
