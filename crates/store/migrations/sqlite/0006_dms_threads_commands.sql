-- DMs: a DM is a row of `channels` (kind 1, no guild) with its recipients.
-- `dm_pairs` holds one DM per pair of users (the lower id first), so two
-- concurrent opens of the same DM agree on one channel.
CREATE TABLE dm_recipients (
    channel_id INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (channel_id, user_id)
) WITHOUT ROWID;
CREATE INDEX dm_recipients_user ON dm_recipients (user_id);

CREATE TABLE dm_pairs (
    low        INTEGER NOT NULL,
    high       INTEGER NOT NULL,
    channel_id INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    PRIMARY KEY (low, high)
) WITHOUT ROWID;

-- Threads: a row of `channels` (kind 10/11/12, parent_id = the parent
-- channel) and its metadata here. Message counts are not stored: they are
-- counted from `messages` when a guild loads.
CREATE TABLE threads (
    channel_id            INTEGER PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    guild_id              INTEGER NOT NULL,
    owner_id              INTEGER NOT NULL,
    archived              INTEGER NOT NULL DEFAULT 0,
    archive_timestamp     INTEGER NOT NULL,
    auto_archive_duration INTEGER NOT NULL,
    locked                INTEGER NOT NULL DEFAULT 0,
    invitable             INTEGER NOT NULL DEFAULT 1,
    created_at            INTEGER NOT NULL
);
CREATE INDEX threads_guild ON threads (guild_id);

CREATE TABLE thread_members (
    thread_id      INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    user_id        INTEGER NOT NULL,
    join_timestamp INTEGER NOT NULL,
    flags          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, user_id)
) WITHOUT ROWID;

-- Application commands: global (guild_id NULL) or of one guild. `body` is
-- the rest of the command object (descriptions, options, localizations...)
-- as JSON. One command per application, scope, type and name.
CREATE TABLE application_commands (
    id             INTEGER PRIMARY KEY,
    application_id INTEGER NOT NULL,
    guild_id       INTEGER,
    kind           INTEGER NOT NULL,
    name           TEXT NOT NULL,
    version        INTEGER NOT NULL,
    body           TEXT NOT NULL
);
CREATE UNIQUE INDEX application_commands_name ON application_commands (application_id, coalesce(guild_id, 0), kind, name);
