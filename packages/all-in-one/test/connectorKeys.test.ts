import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSecretKey, SecretBox } from '@rrs/runtime';
import { testLogger } from '@rrs/testkit';
import { buildConfig } from '../src/config';
import { CONNECTOR_KEY_FILE, connectorSecretKeys, WEBHOOK_KEY_FILE, webhookSecretKeys } from '../src/connectorKeys';

/** Production with the sinks named (a staging): the senders' provider variables are not the subject here. */
const STAGING = { EMAIL_PROVIDERS: 'sink', SMS_PROVIDERS: 'sink', MESSENGER_SINK: 'max,telegram' };

describe('the connectors’ credential keys in the all-in-one', () => {
  let dir: string;
  beforeEach(() => {
    dir = join(mkdtempSync(join(tmpdir(), 'rrs-aio-keys-')), 'data');
  });
  afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));
  const file = () => join(dir, CONNECTOR_KEY_FILE);

  it('makes one key on first start, mode 0600, and reads the same key on every later start', () => {
    const logger = testLogger();
    const [first] = connectorSecretKeys({ dataDir: dir, logger });
    expect(first).toHaveLength(32);
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    const again = connectorSecretKeys({ dataDir: dir, logger });
    expect(again).toEqual([first]);
    // What one start sealed, the next opens.
    const sealed = new SecretBox([first]).seal('token', 'connector-1');
    expect(new SecretBox(again).open(sealed, 'connector-1')).toBe('token');
  });

  it('tightens a key file others could read', () => {
    const logger = testLogger();
    const [key] = connectorSecretKeys({ dataDir: dir, logger });
    chmodSync(file(), 0o644);
    expect(connectorSecretKeys({ dataDir: dir, logger })).toEqual([key]);
    expect(statSync(file()).mode & 0o777).toBe(0o600);
    expect(logger.lines.join('\n')).toContain('its mode is now 0600');
  });

  it('refuses a damaged key file, naming it', () => {
    connectorSecretKeys({ dataDir: dir, logger: testLogger() });
    writeFileSync(file(), 'not a key\n');
    expect(() => connectorSecretKeys({ dataDir: dir, logger: testLogger() })).toThrow(`${file()}: key 1 is not base64`);
  });

  it('uses CONNECTOR_SECRET_KEYS when set, makes no file, and warns when the list leaves out the key the file keeps', () => {
    const own = buildConfig({ CONNECTOR_SECRET_KEYS: generateSecretKey(), DATA_DIR: dir }).connectorSecretKeys!;
    const logger = testLogger();
    expect(connectorSecretKeys({ given: own, dataDir: dir, logger })).toBe(own);
    expect(() => statSync(file())).toThrow();

    const [kept] = connectorSecretKeys({ dataDir: dir, logger });
    const before = readFileSync(file(), 'utf8');
    connectorSecretKeys({ given: own, dataDir: dir, logger });
    expect(logger.lines.join('\n')).toContain('CONNECTOR_SECRET_KEYS lacks the key kept in this file');
    const quiet = testLogger();
    connectorSecretKeys({ given: [...own, kept], dataDir: dir, logger: quiet });
    expect(quiet.lines.join('\n')).not.toContain('lacks the key');
    expect(readFileSync(file(), 'utf8')).toBe(before);
  });

  it('reads CONNECTOR_SECRET_KEYS at start, naming the variable it refuses, and allows plain-http CRMs outside production only', () => {
    expect(() => buildConfig({ CONNECTOR_SECRET_KEYS: 'c2hvcnQ=' })).toThrow(/^CONNECTOR_SECRET_KEYS: key 1 is 5 bytes/);
    expect(buildConfig({}).connectorSecretKeys).toBeUndefined();
    expect(buildConfig({}).allowHttpCrm).toBe(true);
    expect(buildConfig({ ...STAGING, NODE_ENV: 'production', ADMIN_API: 'off' }).allowHttpCrm).toBe(false);
  });
});

describe('the webhook signing secrets’ keys in the all-in-one', () => {
  let dir: string;
  beforeEach(() => {
    dir = join(mkdtempSync(join(tmpdir(), 'rrs-aio-wkeys-')), 'data');
  });
  afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

  it('makes its own key once, mode 0600, apart from the connectors’ key, and takes WEBHOOK_SECRET_KEYS when set', () => {
    const logger = testLogger();
    const [key] = webhookSecretKeys({ dataDir: dir, logger });
    expect(statSync(join(dir, WEBHOOK_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(webhookSecretKeys({ dataDir: dir, logger })).toEqual([key]);
    expect(connectorSecretKeys({ dataDir: dir, logger })[0].equals(key)).toBe(false);
    const own = buildConfig({ WEBHOOK_SECRET_KEYS: generateSecretKey(), DATA_DIR: dir }).webhookSecretKeys!;
    expect(webhookSecretKeys({ given: own, dataDir: dir, logger })).toBe(own);
    expect(logger.lines.join('\n')).toContain('WEBHOOK_SECRET_KEYS lacks the key kept in this file');
    expect(() => buildConfig({ WEBHOOK_SECRET_KEYS: 'c2hvcnQ=' })).toThrow(/^WEBHOOK_SECRET_KEYS: key 1 is 5 bytes/);
  });
});
