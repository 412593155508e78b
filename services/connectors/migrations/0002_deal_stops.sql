-- Stopping a deal's review request when the deal is lost or leaves its won stage (docs/connectors.md,
-- "Lost and refunded deals").

-- finished_at: the cascade finished (its recipient's finish event came, or the scheduler said so); such a
-- deal is no longer watched. stop_reason: why the connector cancels it (`lost`: a failure stage;
-- `left_won`: moved out of won), written before the cancel is asked; stopped_at: the cancel was done.
ALTER TABLE deal_cascades ADD COLUMN finished_at timestamptz;
ALTER TABLE deal_cascades ADD COLUMN stop_reason text;
ALTER TABLE deal_cascades ADD COLUMN stopped_at timestamptz;
-- The deals the reconciliation watches for a missed "lost" hook: those whose cascade may still run.
CREATE INDEX deal_cascades_open ON deal_cascades (connector_id, created_at) WHERE finished_at IS NULL AND stopped_at IS NULL;

-- Why the connector canceled the request whose finish is written back (the note says so).
ALTER TABLE write_backs ADD COLUMN stop_reason text;
