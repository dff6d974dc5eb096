//! A worker process (`throng-bench worker`, started by the coordinator): runs
//! up to ~19,000 sessions on one thread (a current-thread runtime, so the
//! shared state is `RefCell`s with no locks; parallelism comes from running
//! several workers), obeys commands from stdin and reports on stdout once a
//! second.
//!
//! Delivery accounting: chat message contents are `tb:<key>:<send µs>`. A
//! receipt counts toward a message only if the receiving user's first
//! session was fully ready before the message was sent and has not been lost
//! (re-identified or given up); the coordinator applies the same rule to the
//! fixture's member lists to get the expected receipts, so losses and
//! duplicates are exact per message.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use hdrhistogram::Histogram;
use protocol::compress::Transport;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use tokio::task::LocalSet;

use crate::fixture::{Fixture, Index};
use crate::rest::{Rest, Sent};
use crate::wire::{new_hist, Command, Final, Hist, Report, SentMsg, SessionLife, Tick, WorkerConfig};

/// What every session of a worker watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Run,
    /// Drop the socket and resume; the number is the drop generation.
    Drop(u64),
    Finish,
}

/// How long the worker waits for its sessions to close at the end.
const FINISH_GRACE: Duration = Duration::from_secs(5);

pub fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

pub trait RecordUs {
    fn record_us(&mut self, d: Duration);
}

impl RecordUs for Histogram<u64> {
    fn record_us(&mut self, d: Duration) {
        self.saturating_record((d.as_micros() as u64).max(1));
    }
}

/// Counters and the histograms of the current tick.
pub struct Stats {
    pub counters: Tick,
    pub e2e_us: Histogram<u64>,
    pub connect_us: Histogram<u64>,
    pub ready_us: Histogram<u64>,
    pub rest_us: Histogram<u64>,
    pub storm_us: Histogram<u64>,
    /// Longest recovery after the last Drop command.
    pub storm_last: Duration,
}

#[derive(Clone, Copy, Default)]
struct Life {
    /// 0 until the user's first session is fully ready.
    ready_at_us: u64,
    broken_at_us: Option<u64>,
    failed: bool,
}

pub struct Worker {
    pub cfg: WorkerConfig,
    pub ix: Index,
    pub transport: Transport,
    rest: Vec<Rest>,
    pub stats: RefCell<Stats>,
    /// Indexed by user; only the users of this worker are ever touched.
    lives: RefCell<Vec<Life>>,
    /// Receipts per message key: (eligible receipts, last receipt µs).
    received: RefCell<HashMap<u64, (u32, u64)>>,
    sent: RefCell<Vec<SentMsg>>,
    next_key: Cell<u64>,
    /// Users that became ready and are not yet scheduled to chat.
    newly_ready: RefCell<Vec<u32>>,
    chat_interval_ms: Cell<Option<u64>>,
    inflight_sends: Cell<usize>,
    live_tasks: Cell<usize>,
    /// Distinct failure reasons with counts (reported at the end).
    errors: RefCell<HashMap<String, u64>>,
    full: RefCell<FullHists>,
}

impl Worker {
    pub fn token(&self, user: u32) -> String {
        self.ix.fixture.users[user as usize].token.clone()
    }

    pub fn note_connect_failure(&self, reason: &str) {
        self.stats.borrow_mut().counters.connect_failures += 1;
        self.note_error(reason);
    }

    fn note_error(&self, reason: &str) {
        let mut e = self.errors.borrow_mut();
        if e.len() < 64 || e.contains_key(reason) {
            *e.entry(reason.to_owned()).or_default() += 1;
        }
    }

    pub fn session_ready(&self, user: u32, at_us: u64) {
        let mut lives = self.lives.borrow_mut();
        let l = &mut lives[user as usize];
        if l.ready_at_us == 0 {
            l.ready_at_us = at_us;
            self.newly_ready.borrow_mut().push(user);
        }
    }

    /// The user's first session is over (re-identified or given up).
    pub fn session_broken(&self, user: u32) {
        let mut lives = self.lives.borrow_mut();
        let l = &mut lives[user as usize];
        if l.ready_at_us != 0 && l.broken_at_us.is_none() {
            l.broken_at_us = Some(now_us());
        }
    }

