//! Creating, changing and deleting a guild's channels.

use axum::http::StatusCode;
use protocol::model::{channel_type, permission};
use protocol::{ErrorCode, UserId};
use store::{Change, ChannelRecord};

use super::{gone, ok, Caller, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use node::convert;
use node::route::ops::ChannelAction;
use node::route::OpReply;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: ChannelAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        ChannelAction::Create { channel, position } => {
            caller.require(permission::MANAGE_CHANNELS)?;
            let mut c = *channel;
            if !c.overwrites.is_empty() {
                caller.require(permission::MANAGE_ROLES)?;
                super::roles::check_overwrite_bits(st, &caller, &c, &[], &c.overwrites)?;
            }
            check_parent(st, &c)?;
            c.position = position.unwrap_or(st.channels.len() as i32);
            Ok(Plan::new(vec![Change::CreateChannel(c.clone())], move |a, st, _| {
                let body = convert::channel(&c);
                a.apply(st, GuildEvent::ChannelCreate(c));
                OpReply::ok(StatusCode::CREATED, &body)
            }))
        }
        ChannelAction::Modify { channel, patch } => {
            let before = st.channel(channel)?;
            let patch = *patch;
            let bits = if patch.overwrites.is_set() {
                permission::MANAGE_CHANNELS | permission::MANAGE_ROLES
            } else {
                permission::MANAGE_CHANNELS
            };
            require_in(&caller, st, before, bits)?;
            let mut c = before.clone();
            patch.name.apply(&mut c.name);
            patch.topic.apply(&mut c.topic);
            patch.position.apply(&mut c.position);
            patch.nsfw.apply(&mut c.nsfw);
            patch.parent_id.apply(&mut c.parent_id);
            patch.rate_limit_per_user.apply(&mut c.rate_limit_per_user);
            patch.overwrites.apply(&mut c.overwrites);
            super::roles::check_overwrite_bits(st, &caller, before, &before.overwrites, &c.overwrites)?;
            check_parent(st, &c)?;
            Ok(Plan::new(vec![Change::UpdateChannel(c.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownChannel);
                }
                let body = convert::channel(&c);
                a.apply(st, GuildEvent::ChannelUpdate(c));
                ok(&body)
            }))
        }
        ChannelAction::Delete { channel } => {
            let c = st.channel(channel)?.clone();
            require_in(&caller, st, &c, permission::MANAGE_CHANNELS)?;
            // Its threads go with it (clients drop them on CHANNEL_DELETE).
            let mut changes = vec![Change::DeleteChannel(channel)];
            changes.extend(st.threads.children(channel).map(Change::DeleteChannel));
            Ok(Plan::new(changes, move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownChannel);
                }
                st.threads.map.retain(|_, t| t.channel.parent_id != Some(channel));
                let body = convert::channel(&c);
                a.apply(st, GuildEvent::ChannelDelete(c));
                ok(&body)
            }))
        }
    }
}

/// Permission in the channel itself (its overwrites may grant or deny).
fn require_in(caller: &Caller, st: &State, c: &ChannelRecord, bits: u64) -> Result<(), OpReply> {
    caller.require_in(st, c, bits).map(drop)
}

/// A parent is a category of this guild, and a category has none.
fn check_parent(st: &State, c: &ChannelRecord) -> Result<(), OpReply> {
    let Some(p) = c.parent_id else { return Ok(()) };
    let is_category = st.channels.iter().any(|x| x.id == p && x.kind == channel_type::GUILD_CATEGORY);
    if !is_category || c.kind == channel_type::GUILD_CATEGORY || p == c.id {
        return Err(OpReply::field("parent_id", "CHANNEL_PARENT_INVALID", "Not a category of this guild."));
    }
    Ok(())
}
