/** The repository as the chart and observability tests read it: services, their images and their metrics. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..');

export const read = (...parts: string[]) => readFileSync(join(ROOT, ...parts), 'utf8');

/** The services: every folder of services/ with a Dockerfile. */
export function serviceNames(): string[] {
  return readdirSync(join(ROOT, 'services'))
    .filter((name) => existsSync(join(ROOT, 'services', name, 'Dockerfile')))
    .sort();
}

/** `ENV NAME=value` lines of a service's Dockerfile: the environment its container starts with. */
export function imageEnv(service: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of read('services', service, 'Dockerfile').matchAll(/^ENV\s+([A-Z][A-Z0-9_]*)=(\S+)\s*$/gm)) env[m[1]] = m[2];
  return env;
}

/** Env variables read by the runtime itself, outside the services' configs (the OpenTelemetry SDK). */
export function runtimeEnv(): Set<string> {
  return new Set(read('packages', 'runtime', 'src', 'otel.ts').match(/OTEL_[A-Z_]+/g) ?? []);
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
