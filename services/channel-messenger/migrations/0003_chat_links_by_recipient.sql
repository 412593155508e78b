-- An erased person's chat links are deleted by organization and recipient (docs/customer-respect.md):
-- without this index that walked every link of every organization (the primary key leads with channel).
CREATE INDEX bot_chats_recipient ON bot_chats (organization_id, recipient_id);
