/** The service runtime kit: config, logs, metrics, traces, health, shutdown, Postgres, gRPC and the bus. */
export * from './errors';
export * from './config';
export * from './logger';
export * from './metrics';
export * from './tracing';
export * from './health';
export * from './lifecycle';
export * from './db';
export * from './grpc';
export * from './bus';
export * from './ids';
export * from './service';
export * from './otel';
export * from './busObservability';
export * from './deployJobs';
export * from './notifier';
export * from './dueWork';
