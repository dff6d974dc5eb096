//! A cluster of nodes that meet only through NATS (no node connects to
//! another; no full mesh). Membership comes from heartbeats on NATS; every
//! node builds the same consistent-hash ring from the live set and so
//! agrees where each guild's actor runs. [`ClusterRouter`] sends a guild's
//! messages to its owner; an owner sends each other node with subscribers
//! one message per event, and that node fans it out to its own sessions.
//!
//! Subjects: `throng.hb` (heartbeats), `throng.n.<id>.g` (messages to the
//! guilds a node owns), `throng.n.<id>.d` (deliveries to a node's sessions
//! and answers to its requests). Everything a node publishes leaves through
//! one ordered queue, so one actor's stream to one node keeps its order.
//! What is queued for one subject when the publisher gets to it leaves as
//! one NATS message: the JSON messages one after another (a receiver reads
//! them as a stream of values), so a busy node wakes nats-server and the
//! receiving node once per batch rather than once per message.

mod inbound;
mod membership;
mod outbound;
mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use hashring::{Ring, SharedRing};
use protocol::{ActorKey, GuildId, UserId};
use tokio::sync::mpsc;

use fanout::{Dispatch, FanEvent, Filter, NodeId, SessionRef};
use guild::LocalRouter;
use node::route::{raw, ClusterLink, GuildMsg, ReplyTo, RouteError, Router, TakeOver};
use node::Node;

use inbound::{inbound_deliver, inbound_guild, inbound_notices, NOTICES};
use membership::start_membership;
use outbound::outbound;
use wire::{send_to, ToNode, WireFilter};

/// The router of a cluster node: local actors for the guilds this node
/// owns, NATS for the rest.
pub struct ClusterRouter {
    me: NodeId,
    /// The node's sessions, typed (hand-over, re-homing, End).
    sessions: Arc<gateway::Sessions>,
    local: LocalRouter,
    ring: SharedRing,
    out: mpsc::Sender<(String, Bytes)>,
    /// Connected to NATS and in the ring.
    healthy: AtomicBool,
    /// Messages published: guild events to other nodes (`Fan`), and all.
    sent_fan: AtomicU64,
    sent: AtomicU64,
    /// NATS messages published (a batch of messages is one).
    published: AtomicU64,
    /// Messages received on this node's subjects.
    received: AtomicU64,
    /// Guild events refused because a newer owner of the guild was seen.
    stale: AtomicU64,
    /// Reconnections to NATS seen, this node's and others' (`bus_epoch`).
    reconnects: AtomicU64,
    /// Bumped after every change of the ring, health or `reconnects`
    /// (`ClusterLink::changes`).
    changed: tokio::sync::watch::Sender<u64>,
}

impl ClusterRouter {
    /// Tells the posts waiting on `changes` to look again.
    pub(crate) fn bump_changes(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn owner(&self, guild: ActorKey) -> Result<NodeId, RouteError> {
        if !self.healthy.load(Ordering::Acquire) {
            return Err(RouteError::Unavailable(guild));
        }
        self.ring.load().lookup(guild.raw()).map(NodeId).ok_or(RouteError::Unavailable(guild))
    }

    fn publish(&self, subject: String, payload: Vec<u8>) -> bool {
        self.sent.fetch_add(1, Ordering::Relaxed);
        match self.out.try_send((subject, Bytes::from(payload))) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "NATS outbound queue full or closed");
                false
            }
        }
    }

    fn to_node(&self, node: NodeId, msg: &ToNode) -> bool {
        self.sent.fetch_add(1, Ordering::Relaxed);
        send_to(&self.out, node, msg)
    }

    fn to_owner(&self, owner: NodeId, guild: ActorKey, msg: &GuildMsg) -> Result<(), RouteError> {
        let v = serde_json::to_vec(&(guild, msg)).map_err(|_| RouteError::Gone(guild))?;
        if self.publish(format!("throng.n.{owner}.g"), v) {
            Ok(())
        } else {
            Err(RouteError::Busy(guild))
        }
    }

    /// Whether this node is connected and in the ring.
    fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }
}

impl Router for ClusterRouter {
    fn send(&self, guild: ActorKey, msg: GuildMsg) -> Result<(), RouteError> {
        let owner = self.owner(guild)?;
        if owner == self.me {
            self.local.send(guild, msg)
        } else {
            self.to_owner(owner, guild, &msg)
        }
    }

    fn reply(&self, to: ReplyTo, body: Bytes) {
        if to.node == self.me {
            return self.local.reply(to, body);
        }
        self.to_node(to.node, &ToNode::Reply { id: to.id, body: raw(&body) });
    }

    fn local_actors(&self) -> usize {
        self.local.local_actors()
    }

    fn mailbox_depths(&self) -> node::route::MailboxDepths {
        self.local.mailbox_depths()
    }

    fn actor_stopped(&self, guild: ActorKey) {
        self.local.actor_stopped(guild)
    }
}

