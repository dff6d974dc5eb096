//! The one registry of gateway close codes and REST JSON error codes, each
//! with the sentence clients see.

/// Gateway close codes (4000-4014) with Discord's meanings. The server never
/// closes with 1000: clients treat a server-side 1000 as a drop anyway, and
/// it would invalidate the session in Discord's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum CloseCode {
    /// Something went wrong on our side (also: a slow consumer, a forced drop). Resumable.
    UnknownError = 4000,
    /// The client sent an opcode we do not know.
    UnknownOpcode = 4001,
    /// The client sent a payload we could not decode (bad JSON, bad frame, too large).
    DecodeError = 4002,
    /// The client sent a payload before identifying.
    NotAuthenticated = 4003,
    /// The token in IDENTIFY or RESUME is not valid. Not resumable.
    AuthenticationFailed = 4004,
    /// The client sent a second IDENTIFY.
    AlreadyAuthenticated = 4005,
    /// The sequence sent when resuming is not valid.
    InvalidSeq = 4007,
    /// The client sent more than 120 events in 60 seconds.
    RateLimited = 4008,
    /// The session timed out (no heartbeat, or no IDENTIFY in time).
    SessionTimedOut = 4009,
    /// The shard in IDENTIFY is not valid. Not resumable.
    InvalidShard = 4010,
    /// The session would hold too many guilds; sharding is required. Not resumable.
    ShardingRequired = 4011,
    /// The `v` query parameter names a version we do not speak. Not resumable.
    InvalidApiVersion = 4012,
    /// The intents in IDENTIFY hold unknown bits. Not resumable.
    InvalidIntents = 4013,
    /// The intents in IDENTIFY ask for something this account may not have. Not resumable.
    DisallowedIntents = 4014,
}

impl CloseCode {
    pub fn code(self) -> u16 {
        self as u16
    }

    /// The reason text sent in the close frame.
    pub fn reason(self) -> &'static str {
        match self {
            Self::UnknownError => "Unknown error.",
            Self::UnknownOpcode => "Unknown opcode.",
            Self::DecodeError => "Decode error.",
            Self::NotAuthenticated => "Not authenticated.",
            Self::AuthenticationFailed => "Authentication failed.",
            Self::AlreadyAuthenticated => "Already authenticated.",
            Self::InvalidSeq => "Invalid seq.",
            Self::RateLimited => "Rate limited.",
            Self::SessionTimedOut => "Session timed out.",
            Self::InvalidShard => "Invalid shard.",
            Self::ShardingRequired => "Sharding required.",
            Self::InvalidApiVersion => "Invalid API version.",
            Self::InvalidIntents => "Invalid intent(s).",
            Self::DisallowedIntents => "Disallowed intent(s).",
        }
    }

    /// Whether Discord tells clients to reconnect after this code.
    pub fn reconnect(self) -> bool {
        !matches!(
            self,
            Self::AuthenticationFailed
                | Self::InvalidShard
                | Self::ShardingRequired
                | Self::InvalidApiVersion
                | Self::InvalidIntents
                | Self::DisallowedIntents
        )
    }
}

