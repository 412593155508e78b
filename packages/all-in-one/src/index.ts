export { buildConfig, type AllInOneConfig } from './config';
export { startAllInOne, type RunningAllInOne } from './launcher';
export { startEmbeddedPostgres } from './embeddedPostgres';
