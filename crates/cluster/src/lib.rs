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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use hashring::{Ring, SharedRing};
use protocol::{GuildId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use fanout::{Dispatch, FanEvent, Filter, NodeId, SessionRef, Subscribers};
use guild::LocalRouter;
use node::route::{raw, ClusterLink, GuildMsg, ReplyTo, RouteError, Router, TakeOver};
use node::Node;

/// A delivery to a node's own sessions, or an answer to one of its requests.
#[derive(Serialize, Deserialize)]
enum ToNode {
    /// One guild event for the node's subscribers of `g` (or `only` these),
    /// from the actor of epoch `e`.
    Fan {
        g: GuildId,
        e: u64,
        name: String,
        body: Box<RawValue>,
        filter: WireFilter,
        only: Option<Vec<Arc<str>>>,
    },
    /// One dispatch for one session.
    One {
        s: Arc<str>,
        name: String,
        body: Box<RawValue>,
    },
    /// One dispatch for a session this node took over, from the node that
    /// held it (see `Recipient::write_forwarded`).
    Fwd {
        s: Arc<str>,
        name: String,
        body: Box<RawValue>,
    },
    /// Session `s` starts (stops) receiving guild `g` here (from the actor
    /// of epoch `e`); `first` is a dispatch for it alone that comes before
    /// (its GUILD_CREATE), delivered as `One` would.
    Sub {
        s: Arc<str>,
        g: GuildId,
        e: u64,
        on: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<(String, Box<RawValue>)>,
    },
    Reply {
        id: u64,
        body: Box<RawValue>,
    },
    /// A RESUME reached the requesting node: hand the session over.
    TakeOver(TakeOver),
    /// The session, handed over (answers `TakeOver`; later dispatches of it
    /// follow as `One`, in order, on the same stream).
    HandOver {
        id: u64,
        s: Arc<str>,
        user: UserId,
        bot: bool,
        intents: u64,
        large_threshold: u32,
        guilds: Vec<GuildId>,
        seq: u64,
        replay: Vec<(u64, String, Box<RawValue>)>,
        home: SessionRef,
    },
    /// A session handed over from this node ended where it went.
    End {
        s: Arc<str>,
    },
    /// `u` joined guild `g`: subscribe this node's sessions of `u` to it.
    Joined {
        g: GuildId,
        u: UserId,
    },
    /// DM `g` (its actor's key) was created: subscribe this node's sessions
    /// of `users` to it, then tell the actor this node is settled.
    DmOpened {
        g: GuildId,
        users: Vec<UserId>,
    },
}

fn send_to(out: &mpsc::Sender<(String, Bytes)>, node: NodeId, msg: &ToNode) -> bool {
    match serde_json::to_vec(msg) {
        Ok(v) => match out.try_send((format!("throng.n.{node}.d"), Bytes::from(v))) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "NATS outbound queue full or closed");
                false
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "delivery not encoded");
            false
        }
    }
}

#[derive(Serialize, Deserialize)]
enum WireFilter {
    Intent(u64),
    IntentNotUser(u64, UserId),
    /// The body is the message; the receiving node parses it once for the
    /// redaction rules.
    Message,
}

#[derive(Serialize, Deserialize)]
struct Heartbeat {
    node: NodeId,
    url: String,
}

/// Dispatch names are static strings everywhere else; names that arrive
/// over the bus are interned (a small, fixed set of event names).
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().expect("name table poisoned");
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// The router of a cluster node: local actors for the guilds this node
/// owns, NATS for the rest.
pub struct ClusterRouter {
    me: NodeId,
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
}

