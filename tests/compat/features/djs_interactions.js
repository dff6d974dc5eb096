#!/usr/bin/env node
// discord.js: interactions through the library's own API. Guild commands
// registered with the builders (SlashCommandBuilder: string/integer/user/
// channel options, a subcommand group, an autocompleted option;
// ContextMenuCommandBuilder: a user and a message menu) through
// guild.commands.set; the handlers answer with reply (public and ephemeral),
// respond (autocomplete), a reply with a button and a select used through
// awaitMessageComponent and a collector, showModal + awaitModalSubmit,
// deferReply + followUp + editReply; and a global command allowed in the
// bot's DMs (setContexts), run there through client.application.commands.
//
// The person's side (the member, a human) is driven here too, over raw REST
// with fetch(), as Discord's client does it: the command index, then
// POST /interactions for each command, component and modal. Every handler
// reports what it saw and the scenario waits for it (never a fixed sleep);
// the member then reads the channel's history to see which answers are
// public. Steps carry the invocation's nonce and the interaction's id, so the
// test can match the member's own gateway events against them.
'use strict';

const { run, emit } = require('./djs_common.js');

const FRUITS = ['apple', 'apricot', 'banana', 'cherry', 'pear'];
const WAIT_MS = 10000;
const DISCORD_EPOCH = 1420070400000n;

// A deprecation (or any process warning) is a library warning: the test fails on it.
process.on('warning', w => emit('log', { level: 'WARN', logger: 'process', message: `${w.name}: ${w.message}` }));

function summary(m) {
  const meta = m.interaction_metadata || {};
  return {
    id: m.id, type: m.type, content: m.content, author: (m.author || {}).id,
    application_id: m.application_id, webhook_id: m.webhook_id, flags: m.flags || 0,
    components: (m.components || []).length,
    meta: { id: meta.id, type: meta.type, name: meta.name, command_type: meta.command_type, user: (meta.user || {}).id },
  };
}

