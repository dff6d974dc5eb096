-- Reactions, custom emojis and pins (#14): the same tables as in
-- migrations/sqlite.

-- A guild's custom emojis; each image is a file the server keeps by id.
CREATE TABLE emojis (
    id         BIGINT PRIMARY KEY,
    guild_id   BIGINT NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    animated   BOOLEAN NOT NULL DEFAULT FALSE,
    roles      TEXT NOT NULL DEFAULT '[]',
    creator_id BIGINT
);
CREATE INDEX emojis_guild ON emojis (guild_id);

-- One row per user and emoji on a message. `emoji` is the key: the Unicode
-- emoji, or a custom emoji's id in decimal (`emoji_id` set, `emoji_name`
-- and `animated` as they were when the reaction was made).
CREATE TABLE reactions (
    message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    emoji      TEXT NOT NULL,
    user_id    BIGINT NOT NULL,
    emoji_id   BIGINT,
    emoji_name TEXT NOT NULL,
    animated   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (message_id, emoji, user_id)
);

-- Pinned messages: a row while pinned (gone with the message).
CREATE TABLE pins (
    message_id BIGINT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    channel_id BIGINT NOT NULL,
    pinned_at  BIGINT NOT NULL
);
CREATE INDEX pins_channel ON pins (channel_id, pinned_at);
