//! Bans: BAN_MEMBERS and the role hierarchy, checked against the actor's
//! state. The actor holds the banned ids, so a ban and a join are decided
//! in one order: once a ban is committed no join of that user commits.

use protocol::model::permission;
use protocol::{ErrorCode, UserId};
use store::{BanRecord, Change};

use super::{gone, missing_permissions, Decided, Plan};
use crate::actor::{GuildActor, State};
use node::auth::now_ms;
use node::route::ops::BanAction;
use node::route::OpReply;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: BanAction) -> Decided {
    let caller = st.caller(user)?;
    caller.require(permission::BAN_MEMBERS)?;
    match action {
        BanAction::Add { user: target, reason, purge } => {
            if target.id == st.guild.owner_id || target.id == user {
                return Err(missing_permissions());
            }
            let member = st.members.get(&target.id);
            if let Some(m) = member {
                caller.outranks(st, &m)?;
            }
            if st.bans.contains(&target.id) {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            let gid = st.guild.id;
            // Removed from the members in any case: a join planned before
            // this ban may commit before it.
            let mut changes = vec![
                Change::AddBan(BanRecord { guild_id: gid, user_id: target.id, reason, created_at: now_ms() }),
                Change::RemoveMember { guild: gid, user: target.id },
            ];
            if !purge.is_empty() {
                changes.push(Change::PurgeMessages { guild: gid, author: target.id, ids: purge.iter().map(|(_, m)| *m).collect() });
            }
            Ok(Plan::new(changes, move |a, st, rows| {
                if gone(rows) {
                    // Banned by a request planned just before this one.
                    return OpReply::no_content();
                }
                a.banned(st, &target, &purge);
                OpReply::no_content()
            }))
        }
        BanAction::Remove { user: target } => {
            if !st.bans.contains(&target.id) {
                return Err(OpReply::not_found(ErrorCode::UnknownBan));
            }
            Ok(Plan::new(vec![Change::RemoveBan { guild: st.guild.id, user: target.id }], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownBan);
                }
                a.unbanned(st, &target);
                OpReply::no_content()
            }))
        }
    }
}
