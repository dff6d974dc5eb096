//! JSON shapes of Discord objects as throng sends them. Field sets follow
//! what discord.py 2.7 and discord.js 14 read (see docs/object-audit.md):
//! keys those libraries index directly are always present, even if null.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, UserId};

/// Channel types we create and accept.
pub mod channel_type {
    pub const GUILD_TEXT: u8 = 0;
    pub const DM: u8 = 1;
    pub const GUILD_VOICE: u8 = 2;
    pub const GROUP_DM: u8 = 3;
    pub const GUILD_CATEGORY: u8 = 4;
    pub const GUILD_ANNOUNCEMENT: u8 = 5;
    pub const ANNOUNCEMENT_THREAD: u8 = 10;
    pub const PUBLIC_THREAD: u8 = 11;
    pub const PRIVATE_THREAD: u8 = 12;
}

/// Permission bits (a subset; values are Discord's).
pub mod permission {
    pub const CREATE_INSTANT_INVITE: u64 = 1 << 0;
    pub const KICK_MEMBERS: u64 = 1 << 1;
    pub const BAN_MEMBERS: u64 = 1 << 2;
    pub const ADMINISTRATOR: u64 = 1 << 3;
    pub const MANAGE_CHANNELS: u64 = 1 << 4;
    pub const MANAGE_GUILD: u64 = 1 << 5;
    pub const ADD_REACTIONS: u64 = 1 << 6;
    pub const VIEW_AUDIT_LOG: u64 = 1 << 7;
    pub const VIEW_CHANNEL: u64 = 1 << 10;
    pub const SEND_MESSAGES: u64 = 1 << 11;
    pub const SEND_TTS_MESSAGES: u64 = 1 << 12;
    pub const MANAGE_MESSAGES: u64 = 1 << 13;
    pub const EMBED_LINKS: u64 = 1 << 14;
    pub const ATTACH_FILES: u64 = 1 << 15;
    pub const READ_MESSAGE_HISTORY: u64 = 1 << 16;
    pub const MENTION_EVERYONE: u64 = 1 << 17;
    pub const USE_EXTERNAL_EMOJIS: u64 = 1 << 18;
    pub const CHANGE_NICKNAME: u64 = 1 << 26;
    pub const MANAGE_NICKNAMES: u64 = 1 << 27;
    pub const MANAGE_ROLES: u64 = 1 << 28;
    pub const MANAGE_WEBHOOKS: u64 = 1 << 29;
    pub const MANAGE_GUILD_EXPRESSIONS: u64 = 1 << 30;
    pub const USE_APPLICATION_COMMANDS: u64 = 1 << 31;
    pub const MANAGE_THREADS: u64 = 1 << 34;
    pub const CREATE_PUBLIC_THREADS: u64 = 1 << 35;
    pub const CREATE_PRIVATE_THREADS: u64 = 1 << 36;
    pub const USE_EXTERNAL_STICKERS: u64 = 1 << 37;
    pub const SEND_MESSAGES_IN_THREADS: u64 = 1 << 38;
    pub const MODERATE_MEMBERS: u64 = 1 << 40;
    /// Create emojis, and edit or delete one's own.
    pub const CREATE_GUILD_EXPRESSIONS: u64 = 1 << 43;
    /// Pin and unpin messages (Discord split it from MANAGE_MESSAGES; either is
    /// accepted). Not in `@everyone`'s default: a role or overwrite grants it.
    pub const PIN_MESSAGES: u64 = 1 << 51;
    /// What `@everyone` gets in a new guild (Discord's default, 0x6_3584_6c41 trimmed to known bits).
    pub const DEFAULT_EVERYONE: u64 = CREATE_INSTANT_INVITE
        | ADD_REACTIONS
        | VIEW_CHANNEL
        | SEND_MESSAGES
        | EMBED_LINKS
        | ATTACH_FILES
        | READ_MESSAGE_HISTORY
        | MENTION_EVERYONE
        | CHANGE_NICKNAME
        // Threads and commands, as Discord's default `@everyone` has them.
        | USE_APPLICATION_COMMANDS
        | CREATE_PUBLIC_THREADS
        | CREATE_PRIVATE_THREADS
        | SEND_MESSAGES_IN_THREADS;
    /// Every permission throng knows: what roles may grant and what the
    /// owner and administrators hold.
    pub const ALL: u64 = ((1 << 47) - 1) | PIN_MESSAGES;
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct User {
    pub id: UserId,
    pub username: String,
    pub global_name: Option<String>,
    pub discriminator: String,
    pub avatar: Option<String>,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub bot: bool,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub flags: u64,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub public_flags: u64,
    /// Only on the users of a guild message's `mentions` in its events:
    /// Discord adds the mentioned user's partial member there.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub member: Option<Box<Member>>,
}

/// `GET /users/@me`: a user plus the private fields clients read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CurrentUser {
    #[serde(flatten)]
    pub user: User,
    pub verified: bool,
    pub mfa_enabled: bool,
    pub email: Option<String>,
    pub locale: &'static str,
    pub premium_type: u8,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Role {
    pub id: RoleId,
    pub name: String,
    pub color: u32,
    /// The newer form of `color`: gradients and holographic roles have a
    /// second and third colour. Several libraries build roles from it.
    pub colors: RoleColors,
    pub hoist: bool,
    pub icon: Option<String>,
    pub unicode_emoji: Option<String>,
    pub position: i32,
    /// Permission bits as a decimal string, as Discord sends them.
    pub permissions: String,
    pub managed: bool,
    pub mentionable: bool,
    pub flags: u64,
    /// What manages the role: a bot's own role carries `bot_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<RoleTags>,
}

/// Discord's role tags; only the bot's (`bot_id`) exist here.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RoleTags {
    pub bot_id: crate::UserId,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RoleColors {
    pub primary_color: u32,
    pub secondary_color: Option<u32>,
    pub tertiary_color: Option<u32>,
}

impl RoleColors {
    pub fn solid(color: u32) -> RoleColors {
        RoleColors { primary_color: color, secondary_color: None, tertiary_color: None }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Overwrite {
    pub id: crate::id::Snowflake,
    /// 0 = role, 1 = member.
    #[serde(rename = "type")]
    pub kind: u8,
    pub allow: String,
    pub deny: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Channel {
    pub id: ChannelId,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<GuildId>,
    pub name: String,
    pub position: i32,
    pub permission_overwrites: Vec<Overwrite>,
    pub topic: Option<String>,
    pub nsfw: bool,
    pub last_message_id: Option<MessageId>,
    pub parent_id: Option<ChannelId>,
    pub rate_limit_per_user: u32,
    pub flags: u64,
    /// Voice channels only (discord.py reads both without a fallback).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bitrate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub user_limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rtc_region: Option<Option<String>>,
    /// Voice channels only: 1 (auto), the only mode throng has.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub video_quality_mode: Option<u8>,
    /// Text and announcement channels only: what threads started there
    /// default to (Discord's defaults: a day, no slow mode).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub default_auto_archive_duration: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub default_thread_rate_limit_per_user: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Member {
    /// Absent in the partial member attached to MESSAGE_CREATE.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub user: Option<User>,
    pub nick: Option<String>,
    pub avatar: Option<String>,
    pub roles: Vec<RoleId>,
    pub joined_at: String,
    pub premium_since: Option<String>,
    pub deaf: bool,
    pub mute: bool,
    pub flags: u64,
    pub pending: bool,
    pub communication_disabled_until: Option<String>,
    /// Always null: throng has no per-guild banners.
    #[serde(default)]
    pub banner: Option<String>,
    /// Only on GUILD_MEMBER_ADD/UPDATE/REMOVE dispatches.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub guild_id: Option<GuildId>,
}

/// The guild fields common to REST and GUILD_CREATE.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Guild {
    pub id: GuildId,
    pub name: String,
    pub icon: Option<String>,
    pub splash: Option<String>,
    pub discovery_splash: Option<String>,
    pub banner: Option<String>,
    pub description: Option<String>,
    pub owner_id: UserId,
    pub afk_channel_id: Option<ChannelId>,
    pub afk_timeout: u32,
    pub verification_level: u8,
    pub default_message_notifications: u8,
    pub explicit_content_filter: u8,
    pub roles: Vec<Role>,
    pub emojis: Vec<Emoji>,
    pub stickers: [(); 0],
    pub features: [(); 0],
    pub mfa_level: u8,
    pub application_id: Option<ApplicationId>,
    pub system_channel_id: Option<ChannelId>,
    pub system_channel_flags: u64,
    pub rules_channel_id: Option<ChannelId>,
    pub public_updates_channel_id: Option<ChannelId>,
    pub safety_alerts_channel_id: Option<ChannelId>,
    pub max_members: u32,
    pub vanity_url_code: Option<String>,
    pub premium_tier: u8,
    pub premium_subscription_count: u32,
    pub preferred_locale: &'static str,
    pub nsfw_level: u8,
    pub nsfw: bool,
    pub premium_progress_bar_enabled: bool,
    /// Always null: no raid incidents, no presence cap.
    pub incidents_data: Option<()>,
    pub max_presences: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MessageReference {
    #[serde(rename = "type", default, deserialize_with = "crate::de::null_default")]
    pub kind: u8,
    #[serde(default)]
    pub message_id: Option<MessageId>,
    #[serde(default)]
    pub channel_id: Option<ChannelId>,
    #[serde(default)]
    pub guild_id: Option<GuildId>,
    #[serde(default, skip_serializing)]
    pub fail_if_not_exists: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Message {
    pub id: MessageId,
    pub channel_id: ChannelId,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub guild_id: Option<GuildId>,
    pub author: User,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub member: Option<Member>,
    pub content: String,
    pub timestamp: String,
    pub edited_timestamp: Option<String>,
    pub tts: bool,
    pub mention_everyone: bool,
    pub mentions: Vec<User>,
    pub mention_roles: Vec<RoleId>,
    pub attachments: Vec<serde_json::Value>,
    pub embeds: Vec<serde_json::Value>,
    pub components: Vec<serde_json::Value>,
    pub pinned: bool,
    #[serde(rename = "type")]
    pub kind: u8,
    pub flags: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nonce: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_reference: Option<MessageReference>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channel_type: Option<u8>,
    /// Replies (type 19) only: the message replied to, or null once it is
    /// deleted. Absent on every other message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub referenced_message: Option<Option<Box<Message>>>,
    /// Messages a webhook sent: its id (the author is built from it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub webhook_id: Option<crate::Snowflake>,
    /// Messages an interaction sent: its application, and the interaction
    /// (`interaction_metadata`, and the older `interaction`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub application_id: Option<crate::Snowflake>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interaction_metadata: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interaction: Option<serde_json::Value>,
    /// Per requester (`me`): filled in by REST reads, absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub reactions: Vec<Reaction>,
}

/// A custom emoji (`id`, `name`, ...), or a Unicode one (`id: null`, the
/// emoji as `name`). Reactions and their events carry the partial form:
/// `id`, `name` and, for custom ones, `animated`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Emoji {
    pub id: Option<crate::id::EmojiId>,
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub roles: Option<Vec<RoleId>>,
    /// Who created it; only for those who may manage the guild's emojis.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub user: Option<User>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub require_colons: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub managed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub animated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub available: Option<bool>,
}

/// A message's reactions with one emoji, as one requester sees them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Reaction {
    pub count: u32,
    pub count_details: ReactionCountDetails,
    /// The requester reacted with this emoji.
    pub me: bool,
    pub me_burst: bool,
    pub burst_colors: Vec<String>,
    pub emoji: Emoji,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReactionCountDetails {
    pub burst: u32,
    pub normal: u32,
}

impl Message {
    /// A copy with the fields MESSAGE_CONTENT gates emptied.
    pub fn redacted(&self) -> Message {
        Message {
            content: String::new(),
            embeds: Vec::new(),
            attachments: Vec::new(),
            components: Vec::new(),
            referenced_message: self.referenced_message.as_ref().map(|r| r.as_ref().map(|m| Box::new(m.redacted()))),
            ..self.clone()
        }
    }
}

/// Formats milliseconds since the Unix epoch as Discord's ISO 8601 timestamp,
/// e.g. `2026-11-22T16:54:13.123000+00:00`.
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let (h, min, sec) = (rem / 3600, (rem / 60) % 60, rem % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}.{millis:03}000+00:00");
    }
    // Every message, member and READY carries timestamps: the digits are
    // written straight into the buffer (`format!` with seven arguments
    // was a fifth of encoding a member).
    let mut b = *b"0000-00-00T00:00:00.000000+00:00";
    let mut put = |at: usize, width: usize, mut v: u64| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y as u64);
    put(5, 2, u64::from(m));
    put(8, 2, u64::from(d));
    put(11, 2, h);
    put(14, 2, min);
    put(17, 2, sec);
    put(20, 3, millis);
    String::from_utf8_lossy(&b).into_owned()
}

/// An ISO 8601 time (`2026-11-24T02:02:45.123000+00:00`,
/// `2026-11-24T02:02:45.123Z`, no fraction, any offset) as ms since the
/// Unix epoch; a snowflake counts as the time it was made.
pub fn parse_time(s: &str) -> Option<u64> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u64>().ok().map(|n| crate::Snowflake(n).timestamp_ms());
    }
    let num = |r: std::ops::Range<usize>| s.get(r).filter(|t| t.bytes().all(|b| b.is_ascii_digit())).and_then(|t| t.parse::<i64>().ok());
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first3 = format!("{:0<3}", &frac[..digits.min(3)]);
        ms = first3.parse::<i64>().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            // A `+` left unescaped in a query string arrives as a space.
            let sign = match rest.as_bytes()[0] {
                b'+' | b' ' => 1,
                b'-' => -1,
                _ => return None,
            };
            let o = rest[1..].replace(':', "");
            if o.len() != 4 || !o.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            sign * (o[..2].parse::<i64>().ok()? * 60 + o[2..].parse::<i64>().ok()?)
        }
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    u64::try_from(secs * 1000 + ms).ok()
}

