#!/usr/bin/env node
// discord.js 14.x compat bot for throng.
//
// Usage: node djs_bot.js --base http://127.0.0.1:PORT --token TOKEN --djs-dir DIR
//   DIR is an npm install dir containing node_modules/discord.js (tests/compat/js or
//   tests/compat/js-zlib); discord.js (and, transitively, zlib-sync) is loaded from there.
//
// Prints one JSON object per line on stdout; library debug output goes to stderr.
// Events: start, ready, shard_ready, guild_create, raw, message, reply_sent, resumed,
// reconnecting, shard_disconnect, error, login_error (exit 3), fatal (exit 1).
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const T0 = Date.now();
function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, t_ms: Date.now() - T0, ...fields }) + '\n');
}
function errFields(err) {
  if (!err) return { type: null };
  return {
    type: err.constructor ? err.constructor.name : typeof err,
    name: err.name,
    code: err.code,
    status: err.status,
    message: String(err.message ?? err),
    url: err.url,
    method: err.method,
    rawError: err.rawError,
    stack: err.stack,
  };
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith('--')) out[a.slice(2)] = argv[++i];
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
if (!args.base || !args.token || !args['djs-dir']) {
  process.stderr.write('usage: djs_bot.js --base URL --token TOKEN --djs-dir DIR\n');
  process.exit(2);
}
const djsDir = path.resolve(args['djs-dir']);
const req = createRequire(path.join(djsDir, 'package.json'));
const djs = req('discord.js');
let zlibSync = null;
try {
  req('zlib-sync');
  zlibSync = true;
} catch {
  zlibSync = false;
}
const { Client, GatewayIntentBits, Events } = djs;
const base = args.base.replace(/\/+$/, '');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent],
  rest: { api: `${base}/api` },
});

let compression = null;
emit('start', { lib: 'discord.js', version: djs.version, zlib_sync: zlibSync, api: `${base}/api`, djs_dir: djsDir });

client.on(Events.Debug, msg => {
  process.stderr.write(`${new Date().toISOString()} [debug] ${msg}\n`);
  if (/Heartbeat acknowledged/.test(msg)) emit('heartbeat_ack');
  const inv = /Invalid session; will attempt to resume: (\S+)/.exec(msg);
  if (inv) emit('raw_op', { op: 9, d: inv[1] === 'true' ? true : inv[1] === 'false' ? false : inv[1] });
  const m = /compression: ([\w-]+)/.exec(msg);
  if (m && compression === null) {
    compression = m[1];
    emit('compression', { compression });
  }
});
client.on(Events.Warn, msg => emit('log', { level: 'WARN', message: String(msg) }));
client.on(Events.Error, err => emit('error', { where: 'client', ...errFields(err) }));
client.on(Events.ShardError, (err, id) => emit('error', { where: 'shard', shard: id, ...errFields(err) }));
client.on(Events.ShardReconnecting, id => emit('reconnecting', { shard: id }));
client.on(Events.ShardDisconnect, (ev, id) => emit('shard_disconnect', { shard: id, code: ev && ev.code }));
client.on(Events.ShardReady, (id, unavailable) =>
  emit('shard_ready', { shard: id, unavailable: unavailable ? [...unavailable] : null }),
);
client.on(Events.ShardResume, (id, replayed) => emit('resumed', { shard: id, replayed }));
client.on(Events.Raw, packet => {
  const fields = { t: packet.t, s: packet.s };
  if (packet.t === 'GUILD_CREATE' && packet.d) {
    fields.id = packet.d.id;
    fields.channels = Array.isArray(packet.d.channels) ? packet.d.channels.length : null;
  }
  emit('raw', fields);
});

client.on(Events.GuildCreate, guild => {
  // Only fires for guilds joined after READY in discord.js 14; initial guilds are reported on ready.
  emit('guild_create', { id: guild.id, source: 'guildCreate', name: guild.name, channels: channelsOf(guild) });
});

function channelsOf(guild) {
  return [...guild.channels.cache.values()].map(c => ({ id: c.id, type: c.type, name: c.name }));
}

client.once(Events.ClientReady, c => {
  for (const guild of c.guilds.cache.values()) {
    emit('guild_create', {
      id: guild.id,
      source: 'cache_at_ready',
      available: guild.available,
      name: guild.name,
      channels: channelsOf(guild),
      me: guild.members.me ? guild.members.me.id : null,
    });
  }
  emit('ready', {
    user_id: c.user.id,
    username: c.user.username,
    application_id: c.application ? c.application.id : null,
    guilds: [...c.guilds.cache.keys()],
    compression,
  });
});

client.on(Events.MessageCreate, async message => {
  emit('message', {
    id: message.id,
    content: message.content,
    author_id: message.author ? message.author.id : null,
    author_bot: message.author ? message.author.bot : null,
    guild_id: message.guildId,
    channel_id: message.channelId,
    reference_id: message.reference ? message.reference.messageId : null,
  });
  if (!message.author || message.author.id === client.user.id) return;
  if (message.content === 'ping') {
    try {
      const reply = await message.reply('pong');
      emit('reply_sent', {
        id: reply.id,
        content: reply.content,
        reference_id: reply.reference ? reply.reference.messageId : null,
        channel_id: reply.channelId,
      });
    } catch (err) {
      emit('error', { where: 'reply', ...errFields(err) });
    }
  }
});

process.on('unhandledRejection', err => emit('error', { where: 'unhandledRejection', ...errFields(err) }));
process.on('uncaughtException', err => {
  emit('fatal', { where: 'uncaughtException', ...errFields(err) });
  process.exit(1);
});
function shutdown() {
  client
    .destroy()
    .catch(() => {})
    .finally(() => {
      emit('exit');
      process.exit(0);
    });
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

client.login(args.token).catch(err => {
  emit('login_error', errFields(err));
  client.destroy().catch(() => {});
  process.exit(3);
});
