import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { read, registeredMetrics, ROOT } from './repo';

/*
 * The dashboard and the alert rules in deploy/observability query metrics by name; these tests keep them
 * pointed at metrics the code really registers, and the alerts at runbook sections that exist.
 */

const dashboard = JSON.parse(read('deploy', 'observability', 'grafana-dashboard.json'));
const rules = YAML.parse(read('deploy', 'observability', 'prometheus-rules.yaml'));
const runbook = read('docs', 'operations.md');

interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ expr: string; refId: string }>;
}
const panels: Panel[] = dashboard.panels;
const alerts: Array<{ alert: string; expr: string; labels: { severity: string }; annotations: Record<string, string> }> = rules.groups.flatMap((g: { rules: unknown[] }) => g.rules);

/** Metric names in a PromQL expression: identifiers followed by `{`, `[` or used bare inside a function call. */
function metricsIn(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const names = new Set<string>();
  for (const m of withoutStrings.matchAll(/\b([a-z_][a-z0-9_]*)\s*(?=\{|\[)/g)) names.add(m[1]);
  return [...names];
}

const PROCESS_METRICS = /^(process_|nodejs_)/;

function known(name: string, registered: Set<string>): boolean {
  if (PROCESS_METRICS.test(name)) return true;
  return registered.has(name) || registered.has(name.replace(/_(bucket|count|sum)$/, ''));
}

/** GitHub-style anchors of the runbook's headings. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const m of markdown.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    out.add(
      m[1]
        .trim()
        .toLowerCase()
        .replace(/[^\w\s-]/g, '')
        .replace(/\s/g, '-'),
    );
  }
  return out;
}

describe('Grafana dashboard', () => {
  const registered = registeredMetrics();

  it('is a dashboard with unique panel ids and a query on every graph', () => {
    expect(dashboard.uid).toBe('rrs-overview');
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const graphs = panels.filter((x) => x.type !== 'row');
    expect(graphs.length).toBeGreaterThan(10);
    const empty = graphs.filter((p) => !(p.targets ?? []).length || (p.targets ?? []).some((t) => !t.expr)).map((p) => p.title);
    expect(empty).toEqual([]);
  });

  it('queries only metrics the services register', () => {
    const unknown = panels.flatMap((p) => (p.targets ?? []).flatMap((t) => metricsIn(t.expr))).filter((name) => !known(name, registered));
    expect(unknown).toEqual([]);
  });

  it.each([
    ['RED per HTTP route', /sum by \(route\) \(rate\(http_server_request_duration_seconds_count/],
    ['RED per gRPC method', /sum by \(service, method\) \(rate\(grpc_server_handling_seconds_count/],
    ['consumer lag', /bus_consumer_pending_messages/],
    ['dispatch lateness', /scheduler_step_lateness_seconds_bucket/],
    ['sends by channel and result', /sum by \(channel, result\) \(rate\(sender_sends_total/],
    ['webhook attempts by outcome', /sum by \(outcome\) \(rate\(webhook_attempts_total/],
    ['idempotent replays', /idempotent_replays_total/],
    ['rate-limit rejections', /gateway_rate_limited_total/],
    ['webhook deliveries pending by state', /max by \(state\) \(webhook_deliveries_pending/],
  ])('shows %s', (_what, pattern) => {
    expect(panels.some((p) => (p.targets ?? []).some((t) => pattern.test(t.expr)))).toBe(true);
  });
});

describe('Prometheus alert rules', () => {
  const registered = registeredMetrics();

  it('alert only on metrics the services register', () => {
    const unknown = alerts.flatMap((a) => metricsIn(a.expr)).filter((name) => !known(name, registered));
    expect(unknown).toEqual([]);
  });

  it('have a unique name, a severity, a summary and a runbook section that exists', () => {
    const names = alerts.map((a) => a.alert);
    expect(new Set(names).size).toBe(names.length);
    const sections = anchors(runbook);
    for (const a of alerts) {
      expect({ alert: a.alert, severity: a.labels?.severity }).toEqual({ alert: a.alert, severity: expect.stringMatching(/^(info|warning|critical)$/) });
      expect(a.annotations.summary).toBeTruthy();
      const anchor = /^docs\/operations\.md#([\w-]+)$/.exec(a.annotations.runbook)?.[1];
      expect({ alert: a.alert, section: anchor && sections.has(anchor) ? anchor : `missing: ${a.annotations.runbook}` }).toEqual({ alert: a.alert, section: anchor });
    }
  });

  it.each([
    ['lateness p99', /histogram_quantile\(0\.99, sum by \([^)]*\) \(rate\(scheduler_step_lateness_seconds_bucket/],
    ['consumer lag', /bus_consumer_pending_messages\{consumer!="webhooks"\}/],
    ['failure rate', /sender_sends_total\{result=~"failed\|dead_letter"\}/],
    ['webhook backlog (deliveries due)', /webhook_deliveries_pending\{state="due"\}/],
    ['webhook intake lag', /bus_consumer_pending_messages\{consumer="webhooks"\}/],
  ])('cover %s', (_what, pattern) => {
    expect(alerts.some((a) => pattern.test(a.expr))).toBe(true);
  });

  it('reads the consumer names the code uses', () => {
    const consumers = new Set(alerts.flatMap((a) => [...a.expr.matchAll(/consumer[!=]~?"([\w-]+)"/g)].map((m) => m[1])));
    const intake = readFileSync(join(ROOT, 'services', 'webhooks', 'src', 'intake.ts'), 'utf8');
    for (const c of consumers) expect(intake).toContain(`durable: '${c}'`);
  });

  it('reads the delivery states the webhooks service reports', () => {
    const exprs = [...alerts.map((a) => a.expr), ...panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))];
    const states = new Set(exprs.flatMap((e) => [...e.matchAll(/webhook_deliveries_pending\{[^}]*state="(\w+)"/g)].map((m) => m[1])));
    expect(states.size).toBeGreaterThan(0);
    const backlog = readFileSync(join(ROOT, 'services', 'webhooks', 'src', 'backlog.ts'), 'utf8');
    for (const s of states) expect({ state: s, reported: backlog.includes(`state: '${s}'`) }).toEqual({ state: s, reported: true });
  });
});
