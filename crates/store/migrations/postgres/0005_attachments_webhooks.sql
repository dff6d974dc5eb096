-- Attachments: one row per uploaded file, linked to its message. The file
-- itself lives on disk, named by the SHA-256 of its content (`hash`, hex):
-- the same content is stored once, and the rows naming a hash are its
-- references. A row without a message is an upload whose message is not
-- committed yet (or never will be: expired by the sweeper after a grace).
CREATE TABLE attachments (
    id           BIGINT PRIMARY KEY,
    channel_id   BIGINT NOT NULL,
    message_id   BIGINT REFERENCES messages (id) ON DELETE CASCADE,
    hash         TEXT NOT NULL,
    filename     TEXT NOT NULL,
    size         BIGINT NOT NULL,
    content_type TEXT,
    width        BIGINT,
    height       BIGINT,
    description  TEXT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX attachments_message ON attachments (message_id);
CREATE INDEX attachments_hash ON attachments (hash);
CREATE INDEX attachments_pending ON attachments (created_at) WHERE message_id IS NULL;

-- Incoming webhooks. The token is kept as it is: Discord shows it again to
-- members with MANAGE_WEBHOOKS.
CREATE TABLE webhooks (
    id         BIGINT PRIMARY KEY,
    guild_id   BIGINT NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    channel_id BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    kind       BIGINT NOT NULL DEFAULT 1,
    name       TEXT NOT NULL,
    avatar     TEXT,
    token      TEXT NOT NULL,
    creator_id BIGINT,
    application_id BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhooks_channel ON webhooks (channel_id);
CREATE INDEX webhooks_guild ON webhooks (guild_id);
