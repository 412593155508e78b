export { buildConfig, type GatewayConfig } from './config';
export { startGateway, type RunningGateway } from './service';
export { createApp } from './app';