    /// The user's session was given up on: it no longer chats.
    pub fn mark_failed(&self, user: u32) {
        self.lives.borrow_mut()[user as usize].failed = true;
    }

    /// A MESSAGE_CREATE arrived for `user`.
    pub fn on_message(&self, user: u32, content: &str) {
        let now = now_us();
        let mut s = self.stats.borrow_mut();
        s.counters.deliveries += 1;
        let Some((key, ts)) = parse_content(content) else { return };
        s.e2e_us.saturating_record(now.saturating_sub(ts).max(1));
        drop(s);
        let l = self.lives.borrow()[user as usize];
        if l.ready_at_us != 0 && l.broken_at_us.is_none() && l.ready_at_us <= ts {
            let mut r = self.received.borrow_mut();
            let e = r.entry(key).or_insert((0, 0));
            e.0 += 1;
            e.1 = e.1.max(now);
        }
    }

    /// Sends one chat message from `user`, to `guild` or a random guild of theirs.
    fn send_one(self: &Rc<Self>, user: u32, guild: Option<u32>) {
        let gs = &self.ix.guilds_of[user as usize];
        let g = match guild {
            Some(g) => g,
            None if gs.is_empty() => return,
            None => gs[rand::random::<usize>() % gs.len()],
        };
        let chans = &self.ix.fixture.guilds[g as usize].channel_ids;
        if chans.is_empty() {
            return;
        }
        if self.inflight_sends.get() >= self.cfg.max_inflight_sends {
            self.stats.borrow_mut().counters.send_skipped += 1;
            return;
        }
        let channel = chans[rand::random::<usize>() % chans.len()].clone();
        let key = (u64::from(self.cfg.worker) << 40) | self.next_key.get();
        self.next_key.set(self.next_key.get() + 1);
        let ts = now_us();
        let mut content = format!("tb:{key}:{ts}");
        content.extend(std::iter::repeat_n('x', self.cfg.message_padding));
        let idx = {
            let mut sent = self.sent.borrow_mut();
            sent.push(SentMsg { key, guild: g, ts_us: ts, ok: false });
            sent.len() - 1
        };
        self.inflight_sends.set(self.inflight_sends.get() + 1);
        let w = self.clone();
        tokio::task::spawn_local(async move {
            let rest = &w.rest[user as usize % w.rest.len()];
            let token = w.token(user);
            let t0 = Instant::now();
            let r = rest.send_message(&token, &channel, &content).await;
            w.inflight_sends.set(w.inflight_sends.get() - 1);
            let mut s = w.stats.borrow_mut();
            s.rest_us.record_us(t0.elapsed());
            match r {
                Sent::Ok => {
                    s.counters.sent += 1;
                    w.sent.borrow_mut()[idx].ok = true;
                }
                Sent::Failed(code) => {
                    s.counters.send_errors += 1;
                    drop(s);
                    w.note_error(&format!("send: HTTP {code}"));
                }
                Sent::Transport => {
                    s.counters.send_errors += 1;
                    drop(s);
                    w.note_error("send: transport error");
                }
            }
        });
    }
}

/// `tb:<key>:<µs><padding>` -> (key, µs).
fn parse_content(c: &str) -> Option<(u64, u64)> {
    let rest = c.strip_prefix("tb:")?;
    let (key, rest) = rest.split_once(':')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    Some((key.parse().ok()?, rest[..digits].parse().ok()?))
}

/// Lets this process open as many sockets as the hard limit allows.
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    lim.rlim_cur
}

pub fn main() -> anyhow::Result<()> {
    raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    LocalSet::new().block_on(&rt, run())
}