impl ClusterLink for ClusterRouter {
    fn health(&self) -> Result<(), &'static str> {
        if self.healthy() {
            Ok(())
        } else {
            Err("not connected to the cluster's NATS")
        }
    }

    fn nodes(&self) -> Vec<u64> {
        self.ring.load().nodes().to_vec()
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::json!({
            "nodes": self.nodes(),
            "sent": self.sent.load(Ordering::Relaxed),
            "nats_published": self.published.load(Ordering::Relaxed),
            "sent_guild_events": self.sent_fan.load(Ordering::Relaxed),
            "received": self.received.load(Ordering::Relaxed),
            "stale_dropped": self.stale.load(Ordering::Relaxed),
            "reconnects_seen": self.reconnects.load(Ordering::Relaxed),
            "outbound_queued": self.out.max_capacity() - self.out.capacity(),
        })
    }

    fn owner_of(&self, guild: ActorKey) -> Option<NodeId> {
        self.owner(guild).ok()
    }

    fn bus_epoch(&self) -> u64 {
        self.reconnects.load(Ordering::Acquire)
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn fan(&self, node: NodeId, guild: ActorKey, epoch: u64, event: &Arc<FanEvent>, only: Option<Vec<Arc<str>>>, reach: fanout::Reach) {
        let filter = match &event.filter {
            Filter::Intent(i) => WireFilter::Intent(*i),
            Filter::IntentNotUser(i, u) => WireFilter::IntentNotUser(*i, *u),
            Filter::Message { .. } => WireFilter::Message,
        };
        let msg = ToNode::Fan { g: guild, e: epoch, name: event.name.to_string(), body: raw(&event.body), filter, only, reach };
        self.sent_fan.fetch_add(1, Ordering::Relaxed);
        self.to_node(node, &msg);
    }

    fn one(&self, session: &SessionRef, d: Dispatch) {
        self.to_node(session.node, &ToNode::One { s: session.id.clone(), name: d.name.to_string(), body: raw(&d.body) });
    }

    fn forward(&self, session: &SessionRef, d: Dispatch) {
        self.to_node(session.node, &ToNode::Fwd { s: session.id.clone(), name: d.name.to_string(), body: raw(&d.body) });
    }

    fn subscribed(&self, session: &SessionRef, guild: ActorKey, epoch: u64, on: bool) {
        self.to_node(session.node, &ToNode::Sub { s: session.id.clone(), g: guild, e: epoch, on, first: None });
    }

    fn set_passive(&self, session: &SessionRef, guild: ActorKey, epoch: u64, passive: bool) {
        self.to_node(session.node, &ToNode::Passive { s: session.id.clone(), g: guild, e: epoch, passive });
    }

    fn subscribed_after(&self, session: &SessionRef, guild: ActorKey, epoch: u64, first: Dispatch) {
        let first = Some((first.name.to_string(), raw(&first.body)));
        self.to_node(session.node, &ToNode::Sub { s: session.id.clone(), g: guild, e: epoch, on: true, first });
    }

    fn take_over(&self, holder: NodeId, req: TakeOver) -> bool {
        self.healthy() && self.to_node(holder, &ToNode::TakeOver(req))
    }

    fn end(&self, home: &SessionRef) {
        self.to_node(home.node, &ToNode::End { s: home.id.clone() });
    }

    fn member_joined(&self, guild: GuildId, user: UserId) {
        for n in self.nodes().into_iter().map(NodeId).filter(|&n| n != self.me) {
            self.to_node(n, &ToNode::Joined { g: guild, u: user });
        }
    }

    fn dm_opened(&self, key: ActorKey, users: &[UserId]) -> Vec<NodeId> {
        let msg = ToNode::DmOpened { g: key, users: users.to_vec() };
        self.nodes().into_iter().map(NodeId).filter(|&n| n != self.me && self.to_node(n, &msg)).collect()
    }
}

/// Where a node announces that it (re)connected to NATS.
const RECONNECTED: &str = "throng.reconnected";

/// The NATS servers of `nats`: one URL, or several separated by commas
/// (the servers of one NATS cluster; a node connects to one and moves to
/// another when it fails).
pub(crate) fn nats_servers(nats: &str) -> Vec<&str> {
    nats.split(',').map(str::trim).filter(|u| !u.is_empty()).collect()
}

