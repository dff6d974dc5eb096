-- DMs: a DM is a row of `channels` (kind 1, no guild) with its recipients.
-- `dm_pairs` holds one DM per pair of users (the lower id first), so two
-- concurrent opens of the same DM agree on one channel.
CREATE TABLE dm_recipients (
    channel_id BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (channel_id, user_id)
);
CREATE INDEX dm_recipients_user ON dm_recipients (user_id);

CREATE TABLE dm_pairs (
    low        BIGINT NOT NULL,
    high       BIGINT NOT NULL,
    channel_id BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    PRIMARY KEY (low, high)
);

-- Threads: a row of `channels` (kind 10/11/12, parent_id = the parent
-- channel) and its metadata here. Message counts are not stored: they are
-- counted from `messages` when a guild loads.
CREATE TABLE threads (
    channel_id            BIGINT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    guild_id              BIGINT NOT NULL,
    owner_id              BIGINT NOT NULL,
    archived              BOOLEAN NOT NULL DEFAULT FALSE,
    archive_timestamp     BIGINT NOT NULL,
    auto_archive_duration BIGINT NOT NULL,
    locked                BOOLEAN NOT NULL DEFAULT FALSE,
    invitable             BOOLEAN NOT NULL DEFAULT TRUE,
    created_at            BIGINT NOT NULL
);
CREATE INDEX threads_guild ON threads (guild_id);

CREATE TABLE thread_members (
    thread_id      BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL,
    join_timestamp BIGINT NOT NULL,
    flags          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, user_id)
);

-- Application commands: global (guild_id NULL) or of one guild. `body` is
-- the rest of the command object (descriptions, options, localizations...)
-- as JSON. One command per application, scope, type and name.
CREATE TABLE application_commands (
    id             BIGINT PRIMARY KEY,
    application_id BIGINT NOT NULL,
    guild_id       BIGINT,
    kind           BIGINT NOT NULL,
    name           TEXT NOT NULL,
    version        BIGINT NOT NULL,
    body           TEXT NOT NULL
);
CREATE UNIQUE INDEX application_commands_name ON application_commands (application_id, coalesce(guild_id, 0), kind, name);
