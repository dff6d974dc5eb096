//! The guild's own settings, and deleting it.

use protocol::model::permission;
use protocol::UserId;
use store::Change;

use super::{missing_permissions, ok, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use node::route::ops::GuildAction;
use node::route::OpReply;

pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: GuildAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        GuildAction::Modify { name, icon, description, system_channel_id } => {
            caller.require(permission::MANAGE_GUILD)?;
            let mut g = st.guild.clone();
            name.apply(&mut g.name);
            icon.apply(&mut g.icon);
            description.apply(&mut g.description);
            system_channel_id.apply(&mut g.system_channel_id);
            Ok(Plan::new(vec![Change::UpdateGuild(g.clone())], move |a, st, _| {
                a.apply(st, GuildEvent::GuildUpdate(g));
                ok(&st.guild_object())
            }))
        }
        GuildAction::Delete => {
            if !caller.owner {
                return Err(missing_permissions());
            }
            Ok(Plan::new(vec![Change::DeleteGuild(a.id())], move |a, st, _| {
                a.apply(st, GuildEvent::GuildDelete);
                OpReply::no_content()
            }))
        }
        // The entry itself is added by the actor (`crate::audit`): nothing else changes.
        GuildAction::Record(_) => Ok(Plan::now(|_, _| OpReply::no_content())),
    }
}
