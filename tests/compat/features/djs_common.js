// Shared by the discord.js feature scenarios (tests/compat/features/djs_*.js).
//
// A scenario is `async (client, ctx, emit, djs) => {...}` that drives the
// library's own high-level API (guild.roles.create, message.react, ...) once
// the client is ready. `run(scenario, options)` points discord.js at the
// server, logs in with the bot token, runs the scenario with a time limit and
// prints one JSON object per line on stdout (the same events as
// dpy_common.py: ready, step, dispatch, log, error, done).
//
// Arguments: --base http://HOST:PORT --token BOT_TOKEN --djs-dir DIR --ctx JSON
// (DIR holds node_modules/discord.js: tests/compat/js).
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
    if (argv[i].startsWith('--')) out[argv[i].slice(2)] = argv[++i];
  }
  return out;
}

/**
 * Runs `scenario` once the client is ready; exits 0 only if it returned.
 * options.intents: names of GatewayIntentBits (default Guilds, GuildMembers,
 * GuildMessages, MessageContent, GuildMessageReactions, DirectMessages);
 * options.partials: names of Partials; options.timeoutMs (default 60 s).
 */
function run(scenario, options = {}) {
  const args = parseArgs(process.argv.slice(2));
  const req = createRequire(path.join(path.resolve(args['djs-dir']), 'package.json'));
  const djs = req('discord.js');
  const { Client, GatewayIntentBits, Partials, Events } = djs;
  const ctx = JSON.parse(args.ctx || '{}');
  const base = args.base.replace(/\/+$/, '');
  const intents = (
    options.intents || ['Guilds', 'GuildMembers', 'GuildMessages', 'MessageContent', 'GuildMessageReactions', 'DirectMessages']
  ).map(n => GatewayIntentBits[n]);
  const partials = (options.partials || []).map(n => Partials[n]);
  const client = new Client({ intents, partials, rest: { api: `${base}/api` } });
  emit('start', { lib: 'discord.js', version: djs.version });

  client.on(Events.Debug, msg => process.stderr.write(`${new Date().toISOString()} [debug] ${msg}\n`));
  client.on(Events.Warn, msg => emit('log', { level: 'WARN', message: String(msg) }));
  client.on(Events.Error, err => emit('error', { where: 'client', ...errFields(err) }));
  client.on(Events.ShardError, err => emit('error', { where: 'shard', ...errFields(err) }));
  client.on(Events.Raw, packet => {
    if (packet.t) emit('dispatch', { t: packet.t });
  });
  process.on('unhandledRejection', err => emit('error', { where: 'unhandledRejection', ...errFields(err) }));
  process.on('uncaughtException', err => {
    emit('fatal', { where: 'uncaughtException', ...errFields(err) });
    process.exit(1);
  });

  const timeoutMs = options.timeoutMs || 60000;
  client.once(Events.ClientReady, async c => {
    emit('ready', { user_id: c.user.id, guilds: [...c.guilds.cache.keys()] });
    let ok = false;
    const timer = setTimeout(() => {
      emit('error', { where: 'scenario', type: 'Timeout', message: `scenario took over ${timeoutMs} ms` });
      process.exit(1);
    }, timeoutMs);
    try {
      await scenario(client, ctx, (name, fields = {}) => emit('step', { name, ...fields }), djs);
      ok = true;
      emit('done');
    } catch (err) {
      emit('error', { where: 'scenario', ...errFields(err) });
    }
    clearTimeout(timer);
    await client.destroy().catch(() => {});
    process.exit(ok ? 0 : 1);
  });

  client.login(args.token).catch(err => {
    emit('fatal', { where: 'login', ...errFields(err) });
    process.exit(1);
  });
}

/** Resolves with the first `event` of `emitter` for which `pred` holds (rejects after `ms`). */
function waitFor(emitter, event, pred = () => true, ms = 15000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`no ${event} within ${ms} ms`));
    }, ms);
    function on(...a) {
      let hit = false;
      try {
        hit = pred(...a);
      } catch {
        hit = false;
      }
      if (hit) {
        clearTimeout(timer);
        emitter.off(event, on);
        resolve(a.length > 1 ? a : a[0]);
      }
    }
    emitter.on(event, on);
  });
}

module.exports = { run, waitFor, emit };
