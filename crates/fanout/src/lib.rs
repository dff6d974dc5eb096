//! Fan-out: who receives a guild's events on this node, and the delivery
//! workers that write them. Below both the gateway (whose sessions are
//! [`Recipient`]s) and the guild actors (which publish [`FanEvent`]s to an
//! audience): neither knows the other's types.
//!
//! Delivery workers: the per-core half of fan-out.
//!
//! A guild actor encodes each event once and hands it, with its recipients
//! already split by worker, to every worker at once (one job per worker,
//! a reference-count bump each). A worker frames the event into each of its
//! sessions' write buffers under the session's lock and then writes every
//! touched socket once, so when events pile up (a burst) everything queued
//! for a socket leaves in one `write`. Sessions are pinned to a worker, so
//! each session still sees its guild's events in the guild's order.
//!
//! Workers never wait on a socket: writes are non-blocking, the unsent rest
//! stays in the session's buffer, and a small task waits for writability
//! only while a socket is backed up. Work is bounded where it enters: the
//! backlog of queued deliveries is counted, and REST refuses new messages
//! (503) while it is above `gateway.delivery_backlog_max`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::{model, UserId};
use tokio_util::task::TaskTracker;

pub mod registry;

pub use registry::Registry;

/// One encoded dispatch, shared by every recipient: the event name and the
/// JSON of `d`. Cloning is two reference-count bumps, never a copy.
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub name: &'static str,
    pub body: Bytes,
}

/// The name of a control dispatch, never sent to a client: its body is a
/// guild id, and it tells a session taken over from another node that
/// everything that node had of that guild came before it (see
/// `Recipient::write_forwarded`).
pub const MOVED: &str = "\u{0}MOVED";

/// A node of the cluster (1 for a single node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NodeId(pub u64);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A session anywhere in the cluster, as plain data: the node that holds
/// its socket and its id there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SessionRef {
    pub node: NodeId,
    pub id: Arc<str>,
}

/// What a guild needs to know of a subscribing session (plain data).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SubInfo {
    pub user_id: UserId,
    pub bot: bool,
    pub intents: Intents,
    /// Guilds above this member count send only online members in GUILD_CREATE.
    pub large_threshold: u32,
}

/// A session as fan-out sees it: who it is, and how a delivery worker
/// frames a dispatch into it and writes it. The gateway's sessions
/// implement it; fan-out never sees sockets.
pub trait Recipient: Send + Sync + 'static {
    fn id(&self) -> &Arc<str>;
    fn user_id(&self) -> UserId;
    fn bot(&self) -> bool;
    fn intents(&self) -> Intents;
    /// The delivery worker this recipient is pinned to.
    fn shard(&self) -> u16;
    /// What a guild needs to know of it.
    fn sub_info(&self) -> SubInfo;
    /// Frames one dispatch (recording it for replay). Returns (framed into
    /// a socket's buffer, first frame since the last flush).
    fn write_dispatch(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool);
    /// Frames a dispatch that another node forwarded for this session (it
    /// held the session before): those come first, in their node's order,
    /// and [`MOVED`] markers among them say a guild's own events may follow.
    /// A recipient that does not move between nodes writes it as any other.
    fn write_forwarded(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool) {
        self.write_dispatch(name, body, now)
    }
    /// Writes what was framed; returns how many frames left.
    fn flush(self: Arc<Self>) -> usize;
    /// Queues one dispatch for this recipient alone, behind everything
    /// already queued for it (its worker's queue is FIFO). Never waits.
    fn push(self: Arc<Self>, d: Dispatch);
    /// The recipient now receives (no longer receives) `guild`'s events.
    fn joined(&self, guild: protocol::GuildId);
    fn left(&self, guild: protocol::GuildId);
    /// For the layer that owns the concrete type (the gateway).
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}

/// A recipient as fan-out holds it.
pub type Sink = Arc<dyn Recipient>;

/// Who gets an event's body, and which variant.
pub enum Filter {
    /// Sessions with this intent.
    Intent(u64),
    /// Sessions with this intent, except the user's own (presence: they set it).
    IntentNotUser(u64, UserId),
    /// MESSAGE_CREATE/UPDATE: sessions with GUILD_MESSAGES; bots without
    /// MESSAGE_CONTENT get the redacted variant unless they wrote or are
    /// mentioned in the message. The redacted body is encoded at most once.
    Message { message: Arc<model::Message>, redacted: OnceLock<Bytes> },
}

