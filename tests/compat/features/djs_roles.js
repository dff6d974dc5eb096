#!/usr/bin/env node
// discord.js: roles, overwrites, bans and kicks through the library's API.
//
// The bot (an ADMINISTRATOR role) creates a role, gives it to `member`,
// hides a new channel from @everyone but not from that role, and posts there
// (the test checks who received it on the humans' own gateway sessions);
// times `member` out and lifts it; edits, moves and deletes roles; bans `member2` (their recent messages go),
// whose invite join is then refused; unbans them (the join works) and kicks
// them. Every change is checked by the event the library emitted.
'use strict';

const { run, waitFor } = require('./djs_common.js');

const LIB = 'discord.js';

/** `token`'s human accepts an invite, as a client would (not the bot). */
async function humanJoin(ctx, code, token) {
  const r = await fetch(`${ctx.api}/invites/${code}`, {
    method: 'POST',
    headers: { Authorization: token, 'Content-Type': 'application/json' },
    body: '{}',
  });
  const body = await r.json().catch(() => ({}));
  return { status: r.status, code: body.code ?? null };
}

run(
  async (client, ctx, step, djs) => {
    const { Events, ChannelType } = djs;
    const guild = client.guilds.cache.get(ctx.guild);
    const general = guild.channels.cache.get(ctx.channel);
    const member = await guild.members.fetch(ctx.member_id);

    const created = waitFor(client, Events.GuildRoleCreate, r => r.name === 'djs-seer');
    const role = await guild.roles.create({ name: 'djs-seer', colors: { primaryColor: 0x3498db }, permissions: [], reason: 'compat: roles' });
    const seen = await created;
    step('role_created', { id: role.id, position: role.position, colour: role.colors.primaryColor, event_id: seen.id });

    const given = waitFor(client, Events.GuildMemberUpdate, (b, a) => a.id === member.id && a.roles.cache.has(role.id));
    await member.roles.add(role);
    await given;
    step('role_given', { member: member.id });

    // A ten-minute timeout, then lifted: each seen in the member's update.
    const timed = waitFor(client, Events.GuildMemberUpdate, (b, a) => a.id === member.id && a.isCommunicationDisabled());
    await member.timeout(10 * 60_000, 'compat: timeout');
    const [, tm] = await timed;
    step('timed_out', { until: tm.communicationDisabledUntil.toISOString() });
    const lifted = waitFor(client, Events.GuildMemberUpdate, (b, a) => a.id === member.id && !a.isCommunicationDisabled());
    await member.timeout(null);
    await lifted;
    step('timeout_lifted', {});

    const secret = await guild.channels.create({ name: 'djs-secret', type: ChannelType.GuildText });
    await secret.permissionOverwrites.edit(role, { ViewChannel: true });
    const hidden = waitFor(
      client,
      Events.ChannelUpdate,
      (b, a) => a.id === secret.id && a.permissionOverwrites.cache.get(guild.id)?.deny.has('ViewChannel'),
    );
    await secret.permissionOverwrites.edit(guild.roles.everyone, { ViewChannel: false });
    const [, after] = await hidden;
    step('hidden', { channel: secret.id, overwrites: after.permissionOverwrites.cache.size });
    const said = await secret.send(`secret from ${LIB}`);
    await general.send(`public from ${LIB}`);
    step('secret', { channel: secret.id, message: said.id });

    const renamed = waitFor(client, Events.GuildRoleUpdate, (b, a) => a.id === role.id && a.name === 'djs-seer-renamed');
    await role.edit({ name: 'djs-seer-renamed', hoist: true });
    const [, edited] = await renamed;
    step('role_edited', { role_name: edited.name, hoist: edited.hoist });
    // A new role goes to the bottom and every other moves up one (each a
    // GUILD_ROLE_UPDATE): the library's positions are current once the
    // bot's own role, the top one, has moved.
    const shifted = waitFor(client, Events.GuildRoleUpdate, (b, a) => a.id === ctx.bot_role);
    const second = await guild.roles.create({ name: 'djs-second' });
    await shifted;
    const moved = waitFor(client, Events.GuildRoleUpdate, (b, a) => a.id === second.id && a.position === 2);
    await second.setPosition(2);
    await moved;
    step('role_moved', { roles: guild.roles.cache.map(r => [r.name, r.position]) });

    const banned = waitFor(client, Events.GuildBanAdd, ban => ban.user.id === ctx.member2_id);
    const purged = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no MESSAGE_DELETE_BULK within 15 s')), 15000);
      client.on(Events.Raw, function on(packet) {
        if (packet.t === 'MESSAGE_DELETE_BULK') {
          clearTimeout(timer);
          client.off(Events.Raw, on);
          resolve(packet.d);
        }
      });
    });
    await guild.members.ban(ctx.member2_id, { deleteMessageSeconds: 3600, reason: 'compat: spam' });
    await banned;
    const bulk = await purged;
    step('banned', { purged: [...bulk.ids].sort() });
    const ban = await guild.bans.fetch({ user: ctx.member2_id, force: true });
    step('ban_entry', { reason: ban.reason, user: ban.user.id });
    const invite = await general.createInvite({ maxAge: 600 });
    const refused = await humanJoin(ctx, invite.code, ctx.member2_token);
    step('join_refused', refused);

    const unbanned = waitFor(client, Events.GuildBanRemove, b => b.user.id === ctx.member2_id);
    await guild.members.unban(ctx.member2_id);
    await unbanned;
    const joined = waitFor(client, Events.GuildMemberAdd, m => m.id === ctx.member2_id);
    const back = await humanJoin(ctx, invite.code, ctx.member2_token);
    await joined;
    step('rejoined', { status: back.status });

    const kicked = waitFor(client, Events.GuildMemberRemove, m => m.id === ctx.member2_id);
    await guild.members.kick(ctx.member2_id);
    await kicked;
    step('kicked', { user: ctx.member2_id });

    for (const r of [second, role]) {
      // discord.js emits GuildRoleDelete from the REST answer already; the
      // gateway's GUILD_ROLE_DELETE is what the test checks, so wait for it.
      const deleted = waitFor(client, Events.Raw, p => p.t === 'GUILD_ROLE_DELETE' && p.d.role_id === r.id);
      await r.delete();
      await deleted;
    }
    step('roles_deleted', { left: guild.roles.cache.map(r => r.name) });
  },
  { intents: ['Guilds', 'GuildMembers', 'GuildMessages', 'MessageContent', 'GuildModeration'] },
);
