//! A member's presence across the nodes of a cluster.
//!
//! Each node knows the presence of the users with sessions on it
//! (`node::presence`: online while any of its sessions lives, the status
//! set last). A user may have sessions on several nodes (two clients
//! behind a load balancer), so the guild's actor keeps one entry per node
//! that reported the user: what it shows is the entry updated last, and
//! the user is offline only when no node has one. A node that reports
//! offline (its last session of the user ended) removes its entry; a node
//! that leaves the cluster loses all of its entries (`GuildMsg::NodesLive`).
//! Without a cluster there is one node and this is what it reported.

use std::collections::HashMap;

use protocol::gateway::{Intents, Status};
use protocol::UserId;

use super::{GuildActor, State};
use fanout::{encode, FanEvent, Filter};
use node::presence::Presence;

/// One node's report of a user, and when the actor took it (its own count).
#[derive(Debug, Clone)]
pub(crate) struct Source {
    node: u64,
    presence: Presence,
    at: u64,
}

/// Every node's report of each member that some node has online.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    by_user: HashMap<UserId, Vec<Source>>,
    clock: u64,
}

impl Sources {
    /// Node `node` reports `presence` for `user`. Returns what the user
    /// shows now (offline if no node has them).
    pub(crate) fn report(&mut self, user: UserId, node: u64, presence: Presence) -> Presence {
        if presence.status == Status::Offline {
            if let Some(list) = self.by_user.get_mut(&user) {
                list.retain(|s| s.node != node);
                if list.is_empty() {
                    self.by_user.remove(&user);
                }
            }
        } else {
            let list = self.by_user.entry(user).or_default();
            match list.iter_mut().find(|s| s.node == node) {
                // Unchanged reports (a session subscribing again) do not
                // make this node's entry the latest.
                Some(s) if s.presence == presence => {}
                Some(s) => {
                    self.clock += 1;
                    *s = Source { node, presence, at: self.clock };
                }
                None => {
                    self.clock += 1;
                    list.push(Source { node, presence, at: self.clock });
                }
            }
        }
        self.shown(user)
    }

    /// What `user` shows: the entry updated last, or offline.
    pub(crate) fn shown(&self, user: UserId) -> Presence {
        let latest = self.by_user.get(&user).and_then(|list| list.iter().max_by_key(|s| s.at));
        latest.map_or_else(Presence::offline, |s| s.presence.clone())
    }

    /// The user left the guild.
    pub(crate) fn forget(&mut self, user: UserId) {
        self.by_user.remove(&user);
    }

    /// Drops the entries of nodes not in `live`; returns the users whose
    /// shown presence may have changed.
    pub(crate) fn keep_nodes(&mut self, live: &[u64]) -> Vec<UserId> {
        let mut touched = Vec::new();
        for (user, list) in &mut self.by_user {
            let before = list.len();
            list.retain(|s| live.contains(&s.node));
            if list.len() != before {
                touched.push(*user);
            }
        }
        self.by_user.retain(|_, list| !list.is_empty());
        touched
    }
}

impl GuildActor {
    /// `node` reports `presence` for member `user`: if what the user shows
    /// changes, the member lists and PRESENCE_UPDATE follow.
    pub(super) fn presence_reported(&mut self, st: &mut State, user: UserId, node: u64, presence: Presence) {
        if !st.members.contains_key(&user) {
            return;
        }
        let shown = st.presences.report(user, node, presence);
        self.show_presence(st, user, shown);
    }

    /// Nodes not in `live` left the cluster: their reports go.
    pub(super) fn nodes_live(&mut self, st: &mut State, live: &[u64]) {
        for user in st.presences.keep_nodes(live) {
            let shown = st.presences.shown(user);
            self.show_presence(st, user, shown);
        }
    }

    /// Makes `shown` what `user` shows, announcing it if it changed.
    fn show_presence(&mut self, st: &mut State, user: UserId, shown: Presence) {
        let before = st.online.get(&user).cloned().unwrap_or_else(Presence::offline);
        if before == shown {
            return;
        }
        if shown.status == Status::Offline {
            st.online.remove(&user);
        } else {
            st.online.insert(user, shown.clone());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(status: Status) -> Presence {
        Presence { status, activities: Vec::new() }
    }

    #[test]
    fn the_latest_report_shows_and_offline_needs_every_node() {
        let mut s = Sources::default();
        let u = UserId(7);
        assert_eq!(s.report(u, 1, p(Status::Online)).status, Status::Online);
        assert_eq!(s.report(u, 2, p(Status::Idle)).status, Status::Idle, "node 2 reported last");
        // Node 1 says the same again (a re-subscription): still node 2's.
        assert_eq!(s.report(u, 1, p(Status::Online)).status, Status::Idle);
        assert_eq!(s.report(u, 1, p(Status::Dnd)).status, Status::Dnd);
        // Node 1's last session ends: node 2's session still shows.
        assert_eq!(s.report(u, 1, p(Status::Offline)).status, Status::Idle);
        assert_eq!(s.report(u, 2, p(Status::Offline)).status, Status::Offline);
        assert!(s.by_user.is_empty(), "nothing kept for offline users");
    }

    #[test]
    fn a_node_that_leaves_takes_its_reports() {
        let mut s = Sources::default();
        s.report(UserId(1), 1, p(Status::Online));
        s.report(UserId(1), 3, p(Status::Idle));
        s.report(UserId(2), 3, p(Status::Online));
        s.report(UserId(3), 1, p(Status::Online));
        let mut touched = s.keep_nodes(&[1, 2]);
        touched.sort();
        assert_eq!(touched, [UserId(1), UserId(2)]);
        assert_eq!(s.shown(UserId(1)).status, Status::Online, "node 1's report is what is left");
        assert_eq!(s.shown(UserId(2)).status, Status::Offline);
        assert_eq!(s.shown(UserId(3)).status, Status::Online);
    }
}
