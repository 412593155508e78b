-- Signing secrets are sealed at rest (secrets.ts: the service seals the rows still holding `whsec_…` at
-- start, with the keys of WEBHOOK_SECRET_KEYS, which SQL does not have). Saved responses of idempotent
-- creates and rotations held the secret itself; from now on they hold the id of the secret's row
-- (endpoints.ts, createdCodec) and a replay reads the secret from there. The live ones are rewritten so,
-- a saved response whose secret is no longer stored is dropped.
DO $$
BEGIN
  IF to_regclass('idempotency_keys') IS NOT NULL THEN
    WITH saved AS (
      SELECT organization_id, key, convert_from(response, 'UTF8')::jsonb AS body
      FROM idempotency_keys WHERE position(convert_to('"secret":"whsec_', 'UTF8') IN response) > 0
    )
    UPDATE idempotency_keys k
    SET response = convert_to(jsonb_build_object('endpoint', saved.body -> 'endpoint', 'secretId', s.id)::text, 'UTF8')
    FROM saved JOIN endpoint_secrets s ON s.endpoint_id = (saved.body -> 'endpoint' ->> 'id')::uuid AND s.secret = saved.body ->> 'secret'
    WHERE k.organization_id = saved.organization_id AND k.key = saved.key;
    DELETE FROM idempotency_keys WHERE position(convert_to('"secret":"whsec_', 'UTF8') IN response) > 0;
  END IF;
END $$;
