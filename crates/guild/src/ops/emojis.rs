//! A guild's custom emojis: create (MANAGE_GUILD_EXPRESSIONS or
//! CREATE_GUILD_EXPRESSIONS), rename or restrict to roles, delete
//! (MANAGE_GUILD_EXPRESSIONS, or CREATE_GUILD_EXPRESSIONS for one's own).
//! Each change sends the whole list as GUILD_EMOJIS_UPDATE
//! (GUILD_EXPRESSIONS), as Discord does.

use axum::http::StatusCode;
use protocol::gateway::Intents;
use protocol::model::{self, permission};
use protocol::{ErrorCode, RoleId, UserId};
use serde_json::json;
use store::{Change, EmojiRecord};

use super::{gone, missing_permissions, ok, Caller, Decided, Plan};
use crate::actor::{GuildActor, State};
use fanout::encode;
use node::convert;
use node::emoji;
use node::route::ops::EmojiAction;
use node::route::OpReply;

/// Custom emojis per guild, of each kind (static, animated): Discord's
/// allowance for a guild without boosts (30008 beyond).
pub(crate) const MAX_EMOJIS: usize = 50;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: EmojiAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        EmojiAction::Create { emoji } => {
            let e = *emoji;
            if !has_any(&caller, permission::MANAGE_GUILD_EXPRESSIONS | permission::CREATE_GUILD_EXPRESSIONS) {
                return Err(missing_permissions());
            }
            check_roles(st, &e.roles)?;
            if st.emojis.iter().filter(|x| x.animated == e.animated).count() >= MAX_EMOJIS {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::MaxEmojis));
            }
            let creator = (*caller.user).clone();
            Ok(Plan::new(vec![Change::CreateEmoji(e.clone())], move |a, st, _| {
                let body = emoji::full(&e, Some(&creator));
                st.emojis.push(e);
                publish(a, st);
                OpReply::ok(StatusCode::CREATED, &body)
            }))
        }
        EmojiAction::Modify { id, name, roles } => {
            let mut e = may_manage(st, &caller, id)?.clone();
            if let node::route::Set::To(r) = &roles {
                check_roles(st, r)?;
            }
            name.apply(&mut e.name);
            roles.apply(&mut e.roles);
            Ok(Plan::new(vec![Change::UpdateEmoji(e.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownEmoji);
                }
                let creator = e.creator_id.and_then(|c| st.members.get(&c)).map(|m| m.user());
                let body = emoji::full(&e, creator.as_ref());
                if let Some(old) = st.emojis.iter_mut().find(|x| x.id == e.id) {
                    *old = e;
                }
                publish(a, st);
                ok(&body)
            }))
        }
        EmojiAction::Delete { id } => {
            may_manage(st, &caller, id)?;
            Ok(Plan::new(vec![Change::DeleteEmoji { guild: st.guild.id, id }], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownEmoji);
                }
                st.emojis.retain(|x| x.id != id);
                publish(a, st);
                OpReply::no_content()
            }))
        }
    }
}

/// Any of `bits` at guild level (or ADMINISTRATOR).
fn has_any(caller: &Caller, bits: u64) -> bool {
    caller.base & (permission::ADMINISTRATOR | bits) != 0
}

/// Emoji `id` of this guild (404 10014), if the caller may change it.
fn may_manage<'s>(st: &'s State, caller: &Caller, id: protocol::id::EmojiId) -> Result<&'s EmojiRecord, OpReply> {
    let e = st.emojis.iter().find(|e| e.id == id).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownEmoji))?;
    let own = e.creator_id == Some(caller.member.user_id) && has_any(caller, permission::CREATE_GUILD_EXPRESSIONS);
    if !own && !has_any(caller, permission::MANAGE_GUILD_EXPRESSIONS) {
        return Err(missing_permissions());
    }
    Ok(e)
}

/// Roles an emoji is limited to must be roles of this guild.
fn check_roles(st: &State, roles: &[RoleId]) -> Result<(), OpReply> {
    if roles.iter().all(|r| st.roles.iter().any(|x| x.id == *r)) {
        Ok(())
    } else {
        Err(OpReply::field("roles", "ROLE_INVALID", "Not a role of this guild."))
    }
}

/// GUILD_EMOJIS_UPDATE: the guild's whole list.
fn publish(a: &mut GuildActor, st: &State) {
    let body = encode(&json!({ "guild_id": st.guild.id, "emojis": st.emoji_objects() }));
    a.fan_out("GUILD_EMOJIS_UPDATE", &body, Intents::GUILD_EXPRESSIONS);
}

impl State {
    /// The guild object of GUILD_CREATE, GUILD_UPDATE and REST answers
    /// from the actor: with its emojis.
    pub(crate) fn guild_object(&self) -> model::Guild {
        let mut g = convert::guild(&self.guild, &self.roles);
        g.emojis = self.emoji_objects();
        g
    }

    /// The custom emojis as gateway events carry them (no creator).
    pub(crate) fn emoji_objects(&self) -> Vec<model::Emoji> {
        self.emojis.iter().map(|e| emoji::full(e, None)).collect()
    }
}
