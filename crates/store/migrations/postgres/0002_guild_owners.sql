-- Guild ownership in a cluster: the node whose actor runs each guild and an
-- epoch that goes up on every change of owner. Writes carry the epoch their
-- actor claimed; a write with an older epoch is refused (fencing). A group
-- commit holds its guilds' rows here with FOR SHARE until it commits, so a
-- claim (an upsert of the row) waits for it, and a batch that waited reads
-- the new epoch.
CREATE TABLE guild_owners (
    guild_id BIGINT PRIMARY KEY,
    node     BIGINT NOT NULL,
    epoch    BIGINT NOT NULL
);
