//! A property-based state-machine test of sessions: replay, heartbeat
//! acknowledgements, drops, RESUME, replay bounds, resume windows and slow
//! consumers, against a small model of what ARCHITECTURE.md § Invariants
//! promises.
//!
//! The real code runs as in production: `start` and `resume` put a socket
//! in, delivery goes through `write_dispatch` and `flush`, the client's
//! heartbeats and its EOF reach the session's own reader task, backed-up
//! sockets get flusher tasks, and `sweep` enforces heartbeat timeouts and
//! resume windows. Only the socket is an in-memory pipe (`socket::pipe`) whose
//! client end is the test, and time is the test's (`now`), so every case
//! runs the same way each time on a single-threaded runtime.
//!
//! The model is a log of every dispatch the session was given and where its
//! replay buffer starts; after every step the real state must agree with
//! it, and every frame the client reads must be the next one it expects.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed, TestCaseError, TestError, TestRunner};
use protocol::compress::{CompressParams, Decompressor, Transport};
use protocol::gateway::{dispatch_envelope_len, op, write_op, Intents, Resume};
use protocol::UserId;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::task::TaskTracker;

use super::super::socket::pipe::Pipe;
use super::super::socket::Conn;
use super::super::ws;
use super::{Identified, SessionHandle, SessionState};
use fanout::{Delivery, Limits, Nice};
use node::presence::Presence;
use node::Node;

thread_local! {
    static CLOCK: Cell<Option<Instant>> = const { Cell::new(None) };
    static TALLY: std::cell::RefCell<Tally> = std::cell::RefCell::new(Tally::default());
}

/// What the cases of a run did, so a run that stopped reaching some
/// outcome (a generator drifting, a bound never hit) fails.
#[derive(Debug, Default, Clone)]
struct Tally {
    steps: u64,
    dispatches: u64,
    /// Dispatches the client read, and how many of them a RESUME replayed.
    read: u64,
    replayed: u64,
    partial_writes: u64,
    /// Entries that left the replay buffer for a bound, and written own dispatches forgotten.
    trimmed: u64,
    forgotten: u64,
    /// A bound was passed because the oldest entries were not written.
    kept_unwritten: u64,
    acknowledged: u64,
    /// Heartbeats claiming more than was written.
    clamped_acks: u64,
    resumed: u64,
    resumed_replacing: u64,
    refused_below_ack: u64,
    refused_trimmed: u64,
    refused_ahead: u64,
    refused_ended: u64,
    identified: u64,
    slow_closes: u64,
    /// Of those, above the hard cap (no grace).
    hard_cap_closes: u64,
    /// Close frames the client read (4000, 4009), each last on its socket.
    close_frames: u64,
    heartbeat_timeouts: u64,
    windows_expired: u64,
}

fn tally(f: impl FnOnce(&mut Tally)) {
    TALLY.with(|t| f(&mut t.borrow_mut()));
}

/// The session code's clock under unit tests: the time this thread's test
/// set, or the real one.
pub(super) fn now() -> Instant {
    CLOCK.with(Cell::get).unwrap_or_else(Instant::now)
}

fn set_clock(t: Option<Instant>) {
    CLOCK.with(|c| c.set(t));
}

/// Passes of the single-threaded scheduler after each action, so every task
/// it woke (the session's reader, flushers, a closing socket's writer) has
/// run to its next wait.
const SETTLE_PASSES: usize = 16;

