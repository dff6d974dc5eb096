//! Roles, a member's roles and channel overwrites, checked against the
//! actor's state: MANAGE_ROLES and Discord's role hierarchy.
//!
//! The hierarchy: a member's rank is their highest role (position, then the
//! older role above at equal positions; `@everyone` is the lowest). A member
//! may edit, delete, reorder, give and take away only roles below their own
//! highest, and act on (kick, ban, rename) only members whose highest role
//! is below theirs. They may give a role, or allow or deny in an overwrite,
//! only permissions they have. ADMINISTRATOR grants every permission but
//! not rank; only the owner is above the hierarchy.

use node::perm::MemberFacts;
use std::cmp::Reverse;

use axum::http::StatusCode;
use protocol::model::permission;
use protocol::{ErrorCode, RoleId, UserId};
use store::{Change, ChannelRecord, OverwriteRecord, RoleRecord};

use super::{gone, missing_permissions, ok, Caller, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use node::convert;
use node::route::ops::roles::MAX_ROLES;
use node::route::ops::{OverwriteAction, RoleAction};
use node::route::OpReply;

/// Where a new role goes: just above `@everyone` (position 0), below every
/// other role, so whoever may manage roles may manage it.
const NEW_ROLE_POSITION: i32 = 1;

/// A place in the hierarchy: position, then the older (smaller id) role above.
pub(super) type Rank = (i32, Reverse<u64>);

fn rank(r: &RoleRecord) -> Rank {
    (r.position, Reverse(r.id.0))
}

impl State {
    /// A role of this guild: 404 10011 if there is none.
    pub(super) fn role(&self, id: RoleId) -> Result<&RoleRecord, OpReply> {
        self.roles.iter().find(|r| r.id == id).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownRole))
    }

    fn is_everyone(&self, id: RoleId) -> bool {
        id.0 == self.guild.id.0
    }

    /// A member's highest role (`@everyone` if they have no other).
    pub(super) fn top(&self, m: &impl MemberFacts) -> Rank {
        self.roles
            .iter()
            .filter(|r| self.is_everyone(r.id) || m.roles().contains(&r.id))
            .map(rank)
            .max()
            .unwrap_or((0, Reverse(self.guild.id.0)))
    }
}

impl Caller<'_> {
    /// The owner, or a highest role above `r`: else 403 50013.
    pub(super) fn above(&self, st: &State, r: Rank) -> Result<(), OpReply> {
        if self.owner || st.top(&self.member) > r {
            Ok(())
        } else {
            Err(missing_permissions())
        }
    }

    /// May act on `target` (kick, ban, nickname): the owner, or ranked above
    /// them; nobody but the owner acts on the owner.
    pub(super) fn outranks(&self, st: &State, target: &impl MemberFacts) -> Result<(), OpReply> {
        if target.user_id() == st.guild.owner_id && !self.owner {
            return Err(missing_permissions());
        }
        self.above(st, st.top(target))
    }

    /// May give `role` to a member or take it away: MANAGE_ROLES and below
    /// the caller's highest role.
    pub(super) fn may_assign(&self, st: &State, role: &RoleRecord) -> Result<(), OpReply> {
        self.require(permission::MANAGE_ROLES)?;
        self.above(st, rank(role))
    }

    /// Only permissions the caller has (`have`; owner and ADMINISTRATOR: all).
    pub(super) fn may_grant(&self, bits: u64, have: u64) -> Result<(), OpReply> {
        if self.owner || self.base & permission::ADMINISTRATOR != 0 || bits & !have == 0 {
            Ok(())
        } else {
            Err(missing_permissions())
        }
    }
}

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: RoleAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        RoleAction::Create { role, permissions } => create(st, &caller, *role, permissions),
        RoleAction::Modify { role, patch } => {
            caller.require(permission::MANAGE_ROLES)?;
            let before = st.role(role)?;
            caller.above(st, rank(before))?;
            let mut r = before.clone();
            if !st.is_everyone(role) {
                patch.name.apply(&mut r.name);
            }
            patch.color.apply(&mut r.color);
            patch.hoist.apply(&mut r.hoist);
            patch.permissions.apply(&mut r.permissions);
            patch.mentionable.apply(&mut r.mentionable);
            caller.may_grant(r.permissions ^ before.permissions, caller.base)?;
            Ok(Plan::new(vec![Change::UpdateRole(r.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownRole);
                }
                let body = convert::role(&r);
                a.roles_updated(st, vec![r]);
                ok(&body)
            }))
        }
        RoleAction::Delete { role } => {
            caller.require(permission::MANAGE_ROLES)?;
            let r = st.role(role)?;
            // `@everyone`, and a bot's managed role (it goes when the bot leaves).
            if st.is_everyone(role) || r.bot_id.is_some() {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::InvalidRole));
            }
            caller.above(st, rank(r))?;
            // Overwrites naming the role go with it, in the same commit.
            let channels: Vec<ChannelRecord> = st
                .channels
                .iter()
                .filter(|c| c.overwrites.iter().any(|o| o.kind == 0 && o.id == role.0))
                .map(|c| {
                    let mut c = c.clone();
                    c.overwrites.retain(|o| !(o.kind == 0 && o.id == role.0));
                    c
                })
                .collect();
            let mut changes = vec![Change::DeleteRole { guild: st.guild.id, role }];
            changes.extend(channels.iter().cloned().map(Change::UpdateChannel));
            Ok(Plan::new(changes, move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownRole);
                }
                a.role_deleted(st, role, channels);
                OpReply::no_content()
            }))
        }
        RoleAction::Reorder { positions } => reorder(st, &caller, positions),
        RoleAction::Grant { user: target, role } => member_role(st, &caller, target, role, true),
        RoleAction::Revoke { user: target, role } => member_role(st, &caller, target, role, false),
    }
}

