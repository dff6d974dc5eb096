// Discord's permission bits, by their API names, with the labels its
// client shows, so a bot's invite link can say in words what it asks for.
// A permission set travels as a decimal string (it passes 2^53), so it is
// read as a BigInt.

const FLAGS: [bit: number, name: string, label: string][] = [
  [0, "CREATE_INSTANT_INVITE", "Create Invite"],
  [1, "KICK_MEMBERS", "Kick Members"],
  [2, "BAN_MEMBERS", "Ban Members"],
  [3, "ADMINISTRATOR", "Administrator"],
  [4, "MANAGE_CHANNELS", "Manage Channels"],
  [5, "MANAGE_GUILD", "Manage Server"],
  [6, "ADD_REACTIONS", "Add Reactions"],
  [7, "VIEW_AUDIT_LOG", "View Audit Log"],
  [8, "PRIORITY_SPEAKER", "Priority Speaker"],
  [9, "STREAM", "Video"],
  [10, "VIEW_CHANNEL", "View Channels"],
  [11, "SEND_MESSAGES", "Send Messages"],
  [12, "SEND_TTS_MESSAGES", "Send Text-to-Speech Messages"],
  [13, "MANAGE_MESSAGES", "Manage Messages"],
  [14, "EMBED_LINKS", "Embed Links"],
  [15, "ATTACH_FILES", "Attach Files"],
  [16, "READ_MESSAGE_HISTORY", "Read Message History"],
  [17, "MENTION_EVERYONE", "Mention @everyone, @here and All Roles"],
  [18, "USE_EXTERNAL_EMOJIS", "Use External Emojis"],
  [19, "VIEW_GUILD_INSIGHTS", "View Server Insights"],
  [20, "CONNECT", "Connect"],
  [21, "SPEAK", "Speak"],
  [22, "MUTE_MEMBERS", "Mute Members"],
  [23, "DEAFEN_MEMBERS", "Deafen Members"],
  [24, "MOVE_MEMBERS", "Move Members"],
  [25, "USE_VAD", "Use Voice Activity"],
  [26, "CHANGE_NICKNAME", "Change Nickname"],
  [27, "MANAGE_NICKNAMES", "Manage Nicknames"],
  [28, "MANAGE_ROLES", "Manage Roles"],
  [29, "MANAGE_WEBHOOKS", "Manage Webhooks"],
  [30, "MANAGE_GUILD_EXPRESSIONS", "Manage Expressions"],
  [31, "USE_APPLICATION_COMMANDS", "Use Application Commands"],
  [32, "REQUEST_TO_SPEAK", "Request to Speak"],
  [33, "MANAGE_EVENTS", "Manage Events"],
  [34, "MANAGE_THREADS", "Manage Threads"],
  [35, "CREATE_PUBLIC_THREADS", "Create Public Threads"],
  [36, "CREATE_PRIVATE_THREADS", "Create Private Threads"],
  [37, "USE_EXTERNAL_STICKERS", "Use External Stickers"],
  [38, "SEND_MESSAGES_IN_THREADS", "Send Messages in Threads"],
  [39, "USE_EMBEDDED_ACTIVITIES", "Use Activities"],
  [40, "MODERATE_MEMBERS", "Time Out Members"],
  [41, "VIEW_CREATOR_MONETIZATION_ANALYTICS", "View Creator Monetization Analytics"],
  [42, "USE_SOUNDBOARD", "Use Soundboard"],
  [43, "CREATE_GUILD_EXPRESSIONS", "Create Expressions"],
  [44, "CREATE_EVENTS", "Create Events"],
  [45, "USE_EXTERNAL_SOUNDS", "Use External Sounds"],
  [46, "SEND_VOICE_MESSAGES", "Send Voice Messages"],
  [49, "SEND_POLLS", "Create Polls"],
  [50, "USE_EXTERNAL_APPS", "Use External Apps"],
  [51, "PIN_MESSAGES", "Pin Messages"],
  [52, "BYPASS_SLOWMODE", "Bypass Slowmode"],
];

export type Permission = { bit: number; name: string; label: string };

/// The permissions set in `bits` (a decimal string), lowest bit first; a
/// bit Discord has no name for is listed by its number. null if `bits`
/// is not a decimal number.
export function decodePermissions(bits: string): Permission[] | null {
  if (!/^\d{1,30}$/.test(bits)) return null;
  let n = BigInt(bits);
  const out: Permission[] = [];
  const known = new Map(FLAGS.map(([bit, name, label]) => [bit, { bit, name, label }]));
  for (let bit = 0; n > 0n; bit++, n >>= 1n) {
    if (!(n & 1n)) continue;
    out.push(known.get(bit) ?? { bit, name: `1 << ${bit}`, label: `Unknown permission (bit ${bit})` });
  }
  return out;
}

/// Discord's words for permission `bit` (its number when it has none).
export function permissionLabel(bit: number): string {
  return FLAGS.find(([b]) => b === bit)?.[2] ?? `Permission ${bit}`;
}