/// Discord's JSON error codes, sent as `{"code": N, "message": "..."}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ErrorCode {
    /// General error; also used with 401 Unauthorized and 5xx.
    General,
    UnknownAccount,
    UnknownApplication,
    UnknownChannel,
    UnknownGuild,
    UnknownInvite,
    UnknownMember,
    UnknownMessage,
    UnknownRole,
    UnknownUser,
    UnknownRoute,
    /// 405 on a route without that method (code 0).
    MethodNotAllowed,
    /// 40001 Unauthorized: a token that does not exist.
    Unauthorized,
    /// 50001 Missing access (not a member).
    MissingAccess,
    /// 50005 Cannot edit a message authored by another user.
    CannotEditOthersMessage,
    /// 50006 Cannot send an empty message.
    EmptyMessage,
    /// 50013 Missing permissions.
    MissingPermissions,
    /// 50035 Invalid form body.
    InvalidFormBody,
    /// 50109 The request body contains invalid JSON.
    InvalidJson,
    /// 40002 Username already taken (for register).
    UsernameTaken,
    /// 20001 Bots cannot use this endpoint.
    BotsCannotUse,
    /// 30001 Maximum number of guilds reached.
    MaxGuilds,
    /// 30011 Maximum number of group DM recipients reached (10).
    MaxGroupDmRecipients,
    /// 40005 Request entity too large.
    EntityTooLarge,
    /// 10015 Unknown webhook.
    UnknownWebhook,
    /// An interaction that does not exist, expired, or was not answered in time.
    UnknownInteraction,
    UnknownApplicationCommand,
    /// 10066 Unknown application command permissions (none were set).
    UnknownCommandPermissions,
    /// A second initial response to one interaction.
    InteractionAlreadyAcknowledged,
    /// 50027 Invalid webhook token.
    InvalidWebhookToken,
    // Reactions, emojis, pins, bulk delete:
    /// 10014 Unknown emoji (also: a reaction path that names no emoji).
    UnknownEmoji,
    /// 30003 Maximum number of pins reached for the channel.
    MaxPins,
    /// 30008 Maximum number of emojis reached.
    MaxEmojis,
    /// 30010 Maximum number of reactions reached (distinct emojis on a message).
    MaxReactions,
    /// 50021 Cannot execute action on a system message.
    SystemMessage,
    /// 50034 A message provided was too old to bulk delete.
    BulkDeleteTooOld,
    /// 50138 Failed to resize asset below the maximum size.
    AssetTooLarge,
    // Roles, overwrites, bans (#14):
    /// 10009 Unknown permission overwrite.
    UnknownOverwrite,
    /// 10026 Unknown ban.
    UnknownBan,
    /// 30005 Maximum number of guild roles reached (250).
    MaxRoles,
    /// 40007 The user is banned from this guild.
    UserBanned,
    /// 50028 Invalid role (e.g. deleting `@everyone`).
    InvalidRole,
    // DMs, threads, application commands:
    /// 50003 Cannot execute action on a DM channel.
    CannotExecuteOnDm,
    /// 50007 Cannot send messages to this user.
    CannotSendToUser,
    /// 50083 Operation cannot be performed on an archived thread.
    ThreadArchived,
    /// 160004 A thread has already been created for this message.
    ThreadAlreadyCreated,
    /// 10063 Unknown application command.
    UnknownCommand,
    /// 30032 Maximum number of application commands reached.
    MaxCommands,
    /// 50025 Invalid OAuth2 access token (or one without the scope needed).
    InvalidOAuthToken,
}