async fn run() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let first = lines.next_line().await?.context("worker: no configuration on stdin")?;
    let cfg: WorkerConfig = serde_json::from_str(&first).context("worker: bad configuration")?;
    let ix = Index::new(Fixture::load(&cfg.fixture)?);
    let transport = cfg.gateways.first().map(|g| crate::session::transport_of(&g.path_query)).unwrap_or(Transport::None);
    let rest = cfg.rest.iter().map(|r| Rest::new(r, 256)).collect::<anyhow::Result<Vec<_>>>()?;
    let n_users = ix.fixture.users.len();
    let w = Rc::new(Worker {
        cfg,
        ix,
        transport,
        rest,
        stats: RefCell::new(Stats {
            counters: Tick::default(),
            e2e_us: new_hist(),
            connect_us: new_hist(),
            ready_us: new_hist(),
            rest_us: new_hist(),
            storm_us: new_hist(),
            storm_last: Duration::ZERO,
        }),
        lives: RefCell::new(vec![Life::default(); n_users]),
        received: RefCell::new(HashMap::new()),
        sent: RefCell::new(Vec::new()),
        next_key: Cell::new(0),
        newly_ready: RefCell::new(Vec::new()),
        chat_interval_ms: Cell::new(None),
        inflight_sends: Cell::new(0),
        live_tasks: Cell::new(0),
        errors: RefCell::new(HashMap::new()),
        full: RefCell::new(FullHists::default()),
    });
    let (ctl_tx, ctl_rx) = watch::channel(Control::Run);
    let ticker = {
        let w = w.clone();
        tokio::task::spawn_local(async move {
            let mut iv = tokio::time::interval(Duration::from_secs(1));
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                iv.tick().await;
                emit(&Report::Tick(Box::new(take_tick(&w))));
            }
        })
    };
    let mut drop_gen = 0;
    // The chat scheduler; it ends on StopSending and is restarted by a later Chat.
    let mut chatting: Option<tokio::task::JoinHandle<()>> = None;
    while let Some(line) = lines.next_line().await? {
        let cmd: Command = serde_json::from_str(&line).with_context(|| format!("worker: bad command {line:?}"))?;
        match cmd {
            Command::Connect { ranges, rate } => {
                tokio::task::spawn_local(ramp(w.clone(), ranges, rate, ctl_rx.clone()));
            }
            Command::Chat { interval_ms } => {
                w.chat_interval_ms.set(Some(interval_ms.max(1)));
                if chatting.as_ref().is_none_or(|h| h.is_finished()) {
                    chatting = Some(tokio::task::spawn_local(chat(w.clone())));
                }
            }
            Command::Broadcast { user, guild, count, interval_ms } => {
                let w = w.clone();
                tokio::task::spawn_local(async move {
                    let mut iv = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
                    for _ in 0..count {
                        iv.tick().await;
                        w.send_one(user, Some(guild));
                    }
                });
            }
            Command::StopSending => w.chat_interval_ms.set(None),
            Command::Drop => {
                drop_gen += 1;
                w.stats.borrow_mut().storm_last = Duration::ZERO;
                if ctl_tx.send(Control::Drop(drop_gen)).is_err() {
                    eprintln!("worker {}: no sessions to drop", w.cfg.worker);
                }
            }
            Command::Finish => break,
        }
    }
    w.chat_interval_ms.set(None);
    // Sessions see Finish and close; wait for them (bounded).
    let _no_receivers_is_fine = ctl_tx.send(Control::Finish);
    let until = Instant::now() + FINISH_GRACE;
    while w.live_tasks.get() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ticker.abort();
    let tick = take_tick(&w);
    let full = w.full.borrow();
    let lives = w.lives.borrow();
    let sessions = lives
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ready_at_us != 0)
        .map(|(u, l)| SessionLife { user: u as u32, ready_at_us: l.ready_at_us, broken_at_us: l.broken_at_us })
        .collect();
    let storm_last = w.stats.borrow().storm_last;
    let fin = Final {
        tick,
        sessions,
        sent: std::mem::take(&mut *w.sent.borrow_mut()),
        received: w.received.borrow().iter().map(|(k, (n, t))| (*k, *n, *t)).collect(),
        storm_recovery_us: (drop_gen > 0).then_some(storm_last.as_micros() as u64),
        e2e_us: Hist::encode(&full.e2e),
        connect_us: Hist::encode(&full.connect),
        ready_us: Hist::encode(&full.ready),
        rest_us: Hist::encode(&full.rest),
        storm_us: Hist::encode(&full.storm),
        errors: w.errors.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    emit(&Report::Final(Box::new(fin)));
    Ok(())
}