/// One guild event, encoded once, for all of its recipients.
pub struct FanEvent {
    pub name: &'static str,
    pub body: Bytes,
    pub filter: Filter,
}

impl FanEvent {
    pub fn new(name: &'static str, body: Bytes, filter: Filter) -> Arc<FanEvent> {
        Arc::new(FanEvent { name, body, filter })
    }

    /// Whether a session described by `info` may get this event at all
    /// (messages: decided where the session lives).
    pub fn may_reach(&self, info: &SubInfo) -> bool {
        self.reaches(info.intents, info.user_id)
    }

    /// [`FanEvent::may_reach`] for a session with `intents`, of `user`.
    #[inline]
    fn reaches(&self, intents: Intents, user: UserId) -> bool {
        match &self.filter {
            Filter::Intent(i) => intents.contains(*i),
            Filter::IntentNotUser(i, u) => intents.contains(*i) && user != *u,
            Filter::Message { .. } => true,
        }
    }

    /// The body `s` gets, if any.
    pub fn body_for(&self, s: &dyn Recipient) -> Option<&Bytes> {
        let (intents, user) = (s.intents(), s.user_id());
        match &self.filter {
            Filter::Intent(_) | Filter::IntentNotUser(..) => self.reaches(intents, user).then_some(&self.body),
            Filter::Message { message: m, redacted } => {
                // DMs: DIRECT_MESSAGES, and content whatever MESSAGE_CONTENT says.
                let dm = m.guild_id.is_none();
                if !intents.contains(if dm { Intents::DIRECT_MESSAGES } else { Intents::GUILD_MESSAGES }) {
                    return None;
                }
                let entitled = dm
                    || !s.bot()
                    || intents.contains(Intents::MESSAGE_CONTENT)
                    || user == m.author.id
                    || m.mentions.iter().any(|u| u.id == user);
                Some(if entitled { &self.body } else { redacted.get_or_init(|| encode(&m.redacted())) })
            }
        }
    }
}

enum Job {
    Fanout {
        event: Arc<FanEvent>,
        to: Arc<[Sink]>,
    },
    One {
        to: Sink,
        d: Dispatch,
    },
    /// A dispatch another node forwarded (see `Recipient::write_forwarded`).
    Forwarded {
        to: Sink,
        d: Dispatch,
    },
    /// Answered once everything queued before it on this worker is written.
    Barrier(mpsc::Sender<()>),
}

/// Bounds and timings the session state applies.
#[derive(Clone, Debug)]
pub struct Limits {
    pub replay_max_events: usize,
    pub replay_max_age: Duration,
    pub replay_max_bytes: usize,
    /// Queued bytes (beyond the frame being written) that make a session a
    /// slow consumer once they have stayed queued for `slow_consumer_grace`.
    pub max_pending_bytes: usize,
    pub slow_consumer_grace: Duration,
    /// Queued bytes that make a session a slow consumer at once: room for a
    /// full replay on RESUME plus the normal bound.
    pub max_pending_hard_bytes: usize,
    /// How long a closed session's socket may wait to write its close frame.
    pub close_linger: Duration,
    /// Framed deliveries a worker may hold unwritten while it coalesces.
    pub coalesce_max: usize,
    /// How long an idle worker waits after its first new job.
    pub linger: Duration,
}

impl Limits {
    pub fn from_config(gw: &config::GatewayConfig) -> Limits {
        Limits {
            replay_max_events: gw.replay_max_events,
            replay_max_age: Duration::from_millis(gw.replay_max_age_ms),
            replay_max_bytes: gw.replay_max_bytes,
            max_pending_bytes: gw.max_pending_write_bytes,
            slow_consumer_grace: Duration::from_millis(gw.slow_consumer_grace_ms),
            max_pending_hard_bytes: gw.replay_max_bytes.max(16 * gw.max_pending_write_bytes) + gw.max_pending_write_bytes,
            close_linger: Duration::from_millis(gw.close_linger_ms),
            coalesce_max: gw.delivery_coalesce_max,
            linger: Duration::from_micros(gw.delivery_linger_us),
        }
    }
}

