#!/usr/bin/env node
// discord.js: reactions, custom emojis, pins and bulk delete through the
// library's API (message.react, reaction.users.fetch/remove,
// reactions.removeAll, reaction.remove, guild.emojis.create, pin/unpin,
// messages.fetchPins/fetchPinned, bulkDelete), each checked by the event
// that comes back.
'use strict';

const { run, waitFor } = require('./djs_common.js');

// A 1x1 PNG.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d4944415478da63fccf00000301010018dd8db40000000049454e44ae426082',
  'hex',
);
const THUMBS = '\u{1F44D}';
const HEART = '\u2764\uFE0F';

run(async (client, ctx, step, djs) => {
  const { Events } = djs;
  const guild = client.guilds.cache.get(ctx.guild);
  const channel = guild.channels.cache.get(ctx.channel);
  const msg = await channel.send('react to this, discord.js');
  const onAdd = pred => waitFor(client, Events.MessageReactionAdd, (r, u) => r.message.id === msg.id && pred(r, u));

  let added = onAdd((r, u) => r.emoji.name === THUMBS && u.id === client.user.id);
  await msg.react(THUMBS);
  const [reaction, , details] = await added;
  step('added', { emoji: reaction.emoji.name, count: reaction.count, me: reaction.me, type: details.type, burst: details.burst });
  added = onAdd(r => r.emoji.name === HEART);
  await msg.react(HEART);
  await added;
  // The member (a human) reacts over raw REST: the bot cannot react for them.
  added = onAdd((r, u) => u.id === ctx.member_id);
  const res = await fetch(`${ctx.api}/channels/${channel.id}/messages/${msg.id}/reactions/${encodeURIComponent(THUMBS)}/@me`, {
    method: 'PUT',
    headers: { Authorization: ctx.member_token },
  });
  if (res.status !== 204) throw new Error(`member reaction: ${res.status} ${await res.text()}`);
  await added;
  const thumbs = msg.reactions.cache.get(THUMBS);
  const users = await thumbs.users.fetch();
  const fetched = await channel.messages.fetch({ message: msg.id, force: true });
  step('fetched', {
    users: [...users.keys()],
    reactions: [...fetched.reactions.cache.values()].map(r => [r.emoji.name, r.count, r.me]),
  });
  let removed = waitFor(client, Events.MessageReactionRemove, (r, u) => r.message.id === msg.id && u.id === ctx.member_id);
  await thumbs.users.remove(ctx.member_id);
  await removed;
  removed = waitFor(client, Events.MessageReactionRemove, (r, u) => r.message.id === msg.id && u.id === client.user.id);
  await thumbs.users.remove();
  await removed;
  const emojiGone = waitFor(client, Events.MessageReactionRemoveEmoji, r => r.message.id === msg.id);
  await fetched.reactions.cache.get(HEART).remove();
  const r = await emojiGone;
  step('cleared_emoji', { emoji: r.emoji.name });
  await msg.react(THUMBS);
  const allGone = waitFor(client, Events.MessageReactionRemoveAll, m => m.id === msg.id);
  await msg.reactions.removeAll();
  await allGone;
  const after = await channel.messages.fetch({ message: msg.id, force: true });
  step('cleared', { reactions: after.reactions.cache.size });

  // A custom emoji: created, announced, reacted with.
  const announced = waitFor(client, Events.Raw, p => p.t === 'GUILD_EMOJIS_UPDATE' && p.d.emojis.some(e => e.name === 'djsblob'));
  const emoji = await guild.emojis.create({ attachment: PNG, name: 'djsblob' });
  await announced;
  step('emoji', { id: emoji.id, emoji_name: emoji.name, in_guild: [...guild.emojis.cache.values()].map(e => e.name), url: emoji.imageURL() });
  added = onAdd(r => r.emoji.id === emoji.id);
  await msg.react(emoji);
  const [custom] = await added;
  step('custom_reaction', { id: custom.emoji.id, emoji_name: custom.emoji.name });

  // Pins.
  const pinned = waitFor(client, Events.ChannelPinsUpdate, (c, time) => c.id === channel.id && time);
  await msg.pin();
  await pinned;
  const pins = await channel.messages.fetchPins();
  const old = await channel.messages.fetchPinned();
  step('pins', {
    ids: pins.items.map(p => p.message.id),
    pinned: pins.items.map(p => p.message.pinned),
    pinned_at: pins.items.map(p => p.pinnedTimestamp),
    has_more: pins.hasMore,
    old: [...old.keys()],
  });
  const unpinned = waitFor(client, Events.ChannelPinsUpdate, c => c.id === channel.id);
  await msg.unpin();
  await unpinned;
  step('unpinned', { pins: (await channel.messages.fetchPins()).items.length });

  // Bulk delete.
  const doomed = [];
  for (let n = 0; n < 3; n++) doomed.push(await channel.send(`bulk me ${n}`));
  const bulk = waitFor(client, Events.MessageBulkDelete, msgs => msgs.has(doomed[0].id));
  const gone = await channel.bulkDelete(doomed);
  const [seen] = await bulk;
  step('purged', { deleted: [...gone.keys()].sort(), seen: [...seen.keys()].sort(), sent: doomed.map(m => m.id).sort() });
}, {
  // The default set, and GuildExpressions for GUILD_EMOJIS_UPDATE.
  intents: ['Guilds', 'GuildMembers', 'GuildMessages', 'MessageContent', 'GuildMessageReactions', 'GuildExpressions'],
});