/// Whole-run histograms; each tick's are folded in.
struct FullHists {
    e2e: Histogram<u64>,
    connect: Histogram<u64>,
    ready: Histogram<u64>,
    rest: Histogram<u64>,
    storm: Histogram<u64>,
}

impl Default for FullHists {
    fn default() -> Self {
        FullHists { e2e: new_hist(), connect: new_hist(), ready: new_hist(), rest: new_hist(), storm: new_hist() }
    }
}

/// Snapshot of the counters plus this tick's histograms (folded into `full`).
fn take_tick(w: &Worker) -> Tick {
    let mut s = w.stats.borrow_mut();
    let full = &mut *w.full.borrow_mut();
    let mut t = s.counters.clone();
    t.worker = w.cfg.worker;
    t.e2e_us = Hist::encode(&s.e2e_us);
    t.connect_us = Hist::encode(&s.connect_us);
    t.ready_us = Hist::encode(&s.ready_us);
    t.rest_us = Hist::encode(&s.rest_us);
    // Bounds are equal, so adding cannot fail.
    full.e2e.add(&s.e2e_us).expect("same bounds");
    full.connect.add(&s.connect_us).expect("same bounds");
    full.ready.add(&s.ready_us).expect("same bounds");
    full.rest.add(&s.rest_us).expect("same bounds");
    full.storm.add(&s.storm_us).expect("same bounds");
    s.e2e_us.reset();
    s.connect_us.reset();
    s.ready_us.reset();
    s.rest_us.reset();
    s.storm_us.reset();
    t
}

fn emit(r: &Report) {
    let mut out = std::io::stdout().lock();
    let line = serde_json::to_string(r).expect("reports always serialise");
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        // The coordinator is gone: nothing left to report to.
        std::process::exit(3);
    }
}

/// Starts the sessions of `ranges` at `rate` per second.
async fn ramp(w: Rc<Worker>, ranges: Vec<(u32, u32)>, rate: f64, ctl: watch::Receiver<Control>) {
    let step = Duration::from_millis(10);
    let per_step = (rate.max(0.1) * step.as_secs_f64()).max(0.0);
    let mut budget = 0.0f64;
    let mut iv = tokio::time::interval(step);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for user in ranges.into_iter().flat_map(|(a, b)| a..b) {
        while budget < 1.0 {
            iv.tick().await;
            budget += per_step;
            if matches!(*ctl.borrow(), Control::Finish) {
                return;
            }
        }
        budget -= 1.0;
        w.stats.borrow_mut().counters.started += 1;
        w.live_tasks.set(w.live_tasks.get() + 1);
        let (w2, ctl) = (w.clone(), ctl.clone());
        tokio::task::spawn_local(async move {
            crate::session::run(w2.clone(), user, user as usize, ctl).await;
            w2.live_tasks.set(w2.live_tasks.get() - 1);
        });
    }
}

/// Every ready user sends one message per interval, starting at a random
/// offset so sends spread evenly.
async fn chat(w: Rc<Worker>) {
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut iv = tokio::time::interval(Duration::from_millis(10));
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        iv.tick().await;
        let Some(interval_ms) = w.chat_interval_ms.get() else { return };
        let period = interval_ms * 1000;
        let now = now_us();
        for u in w.newly_ready.borrow_mut().drain(..) {
            heap.push(Reverse((now + rand::random::<u64>() % period, u)));
        }
        while let Some(&Reverse((due, u))) = heap.peek() {
            if due > now {
                break;
            }
            heap.pop();
            if w.lives.borrow()[u as usize].failed {
                continue;
            }
            w.send_one(u, None);
            heap.push(Reverse((due.max(now - period) + period, u)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_round_trips_with_padding() {
        assert_eq!(parse_content("tb:12:345xxxx"), Some((12, 345)));
        assert_eq!(parse_content("tb:12:345"), Some((12, 345)));
        assert_eq!(parse_content("hello"), None);
    }
}
