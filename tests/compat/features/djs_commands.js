#!/usr/bin/env node
// discord.js: application commands through the library's API:
// client.application.commands.set([...]) globally, the REST client's
// rest.put(Routes.applicationGuildCommands(...)) for the guild, the guild's
// and global commands fetched back, one created, edited and deleted.
'use strict';

const { run } = require('./djs_common.js');

run(async (client, ctx, step, djs) => {
  const { ApplicationCommandOptionType: Opt, ApplicationCommandType: Type, REST, Routes } = djs;
  const commands = [
    {
      name: 'ping',
      description: 'Replies with pong',
      options: [
        { type: Opt.Integer, name: 'times', description: 'How many pongs', required: true,
          choices: [{ name: 'one', value: 1 }, { name: 'two', value: 2 }] },
        { type: Opt.String, name: 'note', description: 'A note' },
      ],
    },
    { name: 'admin', description: 'Admin tools', options: [
      { type: Opt.Subcommand, name: 'purge', description: 'Purges messages',
        options: [{ type: Opt.Integer, name: 'count', description: 'How many', required: true }] },
    ] },
    { type: Type.User, name: 'Inspect User' },
  ];
  const set = await client.application.commands.set(commands);
  step('set_global', { names: [...set.values()].map(c => c.name).sort() });
  const fetched = await client.application.commands.fetch();
  const ping = [...fetched.values()].find(c => c.name === 'ping');
  step('fetched_global', {
    names: [...fetched.values()].map(c => c.name).sort(),
    ping_options: ping.options.map(o => o.name),
    ping_choices: ping.options[0].choices.map(c => c.name),
  });

  const rest = new REST({ version: '10', api: ctx.api.replace(/\/v10$/, '') }).setToken(client.token);
  const put = await rest.put(Routes.applicationGuildCommands(client.application.id, ctx.guild), { body: commands.slice(0, 2) });
  const guild = client.guilds.cache.get(ctx.guild);
  const guildCmds = await guild.commands.fetch();
  step('guild', { put: put.map(c => c.name).sort(), fetched: [...guildCmds.values()].map(c => c.name).sort(),
    guild_ids: [...new Set([...guildCmds.values()].map(c => c.guildId))] });

  const extra = await client.application.commands.create({ name: 'echo', description: 'Echoes' });
  const edited = await extra.edit({ description: 'Echoes back' });
  await extra.delete();
  const after = await client.application.commands.fetch();
  step('one', { edited: edited.description, names: [...after.values()].map(c => c.name).sort() });

  const again = await client.application.commands.set(commands);
  step('reset', { same_ids: [...again.keys()].sort().join() === [...set.keys()].sort().join() });
});
