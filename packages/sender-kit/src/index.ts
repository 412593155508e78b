/** What every channel sender shares: consuming due steps, reporting outcomes, config, the sink provider. */
export * from './sender';
export * from './sink';
export * from './config';
