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
//! duplicates are exact per message. Receipts after the coordinator's Cutoff
//! (the end of the delivery window) are counted apart as late.
//!
//! `slow` adds per-session tracking: numbered messages (`tb:<key>:<µs>:<n>`)
//! land in a bitset per session with an order check, and some sessions stop
//! reading their sockets on command (see [`StallPhase`]).

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
use crate::wire::{new_hist, Command, Final, Hist, Report, SentMsg, SessionLife, Tick, TrackReport, WorkerConfig};

/// What every session of a worker watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Run,
    /// Drop the socket and resume; the number is the drop generation.
    Drop(u64),
    /// Look at your own entry in the worker's stall table (the number only
    /// makes each poke a new value).
    Poke(u64),
    Finish,
}

/// Where a tracked session is in the slow-consumer script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallPhase {
    /// Reads normally (every session that was never stalled).
    Normal,
    /// Does not read its socket at all (nor heartbeat).
    Stalled,
    /// Reads the stalled socket again, until the socket ends.
    Reading,
    /// The stalled socket ended; reconnecting with RESUME.
    Resuming,
    /// RESUMED, re-identified or given up.
    Done,
}

/// One tracked session's view of the numbered messages (`slow`).
struct Track {
    phase: StallPhase,
    was_stalled: bool,
    /// Bit n set: message number n arrived.
    seen: Vec<u8>,
    received: u32,
    last: Option<u32>,
    out_of_order: u32,
    duplicates: u32,
    connection_ends: u32,
    queued_bytes_at_unstall: Option<u64>,
    read_after_unstall: u32,
    end: Option<String>,
    close_code: Option<u16>,
    ended_at: Option<Instant>,
    resumed: bool,
    invalid_sessions: u32,
    resume_ms: Option<f64>,
    after_resume: u32,
    gave_up: bool,
}

impl Track {
    fn new(messages: u32) -> Track {
        Track {
            phase: StallPhase::Normal,
            was_stalled: false,
            seen: vec![0; (messages as usize).div_ceil(8)],
            received: 0,
            last: None,
            out_of_order: 0,
            duplicates: 0,
            connection_ends: 0,
            queued_bytes_at_unstall: None,
            read_after_unstall: 0,
            end: None,
            close_code: None,
            ended_at: None,
            resumed: false,
            invalid_sessions: 0,
            resume_ms: None,
            after_resume: 0,
            gave_up: false,
        }
    }

    fn report(&self, user: u32) -> TrackReport {
        use base64::Engine;
        TrackReport {
            user,
            stalled: self.was_stalled,
            seen: base64::engine::general_purpose::STANDARD.encode(&self.seen),
            received: self.received,
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            connection_ends: self.connection_ends,
            queued_bytes_at_unstall: self.queued_bytes_at_unstall,
            read_after_unstall: self.read_after_unstall,
            end: self.end.clone(),
            close_code: self.close_code,
            resumed: self.resumed,
            invalid_sessions: self.invalid_sessions,
            resume_ms: self.resume_ms,
            after_resume: self.after_resume,
            gave_up: self.gave_up,
        }
    }
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
    /// Receipts per message key: (eligible receipts, last receipt µs, late among them).
    received: RefCell<HashMap<u64, (u32, u64, u32)>>,
    /// Receipts after this time count as late (set by the Cutoff command).
    cutoff_us: Cell<Option<u64>>,
    /// `slow`: per-session tracking of numbered messages, by user.
    tracks: RefCell<HashMap<u32, Track>>,
    reader_e2e: RefCell<Histogram<u64>>,
    stalled_e2e: RefCell<Histogram<u64>>,
    poke: Cell<u64>,
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
    /// Reads ready sessions' sockets (with `shared_reader`).
    pub hub: crate::hub::Hub,
}

impl Worker {
    pub fn token(&self, user: u32) -> String {
        self.ix.fixture.users[user as usize].token.clone()
    }

