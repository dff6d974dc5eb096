//! Members joining, changing, being kicked and leaving.

use axum::http::StatusCode;
use protocol::model::permission;
use protocol::{ErrorCode, UserId};
use store::{Change, MemberRecord, RoleRecord, UserRecord};

use super::{gone, missing_permissions, ok, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use node::convert;
use node::route::ops::roles::MAX_ROLES;
use node::route::ops::{Join, MemberAction};
use node::route::OpReply;

/// The most members one search answers (Discord's bound).
const SEARCH_MAX: u32 = 1000;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: MemberAction) -> Decided {
    match action {
        MemberAction::Add { user: new, member, via } => {
            match via {
                // Joining oneself: the REST handler used an invite for it.
                Join::Invite if new.id == user => {}
                // A bot adding a user who gave it a `guilds.join` token (checked
                // by the REST handler): the bot needs CREATE_INSTANT_INVITE.
                Join::OAuth if new.id != user && st.caller(user)?.user.bot => {
                    st.caller(user)?.require(permission::CREATE_INSTANT_INVITE)?;
                }
                _ => return Err(missing_permissions()),
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
        MemberAction::Modify { user: target, nick, roles, timeout } => {
            let caller = st.caller(user)?;
            let found = st.members.get(&target).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownMember))?;
            let (current, target_user) = (found.record(), found.user());
            if nick.is_set() {
                if target == user {
                    caller.require_any(permission::CHANGE_NICKNAME | permission::MANAGE_NICKNAMES)?;
                } else {
                    caller.require(permission::MANAGE_NICKNAMES)?;
                    caller.outranks(st, &current)?;
                }
            }
            if timeout.is_set() {
                caller.require(permission::MODERATE_MEMBERS)?;
                // Never the owner or an administrator (Discord's 403).
                if target == st.guild.owner_id
                    || node::perm::base(st.guild.id, st.guild.owner_id, &st.roles, &current) & permission::ADMINISTRATOR != 0
                {
                    return Err(missing_permissions());
                }
                if target != user {
                    caller.outranks(st, &current)?;
                }
            }
            let mut m = current.clone();
            nick.apply(&mut m.nick);
            timeout.apply(&mut m.communication_disabled_until);
            m.nick = m.nick.filter(|n| !n.is_empty());
            roles.apply(&mut m.roles);
            // `@everyone` is implied, and each role counts once. A bot's
            // managed role stays whatever list is sent (clients send the
            // roles they manage), and no one else can be given it.
            let managed = |r: &protocol::RoleId| st.roles.iter().any(|k| k.id == *r && k.bot_id.is_some());
            let kept: Vec<protocol::RoleId> = current.roles.iter().filter(|r| managed(r)).copied().collect();
            let mut seen = std::collections::HashSet::new();
            m.roles.retain(|r| r.0 != st.guild.id.0 && !kept.contains(r) && seen.insert(*r));
            m.roles.extend(kept);
            if m.roles.iter().any(|r| !st.roles.iter().any(|k| k.id == *r)) {
                return Err(OpReply::not_found(ErrorCode::UnknownRole));
            }
            if m.roles != current.roles {
                super::roles::check_new_roles(st, &caller, &current.roles, &m.roles)?;
            }
            Ok(Plan::new(vec![Change::UpdateMember(m.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownMember);
                }
                let body = convert::member(&m, Some(&target_user));
                a.apply(st, GuildEvent::MemberUpdate(m));
                ok(&body)
            }))
        }
        MemberAction::AuthorizeBot { bot, role, joined_at } => authorize_bot(st, user, *bot, *role, joined_at),
        MemberAction::Remove { user: target } => {
            let caller = st.caller(user)?;
            caller.require(permission::KICK_MEMBERS)?;
            if target == st.guild.owner_id {
                return Err(missing_permissions());
            }
            let m = st.members.get(&target).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownMember))?;
            caller.outranks(st, &m)?;
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
        MemberAction::Search { query, limit } => {
            st.caller(user)?;
            let query =
                query.filter(|q| !q.is_empty()).ok_or_else(|| OpReply::field("query", "BASE_TYPE_REQUIRED", "This field is required"))?;
            if !(1..=SEARCH_MAX).contains(&limit) {
                return Err(OpReply::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {SEARCH_MAX}.")));
            }
            let found = st.search_members(&query, limit as usize);
            let body: Vec<_> = found.iter().map(|m| m.model(true)).collect();
            let reply = ok(&body);
            Ok(Plan::now(move |_, _| reply))
        }
    }
}

