//! A guild's online members and what each shows, across the nodes of a
//! cluster.
//!
//! Each node knows the presence of the users with sessions on it
//! (`node::presence`: online while any of its sessions lives, the status
//! set last). A user may have sessions on several nodes (two clients
//! behind a load balancer), so the guild keeps what every node that has
//! the user online reported: what the user shows is the report taken last,
//! and the user is offline only when no node has one. A node that reports
//! offline (its last session of the user ended) takes its report back; a
//! node that leaves the cluster takes all of its reports (`keep_nodes`).
//!
//! Nearly every online member is reported by one node, so that case is
//! one 16-byte entry (status, activities, node) in one map; the reports of
//! users on several nodes (or on a node whose id needs more than 32 bits)
//! are kept apart, in a map only they are in. (Issue #31's memory diet: a
//! map of what each member shows and a second map of every report, each a
//! list, took ~300 bytes a member; this takes ~35.)

use std::collections::HashMap;

use protocol::gateway::Status;
use protocol::UserId;

use node::presence::{Activities, Presence};

/// What an online member shows, and which node reported it.
#[derive(Debug)]
struct Shown {
    activities: Activities,
    /// The one node reporting the user; [`MANY`] if `many` holds the reports.
    node: u32,
    status: Status,
}

const MANY: u32 = u32::MAX;

/// A node id as a [`Shown`] holds it, if it fits.
fn small(node: u64) -> Option<u32> {
    u32::try_from(node).ok().filter(|n| *n != MANY)
}

impl Shown {
    fn new(presence: Presence, node: u32) -> Self {
        Shown { activities: presence.activities, node, status: presence.status }
    }

    fn presence(&self) -> Presence {
        Presence { status: self.status, activities: self.activities.clone() }
    }
}

/// One node's report of a user reported by several, and when it was taken
/// (the map's own count).
#[derive(Debug, Clone)]
struct Report {
    node: u64,
    presence: Presence,
    at: u64,
}

/// The guild's online members.
#[derive(Debug, Default)]
pub struct Online {
    shown: HashMap<UserId, Shown>,
    /// Every node's report of the users more than one node reports.
    many: HashMap<UserId, Vec<Report>>,
    clock: u64,
}

impl Online {
    /// Node `node` reports `presence` for `user`. Returns what the user
    /// shows now if that changed (offline when no node has them).
    pub fn report(&mut self, user: UserId, node: u64, presence: Presence) -> Option<Presence> {
        let before = self.get(user);
        let offline = presence.status == Status::Offline;
        if !self.many.contains_key(&user) {
            let here = small(node);
            match self.shown.get_mut(&user) {
                // Its one node reports again.
                Some(s) if Some(s.node) == here => {
                    if offline {
                        self.shown.remove(&user);
                    } else {
                        *s = Shown::new(presence, s.node);
                    }
                    return self.changed(user, before);
                }
                // A node that has no report takes none back.
                _ if offline => return None,
                None => match here {
                    Some(n) => {
                        self.shown.insert(user, Shown::new(presence, n));
                        return self.changed(user, before);
                    }
                    // A node id beyond 32 bits: its report is kept in a list.
                    None => {
                        self.many.insert(user, Vec::new());
                    }
                },
                // A second node: the reports go to a list, the first one's too.
                Some(s) => {
                    self.clock += 1;
                    let first = Report { node: u64::from(s.node), presence: s.presence(), at: self.clock };
                    self.many.insert(user, vec![first]);
                }
            }
        }
        if let Some(list) = self.many.get_mut(&user) {
            if offline {
                list.retain(|r| r.node != node);
            } else {
                match list.iter_mut().find(|r| r.node == node) {
                    // Unchanged reports (a session subscribing again) do
                    // not make this node's the latest.
                    Some(r) if r.presence == presence => {}
                    Some(r) => {
                        self.clock += 1;
                        *r = Report { node, presence, at: self.clock };
                    }
                    None => {
                        self.clock += 1;
                        list.push(Report { node, presence, at: self.clock });
                    }
                }
            }
            self.settle(user);
        }
        self.changed(user, before)
    }

    /// What `user` shows now, if it is not `before`.
    fn changed(&self, user: UserId, before: Option<Presence>) -> Option<Presence> {
        let after = self.get(user);
        (after != before).then(|| after.unwrap_or_else(Presence::offline))
    }

    /// After a change of `user`'s several reports: shows the latest, back
    /// to one entry when one node is left, none when none is.
    fn settle(&mut self, user: UserId) {
        let Some(list) = self.many.get(&user) else { return };
        let node = if list.len() == 1 { small(list[0].node).unwrap_or(MANY) } else { MANY };
        match list.iter().max_by_key(|r| r.at) {
            None => {
                self.many.remove(&user);
                self.shown.remove(&user);
            }
            Some(latest) => {
                let shown = Shown::new(latest.presence.clone(), node);
                self.shown.insert(user, shown);
                if node != MANY {
                    self.many.remove(&user);
                }
            }
        }
    }

    /// The user left the guild.
    pub fn forget(&mut self, user: UserId) {
        self.shown.remove(&user);
        self.many.remove(&user);
    }

