-- Who uploaded each file (issue #25): a user's stored bytes are the sizes
-- of the attachment rows naming them, against `attachments.user_quota_bytes`.
-- Rows from before this migration have no uploader and count for nobody.
ALTER TABLE attachments ADD COLUMN uploader_id BIGINT;
CREATE INDEX attachments_uploader ON attachments (uploader_id) WHERE uploader_id IS NOT NULL;

-- Values every node of a deployment must share, created once (the first
-- node to start inserts, the others read what it inserted): the key that
-- signs attachment URLs.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
