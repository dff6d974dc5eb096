-- Users banned from a guild: they are not members and may not join again
-- until unbanned (the guild's actor holds the list and refuses their joins).
CREATE TABLE bans (
    guild_id   INTEGER NOT NULL REFERENCES guilds (id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL,
    reason     TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (guild_id, user_id)
) WITHOUT ROWID;
