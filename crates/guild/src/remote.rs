//! A guild actor's subscribers on other nodes of a cluster. The actor sends
//! each such node one message per event (Manifold's once per node); that
//! node resolves its own sessions and splits them over its delivery
//! workers. Here a remote session is only its reference and what the guild
//! needs to know of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::{ActorKey, UserId};

use fanout::{count_intents, Dispatch, FanEvent, NodeId, Reach, Recipient, SessionRef, Sink, SubInfo};
use node::Node;

/// A session of another node, as the actor holds it. Only `push` reaches
/// it (through the router); it is never in a local delivery partition.
pub struct RemoteSink {
    pub r: SessionRef,
    pub info: SubInfo,
    /// Passive in this guild (its node knows it too: `ClusterLink::set_passive`).
    passive: AtomicBool,
    node: Arc<Node>,
}

impl RemoteSink {
    pub fn is_passive(&self) -> bool {
        self.passive.load(Ordering::Relaxed)
    }

    fn in_reach(&self, reach: Reach) -> bool {
        match reach {
            Reach::All => true,
            Reach::Active => !self.is_passive(),
            Reach::Passive => self.is_passive(),
        }
    }
}

impl Recipient for RemoteSink {
    fn id(&self) -> &Arc<str> {
        &self.r.id
    }
    fn user_id(&self) -> UserId {
        self.info.user_id
    }
    fn bot(&self) -> bool {
        self.info.bot
    }
    fn intents(&self) -> Intents {
        self.info.intents
    }
    fn shard(&self) -> u16 {
        0
    }
    fn sub_info(&self) -> SubInfo {
        self.info.clone()
    }
    fn write_dispatch(&self, _name: &'static str, _body: &Bytes, _now: std::time::Instant) -> (bool, bool) {
        debug_assert!(false, "a remote session in a local partition");
        (false, false)
    }
    fn flush(self: Arc<Self>) -> usize {
        0
    }
    fn push(self: Arc<Self>, d: Dispatch) {
        if let Some(c) = self.node.cluster() {
            c.one(&self.r, d)
        };
    }
    fn joined(&self, _key: ActorKey) {}
    fn left(&self, _key: ActorKey) {}
}

#[derive(Default)]
pub struct RemoteSubs {
    by_node: BTreeMap<NodeId, HashMap<Arc<str>, Arc<RemoteSink>>>,
    /// Remote subscribers per intent bit (as `Subscribers` counts local ones).
    intents: [u32; 32],
    /// How many of them are passive.
    passive: std::sync::atomic::AtomicUsize,
}

impl RemoteSubs {
    pub fn get(&self, r: &SessionRef) -> Option<Sink> {
        self.by_node.get(&r.node).and_then(|m| m.get(&r.id)).map(|s| s.clone() as Sink)
    }

    pub fn contains(&self, r: &SessionRef) -> bool {
        self.by_node.get(&r.node).is_some_and(|m| m.contains_key(&r.id))
    }

    pub fn insert(&mut self, node: &Arc<Node>, r: SessionRef, info: SubInfo) -> Sink {
        count_intents(&mut self.intents, info.intents.0, true);
        let s = Arc::new(RemoteSink { r: r.clone(), info, passive: AtomicBool::new(false), node: node.clone() });
        if let Some(old) = self.by_node.entry(r.node).or_default().insert(r.id, s.clone()) {
            count_intents(&mut self.intents, old.info.intents.0, false);
            if old.is_passive() {
                self.passive.fetch_sub(1, Ordering::Relaxed);
            }
        }
        s
    }

    pub fn remove(&mut self, r: &SessionRef) -> Option<Arc<RemoteSink>> {
        let m = self.by_node.get_mut(&r.node)?;
        let s = m.remove(&r.id)?;
        if m.is_empty() {
            self.by_node.remove(&r.node);
        }
        count_intents(&mut self.intents, s.info.intents.0, false);
        if s.is_passive() {
            self.passive.fetch_sub(1, Ordering::Relaxed);
        }
        Some(s)
    }

    /// Removes (and returns) the sessions of `user`.
    pub fn remove_user(&mut self, user: UserId) -> Vec<Arc<RemoteSink>> {
        let refs: Vec<SessionRef> = self.values().filter(|s| s.info.user_id == user).map(|s| s.r.clone()).collect();
        refs.iter().filter_map(|r| self.remove(r)).collect()
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<RemoteSink>> {
        self.by_node.values().flat_map(|m| m.values())
    }

    pub fn wants(&self, intent: u64) -> bool {
        fanout::wants(&self.intents, intent)
    }

    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }

