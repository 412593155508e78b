-- The send history is pruned by age (sendHistory.ts): send log rows created, and dead letters written,
-- longer ago than their keep days go in small batches, read in this order. `created_at` rather than
-- `updated_at`: it never changes, so a claim's or completion's UPDATE of other columns adds no entry
-- to this index (the send path's writes stay as they were).
CREATE INDEX send_log_created ON send_log (created_at);
CREATE INDEX dead_letters_created ON dead_letters (created_at);