/// Counters for operators and benchmarks (`/_throng/admin/stats`).
#[derive(Default)]
pub struct Stats {
    /// Deliveries queued to workers and not yet framed.
    pub backlog: AtomicUsize,
    /// Dispatches framed into a connected session's buffer.
    pub delivered: AtomicU64,
    /// Largest write backlog one session has had, in bytes.
    pub pending_bytes_max: AtomicUsize,
    /// Sessions closed (resumably) because they did not read fast enough.
    pub slow_consumer_closes: AtomicU64,
    /// `write` calls that sent at least one frame.
    pub writes: AtomicU64,
}

/// What workers and session state share: bounds, counters, and where to
/// spawn the short-lived tasks that wait on backed-up sockets.
pub struct Shared {
    pub limits: Limits,
    pub stats: Stats,
    rt: tokio::runtime::Handle,
    tasks: TaskTracker,
}

impl Shared {
    /// Spawns a task tracked for shutdown.
    pub fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.tasks.spawn_on(f, &self.rt);
    }
}

pub struct Delivery {
    queues: Vec<mpsc::Sender<Job>>,
    next: AtomicUsize,
    pub shared: Arc<Shared>,
}

impl Delivery {
    /// Starts `workers` delivery threads (at least one).
    pub fn start(workers: usize, nice: Nice, limits: Limits, rt: tokio::runtime::Handle, tasks: TaskTracker) -> Arc<Delivery> {
        let shared = Arc::new(Shared { limits, stats: Stats::default(), rt, tasks });
        let queues = (0..workers.max(1))
            .map(|i| {
                let (tx, rx) = mpsc::channel();
                let sh = shared.clone();
                std::thread::Builder::new()
                    .name(format!("throng-deliver-{i}"))
                    .spawn(move || worker(sh, rx, nice))
                    .expect("cannot start a delivery thread");
                tx
            })
            .collect();
        Arc::new(Delivery { queues, next: AtomicUsize::new(0), shared })
    }

    /// A delivery outside a node (tests and benchmarks): default limits,
    /// except that replay buffers keep only the last 64 events and workers
    /// do not linger (the micro-benchmark measures the path itself).
    pub fn standalone(workers: usize, rt: tokio::runtime::Handle) -> Arc<Delivery> {
        let limits = Limits { replay_max_events: 64, linger: Duration::ZERO, ..Limits::from_config(&config::GatewayConfig::default()) };
        Delivery::start(workers, Nice { base: 0, burst: 0 }, limits, rt, TaskTracker::new())
    }

    pub fn workers(&self) -> usize {
        self.queues.len()
    }

    /// The worker for a new session (round robin).
    pub fn next_shard(&self) -> u16 {
        (self.next.fetch_add(1, Ordering::Relaxed) % self.queues.len()) as u16
    }

    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    fn send(&self, shard: usize, job: Job) {
        // A worker only stops when every sender is gone, so this cannot fail
        // while `self` exists; a failure would mean the thread panicked.
        if self.queues[shard].send(job).is_err() {
            tracing::error!(shard, "delivery worker is gone");
        }
    }

    /// Hands `event` to every worker with its share of the recipients.
    pub fn fan_out(&self, event: &Arc<FanEvent>, recipients: &Partitions) {
        for (shard, to) in recipients.0.iter().enumerate() {
            if to.is_empty() {
                continue;
            }
            self.shared.stats.backlog.fetch_add(to.len(), Ordering::Relaxed);
            self.send(shard, Job::Fanout { event: event.clone(), to: to.clone() });
        }
    }

    /// Queues one dispatch for one session, behind what its worker already has.
    pub fn one(&self, to: Sink, d: Dispatch) {
        self.shared.stats.backlog.fetch_add(1, Ordering::Relaxed);
        self.send(to.shard() as usize % self.queues.len(), Job::One { to, d });
    }

    /// `one` for a dispatch another node forwarded for this session.
    pub fn forwarded(&self, to: Sink, d: Dispatch) {
        self.shared.stats.backlog.fetch_add(1, Ordering::Relaxed);
        self.send(to.shard() as usize % self.queues.len(), Job::Forwarded { to, d });
    }

    /// Deliveries queued and not yet framed.
    pub fn backlog(&self) -> usize {
        self.shared.stats.backlog.load(Ordering::Relaxed)
    }