impl ClusterRouter {
    fn owner(&self, guild: GuildId) -> Result<NodeId, RouteError> {
        if !self.healthy.load(Ordering::Acquire) {
            return Err(RouteError::Unavailable(guild));
        }
        self.ring.load().lookup(guild.0).map(NodeId).ok_or(RouteError::Unavailable(guild))
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

    fn to_owner(&self, owner: NodeId, guild: GuildId, msg: &GuildMsg) -> Result<(), RouteError> {
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
    fn send(&self, guild: GuildId, msg: GuildMsg) -> Result<(), RouteError> {
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

    fn actor_stopped(&self, guild: GuildId) {
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
            "outbound_queued": self.out.max_capacity() - self.out.capacity(),
        })
    }

    fn owner_of(&self, guild: GuildId) -> Option<NodeId> {
        self.owner(guild).ok()
    }

    fn fan(&self, node: NodeId, guild: GuildId, epoch: u64, event: &Arc<FanEvent>, only: Option<Vec<Arc<str>>>) {
        let filter = match &event.filter {
            Filter::Intent(i) => WireFilter::Intent(*i),
            Filter::IntentNotUser(i, u) => WireFilter::IntentNotUser(*i, *u),
            Filter::Message { .. } => WireFilter::Message,
        };
        let msg = ToNode::Fan { g: guild, e: epoch, name: event.name.to_string(), body: raw(&event.body), filter, only };
        self.sent_fan.fetch_add(1, Ordering::Relaxed);
        self.to_node(node, &msg);
    }

    fn one(&self, session: &SessionRef, d: Dispatch) {
        self.to_node(session.node, &ToNode::One { s: session.id.clone(), name: d.name.to_string(), body: raw(&d.body) });
    }

    fn forward(&self, session: &SessionRef, d: Dispatch) {
        self.to_node(session.node, &ToNode::Fwd { s: session.id.clone(), name: d.name.to_string(), body: raw(&d.body) });
    }

    fn subscribed(&self, session: &SessionRef, guild: GuildId, epoch: u64, on: bool) {
        self.to_node(session.node, &ToNode::Sub { s: session.id.clone(), g: guild, e: epoch, on, first: None });
    }

    fn subscribed_after(&self, session: &SessionRef, guild: GuildId, epoch: u64, first: Dispatch) {
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

    fn dm_opened(&self, key: GuildId, users: &[UserId]) -> Vec<NodeId> {
        let msg = ToNode::DmOpened { g: key, users: users.to_vec() };
        self.nodes().into_iter().map(NodeId).filter(|&n| n != self.me && self.to_node(n, &msg)).collect()
    }
}

/// Hands this node's session `t.session` to the node that asked (see
/// `SessionHandle::hand_over`); answers `false` if it cannot. A session
/// handed over already is asked for where it went.
fn hand_over(node: &Arc<Node>, r: &ClusterRouter, t: TakeOver) {
    let to = t.reply.node;
    let found = node.sessions.get(&t.session).and_then(gateway::session).filter(|h| h.user_id == t.user);
    if let Some(next) = found.as_ref().and_then(|h| h.handed_to.get()).copied() {
        if next != to && r.nodes().contains(&next.0) && r.to_node(next, &ToNode::TakeOver(t.clone())) {
            return;
        }
    }
    let done = found.is_some_and(|h| {
        let (out, sid) = (r.out.clone(), h.id.clone());
        let forward: gateway::session::Forward = Box::new(move |name, body| {
            send_to(&out, to, &ToNode::Fwd { s: sid.clone(), name: name.to_string(), body: raw(body) });
        });
        let reply = |ho: gateway::session::HandOver| {
            let msg = ToNode::HandOver {
                id: t.reply.id,
                s: h.id.clone(),
                user: h.user_id,
                bot: h.bot,
                intents: h.intents.0,
                large_threshold: h.large_threshold,
                guilds: ho.guilds,
                seq: ho.seq,
                replay: ho.replay.into_iter().map(|(q, d)| (q, d.name.to_string(), raw(&d.body))).collect(),
                home: SessionRef { node: r.me, id: h.id.clone() },
            };
            r.to_node(to, &msg);
        };
        let handed = h.hand_over(t.seq, reply, forward);
        if handed {
            let _first = h.handed_to.set(to);
        }
        handed
    });
    if done {
        tracing::debug!(session = %t.session, to = %to, "session handed over");
    } else {
        r.reply(t.reply, Bytes::from_static(b"false"));
    }
}

/// A DM was created: this node's sessions of its recipients subscribe to
/// it, then the actor hears this node is settled (after the subscriptions,
/// on the same ordered stream), so its answer to the DM's opener, and so
/// the first message, come after every session is subscribed.
fn dm_opened(node: &Arc<Node>, key: GuildId, users: &[UserId]) {
    use node::route::dms_threads::DmAction;
    for &u in users {
        for s in gateway::sessions_of(&node.sessions, u) {
            let sub = s.subscription(node);
            if let Err(e) = node.guilds.send(key, GuildMsg::Subscribe(Box::new(sub))) {
                tracing::debug!(dm = %key, error = %e, "subscribe to a new DM failed");
            }
        }
    }
    let settled = node::route::Op {
        user: UserId(0),
        action: node::route::Action::Dm(DmAction::Settled { node: Some(node.id) }),
        // Nobody waits for this answer: request id 0 is never registered.
        reply: ReplyTo { node: node.id, id: 0 },
    };
    if let Err(e) = node.guilds.send(key, GuildMsg::Op(Box::new(settled))) {
        tracing::debug!(dm = %key, error = %e, "DM settle not sent");
    }
}

/// Why a node could not join its cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot connect to NATS at {0}: {1}")]
    Connect(String, String),
    #[error("cannot subscribe on NATS: {0}")]
    Subscribe(String),
}

/// Connects to NATS and builds the node with a cluster router; starts the
/// heartbeat, membership and inbound tasks.
pub async fn start_node(config: config::Config, store: Arc<dyn store::Store>) -> Result<Arc<Node>, ClusterError> {
    let url = config.nats.clone().unwrap_or_default();
    let client = async_nats::ConnectOptions::new()
        .name(format!("throng-node-{}", config.node_id))
        .retry_on_initial_connect()
        .connect(url.as_str())
        .await
        .map_err(|e| ClusterError::Connect(url.clone(), e.to_string()))?;
    let me = NodeId(config.node_id);
    let cc = config.cluster.clone();
    let capacity = config.limits.guild_mailbox_capacity;
    let (out_tx, out_rx) = mpsc::channel::<(String, Bytes)>(cc.outbound_queue.max(1));
    let notices_out = out_tx.clone();
    // The router is the node's router and cluster link, and the tasks
    // below hold it as what it is (its counters, ring, health).
    let mut built: Option<Arc<ClusterRouter>> = None;
    let node = Node::new(config, store, |weak| {
        let r = Arc::new(ClusterRouter {
            me,
            local: LocalRouter::new(weak, capacity),
            ring: SharedRing::new(Ring::empty()),
            out: out_tx,
            healthy: AtomicBool::new(false),
            sent_fan: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            published: AtomicU64::new(0),
            received: AtomicU64::new(0),
            stale: AtomicU64::new(0),
        });
        built = Some(r.clone());
        (r.clone() as Arc<dyn Router>, Some(r as Arc<dyn ClusterLink>))
    });
    let r = built.expect("Node::new builds the router");
    let guild_sub = client.subscribe(format!("throng.n.{me}.g")).await.map_err(|e| ClusterError::Subscribe(e.to_string()))?;
    let deliver_sub = client.subscribe(format!("throng.n.{me}.d")).await.map_err(|e| ClusterError::Subscribe(e.to_string()))?;
    let notice_sub = client.subscribe(NOTICES).await.map_err(|e| ClusterError::Subscribe(e.to_string()))?;
    node.on_notice(Box::new(move |n| match serde_json::to_vec(&(me, n)) {
        Ok(v) => {
            if let Err(e) = notices_out.try_send((NOTICES.to_string(), Bytes::from(v))) {
                tracing::warn!(error = %e, "notice not sent: NATS outbound queue full or closed");
            }
        }
        Err(e) => tracing::error!(error = %e, "notice not encoded"),
    }));
    node.tasks.spawn(inbound_notices(node.clone(), notice_sub));
    node.tasks.spawn(outbound(node.clone(), r.clone(), client.clone(), out_rx));
    start_membership(node.clone(), r.clone(), client.clone(), url, cc)?;
    node.tasks.spawn(inbound_guild(node.clone(), r.clone(), guild_sub));
    node.tasks.spawn(inbound_deliver(node.clone(), r, deliver_sub));
    Ok(node)
}

/// The subject every node hears: `Node::notify`'s notices, as `(from, notice)`.
const NOTICES: &str = "throng.all";

/// Acts on other nodes' notices (token revocations, account changes).
async fn inbound_notices(node: Arc<Node>, mut sub: async_nats::Subscriber) {
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<(NodeId, node::Notice)>(&m.payload) {
            match x {
                Ok((from, n)) if from != node.id => node.apply_notice(&n),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable notice");
                    break;
                }
            }
        }
    }
}

