-- The connectors' purge (history.ts) reads what is past its age by these, oldest first, in small
-- batches: settled write-backs by when they ended, amoCRM OAuth states by when they expired.
-- (Processed inbox events already have crm_events_processed.)
CREATE INDEX write_backs_settled ON write_backs ((coalesce(done_at, created_at))) WHERE status <> 'pending';
CREATE INDEX amocrm_oauth_states_expiry ON amocrm_oauth_states (expires_at);