    /// The id of `user`'s first guild in the fixture (`--open-home-only`).
    pub fn home_guild(&self, user: u32) -> Option<&str> {
        let g = *self.ix.guilds_of[user as usize].first()?;
        Some(self.ix.fixture.guilds[g as usize].id.as_str())
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
        self.track_gave_up(user);
    }

    /// A MESSAGE_CREATE arrived for `user`.
    pub fn on_message(&self, user: u32, content: &str) {
        let now = now_us();
        let late = self.cutoff_us.get().is_some_and(|c| now > c);
        let mut s = self.stats.borrow_mut();
        s.counters.deliveries += 1;
        if late {
            s.counters.late_deliveries += 1;
        }
        let Some((key, ts)) = parse_content(content) else { return };
        let e2e = now.saturating_sub(ts).max(1);
        s.e2e_us.saturating_record(e2e);
        drop(s);
        if let Some(n) = parse_number(content) {
            self.on_numbered(user, n, e2e);
        }
        let l = self.lives.borrow()[user as usize];
        if l.ready_at_us != 0 && l.broken_at_us.is_none() && l.ready_at_us <= ts {
            let mut r = self.received.borrow_mut();
            let e = r.entry(key).or_insert((0, 0, 0));
            e.0 += 1;
            e.1 = e.1.max(now);
            if late {
                e.2 += 1;
            }
        }
    }

    /// A numbered message `n` reached `user`: bitset, order, per-group e2e.
    fn on_numbered(&self, user: u32, n: u32, e2e_us: u64) {
        let mut tracks = self.tracks.borrow_mut();
        let Some(t) = tracks.get_mut(&user) else { return };
        let (byte, bit) = ((n / 8) as usize, 1u8 << (n % 8));
        if byte < t.seen.len() {
            if t.seen[byte] & bit != 0 {
                t.duplicates += 1;
            }
            t.seen[byte] |= bit;
        }
        if t.last.is_some_and(|l| n <= l) {
            t.out_of_order += 1;
        } else {
            t.last = Some(n);
        }
        t.received += 1;
        match t.phase {
            StallPhase::Reading => t.read_after_unstall += 1,
            StallPhase::Resuming | StallPhase::Done if t.was_stalled => t.after_resume += 1,
            _ => {}
        }
        let h = if t.was_stalled { &self.stalled_e2e } else { &self.reader_e2e };
        h.borrow_mut().saturating_record(e2e_us);
    }

    /// Where `user` is in the stall script (Normal if untracked).
    pub fn stall_phase(&self, user: u32) -> StallPhase {
        self.tracks.borrow().get(&user).map(|t| t.phase).unwrap_or(StallPhase::Normal)
    }

    /// A stalled session reads again; `queued` bytes were waiting in its socket.
    pub fn track_unstalled(&self, user: u32, queued: Option<u64>) {
        if let Some(t) = self.tracks.borrow_mut().get_mut(&user) {
            t.queued_bytes_at_unstall = queued;
        }
    }

    /// A connection of `user` ended (not at Finish): how, and the close code if any.
    pub fn track_conn_end(&self, user: u32, end: &str, code: Option<u16>) {
        let mut tracks = self.tracks.borrow_mut();
        let Some(t) = tracks.get_mut(&user) else { return };
        t.connection_ends += 1;
        if t.phase == StallPhase::Reading {
            t.end = Some(end.to_owned());
            t.close_code = code;
            t.ended_at = Some(Instant::now());
            t.phase = StallPhase::Resuming;
        }
    }

    /// `user` got RESUMED.
    pub fn track_resumed(&self, user: u32) {
        let mut tracks = self.tracks.borrow_mut();
        let Some(t) = tracks.get_mut(&user) else { return };
        if t.phase == StallPhase::Resuming {
            t.resumed = true;
            t.resume_ms = t.ended_at.map(|at| at.elapsed().as_secs_f64() * 1000.0);
            t.phase = StallPhase::Done;
            self.stats.borrow_mut().counters.stall_outcomes += 1;
        }
    }

