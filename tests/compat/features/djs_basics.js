#!/usr/bin/env node
// discord.js: messages and the bot's own member through the library's API
// (send, edit, typing, delete, nickname), each checked by the dispatch that
// comes back.
'use strict';

const { run, waitFor } = require('./djs_common.js');

run(async (client, ctx, step, djs) => {
  const guild = client.guilds.cache.get(ctx.guild);
  const channel = guild.channels.cache.get(ctx.channel);
  const sent = await channel.send('hello from discord.js');
  step('sent', { id: sent.id, content: sent.content });
  const updated = waitFor(client, djs.Events.MessageUpdate, (b, a) => a.id === sent.id);
  const edited = await sent.edit('edited by discord.js');
  const [, after] = await updated;
  step('edited', { content: edited.content, event_content: after.content, edited_at: String(after.editedTimestamp) });
  await channel.sendTyping();
  step('typing');
  const me = await guild.members.me.setNickname('djs nick');
  step('nick', { nick: me.nickname });
  const gone = waitFor(client, djs.Events.MessageDelete, m => m.id === sent.id);
  await sent.delete();
  await gone;
  step('deleted', { id: sent.id });
});