/// A member leaves: a bot's managed role goes with it, as on Discord.
fn remove(st: &State, target: UserId) -> Plan {
    let managed = st.roles.iter().find(|r| r.bot_id == Some(target)).map(|r| r.id);
    let mut changes = vec![Change::RemoveMember { guild: st.guild.id, user: target }];
    changes.extend(managed.map(|role| Change::DeleteRole { guild: st.guild.id, role }));
    Plan::new(changes, move |a, st, rows| {
        if gone(rows) {
            return OpReply::not_found(ErrorCode::UnknownMember);
        }
        a.apply(st, GuildEvent::MemberRemove(target));
        if let Some(role) = managed {
            a.role_deleted(st, role, Vec::new());
        }
        OpReply::no_content()
    })
}

/// A bot authorized into the guild by `user` (see `MemberAction::AuthorizeBot`).
fn authorize_bot(st: &State, user: UserId, bot: UserRecord, mut role: RoleRecord, joined_at: u64) -> Decided {
    let caller = st.caller(user)?;
    caller.require(permission::MANAGE_GUILD)?;
    // Only permissions the caller has may be given (owner, ADMINISTRATOR: all).
    caller.may_grant(role.permissions, caller.base)?;
    if !bot.bot {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::General));
    }
    if st.bans.contains(&bot.id) {
        return Err(OpReply::forbidden(ErrorCode::UserBanned));
    }
    if st.members.contains_key(&bot.id) {
        let Some(current) = st.roles.iter().find(|r| r.bot_id == Some(bot.id)) else {
            return Ok(Plan::now(|_, _| OpReply::no_content()));
        };
        if current.permissions == role.permissions {
            return Ok(Plan::now(|_, _| OpReply::no_content()));
        }
        let r = RoleRecord { permissions: role.permissions, ..current.clone() };
        return Ok(Plan::new(vec![Change::UpdateRole(r.clone())], move |a, st, _| {
            a.roles_updated(st, vec![r]);
            OpReply::no_content()
        }));
    }
    if st.roles.len() >= MAX_ROLES {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::MaxRoles));
    }
    role.guild_id = st.guild.id;
    role.bot_id = Some(bot.id);
    let (role, shifted) = super::roles::placed_new(st, role);
    let member = MemberRecord { roles: vec![role.id], ..MemberRecord::joined(st.guild.id, bot.id, joined_at) };
    let mut changes = vec![Change::AddMemberUnlessBanned(member.clone()), Change::CreateRole(role.clone())];
    changes.extend(shifted.iter().cloned().map(Change::UpdateRole));
    Ok(Plan::new(changes, move |a, st, rows| {
        // GUILD_ROLE_CREATE before GUILD_MEMBER_ADD, whose member holds it.
        // The role is committed either way, so the state keeps it too.
        a.role_created(st, role, shifted);
        if gone(rows) {
            // Banned meanwhile, or a member already (two authorizations at once).
            return if st.bans.contains(&bot.id) { OpReply::forbidden(ErrorCode::UserBanned) } else { OpReply::no_content() };
        }
        let body = convert::member(&member, Some(&bot));
        a.apply(st, GuildEvent::MemberAdd { member, user: bot });
        OpReply::ok(StatusCode::CREATED, &body)
    }))
}