/// Most messages one pass of the publisher takes from its queue.
const OUT_BATCH_MESSAGES: usize = 1024;
/// Most bytes one NATS message of a batch holds (nats-server's default
/// payload limit is 1 MiB); a larger single message still goes alone.
const OUT_BATCH_BYTES: usize = 256 * 1024;

/// Messages queued for one subject, to leave as one NATS message.
struct Batch {
    subject: String,
    parts: Vec<Bytes>,
    bytes: usize,
}

impl Batch {
    /// The subject and the one NATS payload (separators included in `bytes`).
    fn into_message(mut self) -> (String, Bytes) {
        if self.parts.len() == 1 {
            return (self.subject, self.parts.pop().expect("one part"));
        }
        let mut out = Vec::with_capacity(self.bytes);
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(p);
        }
        (self.subject, out.into())
    }
}

/// Adds one message to the newest batch of its subject (a new batch when
/// that one is full, so each subject's order holds).
fn add_to_batches(batches: &mut Vec<Batch>, subject: String, payload: Bytes) {
    if let Some(b) = batches.iter_mut().rev().find(|b| b.subject == subject) {
        if b.bytes + payload.len() < OUT_BATCH_BYTES {
            b.bytes += payload.len() + 1;
            b.parts.push(payload);
            return;
        }
    }
    batches.push(Batch { subject, bytes: payload.len(), parts: vec![payload] });
}

