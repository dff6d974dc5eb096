//! Gateway v10: opcodes, intents, client payloads and the dispatch envelope.
//!
//! A dispatch on the wire is `{"op":0,"t":"NAME","s":N,"d":BODY}`. The body is
//! encoded once per guild event and shared; only the prefix with the
//! per-session `s` is written per recipient ([`write_dispatch`]).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::id::GuildId;
use crate::id::UserId;

/// Gateway opcodes.
pub mod op {
    pub const DISPATCH: u8 = 0;
    pub const HEARTBEAT: u8 = 1;
    pub const IDENTIFY: u8 = 2;
    pub const PRESENCE_UPDATE: u8 = 3;
    pub const VOICE_STATE_UPDATE: u8 = 4;
    pub const RESUME: u8 = 6;
    pub const RECONNECT: u8 = 7;
    pub const REQUEST_GUILD_MEMBERS: u8 = 8;
    pub const INVALID_SESSION: u8 = 9;
    pub const HELLO: u8 = 10;
    pub const HEARTBEAT_ACK: u8 = 11;
    pub const GUILD_SYNC: u8 = 12;
    pub const GUILD_SUBSCRIPTIONS: u8 = 14;
    pub const GUILD_SUBSCRIPTIONS_BULK: u8 = 37;
    pub const QOS_HEARTBEAT: u8 = 40;
    pub const TIME_SPENT: u8 = 41;
    pub const REQUEST_CHANNEL_INFO: u8 = 43;
}

/// Gateway intents (bit flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Intents(pub u64);

impl Intents {
    pub const GUILDS: u64 = 1 << 0;
    pub const GUILD_MEMBERS: u64 = 1 << 1;
    pub const GUILD_MODERATION: u64 = 1 << 2;
    pub const GUILD_EXPRESSIONS: u64 = 1 << 3;
    pub const GUILD_INTEGRATIONS: u64 = 1 << 4;
    pub const GUILD_WEBHOOKS: u64 = 1 << 5;
    pub const GUILD_INVITES: u64 = 1 << 6;
    pub const GUILD_VOICE_STATES: u64 = 1 << 7;
    pub const GUILD_PRESENCES: u64 = 1 << 8;
    pub const GUILD_MESSAGES: u64 = 1 << 9;
    pub const GUILD_MESSAGE_REACTIONS: u64 = 1 << 10;
    pub const GUILD_MESSAGE_TYPING: u64 = 1 << 11;
    pub const DIRECT_MESSAGES: u64 = 1 << 12;
    pub const DIRECT_MESSAGE_REACTIONS: u64 = 1 << 13;
    pub const DIRECT_MESSAGE_TYPING: u64 = 1 << 14;
    pub const MESSAGE_CONTENT: u64 = 1 << 15;
    pub const GUILD_SCHEDULED_EVENTS: u64 = 1 << 16;
    pub const AUTO_MODERATION_CONFIGURATION: u64 = 1 << 20;
    pub const AUTO_MODERATION_EXECUTION: u64 = 1 << 21;
    pub const GUILD_MESSAGE_POLLS: u64 = 1 << 24;
    pub const DIRECT_MESSAGE_POLLS: u64 = 1 << 25;
    /// Every bit Discord defines; anything else is rejected with 4013.
    pub const KNOWN: u64 = 0x331_ffff;
    pub const ALL: Intents = Intents(Self::KNOWN);

    pub fn contains(self, bits: u64) -> bool {
        self.0 & bits == bits
    }
    pub fn is_valid(self) -> bool {
        self.0 & !Self::KNOWN == 0
    }
}

