-- W3C trace context (`traceparent`, `tracestate`) of the request that started a cascade, and of the
-- work that wrote an outbox row: published as message headers, so the dispatch, the send, the result
-- and the finish event stay in the caller's trace. Empty when the start was not traced.
ALTER TABLE cascades ADD COLUMN trace_context jsonb NOT NULL DEFAULT '{}';
ALTER TABLE outbox ADD COLUMN headers jsonb NOT NULL DEFAULT '{}';