/// A new role at [`NEW_ROLE_POSITION`]; every other role moves one up, so
/// positions stay distinct (as Discord keeps them).
fn create(st: &State, caller: &Caller, mut r: RoleRecord, permissions: Option<u64>) -> Decided {
    caller.require(permission::MANAGE_ROLES)?;
    let everyone = st.roles.iter().find(|x| st.is_everyone(x.id)).map_or(0, |e| e.permissions);
    r.permissions = permissions.unwrap_or(everyone);
    caller.may_grant(r.permissions, caller.base)?;
    if st.roles.len() >= MAX_ROLES {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::MaxRoles));
    }
    r.guild_id = st.guild.id;
    r.bot_id = None;
    let (r, shifted) = placed_new(st, r);
    let mut changes = vec![Change::CreateRole(r.clone())];
    changes.extend(shifted.iter().cloned().map(Change::UpdateRole));
    Ok(Plan::new(changes, move |a, st, _| {
        let body = convert::role(&r);
        a.role_created(st, r, shifted);
        ok(&body)
    }))
}

/// `r` placed at [`NEW_ROLE_POSITION`], and the roles that move one up for it.
pub(super) fn placed_new(st: &State, mut r: RoleRecord) -> (RoleRecord, Vec<RoleRecord>) {
    r.position = NEW_ROLE_POSITION;
    let shifted = st
        .roles
        .iter()
        .filter(|x| !st.is_everyone(x.id) && x.position >= NEW_ROLE_POSITION)
        .map(|x| RoleRecord { position: x.position + 1, ..x.clone() })
        .collect();
    (r, shifted)
}

/// `PATCH /guilds/{g}/roles`: the roles whose position changes must be
/// below the caller's highest, and stay below it; `@everyone` stays at 0.
fn reorder(st: &State, caller: &Caller, positions: Vec<(RoleId, i32)>) -> Decided {
    caller.require(permission::MANAGE_ROLES)?;
    let mut moved: Vec<RoleRecord> = Vec::new();
    for (id, position) in positions {
        let r = st.role(id)?;
        if st.is_everyone(id) || r.position == position {
            continue;
        }
        if position < NEW_ROLE_POSITION {
            return Err(OpReply::field("position", "NUMBER_TYPE_MIN", "Only @everyone has position 0."));
        }
        let to = RoleRecord { position, ..r.clone() };
        caller.above(st, rank(r))?;
        caller.above(st, rank(&to))?;
        moved.retain(|m| m.id != id);
        moved.push(to);
    }
    let changes = moved.iter().cloned().map(Change::UpdateRole).collect();
    Ok(Plan::new(changes, move |a, st, _| {
        if !moved.is_empty() {
            a.roles_updated(st, moved);
        }
        ok(&st.roles.iter().map(convert::role).collect::<Vec<_>>())
    }))
}

