-- The PostgreSQL schema: the same tables as migrations/sqlite.
-- Ids are snowflakes stored as BIGINT (u64 cast to i64; they fit in 63 bits
-- until 2084). Every integer is BIGINT so one Rust type (i64) reads them all.
-- Times are milliseconds since the Unix epoch. Lists and JSON objects
-- (overwrites, role ids, mentions, references, extras) are JSON text, as in
-- SQLite, so both backends encode them the same way.
CREATE TABLE users (
    id            BIGINT PRIMARY KEY,
    username      TEXT NOT NULL,
    global_name   TEXT,
    avatar        TEXT,
    bot           BOOLEAN NOT NULL DEFAULT FALSE,
    flags         BIGINT NOT NULL DEFAULT 0,
    password_hash TEXT,
    created_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX users_username ON users (username) WHERE NOT bot;

-- Tokens are stored as SHA-256 of the token string, never the token.
CREATE TABLE tokens (
    hash       BYTEA PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE applications (
    id          BIGINT PRIMARY KEY,
    name        TEXT NOT NULL,
    owner_id    BIGINT,
    bot_user_id BIGINT NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    flags       BIGINT NOT NULL DEFAULT 0,
    verify_key  TEXT NOT NULL
);

CREATE TABLE guilds (
    id                BIGINT PRIMARY KEY,
    name              TEXT NOT NULL,
    icon              TEXT,
    description       TEXT,
    owner_id          BIGINT NOT NULL,
    system_channel_id BIGINT,
    created_at        BIGINT NOT NULL
);

CREATE TABLE roles (
    id          BIGINT PRIMARY KEY,
    guild_id    BIGINT NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    color       BIGINT NOT NULL DEFAULT 0,
    hoist       BOOLEAN NOT NULL DEFAULT FALSE,
    position    BIGINT NOT NULL DEFAULT 0,
    permissions BIGINT NOT NULL DEFAULT 0,
    mentionable BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX roles_guild ON roles (guild_id);

CREATE TABLE channels (
    id              BIGINT PRIMARY KEY,
    guild_id        BIGINT REFERENCES guilds (id) ON DELETE CASCADE,
    kind            BIGINT NOT NULL,
    name            TEXT NOT NULL,
    position        BIGINT NOT NULL DEFAULT 0,
    topic           TEXT,
    nsfw            BOOLEAN NOT NULL DEFAULT FALSE,
    parent_id       BIGINT,
    rate_limit_per_user BIGINT NOT NULL DEFAULT 0,
    overwrites      TEXT NOT NULL DEFAULT '[]',
    last_message_id BIGINT
);
CREATE INDEX channels_guild ON channels (guild_id);

CREATE TABLE members (
    guild_id  BIGINT NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    user_id   BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    nick      TEXT,
    roles     TEXT NOT NULL DEFAULT '[]',
    joined_at BIGINT NOT NULL,
    flags     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (guild_id, user_id)
);
CREATE INDEX members_user ON members (user_id);

CREATE TABLE messages (
    id               BIGINT PRIMARY KEY,
    channel_id       BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    guild_id         BIGINT,
    author_id        BIGINT NOT NULL,
    content          TEXT NOT NULL,
    edited_at        BIGINT,
    kind             BIGINT NOT NULL DEFAULT 0,
    flags            BIGINT NOT NULL DEFAULT 0,
    tts              BOOLEAN NOT NULL DEFAULT FALSE,
    mention_everyone BOOLEAN NOT NULL DEFAULT FALSE,
    mentions         TEXT NOT NULL DEFAULT '[]',
    reference        TEXT,
    extra            TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX messages_channel ON messages (channel_id, id);
-- delete_guild removes a guild's messages by guild id.
CREATE INDEX messages_guild ON messages (guild_id);

CREATE TABLE invites (
    code       TEXT PRIMARY KEY,
    guild_id   BIGINT NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    channel_id BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    inviter_id BIGINT,
    max_age    BIGINT NOT NULL DEFAULT 86400,
    max_uses   BIGINT NOT NULL DEFAULT 0,
    uses       BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
