-- Message search (issue #29): an FTS5 index of messages' content, changed
-- in the transaction that changes a message. External content: the text
-- lives once, in `messages`. New messages are indexed by the statements
-- that insert them (the group commit's batch, `sqlite::inserts::messages`,
-- a pin notice): an insert trigger costs ~4x as much, because FTS5 flushes
-- its pending terms at every trigger's savepoint. Edits, deletes and
-- cascades (rarer) are kept by triggers.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
-- Messages written before this migration.
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