/// Days since 1970-01-01 of a date in the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digits written by hand agree with `format!` at every field's
    /// edges and across the years the product meets.
    #[test]
    fn iso8601_agrees_with_format() {
        let reference = |ms: u64| {
            let (secs, millis) = (ms / 1000, ms % 1000);
            let rem = secs % 86_400;
            let (y, m, d) = civil_from_days((secs / 86_400) as i64);
            format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}000+00:00", rem / 3600, (rem / 60) % 60, rem % 60)
        };
        // From 1970 to past the year 10000, in steps that land on every
        // field's values.
        for ms in (0..260_000_000_000_000u64).step_by(7_919_333_337) {
            assert_eq!(iso8601(ms), reference(ms), "{ms}");
        }
        for ms in [0, 999, 1_000, 59_999, 3_599_999, 86_399_999, 951_782_400_000, 253_402_300_799_999, 253_402_300_800_000, u64::MAX] {
            assert_eq!(iso8601(ms), reference(ms), "{ms}");
        }
    }

    #[test]
    fn iso8601_matches_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(iso8601(1_420_070_400_000), "2015-01-01T00:00:00.000000+00:00");
        assert_eq!(iso8601(1_709_210_096_789), "2024-02-29T12:34:56.789000+00:00");
    }

    #[test]
    fn pin_times_parse_as_the_libraries_send_them() {
        for ms in [0, 1_420_070_400_000, 1_709_210_096_789, 1_795_000_000_123] {
            assert_eq!(parse_time(&iso8601(ms)), Some(ms), "{}", iso8601(ms));
        }
        assert_eq!(parse_time("2024-02-29T12:34:56.789Z"), Some(1_709_210_096_789));
        assert_eq!(parse_time("2024-02-29T12:34:56"), Some(1_709_210_096_000));
        assert_eq!(parse_time("2024-02-29T14:34:56.7+02:00"), Some(1_709_210_096_700));
        assert_eq!(parse_time(&(1u64 << 22).to_string()), Some(crate::id::DISCORD_EPOCH_MS + 1));
        for bad in ["", "yesterday", "2024-13-01T00:00:00Z", "2024-02-29T12:34:56.+00:00", "2024-02-29T12:34:56+0"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        // A `+` sent unescaped in a query string.
        assert_eq!(parse_time("2024-03-01T00:00:00 00:00"), Some(1_709_251_200_000));
    }

    #[test]
    fn archive_timestamps_parse_back() {
        for ms in [0u64, 1_420_070_400_000, 1_735_689_599_999, 1_709_251_200_123] {
            assert_eq!(parse_time(&iso8601(ms)), Some(ms));
        }
        assert_eq!(parse_time("2024-03-01T00:00:00Z"), Some(1_709_251_200_000));
        assert_eq!(parse_time("2024-03-01T00:00:00.5+00:00"), Some(1_709_251_200_500));
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2024-13-01T00:00:00Z"), None);
    }
}
