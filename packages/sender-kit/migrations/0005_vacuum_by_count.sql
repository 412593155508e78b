-- Autovacuum by a count of changed rows, not by a fifth of the table (docs/operations.md "Data
-- lifecycle", "Vacuum by count"): every send inserts a row and updates it once or twice, and the hourly
-- pruning deletes the rows past their keep days; with PostgreSQL's default (20 % of the table changed)
-- a large send log would carry millions of dead rows between vacuums. A fixed count keeps each vacuum
-- small whatever the table's size.
ALTER TABLE send_log SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
  autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000);
