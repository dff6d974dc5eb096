-- The invites list of a guild (GET /guilds/{id}/invites), newest first.
CREATE INDEX invites_by_guild ON invites (guild_id, created_at);
