//! Reactions: adding one's own, taking one's own or (MANAGE_MESSAGES)
//! anyone's off, clearing a message's reactions or those of one emoji.
//! Events go to those who may see the channel and asked for
//! GUILD_MESSAGE_REACTIONS.

use axum::http::StatusCode;
use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::id::EmojiId;
use protocol::model::permission;
use protocol::{ChannelId, ErrorCode, MessageId, UserId};
use serde_json::json;
use store::{Change, EmojiRecord, ReactionEmoji, ReactionRecord};

use super::{missing_permissions, Caller, Decided, Plan};
use crate::actor::{GuildActor, State};
use fanout::encode;
use node::auth::now_ms;
use node::route::ops::ReactionAction;
use node::route::OpReply;
use node::{convert, emoji};

/// Distinct emojis on one message, as on Discord (30010 beyond).
pub(crate) const MAX_REACTION_EMOJIS: u32 = 20;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: ReactionAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        ReactionAction::Add { channel, message, author, emoji, custom, groups } => {
            let c = st.channel(channel)?;
            let bits = caller.require_in(st, c, permission::READ_MESSAGE_HISTORY)?;
            let key = emoji.key();
            match groups.iter().find(|g| g.emoji.key() == key) {
                Some(g) if g.me => return Ok(Plan::now(|_, _| OpReply::no_content())),
                Some(_) => {}
                // A new emoji on the message.
                None if bits & permission::ADD_REACTIONS == 0 => return Err(missing_permissions()),
                None if groups.len() >= MAX_REACTION_EMOJIS as usize => {
                    return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::MaxReactions))
                }
                None => {}
            }
            if let Some(id) = emoji.id() {
                usable(st, &caller, bits, id, custom.as_deref())?;
            }
            let reaction = ReactionRecord { message_id: message, emoji: emoji.clone(), user_id: user, created_at: now_ms() };
            let member = convert::member(&caller.member, Some(&*caller.user));
            Ok(Plan::new(vec![Change::AddReaction { reaction, max_emojis: MAX_REACTION_EMOJIS }], move |a, st, rows| {
                // Not added: it raced another add of the same reaction, the
                // message's deletion or its 20th emoji.
                if rows.first() == Some(&1) {
                    let body = encode(&json!({
                        "user_id": user, "channel_id": channel, "message_id": message, "guild_id": a.id(),
                        "member": member, "emoji": emoji::partial(&emoji), "message_author_id": author,
                        "burst": false, "burst_colors": [], "type": 0,
                    }));
                    a.fan_out_in(st, channel, "MESSAGE_REACTION_ADD", &body, Intents::GUILD_MESSAGE_REACTIONS);
                }
                OpReply::no_content()
            }))
        }
        ReactionAction::Remove { channel, message, emoji, user: whose } => {
            let c = st.channel(channel)?;
            let bits = caller.view(st, c)?;
            if whose != user && bits & permission::MANAGE_MESSAGES == 0 {
                return Err(missing_permissions());
            }
            let change = Change::RemoveReactions { message, emoji: Some(emoji.key()), user: Some(whose) };
            Ok(Plan::new(vec![change], move |a, st, rows| {
                if rows.first() > Some(&0) {
                    let body = encode(&json!({
                        "user_id": whose, "channel_id": channel, "message_id": message, "guild_id": a.id(),
                        "emoji": emoji::partial(&emoji), "burst": false, "type": 0,
                    }));
                    a.fan_out_in(st, channel, "MESSAGE_REACTION_REMOVE", &body, Intents::GUILD_MESSAGE_REACTIONS);
                }
                OpReply::no_content()
            }))
        }
        ReactionAction::Clear { channel, message, emoji } => {
            let c = st.channel(channel)?;
            caller.require_in(st, c, permission::MANAGE_MESSAGES)?;
            let change = Change::RemoveReactions { message, emoji: emoji.as_ref().map(ReactionEmoji::key), user: None };
            Ok(Plan::new(vec![change], move |a, st, rows| {
                if rows.first() > Some(&0) {
                    let (name, body) = cleared(a, channel, message, emoji.as_ref());
                    a.fan_out_in(st, channel, name, &body, Intents::GUILD_MESSAGE_REACTIONS);
                }
                OpReply::no_content()
            }))
        }
    }
}

/// MESSAGE_REACTION_REMOVE_EMOJI (one emoji's) or _REMOVE_ALL.
fn cleared(a: &GuildActor, channel: ChannelId, message: MessageId, emoji: Option<&ReactionEmoji>) -> (&'static str, Bytes) {
    let mut d = json!({ "channel_id": channel, "message_id": message, "guild_id": a.id() });
    match emoji {
        Some(e) => {
            d["emoji"] = json!(emoji::partial(e));
            ("MESSAGE_REACTION_REMOVE_EMOJI", encode(&d))
        }
        None => ("MESSAGE_REACTION_REMOVE_ALL", encode(&d)),
    }
}

/// Whether the caller may react with custom emoji `id`: one of this guild
/// (limited to its roles, if it names any), or of another guild the store
/// knows (`found`) with USE_EXTERNAL_EMOJIS. Anything else is 10014.
fn usable(st: &State, caller: &Caller, bits: u64, id: EmojiId, found: Option<&EmojiRecord>) -> Result<(), OpReply> {
    if let Some(e) = st.emojis.iter().find(|e| e.id == id) {
        let allowed = e.roles.is_empty() || caller.owner || e.roles.iter().any(|r| caller.member.roles.contains(r));
        return if allowed { Ok(()) } else { Err(missing_permissions()) };
    }
    match found {
        Some(e) if e.guild_id != st.guild.id && bits & permission::USE_EXTERNAL_EMOJIS != 0 => Ok(()),
        Some(e) if e.guild_id != st.guild.id => Err(missing_permissions()),
        _ => Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::UnknownEmoji)),
    }
}
