#!/usr/bin/env node
// discord.js: threads through the library's API. A thread from a message
// (message.startThread) and a private one (channel.threads.create),
// messages in them (thread.send), members added and removed, leave and
// join, archive (thread.setArchived) and the lists of active and archived
// threads, then delete.
'use strict';

const { run, waitFor } = require('./djs_common.js');

run(async (client, ctx, step, djs) => {
  const guild = client.guilds.cache.get(ctx.guild);
  const channel = guild.channels.cache.get(ctx.channel);
  const starter = await channel.send('a thread starts here');
  const created = waitFor(client, djs.Events.ThreadCreate, t => t.id === starter.id);
  const thread = await starter.startThread({ name: 'djs thread', autoArchiveDuration: 60 });
  const [event, newlyCreated] = await created;
  step('created', {
    id: thread.id, starter: starter.id, type: thread.type, parent: thread.parentId, owner: thread.ownerId,
    event_name: event.name, newly_created: newlyCreated, archive_minutes: thread.autoArchiveDuration,
  });

  const said = waitFor(client, djs.Events.MessageCreate, m => m.channelId === thread.id);
  await thread.send('hello thread');
  const got = await said;
  step('message', { content: got.content, in_thread: got.channel.isThread() });

  await thread.members.add(ctx.member_id);
  const members = await thread.members.fetch();
  step('members', { ids: [...members.keys()].sort() });
  await thread.members.remove(ctx.member_id);
  await thread.leave();
  await thread.join();
  const after = await thread.members.fetch({ cache: false });
  step('members_after', { ids: [...after.keys()].sort() });

  const active = await guild.channels.fetchActiveThreads();
  step('active', { ids: [...active.threads.keys()] });

  const updated = waitFor(client, djs.Events.ThreadUpdate, (b, a) => a.id === thread.id && a.archived);
  await thread.setArchived(true);
  const [, archived] = await updated;
  const listed = await channel.threads.fetchArchived({ limit: 10 });
  step('archived', { archived: archived.archived, listed: [...listed.threads.keys()] });

  const priv = await channel.threads.create({ name: 'djs private', type: djs.ChannelType.PrivateThread, invitable: false });
  await priv.send('just us');
  step('private', { type: priv.type, invitable: priv.invitable });

  // The REST answer already takes the thread out of discord.js's cache
  // (so no threadDelete follows): wait for the dispatch itself.
  const deleted = waitFor(client, djs.Events.Raw, p => p.t === 'THREAD_DELETE' && p.d.id === priv.id);
  await priv.delete();
  await deleted;
  step('deleted', { id: priv.id });
});
