//! Guilds: one actor task per guild owns its state and is the only writer of
//! its ordered event stream. Everything reaches a guild through a
//! [`Router`]; [`LocalRouter`] runs every guild in this process.

pub(crate) mod actor;
mod audit;
pub mod dm;
mod fenced;
mod interact;
mod keys;
pub mod list;
pub mod members;
pub mod names;
pub mod online;
mod ops;
pub mod remote;
pub mod threads;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use protocol::{Actor, ActorKey};
use tokio::sync::mpsc;

use node::route::ReplyTo;
pub use node::route::{GuildEvent, GuildMsg, ListSubscription, RouteError, Router, Subscription};
use node::Node;

/// Maps guild ids to their actors' mailboxes, spawning actors on first use:
/// every guild runs in this process.
pub struct LocalRouter {
    node: Weak<Node>,
    /// Guards the map only; never held across an await.
    map: Mutex<HashMap<ActorKey, mpsc::Sender<GuildMsg>>>,
    /// Mailbox bound of each actor.
    capacity: usize,
}

impl LocalRouter {
    pub fn new(node: Weak<Node>, capacity: usize) -> Self {
        Self { node, map: Mutex::new(HashMap::new()), capacity }
    }

    fn mailbox(&self, id: ActorKey) -> Result<mpsc::Sender<GuildMsg>, RouteError> {
        let mut map = self.map.lock().expect("guild router poisoned");
        if let Some(tx) = map.get(&id).filter(|tx| !tx.is_closed()) {
            return Ok(tx.clone());
        }
        // The node is gone only while the process shuts down.
        let node = self.node.upgrade().ok_or(RouteError::Gone(id))?;
        let (tx, rx) = mpsc::channel(self.capacity);
        map.insert(id, tx.clone());
        match id.actor() {
            Actor::Dm(dm) => node.tasks.spawn(dm::DmActor::new(node.clone(), id, dm, rx).run()),
            Actor::Guild(g) => node.tasks.spawn(actor::GuildActor::new(node.clone(), g, rx).run()),
        };
        Ok(tx)
    }
}

/// A node whose guilds all run in this process (no cluster), with the
/// session table of the layer that owns sessions.
pub fn local_node(config: config::Config, store: Arc<dyn store::Store>, sessions: Arc<dyn fanout::SessionTable>) -> Arc<Node> {
    let capacity = config.limits.guild_mailbox_capacity;
    Node::new(config, store, sessions, move |node| (Arc::new(LocalRouter::new(node, capacity)), None))
}

impl LocalRouter {
    /// Sends `msg`, waiting for room in a full mailbox instead of refusing:
    /// for messages from other nodes, whose senders were already told yes
    /// (a subscription, a committed event). Dropping them would leave a
    /// silent hole; waiting pushes back on this node's inbound stream.
    pub async fn send_wait(&self, id: ActorKey, msg: GuildMsg) -> Result<(), RouteError> {
        let tx = self.mailbox(id)?;
        tx.send(msg).await.map_err(|_| RouteError::Gone(id))
    }

    /// Sends each running actor the message `make` builds; an actor with a
    /// full mailbox misses it (what it is for must tolerate that).
    pub fn send_all(&self, make: impl Fn() -> GuildMsg) {
        let map = self.map.lock().expect("guild router poisoned");
        for (g, tx) in map.iter() {
            if tx.try_send(make()).is_err() {
                tracing::debug!(guild = %g, "broadcast to a busy or stopped actor dropped");
            }
        }
    }

    /// Stops taking messages for the guilds `keep` refuses (a cluster node
    /// that no longer owns them): their actors end once their mailboxes drain.
    pub fn retain(&self, keep: impl Fn(ActorKey) -> bool) {
        self.map.lock().expect("guild router poisoned").retain(|g, _| keep(*g));
    }
}

impl Router for LocalRouter {
    fn send(&self, id: ActorKey, msg: GuildMsg) -> Result<(), RouteError> {
        match self.mailbox(id)?.try_send(msg) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(RouteError::Busy(id)),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(RouteError::Gone(id)),
        }
    }

    fn reply(&self, to: ReplyTo, body: Bytes) {
        if let Some(node) = self.node.upgrade() {
            if to.node == node.replies.node() {
                node.replies.complete(to.id, body);
            }
        }
    }

    fn local_actors(&self) -> usize {
        self.map.lock().expect("guild router poisoned").len()
    }

    fn mailbox_depths(&self) -> node::route::MailboxDepths {
        let map = self.map.lock().expect("guild router poisoned");
        let mut d = node::route::MailboxDepths::default();
        for tx in map.values() {
            let depth = tx.max_capacity() - tx.capacity();
            d.total += depth;
            d.max = d.max.max(depth);
        }
        d
    }

    fn actor_stopped(&self, id: ActorKey) {
        let mut map = self.map.lock().expect("guild router poisoned");
        if map.get(&id).is_some_and(|tx| tx.is_closed()) {
            map.remove(&id);
        }
    }
}

pub use node::convert::{everyone_role, text_channel};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_slots_stay_small() {
        // Every guild's mailbox allocates slots of this size in blocks of 32.
        assert!(std::mem::size_of::<GuildMsg>() <= 48, "GuildMsg is {} bytes", std::mem::size_of::<GuildMsg>());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_mailbox_refuses_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(store::sqlite::SqliteStore::open(dir.path(), &Default::default()).await.unwrap());
        let mut config = config::Config::default();
        config.limits.guild_mailbox_capacity = 2;
        let node = local_node(config, store, Arc::new(fanout::NoSessions));
        let g = ActorKey::guild(protocol::GuildId(42));
        let msg = || GuildMsg::Unsubscribe { session: fanout::SessionRef { node: fanout::NodeId(1), id: "s".into() }, presence: None };
        // The actor is spawned on this single-threaded runtime but cannot run
        // before the test yields, so nothing drains the mailbox.
        node.guilds.send(g, msg()).unwrap();
        node.guilds.send(g, msg()).unwrap();
        // REST answers it 503 (`api::error`'s tests).
        assert!(matches!(node.guilds.send(g, msg()), Err(RouteError::Busy(id)) if id == g));
    }
}
