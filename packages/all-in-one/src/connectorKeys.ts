import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSecretKey, parseSecretKeys, type Logger } from '@rrs/runtime';

/** Where the all-in-one keeps its generated connector key when CONNECTOR_SECRET_KEYS is not set. */
export const CONNECTOR_KEY_FILE = 'connector-secret-keys';

/**
 * The keys that seal the CRM credentials of the connectors: CONNECTOR_SECRET_KEYS when given, else the
 * key(s) in `<dataDir>/connector-secret-keys`, made on first start (one random key, mode 0600) and read
 * on every later one, so the credentials stored in the database stay readable across restarts.
 */
export function connectorSecretKeys(options: { given?: Buffer[]; dataDir: string; logger: Logger }): Buffer[] {
  const file = join(options.dataDir, CONNECTOR_KEY_FILE);
  if (options.given) {
    const given = options.given;
    // Moving from the generated key to keys of one's own: the old key must stay in the list to open what it sealed.
    if (existsSync(file) && parseSecretKeys(readFileSync(file, 'utf8'), file).some((kept) => !given.some((key) => key.equals(kept)))) {
      options.logger.warn({ file }, 'CONNECTOR_SECRET_KEYS lacks the key kept in this file: CRM credentials sealed with it cannot be read; add it after your keys');
    }
    return given;
  }
  mkdirSync(options.dataDir, { recursive: true });
  try {
    // `wx`: never overwrite a key another start made meanwhile; that one is read below.
    writeFileSync(file, generateSecretKey() + '\n', { mode: 0o600, flag: 'wx' });
    options.logger.info({ file }, 'generated the key that seals CRM connector credentials (keep it with the database)');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  if ((statSync(file).mode & 0o077) !== 0) {
    chmodSync(file, 0o600);
    options.logger.warn({ file }, 'the connector key file was readable by others; its mode is now 0600');
  }
  return parseSecretKeys(readFileSync(file, 'utf8'), file);
}
