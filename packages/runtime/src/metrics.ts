import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from 'prom-client';

/**
 * One registry per process. In the all-in-one mode several services share a process, so metrics are
 * get-or-create by name: two services asking for the same metric get the same instance.
 */
export const registry = new Registry();
let defaultsCollected = false;

export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry });
}

export function counter<L extends string>(config: Omit<CounterConfiguration<L>, 'registers'>): Counter<L> {
  return (registry.getSingleMetric(config.name) as Counter<L> | undefined) ?? new Counter({ ...config, registers: [registry] });
}

export function gauge<L extends string>(config: Omit<GaugeConfiguration<L>, 'registers'>): Gauge<L> {
  return (registry.getSingleMetric(config.name) as Gauge<L> | undefined) ?? new Gauge({ ...config, registers: [registry] });
}

export function histogram<L extends string>(config: Omit<HistogramConfiguration<L>, 'registers'>): Histogram<L> {
  return (registry.getSingleMetric(config.name) as Histogram<L> | undefined) ?? new Histogram({ ...config, registers: [registry] });
}

/** Latency buckets in seconds, from 1 ms to 10 s. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
