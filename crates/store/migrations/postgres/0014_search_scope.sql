-- Message search narrowed inside the index (issue #29). Migration 0012's
-- vector held only the words, so every match was checked against the
-- searched channels on its heap row. The vector now also carries scope
-- lexemes, as SQLite's index does (`store::index_scope`): `c:<channel>`,
-- `a:<author>:<guild, or the DM's channel>`, and `l:<channel>`,
-- `l:<guild>` when the content holds a link (a DM's two are the same
-- lexeme). Not the guild's: a search names it by `messages_guild`, the
-- b-tree the planner weighs with its statistics (see
-- `sql/community.rs`). A word's lexemes are runs of letters and digits, so they never
-- contain the colon. The GIN index then intersects the words with the
-- scope before any heap row is read.
ALTER TABLE messages DROP COLUMN search;
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'))
    || array_to_tsvector(
        ARRAY['c:' || channel_id::text, 'a:' || author_id::text || ':' || coalesce(guild_id, channel_id)::text]
        || CASE WHEN content ILIKE '%http://%' OR content ILIKE '%https://%'
                THEN ARRAY['l:' || coalesce(guild_id, channel_id)::text, 'l:' || channel_id::text] ELSE ARRAY[]::text[] END
    )
) STORED;
CREATE INDEX messages_search ON messages USING GIN (search);
