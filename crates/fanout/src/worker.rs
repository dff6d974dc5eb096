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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::{Dispatch, FanEvent, Partitions, Sink};

pub(crate) enum Job {
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
    /// One queue per worker thread. Not bounded by the channel: every job
    /// is counted in `Stats::backlog` when queued, and work is refused
    /// where it enters (REST answers 503 above `gateway.delivery_backlog_max`;
    /// IDENTIFY is admitted only below it).
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

/// Nice values of a delivery thread: `base` normally, `burst` while events
/// keep arriving during its passes (see `gateway.delivery_burst_nice`).
#[derive(Clone, Copy, Debug)]
pub struct Nice {
    pub base: i32,
    pub burst: i32,
}

/// A delivery thread's current nice value.
pub(crate) struct Priority {
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
pub(crate) fn set_nice(nice: i32) -> bool {
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
pub(crate) const FLUSH_SLICE: usize = 256;

/// Frames one job into its sessions; returns how many were framed.
pub(crate) fn run(shared: &Shared, job: Job, now: std::time::Instant, dirty: &mut VecDeque<Sink>) -> usize {
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
pub(crate) fn worker(shared: Arc<Shared>, rx: mpsc::Receiver<Job>, nice: Nice) {
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
