-- Expired member sign-in tokens are purged by age (memberTokenPurge.ts), oldest first, in small batches.
CREATE INDEX member_sessions_expiry ON member_sessions (expires_at);
CREATE INDEX member_password_resets_expiry ON member_password_resets (expires_at);
CREATE INDEX member_invitations_expiry ON member_invitations (expires_at);
