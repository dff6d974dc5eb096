-- Word pairs in the search index (issue #29). A phrase of two common words
-- was the slowest search: FTS5 compares the positions of every message
-- holding both words. Each message's scope column now also holds a token
-- for each pair of adjacent short words (`store::word_pairs`), so such a
-- phrase is one token's list. The pairs are made in Rust, which SQL here
-- cannot split as the server does, so:
--
-- - the index is emptied here (FTS5's `delete-all`, the table stays as
--   0014 made it) and filled again by `SqliteStore::open` (every message
--   through `store::index_scope`) while `search_rebuild` holds a row,
--   before the server serves;
-- - an edit is re-indexed by the statement that edits
--   (`sql/changes.rs`), not by a trigger. Deletes keep their trigger.
DROP TRIGGER messages_fts_update;
INSERT INTO messages_fts (messages_fts) VALUES ('delete-all');
CREATE TABLE search_rebuild (pending INTEGER NOT NULL);
INSERT INTO search_rebuild VALUES (1);