async fn settle() {
    for _ in 0..SETTLE_PASSES {
        tokio::task::yield_now().await;
    }
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

// ---- What a case is made of.

/// Bounds and timings of one case.
#[derive(Clone, Debug)]
struct Params {
    transport: Transport,
    /// Unread bytes the client's socket holds before the server's writes block.
    capacity: usize,
    replay_max_events: usize,
    replay_max_bytes: usize,
    replay_max_age_ms: u64,
    max_pending_bytes: usize,
    /// The hard cap is `max(replay_max_bytes, hard_factor * max_pending_bytes) + max_pending_bytes` (as in `Limits::from_config`).
    hard_factor: usize,
    slow_consumer_grace_ms: u64,
    heartbeat_timeout_ms: u64,
    resume_window_ms: u64,
    ready_bytes: usize,
}

impl Params {
    fn limits(&self) -> Limits {
        Limits {
            replay_max_events: self.replay_max_events,
            replay_max_age: Duration::from_millis(self.replay_max_age_ms),
            replay_max_bytes: self.replay_max_bytes,
            max_pending_bytes: self.max_pending_bytes,
            slow_consumer_grace: Duration::from_millis(self.slow_consumer_grace_ms),
            max_pending_hard_bytes: self.replay_max_bytes.max(self.hard_factor * self.max_pending_bytes) + self.max_pending_bytes,
            // A closed socket's close frame waits as long as the case needs.
            close_linger: Duration::from_secs(3600),
            coalesce_max: 64,
            linger: Duration::ZERO,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Message,
    Typing,
    /// The session's own bulky dispatches: they leave the replay buffer once written.
    GuildCreate,
    MembersChunk,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Message => "MESSAGE_CREATE",
            Kind::Typing => "TYPING_START",
            Kind::GuildCreate => "GUILD_CREATE",
            Kind::MembersChunk => "GUILD_MEMBERS_CHUNK",
        }
    }
}

fn own_bulky(name: &str) -> bool {
    matches!(name, "READY" | "GUILD_CREATE" | "GUILD_MEMBERS_CHUNK")
}

/// A sequence number the client sends (heartbeat `d`, RESUME `seq`),
/// relative to the last dispatch it saw.
#[derive(Clone, Copy, Debug)]
enum Claim {
    Seen,
    /// Older than what it saw (stale; below what it acknowledged, maybe).
    Behind(u64),
    /// Newer than what it saw (never sent, or not even assigned yet).
    Ahead(u64),
    Null,
}

impl Claim {
    fn of(self, seen: u64) -> Option<u64> {
        match self {
            Claim::Seen => Some(seen),
            Claim::Behind(k) => Some(seen.saturating_sub(k)),
            Claim::Ahead(k) => Some(seen + k),
            Claim::Null => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// A delivery worker's batch for the session (body sizes in bytes), then its flush.
    Write(Vec<(Kind, usize)>),
    /// The client reads up to this many bytes (`None`: all there are).
    Read(Option<usize>),
    /// The client reads until nothing more comes.
    Drain,
    /// op 1 (or op 40, which acknowledges nothing) with a sequence number.
    Heartbeat { claim: Claim, qos: bool },
    /// The client's connection breaks.
    Drop,
    /// The client RESUMEs on a new socket, leaving its old one first or not.
    Resume { claim: Claim, keep_old: bool },
    /// Time passes (ms) and the sweeper runs.
    Advance(u64),
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop_oneof![3 => Just(Transport::None), 1 => Just(Transport::ZlibStream), 1 => Just(Transport::ZstdStream)],
        prop_oneof![64usize..1500, 1500usize..20_000, Just(1usize << 24)],
        prop_oneof![1usize..8, 8usize..200],
        prop_oneof![200usize..5000, 5000usize..100_000],
        500u64..20_000,
        100usize..6000,
        1usize..16,
        prop_oneof![Just(0u64), 1u64..5000],
        2000u64..30_000,
        1000u64..60_000,
        50usize..6000,
    )
        .prop_map(|(transport, capacity, events, bytes, age, pending, hard, grace, hb, window, ready)| Params {
            transport,
            capacity,
            replay_max_events: events,
            replay_max_bytes: bytes,
            replay_max_age_ms: age,
            max_pending_bytes: pending,
            hard_factor: hard,
            slow_consumer_grace_ms: grace,
            heartbeat_timeout_ms: hb,
            resume_window_ms: window,
            ready_bytes: ready,
        })
}

fn claim() -> impl Strategy<Value = Claim> {
    prop_oneof![
        6 => Just(Claim::Seen),
        1 => (1u64..4).prop_map(Claim::Behind),
        1 => (1u64..4).prop_map(Claim::Ahead),
        1 => Just(Claim::Null),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![6 => Just(Kind::Message), 2 => Just(Kind::Typing), 1 => Just(Kind::GuildCreate), 1 => Just(Kind::MembersChunk)];
    let size = prop_oneof![4 => 8usize..300, 1 => 300usize..6000];
    prop_oneof![
        8 => proptest::collection::vec((kind, size), 1..=3).prop_map(Op::Write),
        4 => prop_oneof![Just(None), (1usize..3000).prop_map(Some)].prop_map(Op::Read),
        1 => Just(Op::Drain),
        3 => (claim(), proptest::bool::weighted(0.15)).prop_map(|(claim, qos)| Op::Heartbeat { claim, qos }),
        1 => Just(Op::Drop),
        2 => (claim(), any::<bool>()).prop_map(|(claim, keep_old)| Op::Resume { claim, keep_old }),
        2 => prop_oneof![0u64..2000, 2000u64..40_000].prop_map(Op::Advance),
    ]
}

// ---- The client's side of a socket.

/// A server frame as the client decodes it.
#[derive(Debug)]
enum Frame {
    Dispatch { s: u64, t: String, w: Option<u64> },
    Ack,
    Close(u16),
    Other(u8),
}

/// The header of the server frame at the front of `b`: opcode and payload
/// range, or `None` while incomplete. Server frames are whole (FIN), unmasked
/// and carry minimal length headers.
fn server_frame(b: &[u8]) -> Result<Option<(u8, std::ops::Range<usize>)>, String> {
    if b.len() < 2 {
        return Ok(None);
    }
    check!(b[0] & 0xf0 == 0x80, "frame byte 0 is {:#04x}: not FIN, or reserved bits set", b[0]);
    check!(b[1] & 0x80 == 0, "server frame is masked");
    let (len, hdr) = match b[1] & 0x7f {
        126 if b.len() < 4 => return Ok(None),
        127 if b.len() < 10 => return Ok(None),
        126 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 => (u64::from_be_bytes(b[2..10].try_into().expect("8 bytes")) as usize, 10),
        n => (n as usize, 2),
    };
    check!(ws::header_len(len) == hdr, "a {len}-byte payload with a {hdr}-byte header");
    if b.len() < hdr + len {
        return Ok(None);
    }
    Ok(Some((b[0] & 0x0f, hdr..hdr + len)))
}

/// One gateway message.
fn message(json: &[u8]) -> Result<Frame, String> {
    #[derive(Deserialize)]
    struct Msg<'a> {
        op: u8,
        #[serde(default)]
        s: Option<u64>,
        #[serde(default)]
        t: Option<String>,
        #[serde(borrow, default)]
        d: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        w: Option<u64>,
    }
    let text = || String::from_utf8_lossy(&json[..json.len().min(100)]).into_owned();
    let m: Msg = serde_json::from_slice(json).map_err(|e| format!("undecodable message {}: {e}", text()))?;
    Ok(match m.op {
        op::DISPATCH => {
            let (Some(s), Some(t), Some(d)) = (m.s, m.t, m.d) else { return Err(format!("dispatch without s, t or d: {}", text())) };
            let body: Body = serde_json::from_str(d.get()).map_err(|e| format!("dispatch body {}: {e}", d.get()))?;
            Frame::Dispatch { s, t, w: body.w }
        }
        op::HEARTBEAT_ACK => Frame::Ack,
        other => Frame::Other(other),
    })
}

/// A masked text frame, as a client sends it.
fn client_text(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut v = vec![0x80 | ws::OP_TEXT, 0x80 | payload.len() as u8];
    v.extend_from_slice(&mask);
    v.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    v
}

/// One socket as its client sees it: every byte the server wrote, decoded
/// into frames, and how far the client has read.
struct Wire {
    pipe: Arc<Pipe>,
    decompress: Option<Decompressor>,
    /// Written bytes not decoded yet (an incomplete frame); `at` is the
    /// stream offset of its first byte.
    tail: Vec<u8>,
    at: usize,
    /// Decoded frames with the stream offset where each ends.
    frames: Vec<(usize, Frame)>,
    /// Frames the client has read.
    consumed: usize,
    /// Last dispatch written whole to this socket (where it started, before any).
    written: u64,
    /// Last dispatch the client read from it (likewise).
    last: u64,
    /// The server closed it with this code (while the client still had it).
    closed_with: Option<u16>,
    /// A RESUME put it in when the session was at this seq.
    resumed_at: Option<u64>,
}

impl Wire {
    fn new(pipe: Arc<Pipe>, transport: Transport, from: u64) -> Wire {
        let decompress = Decompressor::new(transport).expect("decompressor");
        Wire {
            pipe,
            decompress,
            tail: Vec::new(),
            at: 0,
            frames: Vec::new(),
            consumed: 0,
            written: from,
            last: from,
            closed_with: None,
            resumed_at: None,
        }
    }

    /// Bytes the server wrote to it.
    fn fetched(&self) -> usize {
        self.at + self.tail.len()
    }

    /// Decodes what the server wrote since the last call.
    fn decode(&mut self) -> Result<(), String> {
        let new = self.pipe.written_from(self.fetched());
        self.tail.extend_from_slice(&new);
        let mut pos = 0;
        while let Some((opcode, range)) = server_frame(&self.tail[pos..])? {
            let payload = &self.tail[pos + range.start..pos + range.end];
            let frame = match (opcode, self.decompress.as_mut()) {
                (ws::OP_TEXT, None) => message(payload)?,
                (ws::OP_BINARY, Some(d)) => {
                    let mut json = Vec::new();
                    d.decompress(payload, &mut json).map_err(|e| format!("frame does not decompress: {e}"))?;
                    message(&json)?
                }
                (ws::OP_CLOSE, _) => {
                    check!(payload.len() >= 2, "close frame without a code");
                    Frame::Close(u16::from_be_bytes([payload[0], payload[1]]))
                }
                (op, _) => return Err(format!("unexpected frame opcode {op} (compressed: {})", self.decompress.is_some())),
            };
            pos += range.end;
            if let Some((_, Frame::Close(c))) = self.frames.last() {
                return Err(format!("{frame:?} written after the close frame ({c})"));
            }
            if let Frame::Dispatch { s, .. } = frame {
                check!(s == self.written + 1, "dispatch {s} written after dispatch {}", self.written);
                self.written = s;
            }
            self.frames.push((self.at + pos, frame));
        }
        self.tail.drain(..pos);
        self.at += pos;
        Ok(())
    }
}

// ---- The model.

struct Entry {
    name: &'static str,
    /// Which write it was (`None`: RESUMED), as its body says.
    w: Option<u64>,
    body: Bytes,
    at: Instant,
}

/// The socket the model has attached.
struct Attached {
    /// Where it started: the client's RESUME `seq` (0 after IDENTIFY).
    base: u64,
    last_heartbeat: Instant,
    /// HEARTBEAT_ACKs queued on it.
    acks: usize,
    /// Since when its backlog has certainly been above the slow-consumer
    /// bound at every step (direct mode).
    over_since: Option<Instant>,
    /// The last time it had nothing queued (or was attached).
    clear_at: Instant,
}

/// A session as ARCHITECTURE.md describes it.
struct Model {
    /// Every dispatch, `seq - 1` indexed.
    log: Vec<Entry>,
    /// The replay buffer holds `oldest..=seq`.
    oldest: u64,
    acked: u64,
    ended: bool,
    detached_at: Option<Instant>,
    attached: Option<Attached>,
}

impl Model {
    fn new(now: Instant) -> Model {
        let attached = Attached { base: 0, last_heartbeat: now, acks: 0, over_since: None, clear_at: now };
        Model { log: Vec::new(), oldest: 1, acked: 0, ended: false, detached_at: None, attached: Some(attached) }
    }

    fn seq(&self) -> u64 {
        self.log.len() as u64
    }

    fn entry(&self, s: u64) -> &Entry {
        &self.log[s as usize - 1]
    }

    /// A new dispatch: the oldest entries before `keep` (the first the
    /// socket has not been handed) leave while the buffer is over a bound.
    fn record(&mut self, l: &Limits, e: Entry, keep: u64) {
        let now = e.at;
        self.log.push(e);
        let seq = self.seq();
        while self.oldest < keep && self.oldest <= seq {
            let count = (seq - self.oldest + 1) as usize;
            let bytes: usize = (self.oldest..=seq).map(|s| self.entry(s).body.len()).sum();
            let age = now.duration_since(self.entry(self.oldest).at);
            if count <= l.replay_max_events && bytes <= l.replay_max_bytes && age <= l.replay_max_age {
                break;
            }
            self.oldest += 1;
            tally(|t| t.trimmed += 1);
        }
        tally(|t| t.dispatches += 1);
    }

    /// Whether a client that saw up to `seq` can get every later dispatch.
    fn can_resume(&self, seq: Option<u64>) -> bool {
        let s = seq.unwrap_or(0);
        !self.ended && s <= self.seq() && s >= self.acked && s + 1 >= self.oldest
    }

    fn detach(&mut self, now: Instant) {
        self.attached = None;
        self.detached_at = Some(now);
    }
}

/// Bytes of the frame of dispatch `seq`.
fn dispatch_frame_len(name: &str, seq: u64, body: usize) -> usize {
    let len = dispatch_envelope_len(name, seq) + body + 1;
    len + ws::header_len(len)
}

fn ack_frame_len() -> usize {
    let mut v = Vec::new();
    write_op(&mut v, op::HEARTBEAT_ACK, b"null");
    v.len() + ws::header_len(v.len())
}

fn body(w: u64, size: usize) -> Bytes {
    let head = format!(r#"{{"w":{w},"p":""#);
    let pad = size.saturating_sub(head.len() + 2);
    Bytes::from(format!(r#"{head}{}"}}"#, "x".repeat(pad)))
}

const RESUMED_BODY: &[u8] = b"{\"_trace\":[\"throng\"]}";

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

// ---- Driving the real code.

struct Harness {
    node: Arc<Node>,
    /// The node's session table (the gateway's, typed).
    table: Arc<crate::Sessions>,
    p: Params,
    limits: Limits,
    delivery: Arc<Delivery>,
    direct: bool,
    /// The client's session, and every session of the case (ended at its end).
    s: Arc<SessionHandle>,
    sessions: Vec<Arc<SessionHandle>>,
    m: Model,
    /// The client's socket.
    wire: Option<Wire>,
    /// The last dispatch the client saw (what an honest heartbeat or RESUME sends).
    seen: u64,
    writes: u64,
    slow_closes: u64,
    /// The session had a socket at some time during this step.
    had_socket: bool,
}

impl Harness {
    async fn new((node, table): &(Arc<Node>, Arc<crate::Sessions>), p: &Params) -> Result<Harness, String> {
        let limits = p.limits();
        let delivery =
            Delivery::start(1, Nice { base: 0, burst: 0 }, limits.clone(), tokio::runtime::Handle::current(), TaskTracker::new());
        let s = new_session(&delivery);
        let mut h = Harness {
            node: node.clone(),
            table: table.clone(),
            p: p.clone(),
            limits,
            delivery,
            direct: p.transport == Transport::None,
            sessions: vec![s.clone()],
            s,
            m: Model::new(now()),
            wire: None,
            seen: 0,
            writes: 0,
            slow_closes: 0,
            had_socket: true,
        };
        h.start().await?;
        Ok(h)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.s.lock()
    }

    fn next_write(&mut self) -> u64 {
        self.writes += 1;
        self.writes
    }

    fn conn(&self) -> Result<(Arc<Pipe>, Conn), String> {
        let pipe = Arc::new(Pipe::new(self.p.capacity));
        let mut conn = Conn::pipe(pipe.clone(), self.p.transport, &CompressParams::default()).map_err(|e| e.to_string())?;
        conn.last_heartbeat = now();
        Ok((pipe, conn))
    }

    /// IDENTIFY's end: `session::start` with `self.s` on a new socket.
    async fn start(&mut self) -> Result<(), String> {
        let (pipe, conn) = self.conn()?;
        let w = self.next_write();
        let ready = body(w, self.p.ready_bytes);
        let now = now();
        self.m = Model::new(now);
        self.had_socket = true;
        self.wire = Some(Wire::new(pipe, self.p.transport, 0));
        self.seen = 0;
        let presence = Presence::new(protocol::gateway::Status::Online);
        super::start(&self.node, &self.table, conn, Identified { handle: self.s.clone(), ready: ready.clone(), presence }, Vec::new());
        self.m.record(&self.limits, Entry { name: "READY", w: Some(w), body: ready, at: now }, 1);
        settle().await;
        self.observe_close()?;
        self.sync(true)
    }

    /// The client gives up its session and IDENTIFYs again.
    async fn identify(&mut self) -> Result<(), String> {
        if let Some(old) = self.wire.take() {
            old.pipe.close();
        }
        settle().await;
        let s = new_session(&self.delivery);
        tally(|t| t.identified += 1);
        self.sessions.push(s.clone());
        self.s = s;
        self.start().await
    }

    /// What the session's `sent` is while the model has a socket attached:
    /// the last dispatch written whole (direct: the replay buffer is the
    /// write queue), or the last one (compressed sockets frame each at once).
    fn sent(&self) -> u64 {
        match (&self.wire, self.direct) {
            (Some(w), true) => w.written,
            _ => self.m.seq(),
        }
    }

    /// Direct mode (frames are not compressed), attached: bytes queued for the socket and not written
    /// (the frames of dispatches `base + 1 ..= seq` and of the heartbeat
    /// ACKs, less what was written), and bytes written of an unfinished frame.
    fn unwritten(&self) -> Result<(usize, usize), String> {
        let (Some(a), Some(w)) = (&self.m.attached, &self.wire) else { return Ok((0, 0)) };
        let dispatches: usize = (a.base + 1..=self.m.seq())
            .map(|s| {
                let e = self.m.entry(s);
                dispatch_frame_len(e.name, s, e.body.len())
            })
            .sum();
        let queued = dispatches + a.acks * ack_frame_len();
        let Some(left) = queued.checked_sub(w.fetched()) else {
            return Err(format!("the server wrote {} bytes to the socket; only {queued} were queued", w.fetched()));
        };
        Ok((left, w.tail.len()))
    }

    /// Decodes what the server wrote; a socket the model has attached and
    /// the session no longer has was closed as a slow consumer.
    fn observe_close(&mut self) -> Result<(), String> {
        if let Some(w) = self.wire.as_mut() {
            w.decode()?;
        }
        let has_conn = self.state().conn.is_some();
        if self.m.attached.is_some() && !has_conn {
            return self.slow_closed();
        }
        Ok(())
    }

    /// The session closed its socket as a slow consumer (4000): that must
    /// have been a slow consumer, and stays resumable.
    fn slow_closed(&mut self) -> Result<(), String> {
        let closes = self.delivery.stats().slow_consumer_closes.load(Ordering::Relaxed);
        check!(closes == self.slow_closes + 1, "the socket was closed, but not as a slow consumer ({closes} slow closes)");
        self.slow_closes = closes;
        tally(|t| t.slow_closes += 1);
        let now = now();
        let full = self.wire.as_ref().is_some_and(|w| w.pipe.full());
        check!(full, "closed as a slow consumer with room in its socket");
        if self.direct {
            let (left, partial) = self.unwritten()?;
            let l = &self.limits;
            check!(
                left + partial > l.max_pending_bytes,
                "closed as a slow consumer with {left} bytes queued (bound {})",
                l.max_pending_bytes
            );
            let a = self.m.attached.as_ref().expect("attached");
            if left + partial > l.max_pending_hard_bytes {
                tally(|t| t.hard_cap_closes += 1);
            }
            check!(
                left + partial > l.max_pending_hard_bytes || now.duration_since(a.clear_at) >= l.slow_consumer_grace,
                "closed as a slow consumer with {left} bytes queued (hard cap {}), {:?} after its socket last had nothing queued (grace {:?})",
                l.max_pending_hard_bytes,
                now.duration_since(a.clear_at),
                l.slow_consumer_grace
            );
        }
        self.m.detach(now);
        if let Some(w) = self.wire.as_mut() {
            w.closed_with = Some(protocol::CloseCode::UnknownError.code());
        }
        Ok(())
    }

    /// The client reads the frames that arrived whole: each dispatch must
    /// be the next one, as the model logged it.
    fn consume(&mut self) -> Result<(), String> {
        let Some(w) = self.wire.as_mut() else { return Ok(()) };
        let read = w.pipe.read_len();
        while w.consumed < w.frames.len() && w.frames[w.consumed].0 <= read {
            match &w.frames[w.consumed].1 {
                Frame::Dispatch { s, t, w: id } => {
                    check!(*s == w.last + 1, "the client got dispatch {s} after dispatch {}", w.last);
                    check!(*s <= self.m.seq(), "the client got dispatch {s}; the session has only {}", self.m.seq());
                    let e = self.m.entry(*s);
                    check!(t == e.name && *id == e.w, "dispatch {s} is {t} of write {id:?}, not {} of write {:?}", e.name, e.w);
                    w.last = *s;
                    self.seen = *s;
                    let replayed = w.resumed_at.is_some_and(|r| *s <= r);
                    tally(|t| {
                        t.read += 1;
                        t.replayed += u64::from(replayed);
                    });
                }
                Frame::Ack => {}
                Frame::Close(code) => {
                    check!(w.closed_with == Some(*code), "the client got close {code}; the server closed it with {:?}", w.closed_with);
                    tally(|t| t.close_frames += 1);
                }
                Frame::Other(op) => return Err(format!("the client got op {op}")),
            }
            w.consumed += 1;
        }
        Ok(())
    }

    /// The real state agrees with the model. `attached` says whether the
    /// session had a socket during the step: then written READY,
    /// GUILD_CREATE and GUILD_MEMBERS_CHUNK may have left the front of the
    /// replay buffer (the code forgets them when it next writes).
    fn sync(&mut self, attached: bool) -> Result<(), String> {
        if let Some(w) = self.wire.as_mut() {
            w.decode()?;
        }
        let sent = self.sent();
        let st = self.s.lock();
        let m = &mut self.m;
        let seq = m.seq();
        check!(st.seq == seq, "seq {} (model {seq})", st.seq);
        check!(st.ended == m.ended, "ended {} (model {})", st.ended, m.ended);
        check!(st.acked == m.acked, "acked {} (model {})", st.acked, m.acked);
        check!(st.conn.is_some() == m.attached.is_some(), "socket attached: {} (model {})", st.conn.is_some(), m.attached.is_some());
        if m.attached.is_some() {
            check!(st.sent == sent, "sent {} (model: {sent} handed to the socket)", st.sent);
            check!(st.detached_at.is_none(), "attached with a detach time");
        } else if !m.ended {
            check!(st.detached_at == m.detached_at, "detached at {:?} (model {:?})", st.detached_at, m.detached_at);
        }
        let front = st.replay.front().map_or(seq + 1, |(q, _, _)| *q);
        let mut may_forget = m.oldest;
        if attached {
            let handed = st.sent.min(sent);
            while may_forget <= handed && may_forget <= seq && own_bulky(m.entry(may_forget).name) {
                may_forget += 1;
            }
        }
        check!(
            m.oldest <= front && front <= may_forget,
            "the replay buffer starts at {front}; the model says {}{} (acked {}, seq {seq}, sent {})",
            m.oldest,
            if may_forget > m.oldest { format!("..={may_forget} (written own dispatches may go)") } else { String::new() },
            m.acked,
            st.sent
        );
        tally(|t| t.forgotten += front - m.oldest);
        m.oldest = front;
        let mut bytes = 0;
        for (i, (q, d, at)) in st.replay.iter().enumerate() {
            check!(*q == front + i as u64, "replay entry {i} is dispatch {q}, after {front}");
            let e = m.entry(*q);
            check!(d.name == e.name && d.body == e.body && *at == e.at, "replay entry {q} is not the dispatch recorded");
            bytes += d.body.len();
        }
        check!(front + st.replay.len() as u64 == seq + 1, "the replay buffer ends at {}, seq is {seq}", front + st.replay.len() as u64 - 1);
        check!(st.replay_bytes == bytes, "replay_bytes {} for {bytes} bytes of bodies", st.replay_bytes);
        // Nothing the socket has not been written is dropped (direct mode:
        // the replay buffer is its write queue).
        if m.attached.is_some() && self.direct {
            check!(front <= sent + 1, "dispatches {}..{front} left the replay buffer unwritten", sent + 1);
        }
        if let (Some(_), Some(w)) = (&m.attached, &self.wire) {
            check!(w.pipe.write_waiters() <= 1, "{} tasks wait to write one socket", w.pipe.write_waiters());
        }
        Ok(())
    }

    /// Right after a dispatch was recorded: the buffer is over a bound
    /// only if its front was not handed to the socket (`keep` and later).
    fn check_bounds(&self, keep: u64, now: Instant) -> Result<(), String> {
        let st = self.state();
        let l = &self.limits;
        if let Some((front, _, at)) = st.replay.front() {
            let age = now.duration_since(*at);
            let over = st.replay.len() > l.replay_max_events || st.replay_bytes > l.replay_max_bytes || age > l.replay_max_age;
            if over {
                tally(|t| t.kept_unwritten += 1);
            }
            check!(
                !over || *front >= keep,
                "the replay buffer holds {} dispatches, {} bytes, the oldest {age:?} old, from {front}, which was written (first unwritten {keep})",
                st.replay.len(),
                st.replay_bytes
            );
        }
        Ok(())
    }

    /// After a step, direct mode: a socket above the slow-consumer bounds at
    /// a write is closed (at once above the hard cap, after the grace period
    /// above `max_pending_bytes`).
    fn track_backlog(&mut self, write: bool) -> Result<(), String> {
        if !self.direct || self.m.attached.is_none() {
            return Ok(());
        }
        let (left, _) = self.unwritten()?;
        let now = now();
        let l = self.limits.clone();
        let a = self.m.attached.as_mut().expect("attached");
        if left == 0 {
            a.clear_at = now;
        }
        // The code's measure leaves out the rest of a partly written control frame.
        let least = left.saturating_sub(ack_frame_len());
        if least <= l.max_pending_bytes {
            a.over_since = None;
        } else if write {
            check!(
                least <= l.max_pending_hard_bytes,
                "{left} bytes queued, above the hard cap {}, and still open",
                l.max_pending_hard_bytes
            );
            let since = *a.over_since.get_or_insert(now);
            check!(
                now.duration_since(since) < l.slow_consumer_grace,
                "{left} bytes queued (bound {}) for {:?} (grace {:?}), and still open",
                l.max_pending_bytes,
                now.duration_since(since),
                l.slow_consumer_grace
            );
        }
        Ok(())
    }

    /// One line of the real state, for `PROPS_TRACE=1`.
    fn describe(&self) -> String {
        let st = self.state();
        format!(
            "session {} seq {} sent {} acked {} replay {:?} attached {} ended {} | client saw {} read {:?}",
            self.s.id,
            st.seq,
            st.sent,
            st.acked,
            st.replay.front().map(|(q, _, _)| *q..=st.seq),
            st.conn.is_some(),
            st.ended,
            self.seen,
            self.wire.as_ref().map(|w| (w.pipe.read_len(), w.pipe.written_len(), w.pipe.server_closed())),
        )
    }

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        if trace() {
            eprintln!("{op:?}");
        }
        self.had_socket = self.m.attached.is_some();
        tally(|t| t.steps += 1);
        match op {
            Op::Write(batch) => self.write(batch).await?,
            Op::Read(n) => self.read(n.unwrap_or(usize::MAX)).await?,
            Op::Drain => self.drain().await?,
            Op::Heartbeat { claim, qos } => self.heartbeat(*claim, *qos).await?,
            Op::Drop => self.drop_socket().await?,
            Op::Resume { claim, keep_old } => self.resume(*claim, *keep_old).await?,
            Op::Advance(ms) => self.advance(*ms).await?,
        }
        if trace() {
            eprintln!("    {}", self.describe());
        }
        self.sync(self.had_socket)?;
        self.track_backlog(matches!(op, Op::Write(_)))
    }

    /// A delivery worker's batch: `write_dispatch` for each, then `flush`.
    async fn write(&mut self, batch: &[(Kind, usize)]) -> Result<(), String> {
        let now = now();
        for &(kind, size) in batch {
            let w = self.next_write();
            let body = body(w, size);
            let attached = self.m.attached.is_some();
            let keep = if attached { self.sent() + 1 } else { u64::MAX };
            self.s.write_dispatch(kind.name(), &body, now);
            if self.m.ended {
                continue;
            }
            self.m.record(&self.limits, Entry { name: kind.name(), w: Some(w), body, at: now }, keep);
            self.check_bounds(keep, now)?;
            self.observe_close()?;
            self.sync(attached)?;
        }
        self.s.flush();
        settle().await;
        if self.wire.as_ref().is_some_and(|w| w.pipe.full()) {
            tally(|t| t.partial_writes += 1);
        }
        self.observe_close()
    }

    async fn read(&mut self, n: usize) -> Result<(), String> {
        let Some(w) = &self.wire else { return Ok(()) };
        w.pipe.read(n);
        settle().await;
        self.observe_close()?;
        self.consume()
    }

    /// The client reads until nothing more comes; then it has everything
    /// (or its socket was closed, with the close frame last).
    async fn drain(&mut self) -> Result<(), String> {
        let Some(pipe) = self.wire.as_ref().map(|w| w.pipe.clone()) else { return Ok(()) };
        loop {
            let before = (pipe.read_len(), pipe.written_len());
            pipe.read(usize::MAX);
            settle().await;
            self.observe_close()?;
            self.consume()?;
            if (pipe.read_len(), pipe.written_len()) == before {
                break;
            }
        }
        let w = self.wire.as_ref().expect("wire");
        if self.m.attached.is_some() {
            check!(w.last == self.m.seq(), "drained, the client has dispatches up to {} of {}", w.last, self.m.seq());
            if self.direct {
                check!(self.unwritten()?.0 == 0, "drained, {} bytes are still queued", self.unwritten()?.0);
            }
        } else if let Some(code) = w.closed_with {
            check!(pipe.server_closed(), "drained, a socket closed with {code} is not shut down");
            let last = w.frames.last().map(|(_, f)| f);
            check!(matches!(last, Some(Frame::Close(c)) if *c == code), "drained, a socket closed with {code} ended with {last:?}");
        }
        Ok(())
    }

    async fn heartbeat(&mut self, claim: Claim, qos: bool) -> Result<(), String> {
        let Some(w) = &self.wire else { return Ok(()) };
        let d = claim.of(self.seen);
        let payload = match (qos, d) {
            (true, Some(s)) => format!(r#"{{"op":40,"d":{{"seq":{s}}}}}"#),
            (true, None) => r#"{"op":40,"d":null}"#.to_string(),
            (false, Some(s)) => format!(r#"{{"op":1,"d":{s}}}"#),
            (false, None) => r#"{"op":1,"d":null}"#.to_string(),
        };
        // Where the session is when it reads the heartbeat: a client cannot
        // acknowledge what was not handed to its socket.
        let sent = self.sent();
        let delivered = w.pipe.send(&client_text(payload.as_bytes()));
        settle().await;
        if delivered && self.m.attached.is_some() {
            let m = &mut self.m;
            let a = m.attached.as_mut().expect("attached");
            a.last_heartbeat = now();
            a.acks += 1;
            if let (false, Some(s)) = (qos, d) {
                tally(|t| {
                    t.acknowledged += u64::from(s.min(sent) >= m.oldest);
                    t.clamped_acks += u64::from(s > sent);
                });
                let s = s.min(sent);
                m.acked = m.acked.max(s);
                m.oldest = m.oldest.max(s + 1);
            }
        }
        self.observe_close()
    }

    /// The client's connection breaks: the session reads EOF and detaches.
    async fn drop_socket(&mut self) -> Result<(), String> {
        let Some(w) = self.wire.take() else { return Ok(()) };
        w.pipe.close();
        settle().await;
        if self.m.attached.is_some() {
            self.m.detach(now());
        }
        Ok(())
    }

    async fn resume(&mut self, claim: Claim, keep_old: bool) -> Result<(), String> {
        if !keep_old {
            self.drop_socket().await?;
            self.sync(self.had_socket)?;
        }
        let seq = claim.of(self.seen);
        let expected = self.m.can_resume(seq);
        let (pipe, conn) = self.conn()?;
        let r = Resume { token: String::new(), session_id: self.s.id.to_string(), seq };
        let resumed = super::resume(&self.node, &self.table, conn, &r, self.s.user_id).is_ok();
        check!(
            resumed == expected,
            "RESUME from {seq:?} {}; the model says {} (seq {}, acked {}, replay from {}, ended {})",
            if resumed { "accepted" } else { "refused" },
            if expected { "it can" } else { "it cannot" },
            self.m.seq(),
            self.m.acked,
            self.m.oldest,
            self.m.ended
        );
        tally(|t| match (resumed, seq.unwrap_or(0)) {
            (true, _) => {
                t.resumed += 1;
                t.resumed_replacing += u64::from(self.m.attached.is_some());
            }
            (false, _) if self.m.ended => t.refused_ended += 1,
            (false, s) if s > self.m.seq() => t.refused_ahead += 1,
            (false, s) if s < self.m.acked => t.refused_below_ack += 1,
            (false, _) => t.refused_trimmed += 1,
        });
        if !resumed {
            // op 9: the client gives the new socket up; an honest client IDENTIFYs.
            pipe.close();
            if let Claim::Seen = claim {
                return self.identify().await;
            }
            return Ok(());
        }
        // A socket still attached was replaced (4000); the client left it.
        if let Some(old) = self.wire.take() {
            old.pipe.close();
        }
        let now = now();
        let from = seq.unwrap_or(0);
        self.m.attached = Some(Attached { base: from, last_heartbeat: now, acks: 0, over_since: None, clear_at: now });
        self.m.detached_at = None;
        self.had_socket = true;
        let mut wire = Wire::new(pipe, self.p.transport, from);
        wire.resumed_at = Some(self.m.seq());
        self.wire = Some(wire);
        self.seen = from;
        // Direct sockets are handed the replay as they write it; compressed ones get it framed at once.
        let keep = if self.direct { from + 1 } else { self.m.seq() + 1 };
        let resumed = Entry { name: "RESUMED", w: None, body: Bytes::from_static(RESUMED_BODY), at: now };
        self.m.record(&self.limits, resumed, keep);
        settle().await;
        self.observe_close()
    }

    /// Time passes and the sweeper runs: a socket without a heartbeat for
    /// the timeout is closed with 4009; a session detached for longer than
    /// the resume window ends.
    async fn advance(&mut self, ms: u64) -> Result<(), String> {
        let t = now() + Duration::from_millis(ms);
        set_clock(Some(t));
        let hb = Duration::from_millis(self.p.heartbeat_timeout_ms);
        let window = Duration::from_millis(self.p.resume_window_ms);
        super::lifecycle::sweep(&self.node, &self.table, t, hb, window, Duration::MAX);
        if let Some(a) = &self.m.attached {
            if t.duration_since(a.last_heartbeat) > hb {
                tally(|t| t.heartbeat_timeouts += 1);
                self.m.detach(t);
                if let Some(w) = self.wire.as_mut() {
                    w.closed_with = Some(protocol::CloseCode::SessionTimedOut.code());
                }
            }
        } else if !self.m.ended && self.m.detached_at.is_some_and(|d| t.duration_since(d) > window) {
            self.m.ended = true;
            self.m.oldest = self.m.seq() + 1;
            tally(|t| t.windows_expired += 1);
        }
        settle().await;
        self.observe_close()
    }

    /// The end of a case: a detached client RESUMEs from what it saw (or
    /// IDENTIFYs when refused) and reads everything.
    async fn finish(&mut self) -> Result<(), String> {
        for _ in 0..3 {
            self.had_socket = self.m.attached.is_some();
            if self.m.attached.is_none() {
                self.resume(Claim::Seen, false).await?;
                self.sync(self.had_socket)?;
            }
            self.drain().await?;
            self.sync(self.had_socket)?;
            if self.m.attached.is_some() {
                break;
            }
        }
        Ok(())
    }

    async fn cleanup(&mut self) {
        if let Some(w) = self.wire.take() {
            w.pipe.close();
        }
        for s in self.sessions.drain(..) {
            s.end(&self.node);
        }
        settle().await;
    }
}

/// A new session, not started yet (IDENTIFY's result).
fn new_session(delivery: &Arc<Delivery>) -> Arc<SessionHandle> {
    let n = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    SessionHandle::new(format!("props{n:08}").into(), UserId(n), false, Intents::ALL, 50, Vec::new(), delivery)
}

async fn run_case(node: &(Arc<Node>, Arc<crate::Sessions>), p: &Params, ops: &[Op]) -> Result<(), String> {
    set_clock(Some(Instant::now()));
    let mut h = Harness::new(node, p).await.map_err(|e| format!("IDENTIFY: {e}"))?;
    let mut result = Ok(());
    for (i, op) in ops.iter().enumerate() {
        if let Err(e) = h.step(op).await {
            result = Err(format!("step {i}, {op:?}: {e}"));
            break;
        }
    }
    if result.is_ok() {
        result = h.finish().await.map_err(|e| format!("at the end (resume, drain): {e}"));
    }
    h.cleanup().await;
    set_clock(None);
    result
}

/// Prints every step of every case (`PROPS_TRACE=1`, with `PROPTEST_CASES=1` to replay one).
fn trace() -> bool {
    std::env::var_os("PROPS_TRACE").is_some()
}

/// Random sequences of writes, reads, heartbeats, drops, RESUMEs and time
/// against the model (see the module's doc).
#[test]
fn sessions_agree_with_the_model() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let node = rt.block_on(async {
        let store = Arc::new(store::sqlite::SqliteStore::open(dir.path(), &Default::default()).await.expect("store"));
        let mut config = config::Config::default();
        config.gateway.client_events_per_window = u32::MAX;
        let table = Arc::new(crate::Sessions::default());
        (guild::local_node(config, store, table.clone()), table)
    });
    // 256 cases unless PROPTEST_CASES says otherwise; a random run unless
    // PROPTEST_RNG_SEED fixes it (a failure prints the seed to replay).
    let mut config = ProptestConfig { failure_persistence: None, ..ProptestConfig::default() };
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => rand::random(),
    };
    config.rng_seed = RngSeed::Fixed(seed);
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let strategy = (params(), proptest::collection::vec(op(), 1..=200));
    let result = runner.run(&strategy, |(p, ops)| rt.block_on(run_case(&node, &p, &ops)).map_err(TestCaseError::fail));
    match result {
        Ok(()) => {
            let t = TALLY.with(|t| t.borrow().clone());
            eprintln!("{t:#?}");
            // Each outcome happens hundreds of times in 256 cases; a run
            // without one tests less than it says.
            if cases >= 256 {
                let reached = [
                    ("partial writes", t.partial_writes),
                    ("dispatches replayed after RESUME", t.replayed),
                    ("entries trimmed for a bound", t.trimmed),
                    ("written own dispatches forgotten", t.forgotten),
                    ("bounds passed by unwritten entries", t.kept_unwritten),
                    ("heartbeats acknowledging", t.acknowledged),
                    ("heartbeats claiming more than written", t.clamped_acks),
                    ("RESUMEs replacing a socket", t.resumed_replacing),
                    ("RESUMEs refused below the acknowledged", t.refused_below_ack),
                    ("RESUMEs refused after trimming", t.refused_trimmed),
                    ("RESUMEs refused ahead of seq", t.refused_ahead),
                    ("RESUMEs refused after the window", t.refused_ended),
                    ("slow consumers closed", t.slow_closes),
                    ("slow consumers closed above the hard cap", t.hard_cap_closes),
                    ("close frames read", t.close_frames),
                    ("heartbeat timeouts", t.heartbeat_timeouts),
                ];
                let missed: Vec<_> = reached.iter().filter(|(_, n)| *n == 0).map(|(what, _)| *what).collect();
                assert!(missed.is_empty(), "no case reached: {missed:?}");
            }
        }
        Err(TestError::Fail(why, (p, ops))) => {
            let steps: Vec<String> = ops.iter().enumerate().map(|(i, op)| format!("  {i:3}: {op:?}")).collect();
            panic!("{why}\nminimal case (PROPTEST_RNG_SEED={seed} replays the run):\n{p:#?}\n{}", steps.join("\n"));
        }
        Err(e) => panic!("{e} (PROPTEST_RNG_SEED={seed})"),
    }
}

/// A backed-up socket has one flusher. A flusher whose write was partial
/// again used to loop *and* hand over to a new flusher (`flush_locked`
/// spawns one), so each time the socket became writable every waiting
/// flusher doubled: 2^n tasks after n partial writes.
#[tokio::test(flavor = "current_thread")]
async fn a_backed_up_socket_has_one_flusher() {
    let limits = Limits { max_pending_bytes: 1 << 20, ..Limits::from_config(&config::GatewayConfig::default()) };
    let delivery = Delivery::start(1, Nice { base: 0, burst: 0 }, limits, tokio::runtime::Handle::current(), TaskTracker::new());
    let s = new_session(&delivery);
    let pipe = Arc::new(Pipe::new(100));
    s.attach_for_bench(Conn::pipe(pipe.clone(), Transport::None, &CompressParams::default()).unwrap());
    let body = body(1, 3000);
    s.write_dispatch("MESSAGE_CREATE", &body, now());
    s.flush();
    settle().await;
    let mut waiters = vec![pipe.write_waiters()];
    for _ in 0..10 {
        pipe.read(100);
        settle().await;
        waiters.push(pipe.write_waiters());
    }
    assert!(waiters.iter().all(|&n| n == 1), "tasks waiting to write after each partial write: {waiters:?}");
    // And the socket drains: the client gets the whole frame.
    while pipe.read(usize::MAX) > 0 {
        settle().await;
    }
    assert_eq!(pipe.written_len(), dispatch_frame_len("MESSAGE_CREATE", 1, body.len()));
    assert_eq!(pipe.write_waiters(), 0);
}
