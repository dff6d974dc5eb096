//! What a guild's actor is asked about interactions (plain data, like
//! [`super::ops`]). The actor of the guild an interaction happens in holds
//! it while its token lives: it checks the invoker against its state, sends
//! INTERACTION_CREATE to the bot's sessions (wherever they are: the actor's
//! own subscribers), takes the bot's one initial response, and the edits
//! and followups after it. An interaction's token names its actor, so a
//! callback reaching any node is routed there.

use protocol::{ActorKey, ApplicationId, ChannelId, MessageId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Interaction types a person sends (`POST /interactions`).
pub mod kind {
    pub const PING: u8 = 1;
    pub const APPLICATION_COMMAND: u8 = 2;
    pub const MESSAGE_COMPONENT: u8 = 3;
    pub const AUTOCOMPLETE: u8 = 4;
    pub const MODAL_SUBMIT: u8 = 5;
}

/// Initial response types (`POST /interactions/{id}/{token}/callback`).
pub mod callback {
    pub const PONG: u8 = 1;
    pub const CHANNEL_MESSAGE: u8 = 4;
    pub const DEFERRED_CHANNEL_MESSAGE: u8 = 5;
    pub const DEFERRED_UPDATE_MESSAGE: u8 = 6;
    pub const UPDATE_MESSAGE: u8 = 7;
    pub const AUTOCOMPLETE_RESULT: u8 = 8;
    pub const MODAL: u8 = 9;
}

/// Message flags interactions use.
pub mod flags {
    pub const EPHEMERAL: u64 = 1 << 6;
    pub const LOADING: u64 = 1 << 7;
}

#[derive(Serialize, Deserialize)]
pub enum InteractionAction {
    /// A person runs a command or uses a component (`user` of the [`super::Op`]).
    Invoke(Box<Invoke>),
    /// The bot's initial response.
    Callback { id: u64, token: String, kind: u8, data: Value, with_response: bool },
    /// `GET`/`PATCH`/`DELETE /webhooks/{app}/{token}/messages/{@original|id}`
    /// (`message: None` is `@original`; `edit: None` with `delete: false` reads).
    Message { app: ApplicationId, token: String, message: Option<MessageId>, edit: Option<Value>, delete: bool },
    /// `POST /webhooks/{app}/{token}`: a followup message.
    Followup { app: ApplicationId, token: String, data: Value },
    /// A guild's permission overrides of an application's commands changed:
    /// APPLICATION_COMMAND_PERMISSIONS_UPDATE to its bot's sessions.
    PermissionsChanged { bot: UserId, body: Value },
    /// The actor's own timer: interactions that got no initial response in
    /// time fail (one timer per actor at a time, not one per interaction).
    Expire,
}

/// A checked invocation: the command (or component) exists and its data has
/// the command's shape; the actor checks who may run it, where.
#[derive(Serialize, Deserialize)]
pub struct Invoke {
    pub kind: u8,
    pub application_id: ApplicationId,
    /// The application's bot, who gets the interaction (the actor has its user).
    pub bot: UserId,
    pub channel: ChannelId,
    /// The invoking session (INTERACTION_CREATE/SUCCESS/FAILURE carry its nonce).
    pub session_id: Option<String>,
    pub nonce: Option<String>,
    /// `data` as the bot gets it (options checked against the command),
    /// without `resolved`: the actor adds what it resolves.
    pub data: Value,
    /// For commands: the command's name, type and `default_member_permissions`.
    pub command: Option<CommandRef>,
    /// Components: the message the component is on, as the bot gets it, and
    /// its row (what UPDATE_MESSAGE and edits of `@original` change).
    pub message: Option<Value>,
    pub component_message: Option<store::MessageRecord>,
    /// Message context menus: the message they were used on (`resolved.messages`).
    pub target_message: Option<Value>,
    /// Ids the data names, by option type, to resolve (users, channels, roles).
    pub mentions: Mentions,
    /// The application takes interactions at its `interactions_endpoint_url`:
    /// the actor answers 202 with the bot's INTERACTION_CREATE payload
    /// instead of sending it to the bot's sessions, and the node that took
    /// the invocation POSTs it there.
    #[serde(default)]
    pub http: bool,
    /// The guild's permission overrides of the command, then of the whole
    /// application ([`overrides_allow`]).
    #[serde(default)]
    pub overrides: (Vec<store::CommandPermission>, Vec<store::CommandPermission>),
    /// Components on an ephemeral message (in no store): its id; the actor
    /// finds it among the invoker's and checks `data` against it.
    #[serde(default)]
    pub ephemeral_message: Option<MessageId>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct CommandRef {
    pub id: u64,
    pub name: String,
    pub kind: u8,
    /// `None`: everyone; `Some(0)`: administrators only.
    pub default_member_permissions: Option<u64>,
}

/// A command's `default_member_permissions` (a string of bits, as stored).
pub fn default_member_permissions(command: &Value) -> Option<u64> {
    match command.get("default_member_permissions")? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Whether a member with `bits` (`admin`: the owner or an administrator)
/// may run a command that needs `need`: everyone if `None`, administrators
/// only if `Some(0)`, otherwise every bit it names.
pub fn may_run(bits: u64, admin: bool, need: Option<u64>) -> bool {
    match need {
        None => true,
        Some(need) => admin || (need != 0 && bits & need == need),
    }
}

/// Permission override kinds.
pub mod target {
    pub const ROLE: u8 = 1;
    pub const USER: u8 = 2;
    pub const CHANNEL: u8 = 3;
}

/// What a guild's command permission overrides say of `user` (with
/// `roles`) running a command in `channel` (`None`: anywhere, as the command
/// index asks): `Some(false)` denied, `Some(true)` allowed whatever
/// `default_member_permissions` says, `None` nothing (that decides).
///
/// The command's own overrides come before the application-wide ones; of
/// each, a channel's before "all channels" (the guild's id minus one), and
/// a denied channel denies. For the member: a user override decides, then
/// roles (any allowed role allows, else any denied role denies), then
/// @everyone (the guild's id). The owner and administrators are bound by
/// channel overrides only.
pub fn overrides_allow(
    command: &[store::CommandPermission],
    app: &[store::CommandPermission],
    guild: protocol::GuildId,
    user: UserId,
    roles: &[protocol::RoleId],
    channel: Option<ChannelId>,
    admin: bool,
) -> Option<bool> {
    let in_channel = |list: &[store::CommandPermission]| {
        let find = |id: u64| list.iter().find(|o| o.kind == target::CHANNEL && o.id == id).map(|o| o.permission);
        channel.and_then(|c| find(c.0)).or_else(|| find(guild.0.wrapping_sub(1)))
    };
    if in_channel(command).or_else(|| in_channel(app)) == Some(false) {
        return Some(false);
    }
    if admin {
        return None;
    }
    let member = |list: &[store::CommandPermission]| {
        if let Some(o) = list.iter().find(|o| o.kind == target::USER && o.id == user.0) {
            return Some(o.permission);
        }
        let mut hit = None;
        for o in list.iter().filter(|o| o.kind == target::ROLE && roles.iter().any(|r| r.0 == o.id)) {
            hit = Some(hit.unwrap_or(false) || o.permission);
        }
        hit.or_else(|| list.iter().find(|o| o.kind == target::ROLE && o.id == guild.0).map(|o| o.permission))
    };
    member(command).or_else(|| member(app))
}

/// Snowflakes in a command's options the bot gets resolved.
#[derive(Serialize, Deserialize, Default)]
pub struct Mentions {
    pub users: Vec<UserId>,
    pub channels: Vec<ChannelId>,
    pub roles: Vec<protocol::RoleId>,
    /// Mentionables: a user or a role.
    pub either: Vec<u64>,
}

/// An interaction token: the actor that holds it, the interaction's id, and
/// a MAC of both under the cluster-wide key (`attachments::UrlSigner::tag`),
/// so any node tells a real token from a made-up one before it reads a
/// request's body. Opaque to libraries, as Discord's are.
pub fn token(signer: &crate::attachments::UrlSigner, actor: ActorKey, id: u64) -> String {
    let head = format!("{:x}.{:x}", actor.raw(), id);
    let tag = signer.tag(&format!("interaction\n{head}"));
    format!("{head}.{tag}")
}

/// The actor and interaction a token names, if it is a real one.
pub fn check_token(signer: &crate::attachments::UrlSigner, token: &str) -> Option<(ActorKey, u64)> {
    let (head, tag) = token.rsplit_once('.')?;
    let (actor, id) = head.split_once('.')?;
    let actor = u64::from_str_radix(actor, 16).ok()?;
    let id = u64::from_str_radix(id, 16).ok()?;
    signer.check_tag(&format!("interaction\n{head}"), tag).then(|| (ActorKey::from_raw(actor), id))
}

/// Whether `token` has an interaction token's shape (webhook tokens have no dots).
pub fn looks_like_token(token: &str) -> bool {
    token.bytes().filter(|&b| b == b'.').count() == 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_go_from_the_command_to_the_application_and_from_users_to_roles_to_everyone() {
        use protocol::{GuildId, RoleId};
        use store::CommandPermission as P;
        let g = GuildId(1000);
        let (u, mod_role, muted) = (UserId(7), RoleId(50), RoleId(60));
        let p = |id: u64, kind: u8, permission: bool| P { id, kind, permission };
        let allow =
            |cmd: &[P], app: &[P], roles: &[RoleId], ch: Option<u64>| overrides_allow(cmd, app, g, u, roles, ch.map(ChannelId), false);
        assert_eq!(allow(&[], &[], &[], Some(5)), None, "nothing said: default_member_permissions decides");
        // @everyone denied, a role allowed: the role wins; a denied role alone denies.
        let cmd = [p(g.0, target::ROLE, false), p(mod_role.0, target::ROLE, true), p(muted.0, target::ROLE, false)];
        assert_eq!(allow(&cmd, &[], &[], None), Some(false));
        assert_eq!(allow(&cmd, &[], &[mod_role, muted], None), Some(true), "an allowed role beats a denied one");
        assert_eq!(allow(&cmd, &[], &[muted], None), Some(false));
        // A user override decides over roles.
        assert_eq!(allow(&[p(u.0, target::USER, false), p(mod_role.0, target::ROLE, true)], &[], &[mod_role], None), Some(false));
        // The command's own overrides come before the application's.
        assert_eq!(allow(&[p(u.0, target::USER, true)], &[p(g.0, target::ROLE, false)], &[], None), Some(true));
        assert_eq!(allow(&[], &[p(g.0, target::ROLE, false)], &[], None), Some(false));
        // Channels: one channel, or every channel (the guild's id minus one).
        let chans = [p(g.0 - 1, target::CHANNEL, false), p(5, target::CHANNEL, true)];
        assert_eq!(allow(&chans, &[], &[], Some(5)), None, "allowed here; nothing said of the member");
        assert_eq!(allow(&chans, &[], &[], Some(6)), Some(false));
        assert_eq!(allow(&chans, &[], &[], None), Some(false), "the index: denied in every channel");
        // Administrators are bound by channels only.
        assert_eq!(overrides_allow(&cmd, &[], g, u, &[], Some(ChannelId(6)), true), None);
        assert_eq!(overrides_allow(&chans, &[], g, u, &[], Some(ChannelId(6)), true), Some(false));
    }

    #[test]
    fn tokens_name_their_actor_and_interaction_and_cannot_be_made_up() {
        let signer = crate::attachments::UrlSigner::new(b"key", 60);
        let key = ActorKey::guild(protocol::GuildId(1234567890123));
        let t = token(&signer, key, 42);
        assert!(looks_like_token(&t));
        assert_eq!(check_token(&signer, &t), Some((key, 42)));
        assert_eq!(check_token(&crate::attachments::UrlSigner::new(b"other", 60), &t), None, "another cluster's key");
        let forged = t.replacen("2a.", "2b.", 1);
        assert_eq!(check_token(&signer, &forged), None, "another interaction");
        for bad in ["nope", "1.2.", "zz.2.00", "1.2.zz"] {
            assert_eq!(check_token(&signer, bad), None, "{bad}");
        }
    }
}
