export { buildConfig, type ContactsConfig } from './config';
export { startContacts, type RunningContacts, type StartContactsConfig, SCHEMA, MIGRATIONS_DIR } from './service';
export { Directory, type Organization, type Location, type ApiKeyRecord, type ReviewLink } from './directory';
export { ContactBook, type Contact, type ContactSubmission } from './contactBook';
export { Templates, KNOWN_CHANNELS, PLACEHOLDERS, defaultTemplate, type MessageTemplate } from './templates';
export { ChannelSettings, type ChannelConfiguration } from './channels';
export { SmsBalance } from './smsBalance';
export { generateApiKey, isWellFormedApiKey } from './apiKeys';
export { Members, normalizeEmail, type Member, type Invitation, type Session, type OpenedSession } from './members';
