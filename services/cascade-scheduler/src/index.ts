export { buildConfig, type SchedulerConfig } from './config';
export { startScheduler, type RunningScheduler, type SchedulerDeps, SCHEMA, MIGRATIONS_DIR } from './service';
export { publishDueStep, consumeStepResults } from './stepBus';
export { Flows, type Flow, type FlowStep } from './flows';