/// Why a node could not join its cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot connect to NATS at {url}")]
    Connect {
        url: String,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("cannot subscribe on NATS")]
    Subscribe(#[from] async_nats::SubscribeError),
    /// The membership thread (its own runtime) could not start.
    #[error("cannot start the membership thread")]
    Membership(#[source] std::io::Error),
}

/// Connects to NATS and builds the node with a cluster router; starts the
/// heartbeat, membership and inbound tasks.
pub async fn start_node(
    config: config::Config,
    store: Arc<dyn store::Store>,
    sessions: Arc<gateway::Sessions>,
) -> Result<Arc<Node>, ClusterError> {
    let url = config.nats.clone().unwrap_or_default();
    // Every (re)connection of this node's main client (`true`): told to
    // the others (`RECONNECTED`), which count it as this node does
    // (`bus_epoch`). A connection lost or messages dropped to this node as
    // a slow consumer (`false`) and every (re)connection: notices may have
    // been missed, so the token cache starts over (`Auth::forget_all`).
    let (connected_tx, mut connected_rx) = mpsc::unbounded_channel::<bool>();
    let client = async_nats::ConnectOptions::new()
        .name(format!("throng-node-{}", config.node_id))
        .event_callback(move |e| {
            let tx = connected_tx.clone();
            async move {
                match e {
                    async_nats::Event::Connected => drop(tx.send(true)),
                    async_nats::Event::Disconnected | async_nats::Event::SlowConsumer(_) => drop(tx.send(false)),
                    _ => {}
                }
            }
        })
        .retry_on_initial_connect()
        .connect(nats_servers(&url))
        .await
        .map_err(|source| ClusterError::Connect { url: url.clone(), source })?;
    let me = NodeId(config.node_id);
    let cc = config.cluster.clone();
    let capacity = config.limits.guild_mailbox_capacity;
    let (out_tx, out_rx) = mpsc::channel::<(String, Bytes)>(cc.outbound_queue.max(1));
    let notices_out = out_tx.clone();
    // The router is the node's router and cluster link, and the tasks
    // below hold it as what it is (its counters, ring, health).
    let mut built: Option<Arc<ClusterRouter>> = None;
    let table = sessions.clone();
    let node = Node::new(config, store, table, |weak| {
        let r = Arc::new(ClusterRouter {
            me,
            sessions,
            local: LocalRouter::new(weak, capacity),
            ring: SharedRing::new(Ring::empty()),
            out: out_tx,
            healthy: AtomicBool::new(false),
            sent_fan: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            published: AtomicU64::new(0),
            received: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            changed: tokio::sync::watch::Sender::new(0),
        });
        built = Some(r.clone());
        (r.clone() as Arc<dyn Router>, Some(r as Arc<dyn ClusterLink>))
    });
    let r = built.expect("Node::new builds the router");
    let guild_sub = client.subscribe(format!("throng.n.{me}.g")).await?;
    let deliver_sub = client.subscribe(format!("throng.n.{me}.d")).await?;
    let notice_sub = client.subscribe(NOTICES).await?;
    let mut reconnected_sub = client.subscribe(RECONNECTED).await?;
    {
        let (r, client, weak) = (r.clone(), client.clone(), Arc::downgrade(&node));
        node.tasks.spawn(async move {
            loop {
                tokio::select! {
                    c = connected_rx.recv() => {
                        let Some(connected) = c else { break };
                        if let Some(node) = weak.upgrade() {
                            node.auth.forget_all();
                        }
                        if !connected {
                            continue;
                        }
                        r.reconnects.fetch_add(1, Ordering::AcqRel);
                        r.bump_changes();
                        if let Err(e) = client.publish(RECONNECTED, Bytes::new()).await {
                            tracing::warn!(error = %e, "reconnection not announced");
                        }
                    }
                    m = reconnected_sub.next() => {
                        if m.is_none() {
                            break;
                        }
                        r.reconnects.fetch_add(1, Ordering::AcqRel);
                        r.bump_changes();
                    }
                }
            }
        });
    }
    // A notice is never dropped for a full outbound queue (a revocation
    // must reach every node): it waits for room on a task of its own.
    node.on_notice(Box::new(move |n| match serde_json::to_vec(&(me, n)) {
        Ok(v) => match notices_out.try_send((NOTICES.to_string(), Bytes::from(v))) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(m)) => match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let out = notices_out.clone();
                    rt.spawn(async move {
                        if out.send(m).await.is_err() {
                            tracing::warn!("notice not sent: the NATS outbound queue is closed");
                        }
                    });
                }
                Err(_) => tracing::warn!("notice not sent: NATS outbound queue full, no runtime to wait on"),
            },
            Err(mpsc::error::TrySendError::Closed(_)) => tracing::warn!("notice not sent: the NATS outbound queue is closed"),
        },
        Err(e) => tracing::error!(error = %e, "notice not encoded"),
    }));
    node.tasks.spawn(inbound_notices(node.clone(), notice_sub));
    let linger = std::time::Duration::from_millis(cc.publish_linger_ms);
    node.tasks.spawn(outbound(node.clone(), r.clone(), client.clone(), out_rx, linger));
    start_membership(node.clone(), r.clone(), client.clone(), url, cc)?;
    node.tasks.spawn(inbound_guild(node.clone(), r.clone(), guild_sub));
    node.tasks.spawn(inbound_deliver(node.clone(), r, deliver_sub));
    Ok(node)
}
