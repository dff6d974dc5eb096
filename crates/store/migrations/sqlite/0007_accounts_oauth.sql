-- Accounts and access (issue 25): token expiry and revocation, OAuth2
-- grants, bots' managed roles, gateway session starts.

-- NULL: the token never expires. `client`: what it was issued to (the
-- login request's User-Agent), shown in the account's session list.
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE tokens ADD COLUMN client TEXT;
CREATE INDEX tokens_user ON tokens (user_id);

-- An application's OAuth2 client secret (SHA-256 of it; NULL: none issued)
-- and the redirect URIs its authorization codes may go to (JSON list).
ALTER TABLE applications ADD COLUMN secret_hash BLOB;
ALTER TABLE applications ADD COLUMN redirect_uris TEXT NOT NULL DEFAULT '[]';

-- OAuth2 authorization codes (kind 0), access tokens (1) and refresh
-- tokens (2), stored as SHA-256 of the secret, never the secret.
CREATE TABLE oauth_grants (
    hash           BLOB PRIMARY KEY,
    kind           INTEGER NOT NULL,
    application_id INTEGER NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id        INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scopes         TEXT NOT NULL,
    redirect_uri   TEXT,
    expires_at     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX oauth_grants_expiry ON oauth_grants (expires_at);

-- A bot's managed role (Discord's `tags.bot_id`): created when the bot is
-- authorized into the guild, never assignable or deletable by hand.
ALTER TABLE roles ADD COLUMN bot_id INTEGER;

-- Gateway session starts per bot token: bucket -1 counts the day's
-- IDENTIFYs (session_start_limit), bucket k >= 0 is the time of the last
-- IDENTIFY in max_concurrency bucket k (shard id % max_concurrency).
CREATE TABLE session_starts (
    token_hash   BLOB NOT NULL,
    bucket       INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (token_hash, bucket)
) WITHOUT ROWID;