    /// Blocks until everything queued so far has been framed and written
    /// (benchmarks and tests; never call it from a runtime thread).
    pub fn barrier(&self) {
        let waits: Vec<_> = self
            .queues
            .iter()
            .map(|q| {
                let (tx, rx) = mpsc::channel();
                let sent = q.send(Job::Barrier(tx)).is_ok();
                (sent, rx)
            })
            .collect();
        for (sent, rx) in waits {
            if sent && rx.recv().is_err() {
                tracing::error!("delivery worker ended during a barrier");
            }
        }
    }
}

/// A guild's subscribers split by delivery worker, shared with the workers
/// (one `Arc` per worker per event).
#[derive(Clone, Default)]
pub struct Partitions(Vec<Arc<[Sink]>>);

/// A guild actor's subscribers: looked up by session id, and partitioned
/// for fan-out. The partitions are rebuilt lazily, once per batch of changes.
pub struct Subscribers {
    by_id: HashMap<Arc<str>, Sink>,
    parts: Option<Partitions>,
    workers: usize,
    /// Subscribers per intent bit: events no subscriber asked for are
    /// neither encoded nor handed to the workers.
    intents: [u32; 32],
}

impl Subscribers {
    pub fn new(workers: usize) -> Self {
        Self { by_id: HashMap::new(), parts: None, workers: workers.max(1), intents: [0; 32] }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn get(&self, id: &str) -> Option<Sink> {
        self.by_id.get(id).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn insert(&mut self, s: Sink) {
        self.parts = None;
        self.count_intents(s.intents().0, true);
        if let Some(old) = self.by_id.insert(s.id().clone(), s) {
            self.count_intents(old.intents().0, false);
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<Sink> {
        let r = self.by_id.remove(id);
        if let Some(s) = &r {
            self.parts = None;
            self.count_intents(s.intents().0, false);
        }
        r
    }

    fn count_intents(&mut self, bits: u64, add: bool) {
        count_intents(&mut self.intents, bits, add);
    }

    /// Whether any subscriber has one of `intent`'s bits.
    pub fn wants(&self, intent: u64) -> bool {
        wants(&self.intents, intent)
    }

    pub fn values(&self) -> impl Iterator<Item = &Sink> {
        self.by_id.values()
    }

    /// Removes (and returns) the sessions of `user`.
    pub fn remove_user(&mut self, user: UserId) -> Vec<Sink> {
        let ids: Vec<Arc<str>> = self.by_id.values().filter(|s| s.user_id() == user).map(|s| s.id().clone()).collect();
        ids.iter().filter_map(|id| self.remove(id)).collect()
    }

    pub fn clear(&mut self) {
        self.by_id.clear();
        self.parts = None;
        self.intents = [0; 32];
    }

    /// The subscribers split by worker, each part in memory order: a
    /// delivery pass then walks the sessions' state (and, as they were
    /// created in about the same order, their sockets') mostly forwards
    /// rather than at random. Measured in the 100,000-member broadcast over
    /// 6 nodes: delivery threads 10.1-10.5 -> 9.2 µs of CPU per delivery.
    /// (Kept until the next change of subscribers, so the sort is paid once.)
    pub fn partitions(&mut self) -> &Partitions {
        let (by_id, workers) = (&self.by_id, self.workers);
        self.parts.get_or_insert_with(|| split(by_id.values(), workers, true))
    }

    /// The subscribers `keep` accepts, split by worker (not cached here).
    pub fn partitions_where(&self, keep: impl Fn(&dyn Recipient) -> bool) -> Partitions {
        split(self.by_id.values().filter(|s| keep(s.as_ref())), self.workers, false)
    }
}

/// Counts subscribers per intent bit (`add` one, or take one away).
pub fn count_intents(counts: &mut [u32; 32], bits: u64, add: bool) {
    for (bit, n) in counts.iter_mut().enumerate() {
        if bits & (1 << bit) != 0 {
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
        }
    }
}

/// Whether the counts hold a subscriber with one of `intent`'s bits.
pub fn wants(counts: &[u32; 32], intent: u64) -> bool {
    counts.iter().enumerate().any(|(bit, n)| *n > 0 && intent & (1 << bit) != 0)
}

/// The sessions split by worker; each part sorted by [`addr`] if `in_memory_order`.
fn split<'a>(sessions: impl Iterator<Item = &'a Sink>, workers: usize, in_memory_order: bool) -> Partitions {
    let mut split: Vec<Vec<Sink>> = vec![Vec::new(); workers];
    for s in sessions {
        split[s.shard() as usize % workers].push(s.clone());
    }
    if in_memory_order {
        for part in &mut split {
            part.sort_unstable_by_key(addr);
        }
    }
    Partitions(split.into_iter().map(Arc::from).collect())
}

/// Where a session's state lives (a partition's sort key).
fn addr(s: &Sink) -> usize {
    Arc::as_ptr(s) as *const () as usize
}

/// Nice values of a delivery thread: `base` normally, `burst` while events
/// keep arriving during its passes (see `gateway.delivery_burst_nice`).
#[derive(Clone, Copy, Debug)]
pub struct Nice {
    pub base: i32,
    pub burst: i32,
}

/// A delivery thread's current nice value.
struct Priority {
    nice: Nice,
    current: i32,
    /// Whether this thread may switch to `burst` and back.
    adaptive: bool,
}

impl Priority {
    fn start(nice: Nice) -> Priority {
        let mut p = Priority { nice, current: 0, adaptive: false };
        if nice.base != 0 && set_nice(nice.base) {
            p.current = nice.base;
        }
        // Going back down needs a privilege: probe it once.
        p.adaptive = nice.burst > p.current && set_nice(p.current + 1) && set_nice(p.current);
        p
    }

    fn burst(&mut self) {
        if self.adaptive && self.current != self.nice.burst && set_nice(self.nice.burst) {
            self.current = self.nice.burst;
        }
    }

    fn calm(&mut self) {
        if self.adaptive && self.current != self.nice.base {
            if set_nice(self.nice.base) {
                self.current = self.nice.base;
            } else {
                self.adaptive = false;
            }
        }
    }
}

/// Sets the calling thread's nice value; false if refused.
fn set_nice(nice: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority on the calling thread have no preconditions.
        let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
        if r != 0 {
            tracing::debug!(nice, error = %std::io::Error::last_os_error(), "delivery thread priority unchanged");
        }
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        false
    }
}

/// Touched sockets a worker writes before it looks for new jobs again.
/// Jobs that arrive meanwhile are framed into the sockets not yet written,
/// so a burst leaves in few, large writes; a slice is a few milliseconds.
const FLUSH_SLICE: usize = 256;

/// Frames one job into its sessions; returns how many were framed.
fn run(shared: &Shared, job: Job, now: std::time::Instant, dirty: &mut VecDeque<Sink>) -> usize {
    let mut framed = 0;
    match job {
        Job::Fanout { event, to } => {
            for s in to.iter() {
                if let Some(body) = event.body_for(s.as_ref()) {
                    let (ok, first) = s.write_dispatch(event.name, body, now);
                    framed += ok as usize;
                    if first {
                        dirty.push_back(s.clone());
                    }
                }
            }
            shared.stats.backlog.fetch_sub(to.len(), Ordering::Relaxed);
        }
        Job::One { to, d } => {
            let (ok, first) = to.write_dispatch(d.name, &d.body, now);
            framed += ok as usize;
            if first {
                dirty.push_back(to);
            }
            shared.stats.backlog.fetch_sub(1, Ordering::Relaxed);
        }
        Job::Forwarded { to, d } => {
            let (ok, first) = to.write_forwarded(d.name, &d.body, now);
            framed += ok as usize;
            if first {
                dirty.push_back(to);
            }
            shared.stats.backlog.fetch_sub(1, Ordering::Relaxed);
        }
        Job::Barrier(done) => {
            for s in dirty.drain(..) {
                s.flush();
            }
            let _ = done.send(());
        }
    }
    shared.stats.delivered.fetch_add(framed as u64, Ordering::Relaxed);
    framed
}

/// A delivery thread. It frames queued jobs into its sessions' buffers and
/// writes the touched sockets in slices, taking in new jobs between slices:
/// a socket is written once per pass however many events reached it. At
/// most `coalesce_max` framed deliveries wait unwritten; beyond that, jobs
/// stay queued and count toward the backlog REST checks.
fn worker(shared: Arc<Shared>, rx: mpsc::Receiver<Job>, nice: Nice) {
    let mut prio = Priority::start(nice);
    let cap = shared.limits.coalesce_max.max(1);
    let mut dirty: VecDeque<Sink> = VecDeque::new();
    // Framed deliveries not yet written (approximate: reset when all are).
    let mut unwritten = 0usize;
    let mut open = true;
    loop {
        if dirty.is_empty() {
            unwritten = 0;
            prio.calm();
            let Ok(job) = (if open { rx.recv().map_err(|_| ()) } else { Err(()) }) else { break };
            if !shared.limits.linger.is_zero() {
                std::thread::sleep(shared.limits.linger);
            }
            unwritten += run(&shared, job, std::time::Instant::now(), &mut dirty);
        }
        let now = std::time::Instant::now();
        while open && unwritten < cap {
            match rx.try_recv() {
                Ok(job) => {
                    // Events arriving while sockets wait for their write: a burst.
                    prio.burst();
                    unwritten += run(&shared, job, now, &mut dirty);
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => open = false,
            }
        }
        for _ in 0..FLUSH_SLICE {
            let Some(s) = dirty.pop_front() else { break };
            unwritten = unwritten.saturating_sub(s.flush());
        }
    }
}

thread_local! {
    /// Where bodies are serialised before they are copied out at their exact size.
    static ENCODE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Serialises a dispatch body once. Our own types always serialise.
///
/// The JSON is built in a per-thread buffer and copied into one allocation
/// of its exact size: serialising straight into a fresh `Vec` grows it by
/// doubling, and the freed intermediate blocks of thousands of per-session
/// GUILD_CREATEs during an identify ramp were measured as ~40 MiB of heap
/// fragmentation at 19,000 sessions.
pub fn encode<T: serde::Serialize>(v: &T) -> Bytes {
    ENCODE.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        serde_json::to_writer(&mut *buf, v).expect("dispatch bodies are plain data and always serialise");
        let out = Bytes::copy_from_slice(&buf);
        if buf.capacity() > 1 << 20 {
            *buf = Vec::new();
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recipient that is only an id and a shard.
    struct Fake {
        id: Arc<str>,
        shard: u16,
    }

    impl Recipient for Fake {
        fn id(&self) -> &Arc<str> {
            &self.id
        }
        fn user_id(&self) -> UserId {
            UserId(1)
        }
        fn bot(&self) -> bool {
            false
        }
        fn intents(&self) -> Intents {
            Intents::ALL
        }
        fn shard(&self) -> u16 {
            self.shard
        }
        fn sub_info(&self) -> SubInfo {
            SubInfo { user_id: UserId(1), bot: false, intents: self.intents(), large_threshold: 50 }
        }
        fn write_dispatch(&self, _: &'static str, _: &Bytes, _: std::time::Instant) -> (bool, bool) {
            (false, false)
        }
        fn flush(self: Arc<Self>) -> usize {
            0
        }
        fn push(self: Arc<Self>, _: Dispatch) {}
        fn joined(&self, _: protocol::GuildId) {}
        fn left(&self, _: protocol::GuildId) {}
        fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
            self
        }
    }

    #[test]
    fn partitions_hold_each_subscriber_once_on_its_worker_in_memory_order() {
        let mut subs = Subscribers::new(3);
        // Allocated in an order unrelated to the ids' hash order.
        let sinks: Vec<Sink> = (0..300u16).map(|i| Arc::new(Fake { id: format!("s{i}").into(), shard: i % 7 }) as Sink).collect();
        for s in &sinks {
            subs.insert(s.clone());
        }
        subs.remove("s5");
        let Partitions(parts) = subs.partitions();
        assert_eq!(parts.len(), 3);
        let mut seen: Vec<&str> = Vec::new();
        for (w, part) in parts.iter().enumerate() {
            assert!(part.iter().all(|s| s.shard() as usize % 3 == w), "a session on another worker's part");
            assert!(part.windows(2).all(|p| addr(&p[0]) < addr(&p[1])), "part {w} is not in memory order");
            seen.extend(part.iter().map(|s| &**s.id()));
        }
        seen.sort_unstable();
        let mut want: Vec<String> = (0..300).filter(|i| *i != 5).map(|i| format!("s{i}")).collect();
        want.sort_unstable();
        assert_eq!(seen, want.iter().map(String::as_str).collect::<Vec<_>>());
    }
}
