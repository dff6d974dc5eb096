//! Members joining, changing, being kicked and leaving.

use axum::http::StatusCode;
use protocol::model::permission;
use protocol::{ErrorCode, UserId};
use store::Change;

use super::{gone, missing_permissions, ok, Decided, Plan};
use crate::convert;
use crate::guild::actor::{GuildActor, State};
use crate::guild::GuildEvent;
use crate::route::ops::MemberAction;
use crate::route::OpReply;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: MemberAction) -> Decided {
    match action {
        MemberAction::Add { user: new, member } => {
            // Joining oneself (the REST handler used an invite for it), or
            // an administrator adding someone.
            if new.id != user {
                st.caller(user)?.require(permission::ADMINISTRATOR)?;
            }
            if st.members.contains_key(&new.id) {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            if st.bans.contains(&new.id) {
                return Err(OpReply::forbidden(ErrorCode::UserBanned));
            }
            let member = *member;
            let new = *new;
            // The ban check is repeated in the commit: a ban still on its
            // way to the store when this was planned wins.
            Ok(Plan::new(vec![Change::AddMemberUnlessBanned(member.clone())], move |a, st, rows| {
                if gone(rows) && st.bans.contains(&new.id) {
                    return OpReply::forbidden(ErrorCode::UserBanned);
                }
                if gone(rows) {
                    // Already a member in the store (a race with another join).
                    return OpReply::no_content();
                }
                let body = convert::member(&member, Some(&new));
                a.apply(st, GuildEvent::MemberAdd { member, user: new });
                OpReply::ok(StatusCode::CREATED, &body)
            }))
        }
        MemberAction::Modify { user: target, nick, roles } => {
            let caller = st.caller(user)?;
            let (current, target_user) = st.members.get(&target).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownMember))?;
            if nick.is_set() {
                if target == user {
                    caller.require_any(permission::CHANGE_NICKNAME | permission::MANAGE_NICKNAMES)?;
                } else {
                    caller.require(permission::MANAGE_NICKNAMES)?;
                    caller.outranks(st, current)?;
                }
            }
            let mut m = current.clone();
            nick.apply(&mut m.nick);
            m.nick = m.nick.filter(|n| !n.is_empty());
            roles.apply(&mut m.roles);
            // `@everyone` is implied, and each role counts once.
            let mut seen = std::collections::HashSet::new();
            m.roles.retain(|r| r.0 != st.guild.id.0 && seen.insert(*r));
            if m.roles.iter().any(|r| !st.roles.iter().any(|k| k.id == *r)) {
                return Err(OpReply::not_found(ErrorCode::UnknownRole));
            }
            if m.roles != current.roles {
                super::roles::check_new_roles(st, &caller, &current.roles, &m.roles)?;
            }
            let target_user = target_user.clone();
            Ok(Plan::new(vec![Change::UpdateMember(m.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownMember);
                }
                let body = convert::member(&m, Some(&target_user));
                a.apply(st, GuildEvent::MemberUpdate(m));
                ok(&body)
            }))
        }
        MemberAction::Remove { user: target } => {
            let caller = st.caller(user)?;
            caller.require(permission::KICK_MEMBERS)?;
            if target == st.guild.owner_id {
                return Err(missing_permissions());
            }
            let (m, _) = st.members.get(&target).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownMember))?;
            caller.outranks(st, m)?;
            Ok(remove(st, target))
        }
        MemberAction::Leave => {
            // Leaving a guild one is not in: Discord's 404 10004.
            if !st.members.contains_key(&user) {
                return Err(OpReply::not_found(ErrorCode::UnknownGuild));
            }
            if st.caller(user)?.owner {
                return Err(OpReply::field("guild_id", "OWNER_CANNOT_LEAVE", "The owner cannot leave the guild."));
            }
            Ok(remove(st, user))
        }
    }
}

fn remove(st: &State, target: UserId) -> Plan {
    Plan::new(vec![Change::RemoveMember { guild: st.guild.id, user: target }], move |a, st, rows| {
        if gone(rows) {
            return OpReply::not_found(ErrorCode::UnknownMember);
        }
        a.apply(st, GuildEvent::MemberRemove(target));
        OpReply::no_content()
    })
}