impl ErrorCode {
    pub fn code(self) -> u32 {
        match self {
            Self::General => 0,
            Self::UnknownAccount => 10001,
            Self::UnknownApplication => 10002,
            Self::UnknownChannel => 10003,
            Self::UnknownGuild => 10004,
            Self::UnknownInvite => 10006,
            Self::UnknownMember => 10007,
            Self::UnknownMessage => 10008,
            Self::UnknownRole => 10011,
            Self::UnknownUser => 10013,
            Self::UnknownRoute => 0,
            Self::MethodNotAllowed => 0,
            Self::Unauthorized => 40001,
            Self::UsernameTaken => 40002,
            Self::EntityTooLarge => 40005,
            Self::UnknownWebhook => 10015,
            Self::UnknownInteraction => 10062,
            Self::UnknownApplicationCommand => 10063,
            Self::UnknownCommandPermissions => 10066,
            Self::InteractionAlreadyAcknowledged => 40060,
            Self::InvalidWebhookToken => 50027,
            Self::BotsCannotUse => 20001,
            Self::MaxGuilds => 30001,
            Self::MaxGroupDmRecipients => 30011,
            Self::MissingAccess => 50001,
            Self::CannotEditOthersMessage => 50005,
            Self::EmptyMessage => 50006,
            Self::MissingPermissions => 50013,
            Self::InvalidFormBody => 50035,
            Self::InvalidJson => 50109,
            Self::UnknownEmoji => 10014,
            Self::MaxPins => 30003,
            Self::MaxEmojis => 30008,
            Self::MaxReactions => 30010,
            Self::SystemMessage => 50021,
            Self::BulkDeleteTooOld => 50034,
            Self::AssetTooLarge => 50138,
            Self::UnknownOverwrite => 10009,
            Self::UnknownBan => 10026,
            Self::MaxRoles => 30005,
            Self::UserBanned => 40007,
            Self::InvalidRole => 50028,
            Self::CannotExecuteOnDm => 50003,
            Self::CannotSendToUser => 50007,
            Self::ThreadArchived => 50083,
            Self::ThreadAlreadyCreated => 160004,
            Self::UnknownCommand => 10063,
            Self::MaxCommands => 30032,
            Self::InvalidOAuthToken => 50025,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Self::General => "General error",
            Self::UnknownAccount => "Unknown Account",
            Self::UnknownApplication => "Unknown Application",
            Self::UnknownChannel => "Unknown Channel",
            Self::UnknownGuild => "Unknown Guild",
            Self::UnknownInvite => "Unknown Invite",
            Self::UnknownMember => "Unknown Member",
            Self::UnknownMessage => "Unknown Message",
            Self::UnknownRole => "Unknown Role",
            Self::UnknownUser => "Unknown User",
            Self::UnknownRoute => "404: Not Found",
            Self::MethodNotAllowed => "405: Method Not Allowed",
            Self::Unauthorized => "401: Unauthorized",
            Self::UsernameTaken => "Username is already taken",
            Self::EntityTooLarge => "Request entity too large",
            Self::UnknownWebhook => "Unknown Webhook",
            Self::UnknownInteraction => "Unknown interaction",
            Self::UnknownApplicationCommand => "Unknown application command",
            Self::UnknownCommandPermissions => "Unknown application command permissions",
            Self::InteractionAlreadyAcknowledged => "Interaction has already been acknowledged.",
            Self::InvalidWebhookToken => "Invalid Webhook Token",
            Self::BotsCannotUse => "Bots cannot use this endpoint",
            Self::MaxGuilds => "Maximum number of guilds reached",
            Self::MaxGroupDmRecipients => "Maximum number of group DMs reached (10)",
            Self::MissingAccess => "Missing Access",
            Self::CannotEditOthersMessage => "Cannot edit a message authored by another user",
            Self::EmptyMessage => "Cannot send an empty message",
            Self::MissingPermissions => "Missing Permissions",
            Self::InvalidFormBody => "Invalid Form Body",
            Self::InvalidJson => "The request body contains invalid JSON.",
            Self::UnknownEmoji => "Unknown Emoji",
            Self::MaxPins => "Maximum number of pins reached (250)",
            Self::MaxEmojis => "Maximum number of emojis reached",
            Self::MaxReactions => "Maximum number of reactions reached (20)",
            Self::SystemMessage => "Cannot execute action on a system message",
            Self::BulkDeleteTooOld => "You can only bulk delete messages that are under 14 days old.",
            Self::AssetTooLarge => "Failed to resize asset below the maximum size: 262144",
            Self::UnknownOverwrite => "Unknown Overwrite",
            Self::UnknownBan => "Unknown Ban",
            Self::MaxRoles => "Maximum number of guild roles reached (250)",
            Self::UserBanned => "The user is banned from this guild.",
            Self::InvalidRole => "Invalid Role",
            Self::CannotExecuteOnDm => "Cannot execute action on a DM channel",
            Self::CannotSendToUser => "Cannot send messages to this user",
            Self::ThreadArchived => "Thread is archived",
            Self::ThreadAlreadyCreated => "A thread has already been created for this message",
            Self::UnknownCommand => "Unknown application command",
            Self::MaxCommands => "Maximum number of application commands reached",
            Self::InvalidOAuthToken => "Invalid OAuth2 access token",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fatal_codes_say_do_not_reconnect() {
        let fatal = [4004, 4010, 4011, 4012, 4013, 4014];
        for c in [
            CloseCode::UnknownError,
            CloseCode::UnknownOpcode,
            CloseCode::DecodeError,
            CloseCode::NotAuthenticated,
            CloseCode::AuthenticationFailed,
            CloseCode::AlreadyAuthenticated,
            CloseCode::InvalidSeq,
            CloseCode::RateLimited,
            CloseCode::SessionTimedOut,
            CloseCode::InvalidShard,
            CloseCode::ShardingRequired,
            CloseCode::InvalidApiVersion,
            CloseCode::InvalidIntents,
            CloseCode::DisallowedIntents,
        ] {
            assert_eq!(c.reconnect(), !fatal.contains(&c.code()), "{c:?}");
            assert!((4000..=4014).contains(&c.code()));
        }
    }
}

/// The `errors` of a 50035 answer for one field, nested as Discord nests
/// them: `data.options.1.name` is `{"data": {"options": {"1": {"name":
/// {"_errors": [...]}}}}}` (`_errors` or an empty path: the body itself).
pub fn form_error(path: &str, code: &str, message: &str) -> serde_json::Value {
    let mut v = serde_json::json!({ "_errors": [{ "code": code, "message": message }] });
    if path.is_empty() || path == "_errors" {
        return v;
    }
    for part in path.rsplit('.') {
        v = serde_json::json!({ part: v });
    }
    v
}

#[cfg(test)]
mod form_error_tests {
    #[test]
    fn a_dotted_path_nests_as_discord_nests_it() {
        let v = super::form_error("data.options.1.name", "X", "m");
        assert_eq!(v["data"]["options"]["1"]["name"]["_errors"][0]["code"], "X");
        assert_eq!(super::form_error("name", "X", "m")["name"]["_errors"][0]["message"], "m");
        assert_eq!(super::form_error("_errors", "X", "m")["_errors"][0]["code"], "X");
    }
}