    /// `user` got op 9; unless it may resume again, its stalled session is over.
    pub fn track_invalid(&self, user: u32, will_resume: bool) {
        let mut tracks = self.tracks.borrow_mut();
        let Some(t) = tracks.get_mut(&user) else { return };
        if t.phase == StallPhase::Resuming {
            t.invalid_sessions += 1;
            if !will_resume {
                t.phase = StallPhase::Done;
                self.stats.borrow_mut().counters.stall_outcomes += 1;
            }
        }
    }

    fn track_gave_up(&self, user: u32) {
        let mut tracks = self.tracks.borrow_mut();
        let Some(t) = tracks.get_mut(&user) else { return };
        if t.was_stalled && t.phase != StallPhase::Done {
            t.gave_up = true;
            t.phase = StallPhase::Done;
            self.stats.borrow_mut().counters.stall_outcomes += 1;
        }
    }

    /// Starts tracking `user` (slow), before its session starts.
    fn track(&self, user: u32) {
        if self.cfg.track_messages > 0 {
            self.tracks.borrow_mut().entry(user).or_insert_with(|| Track::new(self.cfg.track_messages));
        }
    }

    /// Moves this worker's tracked sessions among `users` (all of them if None)
    /// from one phase to the next and pokes every session.
    fn set_phase(&self, users: Option<&[u32]>, from: StallPhase, to: StallPhase) {
        let mut tracks = self.tracks.borrow_mut();
        for (u, t) in tracks.iter_mut() {
            if t.phase == from && users.is_none_or(|us| us.contains(u)) {
                t.phase = to;
                if to == StallPhase::Stalled {
                    t.was_stalled = true;
                }
            }
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
        let (idx, content) = self.prepare(g, None);
        tokio::task::spawn_local(self.clone().post(idx, user, channel, content));
    }

    /// A new message: its key, send time and content, recorded as sent (not yet answered).
    fn prepare(&self, guild: u32, number: Option<u32>) -> (usize, String) {
        let key = (u64::from(self.cfg.worker) << 40) | self.next_key.get();
        self.next_key.set(self.next_key.get() + 1);
        let ts = now_us();
        let mut content = match number {
            Some(n) => format!("tb:{key}:{ts}:{n}"),
            None => format!("tb:{key}:{ts}"),
        };
        content.extend(std::iter::repeat_n('x', self.cfg.message_padding));
        if content.len() < self.cfg.message_size {
            content.extend(std::iter::repeat_n('x', self.cfg.message_size - content.len()));
        }
        let mut sent = self.sent.borrow_mut();
        sent.push(SentMsg { key, guild, ts_us: ts, ok: false, answered_us: None, number });
        (sent.len() - 1, content)
    }

    /// POSTs a prepared message and counts the answer.
    async fn post(self: Rc<Self>, idx: usize, user: u32, channel: String, content: String) {
        self.inflight_sends.set(self.inflight_sends.get() + 1);
        let rest = &self.rest[user as usize % self.rest.len()];
        let token = self.token(user);
        let t0 = Instant::now();
        let key = self.sent.borrow()[idx].key;
        let r = rest.send_message(&token, &channel, &content, key).await;
        self.inflight_sends.set(self.inflight_sends.get() - 1);
        self.sent.borrow_mut()[idx].answered_us = Some(now_us());
        let mut s = self.stats.borrow_mut();
        s.rest_us.record_us(t0.elapsed());
        match r {
            Sent::Ok => {
                s.counters.sent += 1;
                self.sent.borrow_mut()[idx].ok = true;
            }
            Sent::Failed(code) => {
                s.counters.send_errors += 1;
                drop(s);
                self.note_error(&format!("send: HTTP {code}"));
            }
            Sent::Transport => {
                s.counters.send_errors += 1;
                drop(s);
                self.note_error("send: transport error");
            }
        }
    }

    /// Posts `count` numbered messages from `users` in turn to the first
    /// channel of `guild`, one at a time, paced at `interval_ms`.
    async fn sequence(self: Rc<Self>, users: Vec<u32>, guild: u32, count: u32, interval_ms: u64) {
        let channel = self.ix.fixture.guilds.get(guild as usize).and_then(|g| g.channel_ids.first()).cloned();
        if let (Some(channel), false) = (channel, users.is_empty()) {
            let mut iv = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for n in 0..count {
                iv.tick().await;
                let (idx, content) = self.prepare(guild, Some(n));
                let user = users[n as usize % users.len()];
                self.clone().post(idx, user, channel.clone(), content).await;
            }
        } else {
            self.note_error("sequence: guild has no channel");
        }
        self.stats.borrow_mut().counters.sequences_done += 1;
    }
}

/// `tb:<key>:<µs>[:<n>]<padding>` -> (key, µs).
fn parse_content(c: &str) -> Option<(u64, u64)> {
    let rest = c.strip_prefix("tb:")?;
    let (key, rest) = rest.split_once(':')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    Some((key.parse().ok()?, rest[..digits].parse().ok()?))
}

/// `tb:<key>:<µs>:<n><padding>` -> n (numbered messages only).
fn parse_number(c: &str) -> Option<u32> {
    let rest = c.strip_prefix("tb:")?.split_once(':')?.1;
    let rest = rest.trim_start_matches(|ch: char| ch.is_ascii_digit()).strip_prefix(':')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
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
        cutoff_us: Cell::new(None),
        tracks: RefCell::new(HashMap::new()),
        reader_e2e: RefCell::new(new_hist()),
        stalled_e2e: RefCell::new(new_hist()),
        poke: Cell::new(0),
        sent: RefCell::new(Vec::new()),
        next_key: Cell::new(0),
        newly_ready: RefCell::new(Vec::new()),
        chat_interval_ms: Cell::new(None),
        inflight_sends: Cell::new(0),
        live_tasks: Cell::new(0),
        errors: RefCell::new(HashMap::new()),
        full: RefCell::new(FullHists::default()),
        hub: crate::hub::Hub::new().context("worker: epoll set")?,
    });
    if w.cfg.shared_reader {
        tokio::task::spawn_local(crate::hub::Hub::run(w.clone()));
    }
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
            Command::Sequence { users, guild, count, interval_ms } => {
                tokio::task::spawn_local(w.clone().sequence(users, guild, count, interval_ms));
            }
            Command::StopSending => w.chat_interval_ms.set(None),
            Command::Stall { users } => {
                w.set_phase(Some(&users), StallPhase::Normal, StallPhase::Stalled);
                poke(&w, &ctl_tx);
            }
            Command::Unstall => {
                w.set_phase(None, StallPhase::Stalled, StallPhase::Reading);
                poke(&w, &ctl_tx);
            }
            Command::Cutoff { at_us } => w.cutoff_us.set(Some(at_us)),
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
        received: w.received.borrow().iter().map(|(k, (n, t, late))| (*k, *n, *t, *late)).collect(),
        tracks: {
            let tracks = w.tracks.borrow();
            let mut v: Vec<TrackReport> = tracks.iter().map(|(u, t)| t.report(*u)).collect();
            v.sort_by_key(|t| t.user);
            v
        },
        readers_e2e_us: Hist::encode(&w.reader_e2e.borrow()),
        stalled_e2e_us: Hist::encode(&w.stalled_e2e.borrow()),
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
    t.inflight_sends = w.inflight_sends.get() as u64;
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

/// Tells every session to look at the stall table again.
fn poke(w: &Worker, ctl: &watch::Sender<Control>) {
    w.poke.set(w.poke.get() + 1);
    if ctl.send(Control::Poke(w.poke.get())).is_err() {
        eprintln!("worker {}: no sessions to poke", w.cfg.worker);
    }
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
        w.track(user);
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
        assert_eq!(parse_content("tb:12:345:7xx"), Some((12, 345)));
        assert_eq!(parse_number("tb:12:345:7xx"), Some(7));
        assert_eq!(parse_number("tb:12:345xx"), None);
        assert_eq!(parse_number("tb:12:345"), None);
    }
}
