/**
 * What every channel sender shares: the channel registry (catalog entries in the KV bucket `channels`),
 * consuming due steps with sorted errors and a send log, reporting outcomes, the sink provider and the
 * dev inbox of the all-in-one mode.
 */
export * from './errors';
export * from './http';
export * from './result';
export * from './registry';
export * from './sendLog';
export * from './sender';
export * from './providers';
export * from './providerOrder';
export * from './providerRate';
export * from './sink';
export * from './template';
export * from './inbox';
export * from './config';
export * from './service';
export * from './receipts';
export * from './smsParts';
export * from './emailMessage';
export * from './smsText';
export * from './messengerText';
export * from './alertText';
export * from './personErasure';
export * from './sendHistory';
export * from './waitLine';