/// The one ordered stream of everything this node publishes: whatever is
/// queued when it wakes leaves batched per subject (see the module doc).
async fn outbound(node: Arc<Node>, r: Arc<ClusterRouter>, client: async_nats::Client, mut rx: mpsc::Receiver<(String, Bytes)>) {
    let shutdown = node.shutdown.clone();
    let mut batches: Vec<Batch> = Vec::new();
    loop {
        let item = tokio::select! {
            _ = shutdown.cancelled() => break,
            m = rx.recv() => m,
        };
        let Some((subject, payload)) = item else { break };
        add_to_batches(&mut batches, subject, payload);
        for _ in 1..OUT_BATCH_MESSAGES {
            let Ok((subject, payload)) = rx.try_recv() else { break };
            add_to_batches(&mut batches, subject, payload);
        }
        for b in batches.drain(..) {
            r.published.fetch_add(1, Ordering::Relaxed);
            let (subject, payload) = b.into_message();
            if let Err(e) = client.publish(subject, payload).await {
                tracing::warn!(error = %e, "NATS publish failed");
            }
        }
    }
}

/// A dispatch as another node sent it (name and JSON body).
fn wire_dispatch(name: &str, body: &RawValue) -> Dispatch {
    Dispatch { name: intern(name), body: Bytes::copy_from_slice(body.get().as_bytes()) }
}

/// One dispatch for session `s` of this node alone, if it is here.
fn push_one(node: &Node, s: &str, name: &str, body: &RawValue) {
    if let Some(sink) = node.sessions.get(s) {
        sink.push(wire_dispatch(name, body));
    }
}

/// The messages of one NATS message (one, or a batch of them).
fn messages<'a, T: serde::Deserialize<'a> + 'a>(payload: &'a [u8]) -> impl Iterator<Item = Result<T, serde_json::Error>> + 'a {
    serde_json::Deserializer::from_slice(payload).into_iter::<T>()
}

/// Starts heartbeats and membership on a thread of their own, with a
/// runtime and NATS connection of their own. On the node's runtime they
/// starved under load: in a 100,000-session reconnect storm over 6 nodes
/// one node processed no heartbeat for over 3 s, dropped every node from
/// its ring (itself included) and back, stopped its actors and lost the
/// subscriptions of sessions on other nodes (2,500 receipts never
/// arrived). Here a busy node still beats and still hears the others.
fn start_membership(
    node: Arc<Node>,
    r: Arc<ClusterRouter>,
    main: async_nats::Client,
    url: String,
    cc: config::ClusterConfig,
) -> Result<(), ClusterError> {
    let main_rt = tokio::runtime::Handle::current();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClusterError::Connect(url.clone(), e.to_string()))?;
    let name = format!("throng-node-{}-membership", node.id.0);
    std::thread::Builder::new()
        .name("throng-membership".into())
        .spawn(move || {
            rt.block_on(async move {
                let client = match async_nats::ConnectOptions::new().name(name).retry_on_initial_connect().connect(url.as_str()).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "membership: cannot connect to NATS");
                        return;
                    }
                };
                let hb = match client.subscribe("throng.hb").await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "membership: cannot subscribe to heartbeats");
                        return;
                    }
                };
                membership(node, r, main, client, hb, cc, main_rt).await;
            })
        })
        .map_err(|e| ClusterError::Connect(String::new(), e.to_string()))?;
    Ok(())
}

