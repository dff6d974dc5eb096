-- The audit log (issue #29): one row per entry, written in the transaction
-- of the change it records. `entry` is the entry as the API shows it (a
-- JSON object without users); the columns beside it are what reads filter
-- on. Ids are snowflakes, so they order entries by time, and retention
-- deletes by id.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    guild_id    INTEGER NOT NULL,
    user_id     INTEGER,
    action_type INTEGER NOT NULL,
    entry       TEXT NOT NULL
);
CREATE INDEX audit_log_by_guild ON audit_log (guild_id, id);
