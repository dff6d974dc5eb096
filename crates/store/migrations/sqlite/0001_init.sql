-- Ids are snowflakes stored as INTEGER (they fit in 63 bits until 2084).
-- Times are milliseconds since the Unix epoch.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    username      TEXT NOT NULL,
    global_name   TEXT,
    avatar        TEXT,
    bot           INTEGER NOT NULL DEFAULT 0,
    flags         INTEGER NOT NULL DEFAULT 0,
    password_hash TEXT,
    created_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX users_username ON users (username) WHERE bot = 0;

-- Tokens are stored as SHA-256 of the token string, never the token.
CREATE TABLE tokens (
    hash       BLOB PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE applications (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    owner_id    INTEGER,
    bot_user_id INTEGER NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    flags       INTEGER NOT NULL DEFAULT 0,
    verify_key  TEXT NOT NULL
);

CREATE TABLE guilds (
    id                INTEGER PRIMARY KEY,
    name              TEXT NOT NULL,
    icon              TEXT,
    description       TEXT,
    owner_id          INTEGER NOT NULL,
    system_channel_id INTEGER,
    created_at        INTEGER NOT NULL
);

CREATE TABLE roles (
    id          INTEGER PRIMARY KEY,
    guild_id    INTEGER NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    color       INTEGER NOT NULL DEFAULT 0,
    hoist       INTEGER NOT NULL DEFAULT 0,
    position    INTEGER NOT NULL DEFAULT 0,
    permissions INTEGER NOT NULL DEFAULT 0,
    mentionable INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX roles_guild ON roles (guild_id);

CREATE TABLE channels (
    id              INTEGER PRIMARY KEY,
    guild_id        INTEGER REFERENCES guilds (id) ON DELETE CASCADE,
    kind            INTEGER NOT NULL,
    name            TEXT NOT NULL,
    position        INTEGER NOT NULL DEFAULT 0,
    topic           TEXT,
    nsfw            INTEGER NOT NULL DEFAULT 0,
    parent_id       INTEGER,
    rate_limit_per_user INTEGER NOT NULL DEFAULT 0,
    overwrites      TEXT NOT NULL DEFAULT '[]',
    last_message_id INTEGER
);
CREATE INDEX channels_guild ON channels (guild_id);

CREATE TABLE members (
    guild_id  INTEGER NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    user_id   INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    nick      TEXT,
    roles     TEXT NOT NULL DEFAULT '[]',
    joined_at INTEGER NOT NULL,
    flags     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (guild_id, user_id)
) WITHOUT ROWID;
CREATE INDEX members_user ON members (user_id);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    channel_id       INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    guild_id         INTEGER,
    author_id        INTEGER NOT NULL,
    content          TEXT NOT NULL,
    edited_at        INTEGER,
    kind             INTEGER NOT NULL DEFAULT 0,
    flags            INTEGER NOT NULL DEFAULT 0,
    tts              INTEGER NOT NULL DEFAULT 0,
    mention_everyone INTEGER NOT NULL DEFAULT 0,
    mentions         TEXT NOT NULL DEFAULT '[]',
    reference        TEXT,
    extra            TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX messages_channel ON messages (channel_id, id);

CREATE TABLE invites (
    code       TEXT PRIMARY KEY,
    guild_id   INTEGER NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    channel_id INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    inviter_id INTEGER,
    max_age    INTEGER NOT NULL DEFAULT 86400,
    max_uses   INTEGER NOT NULL DEFAULT 0,
    uses       INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