    /// Drops the reports of nodes not in `live`; returns the users whose
    /// shown presence changed, with what they show now.
    pub fn keep_nodes(&mut self, live: &[u64]) -> Vec<(UserId, Presence)> {
        let mut changed = Vec::new();
        let before: Vec<(UserId, Presence)> = self.many.keys().filter_map(|u| self.shown.get(u).map(|s| (*u, s.presence()))).collect();
        for list in self.many.values_mut() {
            list.retain(|r| live.contains(&r.node));
        }
        for (user, was) in before {
            self.settle(user);
            let now = self.get(user).unwrap_or_else(Presence::offline);
            if now != was {
                changed.push((user, now));
            }
        }
        self.shown.retain(|user, s| {
            let keep = s.node == MANY || live.contains(&u64::from(s.node));
            if !keep {
                changed.push((*user, Presence::offline()));
            }
            keep
        });
        changed
    }

    /// What `user` shows, if online.
    pub fn get(&self, user: UserId) -> Option<Presence> {
        self.shown.get(&user).map(Shown::presence)
    }

    /// What `user` shows without a copy, if online: status and activities.
    pub fn shown(&self, user: UserId) -> Option<(Status, &Activities)> {
        self.shown.get(&user).map(|s| (s.status, &s.activities))
    }

    /// What `user` shows (offline if not online).
    pub fn status(&self, user: UserId) -> Status {
        self.shown.get(&user).map_or(Status::Offline, |s| s.status)
    }

    pub fn contains(&self, user: UserId) -> bool {
        self.shown.contains_key(&user)
    }

    pub fn len(&self) -> usize {
        self.shown.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// The online members and what they show, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (UserId, Presence)> + '_ {
        self.shown.iter().map(|(u, s)| (*u, s.presence()))
    }

    /// The online members, in no order.
    pub fn users(&self) -> impl Iterator<Item = UserId> + '_ {
        self.shown.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(status: Status) -> Presence {
        Presence::new(status)
    }

    fn shows(o: &Online, u: UserId) -> Status {
        o.status(u)
    }

    #[test]
    fn the_latest_report_shows_and_offline_needs_every_node() {
        let mut o = Online::default();
        let u = UserId(7);
        assert_eq!(o.report(u, 1, p(Status::Online)).map(|p| p.status), Some(Status::Online));
        assert_eq!(o.report(u, 1, p(Status::Online)), None, "the same again changes nothing");
        assert_eq!(o.report(u, 2, p(Status::Idle)).map(|p| p.status), Some(Status::Idle), "node 2 reported last");
        // Node 1 says the same again (a re-subscription): still node 2's.
        assert_eq!(o.report(u, 1, p(Status::Online)), None);
        assert_eq!(shows(&o, u), Status::Idle);
        assert_eq!(o.report(u, 1, p(Status::Dnd)).map(|p| p.status), Some(Status::Dnd));
        // Node 1's last session ends: node 2's session still shows.
        assert_eq!(o.report(u, 1, p(Status::Offline)).map(|p| p.status), Some(Status::Idle));
        assert!(o.many.is_empty(), "one node left: one entry again");
        assert_eq!(o.report(u, 3, p(Status::Offline)), None, "a node without a report takes none back");
        assert_eq!(o.report(u, 2, p(Status::Offline)).map(|p| p.status), Some(Status::Offline));
        assert!(o.shown.is_empty() && o.many.is_empty(), "nothing kept for offline users");
    }

    #[test]
    fn a_node_that_leaves_takes_its_reports() {
        let mut o = Online::default();
        o.report(UserId(1), 1, p(Status::Online));
        o.report(UserId(1), 3, p(Status::Idle));
        o.report(UserId(2), 3, p(Status::Online));
        o.report(UserId(3), 1, p(Status::Online));
        o.report(UserId(4), 1, p(Status::Dnd));
        o.report(UserId(4), 2, p(Status::Dnd));
        let mut changed = o.keep_nodes(&[1, 2]);
        changed.sort_by_key(|(u, _)| *u);
        assert_eq!(changed, [(UserId(1), p(Status::Online)), (UserId(2), p(Status::Offline))]);
        assert_eq!(shows(&o, UserId(1)), Status::Online, "node 1's report is what is left");
        assert_eq!(shows(&o, UserId(2)), Status::Offline);
        assert_eq!(shows(&o, UserId(3)), Status::Online);
        assert_eq!(shows(&o, UserId(4)), Status::Dnd, "both its nodes live");
        assert_eq!(o.len(), 3);
        assert_eq!(o.many.len(), 1, "user 1 is back to one entry");
    }

    #[test]
    fn a_node_id_beyond_32_bits_keeps_its_report_apart() {
        let mut o = Online::default();
        let (u, big) = (UserId(5), u64::from(u32::MAX) + 7);
        assert_eq!(o.report(u, big, p(Status::Idle)).map(|p| p.status), Some(Status::Idle));
        assert_eq!(o.many.len(), 1);
        assert_eq!(o.report(u, 1, p(Status::Online)).map(|p| p.status), Some(Status::Online));
        assert_eq!(o.report(u, 1, p(Status::Offline)).map(|p| p.status), Some(Status::Idle), "the big node's report is left");
        assert_eq!(o.keep_nodes(&[1]), [(u, p(Status::Offline))]);
        assert!(o.is_empty() && o.many.is_empty());
    }

    #[test]
    fn an_online_member_costs_one_small_entry() {
        assert_eq!(std::mem::size_of::<Shown>(), 16);
        let mut o = Online::default();
        o.report(UserId(1), 1, p(Status::Online));
        o.forget(UserId(1));
        assert!(o.is_empty());
    }
}
