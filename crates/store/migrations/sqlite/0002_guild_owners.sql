-- Guild ownership in a cluster: the node whose actor runs each guild and an
-- epoch that goes up on every change of owner. Writes carry the epoch their
-- actor claimed; a write with an older epoch is refused (fencing).
CREATE TABLE guild_owners (
    guild_id INTEGER PRIMARY KEY,
    node     INTEGER NOT NULL,
    epoch    INTEGER NOT NULL
);