    /// Makes subscriber `r` passive (or active again) here and on its node;
    /// whether it changed.
    pub fn set_passive(&self, node: &Node, key: ActorKey, epoch: u64, r: &SessionRef, passive: bool) -> bool {
        let Some(s) = self.by_node.get(&r.node).and_then(|m| m.get(&r.id)) else { return false };
        if s.passive.swap(passive, Ordering::Relaxed) == passive {
            return false;
        }
        if passive {
            self.passive.fetch_add(1, Ordering::Relaxed);
        } else {
            self.passive.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(c) = node.cluster() {
            c.set_passive(r, key, epoch, passive);
        }
        true
    }

    /// How many remote subscribers are passive.
    pub fn passive_count(&self) -> usize {
        self.passive.load(Ordering::Relaxed)
    }

    /// Whether subscriber `r` is passive.
    pub fn is_passive(&self, r: &SessionRef) -> bool {
        self.by_node.get(&r.node).and_then(|m| m.get(&r.id)).is_some_and(|s| s.is_passive())
    }

    /// Sends `event` once to each node with subscribers in `reach` who may
    /// get it, for those `keep` accepts (`None`: all of them, and the node
    /// resolves them itself). A node whose only subscribers are the event's
    /// own user (a presence they set) or lack its intent gets nothing.
    pub fn fan(
        &self,
        node: &Node,
        key: ActorKey,
        epoch: u64,
        event: &Arc<FanEvent>,
        keep: Option<&dyn Fn(&SubInfo) -> bool>,
        reach: Reach,
    ) {
        for (&n, subs) in &self.by_node {
            match keep {
                None => {
                    if subs.values().any(|s| s.in_reach(reach) && event.may_reach(&s.info)) {
                        if let Some(c) = node.cluster() {
                            c.fan(n, key, epoch, event, None, reach)
                        };
                    }
                }
                Some(keep) => {
                    let only: Vec<Arc<str>> = subs
                        .values()
                        .filter(|s| s.in_reach(reach) && event.may_reach(&s.info) && keep(&s.info))
                        .map(|s| s.r.id.clone())
                        .collect();
                    if !only.is_empty() {
                        if let Some(c) = node.cluster() {
                            c.fan(n, key, epoch, event, Some(only), reach)
                        };
                    }
                }
            }
        }
    }
}

/// Moves a session's subscription of actor `key` (epoch `epoch`) from `m.from`
/// to `m.to` (a RESUME on another node), and sends the
/// [`fanout::MOVED`] marker where the actor's events went so far,
/// behind them: the old node forwards it after everything it forwarded, and
/// only then does the new node let this actor's direct events through.
/// Without an old subscription, straight to the new node. The new
/// subscriber, if it could be found.
pub fn move_subscriber(
    node: &Arc<Node>,
    key: ActorKey,
    epoch: u64,
    subs: &mut fanout::Subscribers,
    remote: &mut RemoteSubs,
    m: node::route::Move,
) -> Option<Sink> {
    let node::route::Move { from, to, info } = m;
    let passive = if from.node == node.id { subs.is_passive(&from.id) } else { remote.is_passive(&from) };
    let old = if from.node == node.id {
        subs.remove(&from.id)
    } else {
        let old = remote.remove(&from).map(|s| s as Sink);
        if old.is_some() {
            if let Some(c) = node.cluster() {
                c.subscribed(&from, key, epoch, false)
            };
        }
        old
    };
    // The session keeps its passive or active state where it went.
    let new: Option<Sink> = if to.node == node.id {
        node.sessions.get(&to.id).inspect(|s| {
            subs.insert(s.clone());
            subs.set_passive(&to.id, passive);
        })
    } else {
        if let Some(c) = node.cluster() {
            c.subscribed(&to, key, epoch, true)
        };
        let s = remote.insert(node, to.clone(), info);
        remote.set_passive(node, key, epoch, &to, passive);
        Some(s)
    };
    let marker = Dispatch { name: fanout::MOVED, body: Bytes::from(key.raw().to_string()) };
    match (old, &new) {
        (Some(old), _) if from.node == node.id => node.delivery.one(old, marker),
        (Some(_), _) => {
            if let Some(c) = node.cluster() {
                c.one(&from, marker)
            }
        }
        (None, Some(n)) if to.node == node.id => node.delivery.forwarded(n.clone(), marker),
        (None, Some(_)) => {
            if let Some(c) = node.cluster() {
                c.forward(&to, marker)
            }
        }
        (None, None) => {}
    }
    new
}
