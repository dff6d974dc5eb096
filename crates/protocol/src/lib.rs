//! Wire protocol of throng: the subset of Discord's Gateway v10 and REST API
//! that bots and chat clients need.
//!
//! Layers, each in its own file:
//! - [`id`]: snowflake ids (newtypes, Discord's bit layout, string on the wire).
//! - [`codes`]: the one registry of gateway close codes and JSON error codes.
//! - [`gateway`]: opcodes, intents, client payloads, dispatch envelopes.
//! - [`model`]: JSON shapes of users, guilds, channels, roles, members, messages.
//! - [`compress`]: per-connection `zlib-stream` / `zstd-stream` transport compression.
//!
//! Invariant: this crate does no I/O and spawns nothing.

pub mod codes;
pub mod compress;
pub mod gateway;
pub mod id;
pub mod model;

pub use codes::{CloseCode, ErrorCode};
pub use id::{Actor, ActorKey, ApplicationId, ChannelId, GuildId, MessageId, RoleId, Snowflake, SnowflakeGen, UserId};

/// Deserialisation helpers for request bodies.
pub mod de {
    use serde::{Deserialize, Deserializer};

    /// For a field with a default: an explicit `null` reads as absent, as on
    /// Discord (`"tts": null`, `"message_reference": {"type": null}`).
    pub fn null_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// For a PATCH field that may be cleared, with `#[serde(default)]`:
    /// absent is `None` (leave it), `null` is `Some(None)` (clear it), a
    /// value is `Some(Some(v))`. Plain `Option<Option<T>>` reads `null` as
    /// absent.
    pub fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
        Ok(Some(Option::<T>::deserialize(d)?))
    }

    /// A boolean as Discord reads one in a query string: `true`/`false`,
    /// `True`/`False` (Python's `str(bool)`) or `1`/`0`.
    pub fn parse_flag(s: &str) -> Option<bool> {
        match s {
            "true" | "True" | "1" => Some(true),
            "false" | "False" | "0" => Some(false),
            _ => None,
        }
    }

    /// For an optional boolean query parameter, with `#[serde(default)]`:
    /// every form [`parse_flag`] reads (a JSON boolean too).
    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<'a> {
            Bool(bool),
            #[serde(borrow)]
            Text(std::borrow::Cow<'a, str>),
        }
        match Option::<Raw>::deserialize(d)? {
            None => Ok(None),
            Some(Raw::Bool(b)) => Ok(Some(b)),
            Some(Raw::Text(t)) => parse_flag(&t).map(Some).ok_or_else(|| {
                serde::de::Error::custom(format!("provided string was not a boolean (true, false, True, False, 1 or 0): `{t}`"))
            }),
        }
    }
}
