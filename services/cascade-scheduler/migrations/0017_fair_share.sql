-- Fair share (docs/operations.md, "Fair share"): due steps are claimed round-robin over the
-- (organization, channel) queues that have work due, small requests ahead of bulk within a queue.

-- A step of a cascade with more than 10 recipients (SMALL_REQUEST_MAX_RECIPIENTS) is bulk: it goes
-- after the same organization's small requests on the same channel. Existing steps count as small.
ALTER TABLE recipient_steps ADD COLUMN bulk boolean NOT NULL DEFAULT false;

-- The fair path's index: a skip-scan walks the distinct (organization, channel) queues, and each
-- queue's due steps come off it small first, then bulk, each in due order. The due index
-- (recipient_steps_due) stays: the claim uses it when there is no backlog to share.
CREATE INDEX recipient_steps_due_by_queue ON recipient_steps (organization_id, sent_channel, bulk, due_at) WHERE status = 'scheduled';
