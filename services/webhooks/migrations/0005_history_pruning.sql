-- The delivery log's purge (retention.ts) reads what is past the retention by these, oldest first, in
-- small batches: settled deliveries by when they last changed, events by when they were received.
CREATE INDEX deliveries_settled ON deliveries (updated_at) WHERE status <> 'pending';
CREATE INDEX events_received ON events (received_at);
