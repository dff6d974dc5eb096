-- A member's timeout: until this time (ms since the Unix epoch) they may
-- only read. NULL when there is none.
ALTER TABLE members ADD COLUMN communication_disabled_until BIGINT;
