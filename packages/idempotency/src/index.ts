/** Idempotency-Key support: saved responses written in the effect's own transaction. */
export * from './fingerprint';
export * from './idempotency';
export * from './secretReplay';
