export { buildConfig, type GatewayConfig } from './config';
export { startGateway, type RunningGateway, type GatewayStartConfig, type GatewayDeps } from './service';
export { createApp, type AppDeps } from './app';
export { renderDocsPage } from './docsPage';
export * from './routes/registry';
export { publicRoutes, type PublicRouteDeps } from './routes';
export { errorCodesOf, buildOpenApiDocument } from './openapi';
export { ERROR_CODES } from './errors';
export { startChannelCatalog, type ChannelCatalogSource, type RunningChannelCatalog } from './catalog/channelCatalog';
