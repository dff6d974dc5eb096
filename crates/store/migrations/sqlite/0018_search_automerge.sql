-- FTS5 merges a level of the search index once it holds 16 segments
-- (its default is 4), in steps with each write, and merges a level whole,
-- inside one commit, only at 64 (its default is 16, which with 16 here
-- would make every merge such a stall: 350-580 ms commits). Every group
-- commit writes one small segment, and each merge rewrites what it merges:
-- with 16, a message's entries are rewritten about half as often.
-- Measured on 400,000 messages of 5-20 words at 80 a transaction: the
-- index's cost per message 19.0 -> 13.0 us, the slowest commit 47 -> 29 ms.
-- More segments make searches slower (twice as slow over 10,000,000
-- messages in 36 segments against 12): the checkpoint thread merges them
-- down to FTS5's usual shape (levels of at most 3) while the writer rests
-- (`store::sqlite::merge_step`; the seeder: `merge_search_index`).
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('crisismerge', 64);