/// Gives `role` to `target` (`add`) or takes it away: 204 either way, also
/// when nothing changes.
fn member_role(st: &State, caller: &Caller, target: UserId, role: RoleId, add: bool) -> Decided {
    let r = st.role(role)?;
    caller.may_assign(st, r)?;
    if r.bot_id.is_some() {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::InvalidRole));
    }
    let m = st.members.get(&target).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownMember))?;
    if st.is_everyone(role) || m.roles().contains(&role) == add {
        return Ok(Plan::now(|_, _| OpReply::no_content()));
    }
    let mut m = m.record();
    if add {
        m.roles.push(role);
    } else {
        m.roles.retain(|x| *x != role);
    }
    Ok(Plan::new(vec![Change::UpdateMember(m.clone())], move |a, st, rows| {
        if gone(rows) {
            return OpReply::not_found(ErrorCode::UnknownMember);
        }
        a.apply(st, GuildEvent::MemberUpdate(m));
        OpReply::no_content()
    }))
}

/// A member's new roles (`PATCH /guilds/{g}/members/{u}`): MANAGE_ROLES,
/// and every role added or taken away below the caller's highest.
pub(super) fn check_new_roles(st: &State, caller: &Caller, before: &[RoleId], after: &[RoleId]) -> Result<(), OpReply> {
    caller.require(permission::MANAGE_ROLES)?;
    for id in after.iter().filter(|r| !before.contains(r)).chain(before.iter().filter(|r| !after.contains(r))) {
        if !st.is_everyone(*id) {
            let r = st.role(*id)?;
            caller.above(st, rank(r))?;
            // A bot's managed role is its own: never given or taken by hand.
            if r.bot_id.is_some() {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::InvalidRole));
            }
        }
    }
    Ok(())
}

/// Discord's rule for editing overwrites: only permissions the caller has
/// in the guild (or in the channel's category) may be allowed or denied,
/// unless an overwrite in this very channel gives them MANAGE_ROLES. Only
/// the bits that change from `before` to `after` count.
pub(super) fn check_overwrite_bits(
    st: &State,
    caller: &Caller,
    c: &ChannelRecord,
    before: &[OverwriteRecord],
    after: &[OverwriteRecord],
) -> Result<(), OpReply> {
    let bits = |list: &[OverwriteRecord], o: &OverwriteRecord| {
        list.iter().find(|x| x.id == o.id && x.kind == o.kind).map_or((0, 0), |x| (x.allow, x.deny))
    };
    let changed = after.iter().chain(before.iter()).fold(0u64, |acc, o| {
        let ((a0, d0), (a1, d1)) = (bits(before, o), bits(after, o));
        acc | (a0 ^ a1) | (d0 ^ d1)
    });
    if changed == 0 {
        return Ok(());
    }
    let own = |o: &OverwriteRecord| {
        (o.kind == 0 && caller.member.roles.iter().any(|r| r.0 == o.id)) || (o.kind == 1 && o.id == caller.member.user_id.0)
    };
    if c.overwrites.iter().any(|o| own(o) && o.allow & permission::MANAGE_ROLES != 0) {
        return Ok(());
    }
    let have = match c.parent_id.and_then(|p| st.channels.iter().find(|x| x.id == p)) {
        Some(parent) => node::perm::in_channel(caller.base, st.guild.id, &caller.member, parent),
        None => caller.base,
    };
    caller.may_grant(changed, have)
}

pub(super) fn plan_overwrite(_a: &GuildActor, st: &State, user: UserId, action: OverwriteAction) -> Decided {
    let caller = st.caller(user)?;
    let (channel, id) = match &action {
        OverwriteAction::Put { channel, overwrite } => (*channel, overwrite.id),
        OverwriteAction::Delete { channel, id } => (*channel, *id),
    };
    let before = st.channel(channel)?;
    caller.require_in(st, before, permission::MANAGE_ROLES)?;
    let mut c = before.clone();
    match action {
        OverwriteAction::Put { overwrite, .. } => {
            match overwrite.kind {
                0 => drop(st.role(RoleId(overwrite.id))?),
                _ if !st.members.contains_key(&UserId(overwrite.id)) => return Err(OpReply::not_found(ErrorCode::UnknownMember)),
                _ => {}
            }
            // One overwrite per target.
            c.overwrites.retain(|o| o.id != id);
            c.overwrites.push(overwrite);
        }
        OverwriteAction::Delete { .. } => {
            if !c.overwrites.iter().any(|o| o.id == id) {
                return Err(OpReply::not_found(ErrorCode::UnknownOverwrite));
            }
            c.overwrites.retain(|o| o.id != id);
        }
    }
    check_overwrite_bits(st, &caller, before, &before.overwrites, &c.overwrites)?;
    Ok(Plan::new(vec![Change::UpdateChannel(c.clone())], move |a, st, rows| {
        if gone(rows) {
            return OpReply::not_found(ErrorCode::UnknownChannel);
        }
        a.apply(st, GuildEvent::ChannelUpdate(c));
        OpReply::no_content()
    }))
}
