export { buildConfig, type AllInOneConfig } from './config';
export { startAllInOne, type DevelopmentAllInOne, type RunningAllInOne } from './launcher';
export { startEmbeddedPostgres } from './embeddedPostgres';