/// Announces this node, tracks the others, and rebuilds the ring when the
/// live set changes. A node that cannot reach NATS leaves its own ring
/// (and so owns no guild) until it can again. Runs on the membership
/// thread; the work a ring change causes (re-subscribing sessions, ending
/// sessions of a node that is gone) runs on the node's runtime.
async fn membership(
    node: Arc<Node>,
    r: Arc<ClusterRouter>,
    main: async_nats::Client,
    client: async_nats::Client,
    mut hb: async_nats::Subscriber,
    cc: config::ClusterConfig,
    main_rt: tokio::runtime::Handle,
) {
    let me = r.me;
    let timeout = Duration::from_millis(cc.node_timeout_ms);
    let mut seen: HashMap<NodeId, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(cc.heartbeat_ms.max(10)));
    let beat = serde_json::to_vec(&Heartbeat { node: me, url: node.config.gateway_url() }).expect("heartbeat encodes");
    let mut live: Vec<u64> = Vec::new();
    loop {
        tokio::select! {
            _ = node.shutdown.cancelled() => break,
            _ = tick.tick() => {
                if let Err(e) = client.publish("throng.hb", beat.clone().into()).await {
                    tracing::warn!(error = %e, "heartbeat not published");
                }
            }
            m = hb.next() => {
                let Some(m) = m else { break };
                if let Ok(h) = serde_json::from_slice::<Heartbeat>(&m.payload) {
                    seen.insert(h.node, Instant::now());
                }
            }
        }
        let connected = [&main, &client].iter().all(|c| matches!(c.connection_state(), async_nats::connection::State::Connected));
        let now = Instant::now();
        seen.retain(|_, t| now.duration_since(*t) < timeout);
        let mut next: Vec<u64> = if connected && seen.contains_key(&me) { seen.keys().map(|n| n.0).collect() } else { Vec::new() };
        next.sort_unstable();
        if next != live {
            tracing::info!(nodes = ?next, connected, "cluster membership changed");
            let old = r.ring.load_full();
            r.ring.store(Ring::with_vnodes(next.iter().copied(), cc.vnodes));
            r.healthy.store(!next.is_empty(), Ordering::Release);
            let (node2, r2, live_now) = (node.clone(), r.clone(), next.clone());
            main_rt.spawn(async move {
                rehome(&node2, &r2, &old);
                // Sessions taken over from a node that is gone while their
                // guilds were still moving here would miss what it had: they
                // end, and their clients IDENTIFY again. Those whose guilds
                // all moved stand on their own.
                for s in gateway::sessions(&node2.sessions) {
                    if s.home.get().is_some_and(|h| h.node != me && !live_now.contains(&h.node.0)) && s.is_moving() {
                        s.end(&node2);
                    }
                }
            });
            live = next;
        }
    }
}

/// A session just taken over from `from`: each of its guilds moves its
/// subscription here. A guild that cannot be asked now (busy, or its owner
/// unknown) keeps it at `from`, which forwards its events as before: the
/// marker sent here releases that guild at once, in order.
fn move_subscriptions(node: &Arc<Node>, h: &Arc<gateway::SessionHandle>, from: SessionRef, guilds: &[GuildId]) {
    let to = h.session_ref(node);
    let info = fanout::Recipient::sub_info(&**h);
    for &g in guilds {
        let m = node::route::Move { from: from.clone(), to: to.clone(), info: info.clone() };
        if let Err(e) = node.guilds.send(g, GuildMsg::Move(Box::new(m))) {
            tracing::debug!(guild = %g, error = %e, "subscription not moved; the old node keeps forwarding it");
            node.delivery.forwarded(h.clone(), Dispatch { name: fanout::MOVED, body: Bytes::from(g.0.to_string()) });
        }
    }
}

