//! Snowflake ids: 42 bits of milliseconds since the Discord epoch
//! (2015-01-01T00:00:00Z), 5 bits worker, 5 bits process, 12 bits increment.
//! Serialised as JSON strings; accepted as strings or integers.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds between the Unix epoch and the Discord epoch.
pub const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// A raw snowflake.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Snowflake(pub u64);

impl Snowflake {
    /// Milliseconds since the Unix epoch at which this id was made.
    pub fn timestamp_ms(self) -> u64 {
        (self.0 >> 22) + DISCORD_EPOCH_MS
    }
}

macro_rules! id_type {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        impl $name {
            pub fn get(self) -> u64 { self.0 }
            pub fn timestamp_ms(self) -> u64 { Snowflake(self.0).timestamp_ms() }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { fmt::Display::fmt(&self.0, f) }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, concat!(stringify!($name), "({})"), self.0) }
        }
        impl From<Snowflake> for $name {
            fn from(s: Snowflake) -> Self { Self(s.0) }
        }
        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;
            fn from_str(s: &str) -> Result<Self, Self::Err> { s.parse().map(Self) }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> { Snowflake(self.0).serialize(s) }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> { Snowflake::deserialize(d).map(|s| Self(s.0)) }
        }
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool { true }
            fn schema_name() -> std::borrow::Cow<'static, str> { "Snowflake".into() }
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema { Snowflake::json_schema(g) }
        }
    )*};
}

id_type!(UserId, GuildId, ChannelId, MessageId, RoleId, ApplicationId);
id_type!(EmojiId);

impl fmt::Display for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
impl fmt::Debug for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Snowflake({})", self.0)
    }
}

/// What the OpenAPI document says of an id: a decimal string when throng
/// sends it; a string or a non-negative integer when a client does.
impl schemars::JsonSchema for Snowflake {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Snowflake".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let string = schemars::json_schema!({ "type": "string", "pattern": "^[0-9]{1,20}$", "examples": ["175928847299117063"] });
        if g.contract().is_serialize() {
            string
        } else {
            schemars::json_schema!({ "anyOf": [string, { "type": "integer", "minimum": 0 }] })
        }
    }
}

impl Serialize for Snowflake {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Snowflake;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a snowflake as a string or an integer")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Snowflake, E> {
                Ok(Snowflake(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Snowflake, E> {
                u64::try_from(v).map(Snowflake).map_err(|_| E::custom("negative snowflake"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Snowflake, E> {
                v.parse().map(Snowflake).map_err(|_| E::custom("snowflake is not a number"))
            }
        }
        d.deserialize_any(V)
    }
}

/// Generates unique, increasing snowflakes for one (worker, process).
/// One atomic word holds `(timestamp << 12) | increment`, so generation is
/// lock-free and ids stay monotonic even when the clock steps backwards.
pub struct SnowflakeGen {
    /// Last issued `(ms since Discord epoch) << 12 | increment`.
    state: AtomicU64,
    /// Worker and process bits, already shifted into place.
    node_bits: u64,
}

impl SnowflakeGen {
    pub fn new(worker: u8, process: u8) -> Self {
        let node_bits = (u64::from(worker & 0x1f) << 17) | (u64::from(process & 0x1f) << 12);
        Self { state: AtomicU64::new(0), node_bits }
    }

    pub fn next(&self) -> Snowflake {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(DISCORD_EPOCH_MS)
            .saturating_sub(DISCORD_EPOCH_MS);
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let candidate = (now << 12).max(cur + 1);
            match self.state.compare_exchange_weak(cur, candidate, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let ts = candidate >> 12;
                    let inc = candidate & 0xfff;
                    return Snowflake((ts << 22) | self.node_bits | inc);
                }
                Err(actual) => cur = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strings_out_and_accept_ints_in() {
        let id = UserId(175928847299117063);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"175928847299117063\"");
        let a: UserId = serde_json::from_str("\"175928847299117063\"").unwrap();
        let b: UserId = serde_json::from_str("175928847299117063").unwrap();
        assert_eq!(a, id);
        assert_eq!(b, id);
        assert!(serde_json::from_str::<UserId>("\"abc\"").is_err());
        assert!(serde_json::from_str::<UserId>("-1").is_err());
    }

    #[test]
    fn generator_is_monotonic_and_timestamped() {
        let g = SnowflakeGen::new(1, 2);
        let mut last = 0;
        for _ in 0..10_000 {
            let s = g.next();
            assert!(s.0 > last);
            last = s.0;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let ts = Snowflake(last).timestamp_ms();
        assert!(ts <= now + 5_000 && ts + 60_000 > now, "timestamp {ts} vs now {now}");
        assert_eq!((last >> 17) & 0x1f, 1);
        assert_eq!((last >> 12) & 0x1f, 2);
    }
}

/// What one of throng's actors is keyed by: a guild, or a DM channel (a DM
/// has no guild but gets an actor of its own). Not a Discord type.
///
/// One `u64`, so it costs no more than an id in session lists, on the
/// cluster's ring and in the store's ownership table: a DM's key is its
/// channel id with the top bit set, which no snowflake has (they use 63
/// bits until 2084). The type keeps the two apart; [`ActorKey::actor`]
/// says which one it is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActorKey(u64);

/// What an [`ActorKey`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Guild(GuildId),
    Dm(ChannelId),
}

impl ActorKey {
    const DM_BIT: u64 = 1 << 63;

    pub const fn guild(g: GuildId) -> ActorKey {
        debug_assert!(g.0 & Self::DM_BIT == 0, "a snowflake has 63 bits");
        ActorKey(g.0)
    }

    pub const fn dm(c: ChannelId) -> ActorKey {
        ActorKey(c.0 | Self::DM_BIT)
    }

    pub const fn actor(self) -> Actor {
        if self.0 & Self::DM_BIT != 0 {
            Actor::Dm(ChannelId(self.0 & !Self::DM_BIT))
        } else {
            Actor::Guild(GuildId(self.0))
        }
    }

    /// The guild, if the key names one.
    pub const fn as_guild(self) -> Option<GuildId> {
        match self.actor() {
            Actor::Guild(g) => Some(g),
            Actor::Dm(_) => None,
        }
    }

    /// The DM channel, if the key names one.
    pub const fn as_dm(self) -> Option<ChannelId> {
        match self.actor() {
            Actor::Dm(c) => Some(c),
            Actor::Guild(_) => None,
        }
    }

    /// The key as one number: where the ring places the actor, and the
    /// store's ownership row.
    pub const fn raw(self) -> u64 {
        self.0
    }

    pub const fn from_raw(raw: u64) -> ActorKey {
        ActorKey(raw)
    }
}

impl From<GuildId> for ActorKey {
    fn from(g: GuildId) -> ActorKey {
        ActorKey::guild(g)
    }
}

impl std::fmt::Debug for ActorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.actor() {
            Actor::Guild(g) => write!(f, "guild {}", g.0),
            Actor::Dm(c) => write!(f, "dm {}", c.0),
        }
    }
}

impl std::fmt::Display for ActorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod actor_key_tests {
    use super::*;

    #[test]
    fn dm_keys_never_meet_guild_keys() {
        let c = ChannelId(1_339_999_999_999_999_999);
        assert_eq!(ActorKey::dm(c).actor(), Actor::Dm(c));
        assert_eq!(ActorKey::guild(GuildId(c.0)).actor(), Actor::Guild(GuildId(c.0)));
        assert_ne!(ActorKey::dm(c), ActorKey::guild(GuildId(c.0)));
        assert_eq!(ActorKey::from_raw(ActorKey::dm(c).raw()), ActorKey::dm(c));
    }
}
