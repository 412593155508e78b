-- Autovacuum by a count of changed rows, not by a fifth of the table (issue 35, docs/operations.md
-- "Data lifecycle", "Vacuum by count"). The due and in-flight indexes are partial (`status =
-- 'scheduled'` / `'dispatched'`): a step leaves them when it is dispatched and sent, but its entry stays
-- until VACUUM, and every claim walks the dead entries in front of the first live one. PostgreSQL's
-- default vacuums a table once 20 % of it has changed: 3 million updates on a table of 15 million steps,
-- so the dead prefix, and each claim's cost, would grow with the history. A fixed 50 000 keeps it to a
-- few hundred index pages whatever the table's size (each vacuum reads only the pages changed since
-- the last, through the visibility map). The same for the other rows every send or rating updates.
ALTER TABLE recipient_steps SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
  autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000,
  autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 200000);
ALTER TABLE recipients SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
  autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000,
  autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 200000);
ALTER TABLE review_requests SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
  autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000);
ALTER TABLE person_activity SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000);
