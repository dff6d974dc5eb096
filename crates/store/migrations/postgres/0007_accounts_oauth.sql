-- Accounts and access (issue 25): the same as migrations/sqlite/0007.

ALTER TABLE tokens ADD COLUMN expires_at BIGINT;
ALTER TABLE tokens ADD COLUMN client TEXT;

ALTER TABLE applications ADD COLUMN secret_hash BYTEA;
ALTER TABLE applications ADD COLUMN redirect_uris TEXT NOT NULL DEFAULT '[]';

CREATE TABLE oauth_grants (
    hash           BYTEA PRIMARY KEY,
    kind           BIGINT NOT NULL,
    application_id BIGINT NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scopes         TEXT NOT NULL,
    redirect_uri   TEXT,
    expires_at     BIGINT NOT NULL
);
CREATE INDEX oauth_grants_expiry ON oauth_grants (expires_at);

ALTER TABLE roles ADD COLUMN bot_id BIGINT;

CREATE TABLE session_starts (
    token_hash   BYTEA NOT NULL,
    bucket       BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    count        BIGINT NOT NULL,
    PRIMARY KEY (token_hash, bucket)
);
