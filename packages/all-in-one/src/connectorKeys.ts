import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSecretKey, parseSecretKeys, type Logger } from '@rrs/runtime';

/** Where the all-in-one keeps its generated connector key when CONNECTOR_SECRET_KEYS is not set. */
export const CONNECTOR_KEY_FILE = 'connector-secret-keys';
/** Where the all-in-one keeps its generated person hash key when PERSON_HASH_KEY is not set. */
export const PERSON_HASH_KEY_FILE = 'person-hash-key';
/** Where the all-in-one keeps its generated webhook-secret key when WEBHOOK_SECRET_KEYS is not set. */
export const WEBHOOK_KEY_FILE = 'webhook-secret-keys';

/** One set of secret-box keys the all-in-one keeps in its data folder when its variable is not set. */
interface KeptKeys {
  file: string;
  variable: string;
  /** What the keys seal, for the log lines. */
  sealing: string;
}

/**
 * The keys of a secret box: the variable's keys when given, else the key(s) in `<dataDir>/<file>`, made
 * on first start (one random key, mode 0600) and read on every later one, so what is sealed in the
 * database stays readable across restarts.
 */
function keptSecretKeys(kept: KeptKeys, options: { given?: Buffer[]; dataDir: string; logger: Logger }): Buffer[] {
  const file = join(options.dataDir, kept.file);
  if (options.given) {
    const given = options.given;
    // Moving from the generated key to keys of one's own: the old key must stay in the list to open what it sealed.
    if (existsSync(file) && parseSecretKeys(readFileSync(file, 'utf8'), file).some((key) => !given.some((g) => g.equals(key)))) {
      options.logger.warn({ file }, `${kept.variable} lacks the key kept in this file: ${kept.sealing} sealed with it cannot be read; add it after your keys`);
    }
    return given;
  }
  mkdirSync(options.dataDir, { recursive: true });
  try {
    // `wx`: never overwrite a key another start made meanwhile; that one is read below.
    writeFileSync(file, generateSecretKey() + '\n', { mode: 0o600, flag: 'wx' });
    options.logger.info({ file }, `generated the key that seals ${kept.sealing} (keep it with the database)`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  if ((statSync(file).mode & 0o077) !== 0) {
    chmodSync(file, 0o600);
    options.logger.warn({ file }, 'the key file was readable by others; its mode is now 0600');
  }
  return parseSecretKeys(readFileSync(file, 'utf8'), file);
}

/** The keys that seal the CRM credentials of the connectors (CONNECTOR_SECRET_KEYS or `connector-secret-keys`). */
export function connectorSecretKeys(options: { given?: Buffer[]; dataDir: string; logger: Logger }): Buffer[] {
  return keptSecretKeys({ file: CONNECTOR_KEY_FILE, variable: 'CONNECTOR_SECRET_KEYS', sealing: 'CRM connector credentials' }, options);
}

/** The keys that seal the webhook signing secrets (WEBHOOK_SECRET_KEYS or `webhook-secret-keys`). */
export function webhookSecretKeys(options: { given?: Buffer[]; dataDir: string; logger: Logger }): Buffer[] {
  return keptSecretKeys({ file: WEBHOOK_KEY_FILE, variable: 'WEBHOOK_SECRET_KEYS', sealing: 'webhook signing secrets' }, options);
}

/**
 * The key of the keyed hashes the opt-out ledger keeps of erased people (PERSON_HASH_KEY or
 * `person-hash-key`, made on first start): a new key would forget every hashed opt-out.
 */
export function personHashKey(options: { given?: string; dataDir: string; logger: Logger }): string {
  if (options.given) return options.given;
  const [key] = keptSecretKeys({ file: PERSON_HASH_KEY_FILE, variable: 'PERSON_HASH_KEY', sealing: "the hashes kept of erased people's opt-outs" }, { dataDir: options.dataDir, logger: options.logger });
  return key.toString('base64');
}