/// A frame as a client sends it. `d` is kept raw and parsed per opcode.
#[derive(Debug, Deserialize)]
pub struct ClientFrame<'a> {
    pub op: u8,
    #[serde(borrow, default)]
    pub d: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub struct IdentifyProperties {
    #[serde(default, alias = "$os")]
    pub os: Option<String>,
    #[serde(default, alias = "$browser")]
    pub browser: Option<String>,
    #[serde(default, alias = "$device")]
    pub device: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Identify {
    pub token: String,
    #[serde(default)]
    pub properties: Option<IdentifyProperties>,
    /// Absent for official user clients (they send capabilities instead).
    #[serde(default)]
    pub intents: Option<u64>,
    /// Per-payload compression; ignored (transport compression is separate).
    #[serde(default)]
    pub compress: Option<bool>,
    #[serde(default)]
    pub large_threshold: Option<u32>,
    #[serde(default)]
    pub shard: Option<[u32; 2]>,
    #[serde(default)]
    pub presence: Option<PresenceUpdate>,
}

#[derive(Debug, Deserialize)]
pub struct Resume {
    pub token: String,
    pub session_id: String,
    /// Last sequence the client saw; null if it saw none.
    #[serde(default)]
    pub seq: Option<u64>,
}

/// op 3, and IDENTIFY's `presence`. Only `status` means anything to us;
/// the other fields are informational and, as on Discord, any value of
/// them is accepted (a float or string `since`, an `afk` that is not a
/// boolean, activities that are not a list).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PresenceUpdate {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub since: Option<u64>,
    #[serde(default, deserialize_with = "lenient_list")]
    pub activities: Option<Vec<serde_json::Value>>,
    #[serde(default = "online")]
    pub status: Status,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub afk: Option<bool>,
}

fn online() -> Status {
    Status::Online
}

/// An integer if it is one (floats are truncated), otherwise absent.
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        _ => None,
    })
}

fn lenient_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<serde_json::Value>>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Array(a) => Some(a),
        _ => None,
    })
}

fn lenient_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(serde_json::Value::deserialize(d)?.as_bool())
}

/// A user's status as clients set it. Any status we do not know (an empty
/// string, null, another type) reads as `online`, as Discord takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Online,
    Idle,
    Dnd,
    Invisible,
    #[default]
    Offline,
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
        Ok(match serde_json::Value::deserialize(d)?.as_str() {
            Some("idle") => Status::Idle,
            Some("dnd") => Status::Dnd,
            Some("invisible") => Status::Invisible,
            Some("offline") => Status::Offline,
            _ => Status::Online,
        })
    }
}