/// After a ring change: this node's sessions subscribe again to every
/// guild whose owner changed (the new owner sends GUILD_CREATE again, so
/// nobody is left with a silent hole), and actors of guilds this node no
/// longer owns stop taking messages.
fn rehome(node: &Arc<Node>, r: &ClusterRouter, old: &Ring) {
    let new = r.ring.load_full();
    for s in gateway::sessions(&node.sessions) {
        for g in s.guild_ids() {
            let (a, b) = (old.lookup(g.0), new.lookup(g.0));
            if a != b && b.is_some() {
                let sub = s.subscription(node);
                if let Err(e) = node.guilds.send(g, GuildMsg::Subscribe(Box::new(sub))) {
                    // No silent hole: the session ends and its client
                    // identifies again (and subscribes from scratch).
                    tracing::warn!(guild = %g, error = %e, "re-subscribe after a ring change failed; the session ends");
                    s.end(node);
                    break;
                }
            }
        }
    }
    r.local.retain(|g| new.lookup(g.0) == Some(r.me.0));
    // The guilds that stay here forget presences of nodes that are gone.
    if old.nodes().iter().any(|n| !new.nodes().contains(n)) {
        let live = new.nodes().to_vec();
        r.local.send_all(|| GuildMsg::NodesLive(live.clone()));
    }
}

/// Messages to the guilds this node owns.
async fn inbound_guild(node: Arc<Node>, r: Arc<ClusterRouter>, mut sub: async_nats::Subscriber) {
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<(GuildId, GuildMsg)>(&m.payload) {
            r.received.fetch_add(1, Ordering::Relaxed);
            let (guild, msg) = match x {
                Ok(x) => x,
                Err(e) => {
                    // The rest of a batch cannot be told apart either.
                    tracing::warn!(error = %e, "undecodable guild message");
                    break;
                }
            };
            // Waits for room rather than dropping: the sending node already
            // told its session or client yes (a 100,000-session IDENTIFY ramp
            // overflowed one guild's mailbox with subscriptions, and every
            // dropped one was a session that never got the guild's messages).
            if let Err(e) = r.local.send_wait(guild, msg).await {
                tracing::warn!(guild = %guild, error = %e, "guild message from another node dropped");
            }
        }
    }
}