run(async (client, ctx, step, djs) => {
  const {
    ActionRowBuilder, ApplicationCommandType, ApplicationIntegrationType, ButtonBuilder, ButtonStyle, ChannelType, ComponentType,
    ContextMenuCommandBuilder, Events, LabelBuilder, MessageFlags, ModalBuilder, SlashCommandBuilder,
    StringSelectMenuBuilder, StringSelectMenuOptionBuilder, TextInputBuilder, TextInputStyle, InteractionContextType,
  } = djs;
  const guild = client.guilds.cache.get(ctx.guild);

  // ---- what the bot's handlers saw, one promise per name ----
  const waiters = new Map();
  function slot(name) {
    let w = waiters.get(name);
    if (!w || w.done) {
      w = { done: false };
      w.promise = new Promise(resolve => (w.resolve = resolve));
      waiters.set(name, w);
    }
    return w;
  }
  function seen(name, info) {
    const w = slot(name);
    w.done = true;
    w.resolve({ seen: true, ...info });
  }
  // Runs a handler body with an `info` object, reports it (and any error, which is also an 'error' event).
  async function handler(name, body) {
    const info = {};
    try {
      await body(info);
    } catch (err) {
      info.error = `${err.constructor?.name}: ${err.message}`;
      emit('error', { where: `handler ${name}`, type: err.constructor?.name, message: String(err.message), stack: err.stack, rawError: err.rawError });
    } finally {
      seen(name, info);
    }
  }
  const basics = i => ({
    interaction_id: i.id, user: i.user.id, itype: i.type, guild: i.guildId, channel: i.channelId,
  });

  // ---- the commands ----
  const commands = [
    new SlashCommandBuilder().setName('echo').setDescription('Echoes')
      .addStringOption(o => o.setName('text').setDescription('What to say').setRequired(true))
      .addIntegerOption(o => o.setName('count').setDescription('How often').setMinValue(1).setMaxValue(10).setRequired(true))
      .addUserOption(o => o.setName('who').setDescription('Whom').setRequired(true))
      .addChannelOption(o => o.setName('where').setDescription('Where').addChannelTypes(ChannelType.GuildText).setRequired(true)),
    new SlashCommandBuilder().setName('cfg').setDescription('Settings')
      .addSubcommandGroup(g => g.setName('set').setDescription('Set things')
        .addSubcommand(s => s.setName('color').setDescription('Sets the colour')
          .addStringOption(o => o.setName('value').setDescription('The colour').setRequired(true)))),
    new SlashCommandBuilder().setName('fruit').setDescription('Picks a fruit')
      .addStringOption(o => o.setName('name').setDescription('The fruit').setAutocomplete(true).setRequired(true)),
    new SlashCommandBuilder().setName('panel').setDescription('Shows buttons'),
    new SlashCommandBuilder().setName('form').setDescription('Asks in a form'),
    new SlashCommandBuilder().setName('slow').setDescription('Thinks first'),
    new ContextMenuCommandBuilder().setName('Greet').setType(ApplicationCommandType.User),
    new ContextMenuCommandBuilder().setName('Quote').setType(ApplicationCommandType.Message),
  ];

  const handlers = {
    echo: i => handler('echo', async info => {
      const who = i.options.getMember('who');
      const whoUser = i.options.getUser('who');
      const where = i.options.getChannel('where');
      Object.assign(info, basics(i), {
        text: i.options.getString('text'), count: i.options.getInteger('count'),
        who: whoUser?.id, who_kind: who?.constructor?.name, who_name: whoUser?.username,
        where: where?.id, where_kind: where?.constructor?.name, where_name: where?.name,
        permissions: i.memberPermissions?.bitfield.toString(), app_permissions: i.appPermissions?.bitfield.toString(),
        command: i.commandName,
      });
      const r = await i.reply({ content: `djs echo: ${info.text} x${info.count}`, withResponse: true });
      info.response_type = r.resource?.type;
      info.message_id = r.resource?.message?.id ?? r.interaction.responseMessageId;
    }),
    cfg: i => handler('color', async info => {
      Object.assign(info, basics(i), {
        value: i.options.getString('value'),
        command: [i.commandName, i.options.getSubcommandGroup(), i.options.getSubcommand()].join(' '),
      });
      await i.reply({ content: `djs colour set to ${info.value}`, flags: MessageFlags.Ephemeral });
      const original = await i.fetchReply();
      Object.assign(info, { message_id: original.id, ephemeral: original.flags.has(MessageFlags.Ephemeral), content: original.content });
    }),
    fruit: i => handler('fruit', async info => {
      Object.assign(info, basics(i), { fruit: i.options.getString('name') });
      await i.reply(`djs fruit: ${info.fruit}`);
    }),
    panel: i => handler('panel', async info => {
      Object.assign(info, basics(i));
      const button = new ButtonBuilder().setCustomId('panel:ok').setLabel('OK').setStyle(ButtonStyle.Primary);
      const select = new StringSelectMenuBuilder().setCustomId('panel:fruit').setPlaceholder('A fruit').addOptions(
        new StringSelectMenuOptionBuilder().setLabel('Apple').setValue('apple'),
        new StringSelectMenuOptionBuilder().setLabel('Pear').setValue('pear'),
      );
      const r = await i.reply({
        content: 'djs pick one',
        components: [new ActionRowBuilder().addComponents(button), new ActionRowBuilder().addComponents(select)],
        withResponse: true,
      });
      const message = r.resource?.message ?? (await i.fetchReply());
      Object.assign(info, {
        callback_message_id: r.interaction.responseMessageId, message_id: message.id,
        components: message.components.map(row => row.components.map(c => c.customId)),
      });
      // The button: awaitMessageComponent; the select: a collector. Both wait before the member acts.
      const clicked = message.awaitMessageComponent({ componentType: ComponentType.Button, time: 3 * WAIT_MS });
      const collector = message.createMessageComponentCollector({ componentType: ComponentType.StringSelect, max: 1, time: 3 * WAIT_MS });
      collector.on('collect', s => handler('select', async sinfo => {
        Object.assign(sinfo, basics(s), { custom_id: s.customId, values: s.values, message: s.message.id });
        await s.reply(`djs picked ${s.values[0]}`);
      }));
      clicked.then(b => handler('button', async binfo => {
        Object.assign(binfo, basics(b), { custom_id: b.customId, message: b.message.id, data_custom_id: b.customId });
        await b.deferUpdate();
        binfo.response_type = 6;
        const followup = await b.followUp({ content: 'djs button pressed' });
        binfo.followup_id = followup.id;
      }), err => seen('button', { error: String(err.message ?? err) }));
    }),
    form: i => handler('form', async info => {
      Object.assign(info, basics(i));
      const modal = new ModalBuilder().setCustomId('form').setTitle('Who are you').addLabelComponents(
        new LabelBuilder().setLabel('Your name').setTextInputComponent(
          new TextInputBuilder().setCustomId('name').setStyle(TextInputStyle.Short).setMaxLength(40)),
      );
      await i.showModal(modal);
      info.response_type = 9;
      i.awaitModalSubmit({ filter: m => m.customId === 'form', time: 3 * WAIT_MS }).then(
        m => handler('form_submit', async minfo => {
          Object.assign(minfo, basics(m), { custom_id: m.customId, value: m.fields.getTextInputValue('name') });
          await m.reply(`djs thanks ${minfo.value}`);
        }),
        err => seen('form_submit', { error: String(err.message ?? err) }),
      );
    }),
    slow: i => handler('slow', async info => {
      Object.assign(info, basics(i));
      await i.deferReply();
      info.response_type = 5;
      const followup = await i.followUp('djs slow done');
      const edited = await i.editReply('djs slow done (edited)');
      Object.assign(info, {
        followup_id: followup.id, followup_content: followup.content, edited_id: edited.id,
        edited_content: edited.content, edited_loading: edited.flags.has(MessageFlags.Loading),
      });
    }),
    Greet: i => handler('greet', async info => {
      Object.assign(info, basics(i), {
        target: i.targetUser?.id, target_kind: i.targetMember?.constructor?.name, target_id: i.targetId,
      });
      await i.reply(`djs hello ${i.targetUser?.username}`);
    }),
    dmping: i => handler('dmping', async info => {
      Object.assign(info, basics(i), {
        in_guild: i.inGuild(), context: i.context, channel_kind: i.channel?.constructor?.name ?? null,
        user_kind: i.user?.constructor?.name, member: i.member ? 'yes' : null,
      });
      const r = await i.reply({ content: 'djs dm pong', withResponse: true });
      info.message_id = r.resource?.message?.id ?? r.interaction.responseMessageId;
    }),
    Quote: i => handler('quote', async info => {
      const m = i.targetMessage;
      Object.assign(info, basics(i), { target: m?.id, content: m?.content, author: m?.author?.id, target_id: i.targetId });
      await i.reply(`djs quoting: ${m?.content}`);
    }),
  };

  client.on(Events.InteractionCreate, async i => {
    if (i.isAutocomplete()) {
      const focused = i.options.getFocused(true);
      const choices = FRUITS.filter(f => f.startsWith(focused.value)).map(f => ({ name: f, value: f }));
      seen('fruit_autocomplete', { ...basics(i), current: focused.value, focused: focused.name, choices: choices.map(c => c.value) });
      try {
        await i.respond(choices);
      } catch (err) {
        emit('error', { where: 'autocomplete respond', message: String(err.message), rawError: err.rawError });
      }
      return;
    }
    if (i.isChatInputCommand() || i.isContextMenuCommand()) {
      const h = handlers[i.commandName];
      if (h) await h(i);
    }
  });

  const set = await guild.commands.set(commands);
  step('synced', {
    names: [...set.values()].map(c => c.name).sort(),
    types: Object.fromEntries([...set.values()].map(c => [c.name, c.type])),
  });
  const globals = await client.application.commands.set([
    new SlashCommandBuilder().setName('dmping').setDescription('Answers in DMs too')
      .setContexts(InteractionContextType.Guild, InteractionContextType.BotDM)
      .setIntegrationTypes(ApplicationIntegrationType.GuildInstall),
  ]);
  step('synced_global', {
    names: [...globals.values()].map(c => c.name).sort(),
    contexts: Object.fromEntries([...globals.values()].map(c => [c.name, c.contexts])),
  });

  // ---- the person's side ----
  const api = ctx.api;
  const auth = { Authorization: ctx.member_token };
  let counter = 0n;
  const nonce = () => (((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | ++counter).toString();

  const idxRes = await fetch(`${api}/guilds/${ctx.guild}/application-command-index`, { headers: auth });
  const index = await idxRes.json();
  const apps = index.applications || [];
  const cmds = index.application_commands || [];
  const appId = (apps.find(a => String(a.bot_id) === ctx.bot_id) || {}).id ?? null;
  step('index', {
    status: idxRes.status, app_id: appId, client_app_id: client.application.id,
    names: cmds.map(c => c.name).sort(), versions: cmds.every(c => c.version), version: Boolean(index.version),
  });
  const byName = Object.fromEntries(cmds.map(c => [c.name, c]));
  const command = (name, options) => {
    const c = byName[name];
    const d = { id: c.id, name: c.name, type: c.type ?? 1, version: c.version };
    if (options !== undefined) d.options = options;
    return d;
  };

  // In the guild's channel, or in `channel` (a DM).
  async function interact(name, kind, data, messageId, channel) {
    const w = slot(name);
    const n = nonce();
    const body = { type: kind, application_id: appId, channel_id: channel ?? ctx.channel, nonce: n, data };
    if (channel === undefined) body.guild_id = ctx.guild;
    if (ctx.member_session) body.session_id = ctx.member_session;
    if (messageId !== undefined) body.message_id = messageId;
    const r = await fetch(`${api}/interactions`, {
      method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    const text = await r.text();
    const rec = { status: r.status, nonce: n };
    if (r.status !== 204) return { ...rec, body: text.slice(0, 500), seen: false };
    let timer;
    const got = await Promise.race([w.promise, new Promise(resolve => (timer = setTimeout(() => resolve({ seen: false }), WAIT_MS)))]);
    clearTimeout(timer);
    return { ...rec, ...got };
  }

  async function replies(interactionId) {
    if (!interactionId) return [];
    const r = await fetch(`${api}/channels/${ctx.channel}/messages?limit=100`, { headers: auth });
    if (r.status !== 200) throw new Error(`history: ${r.status} ${await r.text()}`);
    return (await r.json()).filter(m => (m.interaction_metadata || {}).id === interactionId).map(summary);
  }

  // A slash command with string, integer, user and channel options.
  let rec = await interact('echo', 2, command('echo', [
    { name: 'text', type: 3, value: 'hi there' },
    { name: 'count', type: 4, value: 3 },
    { name: 'who', type: 6, value: ctx.member2_id },
    { name: 'where', type: 7, value: ctx.channel },
  ]));
  step('echo', { ...rec, history: await replies(rec.interaction_id) });

  // A subcommand group; the answer is ephemeral.
  rec = await interact('color', 2, command('cfg', [
    { name: 'set', type: 2, options: [{ name: 'color', type: 1, options: [{ name: 'value', type: 3, value: 'teal' }] }] },
  ]));
  step('color', { ...rec, history: await replies(rec.interaction_id) });

  // Autocomplete (a partial value, focused), then the command itself.
  rec = await interact('fruit_autocomplete', 4, command('fruit', [{ name: 'name', type: 3, value: 'ap', focused: true }]));
  step('fruit_autocomplete', rec);
  rec = await interact('fruit', 2, command('fruit', [{ name: 'name', type: 3, value: 'apricot' }]));
  step('fruit', { ...rec, history: await replies(rec.interaction_id) });

  // Components: the reply carries a button and a select; the member uses both.
  rec = await interact('panel', 2, command('panel'));
  step('panel', { ...rec, history: await replies(rec.interaction_id) });
  const panelMessage = rec.message_id;
  if (panelMessage) {
    rec = await interact('button', 3, { custom_id: 'panel:ok', component_type: 2 }, panelMessage);
    step('button', { ...rec, history: await replies(rec.interaction_id) });
    rec = await interact('select', 3, { custom_id: 'panel:fruit', component_type: 3, values: ['pear'] }, panelMessage);
    step('select', { ...rec, history: await replies(rec.interaction_id) });
  }

  // A modal: shown by the command, submitted by the member (a label around a text input, as built).
  rec = await interact('form', 2, command('form'));
  step('form', rec);
  if (rec.seen) {
    rec = await interact('form_submit', 5, {
      custom_id: 'form',
      components: [{ type: 18, id: 1, component: { type: 4, id: 2, custom_id: 'name', value: 'Bob' } }],
    });
    step('form_submit', { ...rec, history: await replies(rec.interaction_id) });
  }

  // Deferred ("thinking"), a followup that replaces it, an edit.
  rec = await interact('slow', 2, command('slow'));
  step('slow', { ...rec, history: await replies(rec.interaction_id) });

  // A user context menu on member2.
  rec = await interact('greet', 2, { ...command('Greet'), target_id: ctx.member2_id });
  step('greet', { ...rec, history: await replies(rec.interaction_id) });

  // A message context menu on a message of the member's (last: it needs the message resolved, see the test).
  const posted = await fetch(`${api}/channels/${ctx.channel}/messages`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ content: 'quote me, discord.js' }),
  });
  const target = await posted.json();
  rec = await interact('quote', 2, { ...command('Quote'), target_id: target.id });
  step('quote', { ...rec, target_message: target.id, history: await replies(rec.interaction_id) });

  // A global command in the member's DM with the bot, from the DM's index.
  const dm = await (await fetch(`${api}/users/@me/channels`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ recipient_id: ctx.bot_id }),
  })).json();
  const dmIndex = await (await fetch(`${api}/channels/${dm.id}/application-command-index`, { headers: auth })).json();
  const dmCommands = Object.fromEntries((dmIndex.application_commands || []).map(c => [c.name, c]));
  rec = { status: null, index: Object.keys(dmCommands).sort() };
  if (dmCommands.dmping) {
    const c = dmCommands.dmping;
    rec = { ...rec, ...(await interact('dmping', 2, { id: c.id, name: c.name, type: 1, version: c.version }, undefined, dm.id)) };
  }
  const dmHistory = await (await fetch(`${api}/channels/${dm.id}/messages`, { headers: auth })).json();
  rec.history = dmHistory.filter(m => (m.interaction_metadata || {}).id === rec.interaction_id).map(summary);
  step('dmping', { ...rec, dm: dm.id });
}, { timeoutMs: 150000 });
