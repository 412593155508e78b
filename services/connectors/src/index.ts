export { amoCrmOAuthEnvShape, amoCrmOAuthOf, buildConfig, DEFAULT_CONNECTOR_POLICY, DEFAULT_AMOCRM_AUTHORIZE_URL, type AmoCrmOAuthApp, type ConnectorsConfig, type ConnectorPolicy } from './config';
export { startConnectors, SCHEMA, MIGRATIONS_DIR, type RunningConnectors, type StartConnectorsConfig, type ConnectorsDeps } from './service';
export { Connectors } from './connectors';
export type { ReviewServices } from './reviewServices';
export { CONNECTORS_SERVICE_NAME } from './grpcApi';
