-- W3C trace context (`traceparent`, `tracestate`) of the work that queued a delivery: the bus message of
-- its event (the intake's consumer span), or the API call that sent a test event or replayed it. Each
-- attempt's span is a child of it, so an attempt made later by any worker stays in the event's trace.
-- It is never sent to the receiver. Empty when the queuing was not traced.
ALTER TABLE deliveries ADD COLUMN trace_context jsonb NOT NULL DEFAULT '{}';