impl Status {
    /// What other users see: invisible shows as offline.
    pub fn visible(self) -> Status {
        match self {
            Status::Invisible => Status::Offline,
            s => s,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Online => "online",
            Status::Idle => "idle",
            Status::Dnd => "dnd",
            Status::Invisible => "invisible",
            Status::Offline => "offline",
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RequestGuildMembers {
    pub guild_id: GuildId,
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub presences: Option<bool>,
    #[serde(default)]
    pub user_ids: Option<UserIds>,
    #[serde(default)]
    pub nonce: Option<String>,
}

/// `user_ids` in op 8 may be one id or a list.
#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum UserIds {
    One(UserId),
    Many(Vec<UserId>),
}

impl UserIds {
    pub fn into_vec(self) -> Vec<UserId> {
        match self {
            UserIds::One(u) => vec![u],
            UserIds::Many(v) => v,
        }
    }
}

/// op 14: lazy guild subscription (official client). Only the fields the
/// server uses are typed; others are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct GuildSubscription {
    pub guild_id: GuildId,
    #[serde(default)]
    pub channels: Option<std::collections::BTreeMap<crate::id::ChannelId, Vec<(u64, u64)>>>,
    #[serde(default)]
    pub typing: Option<bool>,
    #[serde(default)]
    pub activities: Option<bool>,
}

/// The per-guild body of op 37 (op 14 without `guild_id`).
#[derive(Debug, Deserialize)]
pub struct GuildSubscriptionBody {
    #[serde(default)]
    pub channels: Option<std::collections::BTreeMap<crate::id::ChannelId, Vec<(u64, u64)>>>,
}

/// op 37: `{"subscriptions": {"<guild_id>": {...}}}`.
#[derive(Debug, Deserialize)]
pub struct GuildSubscriptionsBulk {
    pub subscriptions: std::collections::BTreeMap<GuildId, GuildSubscriptionBody>,
}

/// Writes `{"op":0,"t":"NAME","s":SEQ,"d":` + body + `}` into `out`.
/// `body` must be a complete JSON value.
pub fn write_dispatch(out: &mut Vec<u8>, name: &str, seq: u64, body: &[u8]) {
    out.reserve(dispatch_envelope_len(name, seq) + body.len() + 1);
    write_dispatch_envelope(out, name, seq);
    out.extend_from_slice(body);
    out.push(b'}');
}

const ENVELOPE: [&[u8]; 3] = [b"{\"op\":0,\"t\":\"", b"\",\"s\":", b",\"d\":"];

/// Writes what precedes the body of a dispatch: `{"op":0,"t":"NAME","s":SEQ,"d":`
/// (the dispatch ends with the body and `}`).
pub fn write_dispatch_envelope(out: &mut Vec<u8>, name: &str, seq: u64) {
    let mut n = [0u8; 20];
    for part in [ENVELOPE[0], name.as_bytes(), ENVELOPE[1], fmt_u64(seq, &mut n), ENVELOPE[2]] {
        out.extend_from_slice(part);
    }
}

/// Bytes `write_dispatch_envelope` writes.
pub fn dispatch_envelope_len(name: &str, seq: u64) -> usize {
    let mut n = [0u8; 20];
    ENVELOPE.iter().map(|p| p.len()).sum::<usize>() + name.len() + fmt_u64(seq, &mut n).len()
}

/// Writes a non-dispatch frame `{"op":OP,"d":D,"s":null,"t":null}`.
pub fn write_op(out: &mut Vec<u8>, op: u8, d: &[u8]) {
    out.extend_from_slice(b"{\"op\":");
    let mut n = [0u8; 20];
    out.extend_from_slice(fmt_u64(u64::from(op), &mut n));
    out.extend_from_slice(b",\"d\":");
    out.extend_from_slice(d);
    out.extend_from_slice(b",\"s\":null,\"t\":null}");
}

fn fmt_u64(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_envelope_is_valid_json() {
        let mut out = Vec::new();
        write_dispatch(&mut out, "MESSAGE_CREATE", 42, br#"{"id":"1"}"#);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["op"], 0);
        assert_eq!(v["s"], 42);
        assert_eq!(v["t"], "MESSAGE_CREATE");
        assert_eq!(v["d"]["id"], "1");
        out.clear();
        write_op(&mut out, op::INVALID_SESSION, b"false");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["op"], 9);
        assert_eq!(v["d"], false);
        assert!(v["s"].is_null());
    }

    #[test]
    fn client_frames_accept_int_ids_and_missing_d() {
        let f: ClientFrame = serde_json::from_str(r#"{"op":1}"#).unwrap();
        assert_eq!(f.op, 1);
        assert!(f.d.is_none());
        let r: RequestGuildMembers = serde_json::from_str(r#"{"guild_id":123,"query":"","limit":0}"#).unwrap();
        assert_eq!(r.guild_id, GuildId(123));
        assert!(Intents(53608189).is_valid());
        let sub: GuildSubscription = serde_json::from_str(r#"{"guild_id":"1","typing":true,"channels":{"2":[[0,99],[100,199]]}}"#).unwrap();
        assert_eq!(sub.channels.unwrap()[&crate::id::ChannelId(2)], vec![(0, 99), (100, 199)]);
        let bulk: GuildSubscriptionsBulk = serde_json::from_str(r#"{"subscriptions":{"5":{"channels":{"6":[[0,99]]}}}}"#).unwrap();
        assert!(bulk.subscriptions.contains_key(&GuildId(5)));
        assert!(!Intents(1 << 40).is_valid());
    }
}
