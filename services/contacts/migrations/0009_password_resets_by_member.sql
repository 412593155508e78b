-- A completed reset voids the member's other live resets (by member_id), and deleting a member deletes
-- its resets through the foreign key: both look the rows up by member, which grow with every reset.
CREATE INDEX member_password_resets_member ON member_password_resets (member_id);
