// A small bot for the browser tests of interactions, speaking the Gateway
// and the REST API directly (Node's WebSocket: run with
// --experimental-websocket on Node 20). It registers guild commands, then
// answers what a person does in the web client:
//   /echo text        a message with a button and a select
//   button "again"    an ephemeral reply, with a button "Once more" that
//                     updates that ephemeral message (type 7)
//   select "pick"     a message naming the value
//   /form             a modal; its submission is answered with a message
//   /think            deferred, then a followup
//   /slow             never answered (the client says the bot did not respond)
//   /fruit q          autocomplete choices for q
//   /who              a user select and a channel select, answered with the choice
//   /look file        fetches the attached file, answers with its name and text
//   Wave (user menu)  a message naming the user
//   Quote (message)   a message quoting the message
// Usage: node --experimental-websocket interactions-bot.mjs BASE BOT_TOKEN GUILD
// Prints "ready" once its commands are registered and its session has the guild.

const [base, token, guild] = process.argv.slice(2);
const auth = `Bot ${token}`;

async function rest(method, path, body) {
  const r = await fetch(`${base}/api/v10${path}`, {
    method,
    headers: { authorization: auth, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const app = await rest("GET", "/applications/@me");
await rest("PUT", `/applications/${app.id}/guilds/${guild}/commands`, [
  { name: "echo", description: "Says it back", options: [{ type: 3, name: "text", description: "What to say", required: true }] },
  { name: "form", description: "Asks your name" },
  { name: "think", description: "Takes a moment" },
  { name: "slow", description: "Never answers" },
  { name: "fruit", description: "Picks a fruit", options: [{ type: 3, name: "q", description: "Fruit", required: true, autocomplete: true }] },
  { name: "who", description: "Asks whom and where" },
  { name: "look", description: "Reads a file", options: [{ type: 11, name: "file", description: "The file", required: true }] },
  { name: "Wave", type: 2 },
  { name: "Quote", type: 3 },
]);

const FRUIT = ["apple", "apricot", "banana", "cherry"];

async function answer(i, type, data) {
  await rest("POST", `/interactions/${i.id}/${i.token}/callback`, { type, data });
}

async function handle(i) {
  const d = i.data;
  if (i.type === 4) {
    const q = String(d.options?.find((o) => o.focused)?.value ?? "");
    return answer(i, 8, { choices: FRUIT.filter((f) => f.startsWith(q)).map((f) => ({ name: f, value: f })) });
  }
  if (i.type === 3) {
    if (d.custom_id === "again") {
      const more = [{ type: 1, components: [{ type: 2, style: 2, label: "Once more", custom_id: "once" }] }];
      return answer(i, 4, { content: "pressed", flags: 64, components: more });
    }
    // A button on the ephemeral answer: that message is updated in place.
    if (d.custom_id === "once") return answer(i, 7, { content: "pressed twice", components: [] });
    if (d.custom_id === "pick") return answer(i, 4, { content: `picked: ${d.values[0]}` });
    if (d.custom_id === "whom") return answer(i, 4, { content: `chose user: ${d.resolved.users[d.values[0]].username}` });
    if (d.custom_id === "where") return answer(i, 4, { content: `chose channel: #${d.resolved.channels[d.values[0]].name}` });
  }
  if (i.type === 5) {
    // Labels (type 18, the newer form) or rows of inputs: both as Discord's client sends them.
    const first = d.components[0];
    const name = first.component?.value ?? first.components[0].value;
    return answer(i, 4, { content: `hello ${name}` });
  }
  if (d.type === 2) return answer(i, 4, { content: `waved at ${d.resolved.users[d.target_id].username}` });
  if (d.type === 3) return answer(i, 4, { content: `quoted: ${d.resolved.messages[d.target_id].content}` });
  switch (d.name) {
    case "look": {
      const a = d.resolved.attachments[d.options[0].value];
      const text = await (await fetch(a.url)).text();
      return answer(i, 4, { content: `looked at ${a.filename}: ${text}` });
    }
    case "who":
      return answer(i, 4, {
        content: "whom and where?",
        components: [
          { type: 1, components: [{ type: 5, custom_id: "whom", placeholder: "Pick a user" }] },
          { type: 1, components: [{ type: 8, custom_id: "where", placeholder: "Pick a channel", channel_types: [0] }] },
        ],
      });
    case "echo":
      return answer(i, 4, {
        content: `echo: ${d.options[0].value}`,
        components: [
          { type: 1, components: [{ type: 2, style: 1, label: "Again", custom_id: "again" }] },
          {
            type: 1,
            components: [
              { type: 3, custom_id: "pick", placeholder: "Pick one", options: [{ label: "Alpha", value: "a" }, { label: "Beta", value: "b" }] },
            ],
          },
        ],
      });
    case "form":
      return answer(i, 9, {
        custom_id: "who",
        title: "Who are you?",
        components: [
          { type: 10, content: "We greet everyone by name." },
          { type: 18, label: "Your name", component: { type: 4, custom_id: "name", style: 1, required: true } },
        ],
      });
    case "think":
      await answer(i, 5, {});
      setTimeout(() => rest("POST", `/webhooks/${app.id}/${i.token}`, { content: "done thinking" }).catch(fail), 300);
      return;
    case "fruit":
      return answer(i, 4, { content: `fruit: ${d.options[0].value}` });
    case "slow":
      return;
  }
}

function fail(e) {
  console.error("bot:", e);
  process.exit(1);
}

const ws = new WebSocket(`${base.replace("http", "ws")}/?v=10&encoding=json`);
let seq = null;
ws.onmessage = (ev) => {
  const f = JSON.parse(ev.data);
  if (f.s) seq = f.s;
  if (f.op === 10) {
    setInterval(() => ws.send(JSON.stringify({ op: 1, d: seq })), f.d.heartbeat_interval);
    ws.send(JSON.stringify({ op: 2, d: { token, intents: 1 | 512, properties: { os: "linux", browser: "test", device: "test" } } }));
  } else if (f.t === "GUILD_CREATE" && f.d.id === guild) {
    // Subscribed to the guild: interactions there reach this session now.
    console.log("ready");
  } else if (f.t === "INTERACTION_CREATE") {
    handle(f.d).catch(fail);
  }
};
ws.onclose = (e) => fail(`gateway closed ${e.code}`);
