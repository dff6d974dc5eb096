#!/usr/bin/env node
// discord.js: attachments and webhooks through the library's API. Uploads a
// file (channel.send({files})), reads it back from the URL the library
// reports, deletes it; creates a webhook (channel.createWebhook), sends
// through it with and without a file (webhook.send), sees its MESSAGE_CREATE,
// lists (fetchWebhooks) and deletes it.
'use strict';

const crypto = require('node:crypto');
const { run, waitFor } = require('./djs_common.js');

function content(seed, n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) % 251;
  return b;
}
const sha = b => crypto.createHash('sha256').update(b).digest('hex');
async function download(url) {
  const r = await fetch(url);
  return Buffer.from(await r.arrayBuffer());
}

run(async (client, ctx, step, djs) => {
  const guild = client.guilds.cache.get(ctx.guild);
  const channel = guild.channels.cache.get(ctx.channel);
  const goneData = content(11, 300000);
  const keptData = content(12, 120000);

  const gone = await channel.send({ content: 'a file', files: [{ attachment: goneData, name: 'gone.bin' }] });
  const a = gone.attachments.first();
  const read = await download(a.url);
  step('uploaded', { id: gone.id, url: a.url, size: a.size, filename: a.name, read_same: read.equals(goneData), sha: sha(goneData) });
  const deleted = waitFor(client, djs.Events.MessageDelete, m => m.id === gone.id);
  await gone.delete();
  await deleted;
  step('deleted', { id: gone.id });

  const kept = await channel.send({ files: [{ attachment: keptData, name: 'kept.txt', description: 'kept file' }] });
  const k = kept.attachments.first();
  step('kept', { url: k.url, size: k.size, content_type: k.contentType, description: k.description, sha: sha(keptData) });

  const hook = await channel.createWebhook({ name: 'djs hook' });
  step('webhook', { id: hook.id, token_set: Boolean(hook.token), channel_id: hook.channelId });
  const seen = waitFor(client, djs.Events.MessageCreate, m => m.webhookId === hook.id);
  const sent = await hook.send({ content: 'from the webhook', username: 'djs alias' });
  const event = await seen;
  step('executed', {
    id: sent.id, webhook_id: sent.webhookId, author: sent.author.username, bot: sent.author.bot,
    event_id: event.id, event_webhook_id: event.webhookId, event_author: event.author.username,
  });
  const hookData = content(13, 40000);
  const withFile = await hook.send({ content: 'webhook file', files: [{ attachment: hookData, name: 'hook.bin' }] });
  const hread = await download(withFile.attachments.first().url);
  step('executed_file', { id: withFile.id, read_same: hread.equals(hookData), webhook_id: withFile.webhookId });

  const inChannel = await channel.fetchWebhooks();
  const inGuild = await guild.fetchWebhooks();
  step('listed', { channel: [...inChannel.keys()], guild: [...inGuild.keys()] });
  await hook.delete();
  const after = await channel.fetchWebhooks();
  step('webhook_deleted', { remaining: [...after.keys()] });
});
