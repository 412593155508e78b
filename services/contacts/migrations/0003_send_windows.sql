-- Send windows (docs/customer-respect.md): the local hours when steps may go out, as
-- {"start":"HH:MM","end":"HH:MM","days":[1..7],"channels":["SMS",…]}. NULL = any time (organization),
-- or the organization's (location). Organizations created before this release keep sending at any
-- time until an operator sets a window; new ones get the default window from the directory.
ALTER TABLE organizations ADD COLUMN send_window jsonb;
ALTER TABLE locations ADD COLUMN send_window jsonb;
