export { buildConfig, type ContactsConfig } from './config';
export { startContacts, type RunningContacts, SCHEMA, MIGRATIONS_DIR } from './service';
export { Directory, type Organization, type Location, type ApiKeyRecord } from './directory';
export { generateApiKey, isWellFormedApiKey } from './apiKeys';