/// Deliveries to this node's sessions of guilds owned elsewhere: the
/// node's own audience of each such guild, split over its delivery workers.
async fn inbound_deliver(node: Arc<Node>, r: Arc<ClusterRouter>, mut sub: async_nats::Subscriber) {
    let mut audience: HashMap<GuildId, Subscribers> = HashMap::new();
    // The newest ownership epoch seen per guild: events of an owner that
    // another has fenced off since are not taken (its sessions get the
    // guild again from the new owner instead).
    let mut epochs: HashMap<GuildId, u64> = HashMap::new();
    let mut current = |g: GuildId, e: u64| {
        let seen = epochs.entry(g).or_insert(e);
        if e < *seen {
            return false;
        }
        *seen = e;
        true
    };
    let workers = node.delivery.workers();
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<ToNode>(&m.payload) {
            r.received.fetch_add(1, Ordering::Relaxed);
            let msg = match x {
                Ok(x) => x,
                Err(e) => {
                    // The rest of a batch cannot be told apart either.
                    tracing::warn!(error = %e, "undecodable delivery");
                    break;
                }
            };
            match msg {
                ToNode::Sub { s, g, e, on, first } => {
                    if let Some((name, body)) = first {
                        // As `One`: the session's own dispatch, whatever the epoch.
                        push_one(&node, &s, &name, &body);
                    }
                    if !current(g, e) {
                        r.stale.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let sink = node.sessions.get(&s);
                    if on {
                        if let Some(sink) = sink {
                            sink.joined(g);
                            audience.entry(g).or_insert_with(|| Subscribers::new(workers)).insert(sink);
                        }
                    } else {
                        if let Some(sink) = sink {
                            sink.left(g);
                        }
                        if let Some(a) = audience.get_mut(&g) {
                            a.remove(&s);
                            if a.is_empty() {
                                audience.remove(&g);
                            }
                        }
                    }
                }
                ToNode::Fan { g, e, name, body, filter, only } => {
                    if !current(g, e) {
                        r.stale.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let Some(a) = audience.get_mut(&g) else { continue };
                    let body = Bytes::copy_from_slice(body.get().as_bytes());
                    let filter = match filter {
                        WireFilter::Intent(i) => Filter::Intent(i),
                        WireFilter::IntentNotUser(i, u) => Filter::IntentNotUser(i, u),
                        WireFilter::Message => match serde_json::from_slice(&body) {
                            Ok(message) => Filter::Message { message: Arc::new(message), redacted: Default::default() },
                            Err(e) => {
                                tracing::warn!(error = %e, "message event without a message");
                                continue;
                            }
                        },
                    };
                    let event = FanEvent::new(intern(&name), body, filter);
                    match only {
                        None => node.delivery.fan_out(&event, a.partitions()),
                        Some(ids) => {
                            let ids: std::collections::HashSet<Arc<str>> = ids.into_iter().collect();
                            let parts = a.partitions_where(|s| ids.contains(s.id()));
                            node.delivery.fan_out(&event, &parts);
                        }
                    }
                }
                ToNode::One { s, name, body } => push_one(&node, &s, &name, &body),
                ToNode::Fwd { s, name, body } => {
                    if let Some(sink) = node.sessions.get(&s) {
                        node.delivery.forwarded(sink, wire_dispatch(&name, &body));
                    }
                }
                ToNode::Reply { id, body } => node.replies.complete(id, Bytes::copy_from_slice(body.get().as_bytes())),
                ToNode::TakeOver(t) => hand_over(&node, &r, t),
                ToNode::HandOver { id, s, user, bot, intents, large_threshold, guilds, seq, replay, home } => {
                    if node.sessions.get(&s).is_some() {
                        node.replies.complete(id, Bytes::from_static(b"false"));
                        continue;
                    }
                    let h = gateway::SessionHandle::new(
                        s,
                        user,
                        bot,
                        protocol::gateway::Intents(intents),
                        large_threshold,
                        guilds,
                        &node.delivery,
                    );
                    let _first = h.home.set(home.clone());
                    let replay = replay.into_iter().map(|(q, name, body)| (q, wire_dispatch(&name, &body))).collect();
                    // Registered before the next message of this stream (its
                    // first forwarded dispatch, maybe) is read.
                    let guilds = h.guild_ids();
                    h.adopt(&node, seq, replay, guilds.clone());
                    move_subscriptions(&node, &h, home, &guilds);
                    node.replies.complete(id, Bytes::from_static(b"true"));
                }
                ToNode::Joined { g, u } => {
                    for s in gateway::sessions_of(&node.sessions, u) {
                        let sub = s.subscription(&node);
                        if let Err(e) = node.guilds.send(g, GuildMsg::Subscribe(Box::new(sub))) {
                            tracing::debug!(guild = %g, error = %e, "subscribe of a new member's session failed");
                        }
                    }
                }
                ToNode::DmOpened { g, users } => dm_opened(&node, g, &users),
                ToNode::End { s } => {
                    if let Some(h) = node.sessions.get(&s).and_then(gateway::session) {
                        h.end(&node);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: usize, len: usize) -> Bytes {
        let v = serde_json::to_vec(&(n, "x".repeat(len))).unwrap();
        Bytes::from(v)
    }

    /// What the publisher sends for a queue of (subject, message): each
    /// subject's messages in their order, split where a batch would pass
    /// `OUT_BATCH_BYTES`, and every NATS message readable as a stream.
    #[test]
    fn batches_keep_each_subjects_order_and_stay_under_the_byte_bound() {
        let mut batches = Vec::new();
        let big = OUT_BATCH_BYTES / 3;
        for (i, subject) in ["a", "b", "a", "a", "b", "a", "a"].into_iter().enumerate() {
            add_to_batches(&mut batches, subject.to_owned(), msg(i, if subject == "a" { big } else { 10 }));
        }
        let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
        for b in batches {
            let (subject, payload) = b.into_message();
            assert!(payload.len() <= OUT_BATCH_BYTES, "{} bytes", payload.len());
            for m in messages::<(usize, String)>(&payload) {
                seen.entry(subject.clone()).or_default().push(m.unwrap().0);
            }
        }
        assert_eq!(seen["a"], vec![0, 2, 3, 5, 6]);
        assert_eq!(seen["b"], vec![1, 4]);
    }

    #[test]
    fn one_message_leaves_as_it_was_queued() {
        let mut batches = Vec::new();
        let m = msg(7, 3);
        add_to_batches(&mut batches, "s".into(), m.clone());
        assert_eq!(batches.len(), 1);
        assert_eq!(batches.pop().unwrap().into_message(), ("s".to_owned(), m));
    }
}
