-- Reactions, custom emojis and pins (#14).

-- A guild's custom emojis; each image is a file the server keeps by id.
CREATE TABLE emojis (
    id         INTEGER PRIMARY KEY,
    guild_id   INTEGER NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    animated   INTEGER NOT NULL DEFAULT 0,
    roles      TEXT NOT NULL DEFAULT '[]',
    creator_id INTEGER
);
CREATE INDEX emojis_guild ON emojis (guild_id);

-- One row per user and emoji on a message. `emoji` is the key: the Unicode
-- emoji, or a custom emoji's id in decimal (`emoji_id` set, `emoji_name`
-- and `animated` as they were when the reaction was made).
CREATE TABLE reactions (
    message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    emoji      TEXT NOT NULL,
    user_id    INTEGER NOT NULL,
    emoji_id   INTEGER,
    emoji_name TEXT NOT NULL,
    animated   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (message_id, emoji, user_id)
) WITHOUT ROWID;

-- Pinned messages: a row while pinned (gone with the message).
CREATE TABLE pins (
    message_id INTEGER PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    channel_id INTEGER NOT NULL,
    pinned_at  INTEGER NOT NULL
);
CREATE INDEX pins_channel ON pins (channel_id, pinned_at);
