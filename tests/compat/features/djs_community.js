#!/usr/bin/env node
// discord.js: what a community uses beyond chat, through the library's API.
//
// Member search: `guild.members.search` (the REST route) and
// `guild.members.fetch({ query })` (gateway op 8) find the two members by
// their username prefix and then by a nickname the bot gave;
// `guilds.fetch({ withCounts })` gets the counts, and a raw call sends
// `with_counts=1` as nextcord, disnake and py-cord do.
//
// Audit log: the bot renames a member, creates a role and kicks a member
// with reasons; `guild.fetchAuditLogs` reads them back (all, by type, by
// user), and GuildAuditLogEntryCreate is heard for the kick.
'use strict';

const { run, waitFor } = require('./djs_common.js');

run(
  async (client, ctx, step, djs) => {
    const guild = client.guilds.cache.get(ctx.guild);
    const m1 = await guild.members.fetch(ctx.member_id);
    const m2 = await guild.members.fetch(ctx.member2_id);

    const both = await guild.members.search({ query: m1.user.username.toUpperCase(), limit: 10 });
    const only2 = await guild.members.fetch({ query: m2.user.username, limit: 10 });
    step('query', { both: [...both.keys()].sort(), only2: [...only2.keys()] });

    await m2.setNickname('Zephyr');
    const byNick = await guild.members.search({ query: 'zep', limit: 5 });
    const viaGateway = await guild.members.fetch({ query: 'ZEP', limit: 5 });
    step('query_nick', { ids: [...byNick.keys()], nicks: byNick.map(m => m.nickname), gateway: [...viaGateway.keys()] });

    const counted = await client.guilds.fetch({ guild: ctx.guild, withCounts: true, force: true });
    const raw = await client.rest.get(djs.Routes.guild(ctx.guild), { query: new URLSearchParams({ with_counts: '1' }) });
    step('with_counts', { members: counted.approximateMemberCount, raw_members: raw.approximate_member_count });

    const sent = await guild.channels.cache.get(ctx.channel).send('searchable zebra crossing');
    const hits = await client.rest.get(`/guilds/${ctx.guild}/messages/search`, {
      query: new URLSearchParams({ content: 'zebra', author_id: client.user.id }),
    });
    step('search', { total: hits.total_results, ids: hits.messages.map(h => h[0].id), sent: sent.id });

    const { AuditLogEvent, Events } = djs;
    const heard = waitFor(client, Events.GuildAuditLogEntryCreate, e => e.action === AuditLogEvent.MemberKick);
    const role = await guild.roles.create({ name: 'djs-audited', reason: 'compat: a role' });
    await guild.members.kick(ctx.member_id, 'compat: a kick');
    const [live] = await heard;
    step('heard', { action: live.action, target: live.targetId, reason: live.reason });
    const all = await guild.fetchAuditLogs({ limit: 50 });
    step('audit_all', {
      actions: all.entries.map(e => e.action),
      users: [...new Set(all.entries.map(e => e.executorId))].sort(),
      changes: all.entries.first(3).map(e => e.changes.map(c => c.key)),
    });
    const kicks = await guild.fetchAuditLogs({ type: AuditLogEvent.MemberKick });
    step('audit_kicks', { targets: kicks.entries.map(e => e.targetId), reasons: kicks.entries.map(e => e.reason) });
    const mine = await guild.fetchAuditLogs({ user: client.user, limit: 2 });
    step('audit_mine', { actions: mine.entries.map(e => e.action) });
    const created = await guild.fetchAuditLogs({ type: AuditLogEvent.RoleCreate, limit: 1 });
    const entry = created.entries.first();
    step('audit_role', { target: entry.targetId, role: role.id, role_name: entry.target?.name ?? null, reason: entry.reason });
  },
  { intents: ['Guilds', 'GuildMembers', 'GuildMessages', 'MessageContent', 'GuildModeration'] },
);
