-- Message search narrowed inside the index (issue #29). Migration 0012's
-- index held only the words, so every match was checked against the
-- searched channels by reading its message row: seconds for a common word
-- in 10,000,000 messages. Each message now also carries scope tokens in a
-- second column: `g<guild>` (guild messages), `c<channel>`,
-- `a<author>p<guild, or the DM's channel>`, and `l<channel>`, `l<guild>`
-- when the content holds a link. They are what `store::index_scope` makes
-- for new messages, which are still indexed by the statements that insert
-- them (see 0012).
--
-- Contentless with deletes by rowid (SQLite 3.43+): an edit or a delete
-- needs no copy of what was indexed.
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    scope,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    INSERT INTO messages_fts (rowid, content, scope) VALUES (
        new.id,
        new.content,
        coalesce('g' || new.guild_id || ' ', '') || 'c' || new.channel_id
            || ' a' || new.author_id || 'p' || coalesce(new.guild_id, new.channel_id)
            || CASE WHEN new.content LIKE '%http://%' OR new.content LIKE '%https://%'
                    THEN ' l' || new.channel_id || coalesce(' l' || new.guild_id, '') ELSE '' END
    );
END;
INSERT INTO messages_fts (rowid, content, scope)
SELECT id, content,
       coalesce('g' || messages.guild_id || ' ', '') || 'c' || messages.channel_id
            || ' a' || messages.author_id || 'p' || coalesce(messages.guild_id, messages.channel_id)
            || CASE WHEN messages.content LIKE '%http://%' OR messages.content LIKE '%https://%'
                    THEN ' l' || messages.channel_id || coalesce(' l' || messages.guild_id, '') ELSE '' END
FROM messages;
