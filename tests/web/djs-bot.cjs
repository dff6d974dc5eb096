// An unmodified discord.js bot for the browser test of interactions
// (commands-libs.test.mjs): everything through the library's own API:
// builders registered with guild.commands.set, reply / deferReply /
// followUp / editReply, a button and a select awaited on the reply, a
// modal (showModal + awaitModalSubmit), autocomplete (respond), and a
// user and a message context menu. A person drives it from the web client.
//
// Usage: node djs-bot.cjs BASE BOT_TOKEN GUILD DJS_DIR
// (DJS_DIR holds node_modules/discord.js: tests/compat/js, installed by
// tests/compat/setup.sh). Prints "ready" once its commands are set. Any
// library warning or error is printed as "LIBRARY PROBLEM ..." on stderr
// and ends the process with 1: the test fails on it.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const [base, token, guildId, djsDir] = process.argv.slice(2);
const djs = createRequire(path.join(path.resolve(djsDir), 'package.json'))('discord.js');
const {
  ActionRowBuilder, ApplicationCommandType, ButtonBuilder, ButtonStyle, Client, ComponentType, ContextMenuCommandBuilder,
  Events, GatewayIntentBits, LabelBuilder, MessageFlags, ModalBuilder, SlashCommandBuilder, StringSelectMenuBuilder,
  StringSelectMenuOptionBuilder, TextInputBuilder, TextInputStyle,
} = djs;

function problem(where, err) {
  process.stderr.write(`LIBRARY PROBLEM ${where}: ${err?.stack ?? err}\n`);
  process.exit(1);
}
process.on('warning', w => problem('process warning', `${w.name}: ${w.message}`));
process.on('unhandledRejection', e => problem('unhandled rejection', e));

const client = new Client({ intents: [GatewayIntentBits.Guilds], rest: { api: `${base.replace(/\/+$/, '')}/api` } });
client.on(Events.Warn, m => problem('warn', m));
client.on(Events.Error, e => problem('error', e));

const FRUITS = ['apple', 'apricot', 'banana', 'cherry'];
const WAIT_MS = 60000;

const commands = [
  new SlashCommandBuilder().setName('greet').setDescription('Greets someone')
    .addStringOption(o => o.setName('name').setDescription('Whom').setRequired(true))
    .addIntegerOption(o => o.setName('times').setDescription('How often').setMinValue(1).setMaxValue(3)),
  new SlashCommandBuilder().setName('panel').setDescription('Shows a button and a select'),
  new SlashCommandBuilder().setName('form').setDescription('Asks in a form'),
  new SlashCommandBuilder().setName('slow').setDescription('Thinks first'),
  new SlashCommandBuilder().setName('fruit').setDescription('Picks a fruit')
    .addStringOption(o => o.setName('name').setDescription('The fruit').setAutocomplete(true).setRequired(true)),
  new ContextMenuCommandBuilder().setName('Wave').setType(ApplicationCommandType.User),
  new ContextMenuCommandBuilder().setName('Quote').setType(ApplicationCommandType.Message),
];

const handlers = {
  async greet(i) {
    const times = i.options.getInteger('times') ?? 1;
    await i.reply(`djs greets ${i.options.getString('name')} x${times}`);
  },
  async panel(i) {
    const button = new ButtonBuilder().setCustomId('panel:ok').setLabel('Press').setStyle(ButtonStyle.Success);
    const select = new StringSelectMenuBuilder().setCustomId('panel:fruit').setPlaceholder('A fruit').addOptions(
      new StringSelectMenuOptionBuilder().setLabel('Apple').setValue('apple'),
      new StringSelectMenuOptionBuilder().setLabel('Pear').setValue('pear'),
    );
    const r = await i.reply({
      content: 'djs panel',
      components: [new ActionRowBuilder().addComponents(button), new ActionRowBuilder().addComponents(select)],
      withResponse: true,
    });
    const message = r.resource?.message ?? (await i.fetchReply());
    message.awaitMessageComponent({ componentType: ComponentType.Button, time: WAIT_MS }).then(
      b => b.reply({ content: 'djs: only you pressed it', flags: MessageFlags.Ephemeral }),
      e => problem('button', e),
    );
    message.awaitMessageComponent({ componentType: ComponentType.StringSelect, time: WAIT_MS }).then(
      s => s.reply(`djs picked ${s.values[0]}`),
      e => problem('select', e),
    );
  },
  async form(i) {
    const modal = new ModalBuilder().setCustomId('djs-form').setTitle('Your details').addLabelComponents(
      new LabelBuilder().setLabel('Your name').setTextInputComponent(
        new TextInputBuilder().setCustomId('name').setStyle(TextInputStyle.Short).setMaxLength(40)),
    );
    await i.showModal(modal);
    i.awaitModalSubmit({ filter: m => m.customId === 'djs-form', time: WAIT_MS }).then(
      m => m.reply(`djs thanks ${m.fields.getTextInputValue('name')}`),
      e => problem('modal', e),
    );
  },
  async slow(i) {
    await i.deferReply();
    await i.editReply('djs done thinking');
    await i.followUp('djs one more thing');
  },
  async fruit(i) {
    await i.reply(`djs fruit: ${i.options.getString('name')}`);
  },
  async Wave(i) {
    await i.reply(`djs waves at ${i.targetUser.username}`);
  },
  async Quote(i) {
    await i.reply(`djs quotes: ${i.targetMessage.content}`);
  },
};

client.on(Events.InteractionCreate, async i => {
  try {
    if (i.isAutocomplete()) {
      const typed = i.options.getFocused();
      await i.respond(FRUITS.filter(f => f.startsWith(typed)).map(f => ({ name: f, value: f })));
    } else if (i.isChatInputCommand() || i.isContextMenuCommand()) {
      await handlers[i.commandName]?.(i);
    }
  } catch (e) {
    problem(`handler ${i.commandName ?? i.customId}`, e);
  }
});

client.once(Events.ClientReady, async c => {
  try {
    await c.guilds.cache.get(guildId).commands.set(commands);
    console.log('ready');
  } catch (e) {
    problem('commands.set', e);
  }
});

client.login(token).catch(e => problem('login', e));
