#!/usr/bin/env node
// discord.js: what a community uses beyond chat, through the library's API.
//
// Member search: `guild.members.search` (the REST route) and
// `guild.members.fetch({ query })` (gateway op 8) find the two members by
// their username prefix and then by a nickname the bot gave;
// `guilds.fetch({ withCounts })` gets the counts, and a raw call sends
// `with_counts=1` as nextcord, disnake and py-cord do.
'use strict';

const { run } = require('./djs_common.js');

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
  },
  { intents: ['Guilds', 'GuildMembers', 'GuildMessages', 'MessageContent', 'GuildModeration'] },
);
