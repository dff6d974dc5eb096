//! A member's presence reported by a node (`GuildMsg::Presence`, and with
//! each subscription), or the nodes of the cluster changing
//! (`GuildMsg::NodesLive`): the guild's [`Online`](crate::online::Online)
//! decides what the member shows, and a change reaches the member lists
//! and PRESENCE_UPDATE.

use protocol::gateway::Intents;
use protocol::UserId;

use super::{GuildActor, State};
use fanout::{encode, FanEvent, Filter};
use node::presence::Presence;

impl GuildActor {
    /// `node` reports `presence` for member `user`: if what the user shows
    /// changes, the member lists and PRESENCE_UPDATE follow.
    pub(super) fn presence_reported(&mut self, st: &mut State, user: UserId, node: u64, presence: Presence) {
        if !st.members.contains_key(&user) {
            return;
        }
        if let Some(shown) = st.online.report(user, node, presence) {
            self.show_presence(st, user, shown);
        }
    }

    /// Nodes not in `live` left the cluster: their reports go.
    pub(super) fn nodes_live(&mut self, st: &mut State, live: &[u64]) {
        for (user, shown) in st.online.keep_nodes(live) {
            self.show_presence(st, user, shown);
        }
    }

    /// `user` shows `shown` now (a change): the member lists and PRESENCE_UPDATE.
    fn show_presence(&mut self, st: &mut State, user: UserId, shown: Presence) {
        self.lists.status_changed(&st.view(), user, shown.status);
        if !self.subs.wants(Intents::GUILD_PRESENCES) && !self.remote.wants(Intents::GUILD_PRESENCES) {
            self.seq += 1;
            return;
        }
        let body = encode(&super::presence_json(self.id, user, &shown));
        // Not echoed to the user's own sessions: they set it.
        self.publish(FanEvent::new("PRESENCE_UPDATE", body, Filter::IntentNotUser(Intents::GUILD_PRESENCES, user)));
    }
}
