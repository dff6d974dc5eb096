-- Application command permission overrides (issue #27): per guild, for one
-- command or (command_id = the application's id) for all of its commands.
-- `permissions` is the JSON array of {id, type, permission} as the API
-- takes it (type 1 role, 2 user, 3 channel).
CREATE TABLE command_permissions (
    application_id INTEGER NOT NULL,
    guild_id       INTEGER NOT NULL,
    command_id     INTEGER NOT NULL,
    permissions    TEXT NOT NULL,
    PRIMARY KEY (guild_id, application_id, command_id)
);
