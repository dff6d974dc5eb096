#!/usr/bin/env node
// discord.js: DMs through the library's API. The bot opens a DM with a user
// (user.send) and a member (member.send); the human answers through raw
// REST; the library gets it through messageCreate with a DM channel
// (Partials.Channel, as discord.js wants for DMs) and reads the history.
'use strict';

const { run, waitFor } = require('./djs_common.js');

async function humanSays(ctx, token, channelId, content) {
  const r = await fetch(`${ctx.api}/channels/${channelId}/messages`, {
    method: 'POST',
    headers: { authorization: token, 'content-type': 'application/json' },
    body: JSON.stringify({ content }),
  });
  if (r.status !== 200) throw new Error(`human send: ${r.status} ${await r.text()}`);
  return r.json();
}

run(
  async (client, ctx, step, djs) => {
    const guild = client.guilds.cache.get(ctx.guild);
    const owner = await client.users.fetch(ctx.owner_id);
    const sent = await owner.send('hello from discord.js');
    step('sent', { channel_type: sent.channel.type, channel_id: sent.channelId, guild: sent.guildId });

    const answered = waitFor(client, djs.Events.MessageCreate, m => m.channelId === sent.channelId && m.author.id === ctx.owner_id);
    await humanSays(ctx, ctx.owner_token, sent.channelId, 'hello bot, from a human');
    const got = await answered;
    step('received', { content: got.content, guild: got.guildId, dm: got.channel.type === djs.ChannelType.DM, author: got.author.id });

    const again = await owner.createDM(true);
    const history = await again.messages.fetch({ limit: 10 });
    step('history', { same: again.id === sent.channelId, contents: [...history.values()].map(m => m.content) });

    const member = await guild.members.fetch(ctx.member_id);
    const toMember = await member.send('hello member');
    const back = waitFor(client, djs.Events.MessageCreate, m => m.channelId === toMember.channelId && m.author.id === ctx.member_id);
    await humanSays(ctx, ctx.member_token, toMember.channelId, 'hi back');
    const reply = await back;
    step('member_dm', { content: reply.content, dm: reply.channel.type === djs.ChannelType.DM });

    const edited = await toMember.edit('hello member (edited)');
    await toMember.delete();
    step('edited', { content: edited.content });
  },
  { partials: ['Channel'] },
);
