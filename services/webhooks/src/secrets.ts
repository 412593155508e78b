import { SecretBoxError, uuidv7, type Logger, type Pool, type PoolClient, type SecretBox } from '@rrs/runtime';
import { SECRET_PREFIX } from './signing';

/*
 * Signing secrets at rest: sealed with the SecretBox of WEBHOOK_SECRET_KEYS (AES-256-GCM, packages/runtime
 * secretBox.ts), bound to their endpoint and row, so a database dump signs nothing and a sealed value
 * copied to another row does not open there. Rows written before sealing existed hold the secret itself
 * (`whsec_…`); `sealStoredSecrets` seals them at start, and until then they are still read as they are.
 */

function context(endpointId: string, secretId: string): string {
  return `webhook:${endpointId}:secret:${secretId}`;
}

/** Stores a new secret of an endpoint, sealed; returns its row id. */
export async function insertSecret(client: PoolClient, box: SecretBox, endpointId: string, secret: string): Promise<string> {
  const id = uuidv7();
  await client.query(`INSERT INTO endpoint_secrets (id, endpoint_id, secret) VALUES ($1, $2, $3)`, [id, endpointId, box.seal(secret, context(endpointId, id))]);
  return id;
}

/** A stored value as the secret it holds (a legacy unsealed value is the secret). Throws SecretBoxError. */
export function openSecret(box: SecretBox, stored: { endpointId: string; id: string; value: string }): string {
  return stored.value.startsWith(SECRET_PREFIX) ? stored.value : box.open(stored.value, context(stored.endpointId, stored.id));
}

/** One secret row of an endpoint, opened; null when the row is gone (its endpoint was deleted). */
export async function readSecret(pool: Pool, box: SecretBox, endpointId: string, secretId: string): Promise<string | null> {
  const { rows } = await pool.query<{ secret: string }>(`SELECT secret FROM endpoint_secrets WHERE id = $1 AND endpoint_id = $2`, [secretId, endpointId]);
  return rows[0] ? openSecret(box, { endpointId, id: secretId, value: rows[0].secret }) : null;
}

/**
 * Opens the live secrets of a claimed delivery (current first). A secret whose key is no longer in
 * WEBHOOK_SECRET_KEYS is left out and logged: the attempt signs with the others, or fails unsent when none opens.
 */
export function openLiveSecrets(box: SecretBox, endpointId: string, stored: Array<{ id: string; secret: string }>, logger: Logger): string[] {
  const opened: string[] = [];
  for (const row of stored) {
    try {
      opened.push(openSecret(box, { endpointId, id: row.id, value: row.secret }));
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err;
      logger.error({ endpointId, secretId: row.id, code: err.code }, 'a webhook signing secret does not open: is the key that sealed it in WEBHOOK_SECRET_KEYS?');
    }
  }
  return opened;
}

/**
 * The at-rest migration and the key rotation, run at every start: seals the secrets still stored as
 * they are, and re-seals under the first key of WEBHOOK_SECRET_KEYS those sealed with an older one.
 * Each row is rewritten only if unchanged since it was read, so replicas starting together agree.
 */
export async function sealStoredSecrets(pool: Pool, box: SecretBox, logger: Logger): Promise<{ sealed: number; resealed: number }> {
  const { rows } = await pool.query<{ id: string; endpoint_id: string; secret: string }>(`SELECT id, endpoint_id, secret FROM endpoint_secrets`);
  const out = { sealed: 0, resealed: 0 };
  for (const row of rows) {
    const legacy = row.secret.startsWith(SECRET_PREFIX);
    if (!legacy && !box.needsReencrypt(row.secret)) continue;
    const ctx = context(row.endpoint_id, row.id);
    let next: string;
    try {
      next = legacy ? box.seal(row.secret, ctx) : box.reencrypt(row.secret, ctx);
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err;
      // Its key is gone: the endpoint's deliveries fail unsigned until the secret is rotated.
      logger.error({ endpointId: row.endpoint_id, secretId: row.id, code: err.code }, 'a webhook signing secret does not open: is the key that sealed it in WEBHOOK_SECRET_KEYS?');
      continue;
    }
    const { rowCount } = await pool.query(`UPDATE endpoint_secrets SET secret = $3 WHERE id = $1 AND secret = $2`, [row.id, row.secret, next]);
    if (rowCount === 1) out[legacy ? 'sealed' : 'resealed'] += 1;
  }
  if (out.sealed + out.resealed > 0) logger.info(out, 'webhook signing secrets sealed with the current key of WEBHOOK_SECRET_KEYS');
  return out;
}
