-- Word pairs in the search index (issue #29), as SQLite's (see its 0015):
-- a lexeme `<a> <b>` for each pair of adjacent words of 1 to 3 ASCII
-- letters and digits (`store::word_pairs`), so a phrase of two common
-- words is one lexeme's posting list instead of every message holding
-- both words, each checked on its heap row (~400 ms for a pair of the 50
-- most common words in 10,000,000 messages). Words are split and
-- lowercased as the vector's own words are; the space keeps a pair apart
-- from every word and scope lexeme.
--
-- A loop over the split words: 15 µs a message of 5-20 words here, half
-- the cost of the same as a SQL query over `unnest` with `lead`.
CREATE FUNCTION search_pairs(body text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    pairs text[] := '{}';
    prev text;
    w text;
BEGIN
    FOREACH w IN ARRAY regexp_split_to_array(lower(body), '[^[:alnum:]]+') LOOP
        IF length(w) BETWEEN 1 AND 3 AND w ~ '^[a-z0-9]+$' THEN
            IF prev IS NOT NULL THEN
                pairs := pairs || (prev || ' ' || w);
            END IF;
            prev := w;
        ELSE
            prev := NULL;
        END IF;
    END LOOP;
    RETURN pairs;
END
$$;
ALTER TABLE messages DROP COLUMN search;
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'))
    || array_to_tsvector(
        ARRAY['c:' || channel_id::text, 'a:' || author_id::text || ':' || coalesce(guild_id, channel_id)::text]
        || CASE WHEN content ILIKE '%http://%' OR content ILIKE '%https://%'
                THEN ARRAY['l:' || coalesce(guild_id, channel_id)::text, 'l:' || channel_id::text] ELSE ARRAY[]::text[] END
        || search_pairs(content)
    )
) STORED;
CREATE INDEX messages_search ON messages USING GIN (search);
-- An id range (a date filter) as a few block ranges: messages are written
-- in id order, so the planner can intersect a range with a word's posting
-- list without a bitmap of every message in the range from the primary
-- key (69 of 94 ms for the last 30 days of 10,000,000 messages).
CREATE INDEX messages_id_brin ON messages USING brin (id) WITH (autosummarize = on);
