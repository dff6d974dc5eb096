//! Sessions without a task of their own.
//!
//! A session's state (sequence, replay buffer, current socket) lives behind
//! its handle's lock. Whoever has something for it writes there: delivery
//! workers frame dispatches and write the socket; the node's reader task
//! (`crate::reader`), which waits on every session's socket in one epoll
//! set, reads into a per-thread scratch buffer, handles the client's frames
//! and writes a backed-up socket again once it drains; RESUME swaps the
//! socket in. An idle session is its state and a slot in the reader; no
//! session has a task. One sweeper per node enforces heartbeat timeouts and
//! resume windows.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use protocol::{ActorKey, CloseCode};

use super::socket::{Conn, ReadStatus};
use super::{Dispatch, SessionHandle};
use node::presence::Presence;
use node::route::Subscription;
use node::Node;

mod frames;
mod lifecycle;
#[cfg(test)]
mod props;

pub use lifecycle::{resume, start, sweeper};

/// The clock of session state (replay ages, heartbeats, resume windows,
/// slow-consumer grace): `Instant::now()`. Under this crate's unit tests the
/// state-machine test (`props`) sets the time of its own thread instead.
#[cfg(not(test))]
#[inline(always)]
fn now() -> Instant {
    Instant::now()
}
#[cfg(test)]
use props::now;

/// Everything IDENTIFY established.
pub struct Identified {
    pub handle: Arc<SessionHandle>,
    /// READY's `d`.
    pub ready: Bytes,
    pub presence: Presence,
}

/// A session's mutable state, behind `SessionHandle`'s lock.
#[derive(Default)]
pub struct SessionState {
    /// The current socket; `None` while detached (waiting for RESUME).
    conn: Option<Conn>,
    /// Bumped whenever the socket changes, so a reader or flusher of an old
    /// socket knows to stop.
    gen: u32,
    /// Last sequence number assigned.
    seq: u64,
    /// Last dispatch handed to the current socket: written (direct mode,
    /// where the replay buffer is the write queue) or framed into its
    /// buffer (compressed sockets).
    sent: u64,
    /// Direct mode: bytes of the frames of dispatches `sent + 1 ..= seq`.
    unsent_bytes: usize,
    /// Everything at or below this was acknowledged; resuming below it is refused.
    acked: u64,
    /// Dispatches the client has not acknowledged, for RESUME; bounded by
    /// count, age and bytes, trimmed at every heartbeat (a client's
    /// heartbeat carries the last sequence it received).
    replay: VecDeque<(u64, Dispatch, Instant)>,
    replay_bytes: usize,
    /// When the socket went away (the resume window runs from here).
    detached_at: Option<Instant>,
    ended: bool,
    /// A delivery worker has framed into `conn` and will flush it.
    dirty: bool,
    /// A task is waiting for the socket to become writable.
    flushing: bool,
    /// GUILD_CREATEs a new session's READY still waits for before the
    /// socket is written (`gateway.ready_hold_ms`); 0: not waiting. A byte
    /// (it fits the handle's padding): past 255 guilds the rest of them
    /// are written as they come.
    ready_held: u8,
    /// Since when the socket's backlog has been above the slow-consumer bound.
    backlogged_since: Option<Instant>,
    /// Handed over to another node (a RESUME there): every dispatch goes
    /// there, in order, instead of to a socket here.
    forward: Option<Forward>,
    /// Taken over from another node, while its guild subscriptions move
    /// here: what arrives directly waits (see [`Holding`]).
    holding: Option<Box<Holding>>,
    /// The guilds the client opened (op 14/37), the latest last, at most
    /// `gateway.open_guilds_max`: opening one more tells the one opened
    /// longest ago that it is no longer open (a large guild's actor makes
    /// the session passive there again).
    pub(crate) open_guilds: Vec<protocol::GuildId>,
}

/// A session taken over from another node subscribes to its guilds from
/// here; until each guild's actor has switched it over, that guild's
/// earlier events still come through the old node (forwarded, in order).
/// Dispatches that arrive directly meanwhile wait here, and go out once
/// every guild's [`fanout::MOVED`] marker has come through the old
/// node behind everything it forwarded: no guild's events are reordered,
/// lost or doubled. Bounded in time by `cluster.takeover_timeout_ms` (the
/// sweeper ends a session whose guilds never finish moving).
pub struct Holding {
    /// Guilds whose marker has not come yet.
    moving: Vec<ActorKey>,
    held: Vec<Dispatch>,
    since: Instant,
}

/// Sends one dispatch of a handed-over session to the node that holds it now.
pub type Forward = Box<dyn Fn(&'static str, &Bytes) + Send + Sync>;

/// What a node hands over with a session: where its sequence is, and the
/// dispatches the client has not seen.
pub struct HandOver {
    pub seq: u64,
    pub replay: Vec<(u64, Dispatch)>,
    pub actors: Vec<ActorKey>,
}

/// How a batch of client frames ends the connection, if it does.
enum Outcome {
    /// Close the socket with this code (or without a frame); the session stays resumable.
    Detach(Option<Close>),
    /// Close with this code and end the session.
    End(Close),
}

/// The close frame the server sends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Close {
    /// One of the gateway's own codes.
    Code(CloseCode),
    /// The client closed first: answer with its own code (or none), as
    /// RFC 6455 asks and Discord does.
    Echo(Option<u16>),
}

impl From<CloseCode> for Close {
    fn from(c: CloseCode) -> Close {
        Close::Code(c)
    }
}

impl SessionHandle {
    /// Frames one dispatch into the session (recording it for replay).
    /// Returns (framed into a socket's buffer, first frame since the last flush).
    /// `now` is the worker's clock for the batch (one clock read per batch, not per delivery).
    pub(crate) fn write_dispatch(&self, name: &'static str, body: &Bytes, now: Instant) -> (bool, bool) {
        let mut st = self.lock();
        if st.ended {
            return (false, false);
        }
        if let Some(f) = &st.forward {
            f(name, body);
            return (false, false);
        }
        if let Some(h) = st.holding.as_mut() {
            h.held.push(Dispatch { name, body: body.clone() });
            return (false, false);
        }
        if name == fanout::MOVED {
            // A marker for a session that is not moving (any more): not for the client.
            return (false, false);
        }
        self.frame(&mut st, name, body, now)
    }

    /// `write_dispatch` for a dispatch the node that held this session
    /// before forwarded: written at once (it comes before anything held),
    /// or, for a [`fanout::MOVED`] marker, the end of one guild's
    /// move; after the last one, what was held goes out.
    pub(crate) fn write_forwarded(&self, name: &'static str, body: &Bytes, now: Instant) -> (bool, bool) {
        let mut st = self.lock();
        if st.ended {
            return (false, false);
        }
        if let Some(f) = &st.forward {
            f(name, body);
            return (false, false);
        }
        if name != fanout::MOVED {
            return self.frame(&mut st, name, body, now);
        }
        let Some(h) = st.holding.as_mut() else { return (false, false) };
        let key = std::str::from_utf8(body).ok().and_then(|g| g.parse().ok()).map(ActorKey::from_raw);
        h.moving.retain(|k| Some(*k) != key);
        if !h.moving.is_empty() {
            return (false, false);
        }
        let held = std::mem::take(&mut h.held);
        st.holding = None;
        let (mut framed, mut first) = (false, false);
        for d in held {
            let (ok, f) = self.frame(&mut st, d.name, &d.body, now);
            framed |= ok;
            first |= f;
        }
        (framed, first)
    }

    /// [`fanout::Recipient::frame_if_starting`]: frames a dispatch on the
    /// caller's thread while the READY is held, and writes everything once
    /// it is the last GUILD_CREATE the READY waited for.
    pub(crate) fn frame_starting(self: &Arc<Self>, name: &'static str, body: &Bytes) -> bool {
        let mut st = self.lock();
        if st.ready_held == 0 || st.ended || st.forward.is_some() || st.holding.is_some() {
            return false;
        }
        // `dirty` says a delivery worker will flush this session; none will
        // for what is framed here.
        let dirty = st.dirty;
        let (framed, _) = self.frame(&mut st, name, body, Instant::now());
        st.dirty = dirty;
        if framed {
            self.delivery().shared.stats.delivered.fetch_add(1, Ordering::Relaxed);
        }
        if st.ready_held == 0 {
            self.flush_locked(&mut st);
        }
        true
    }

    /// Records one dispatch and frames it into the socket, if any.
    fn frame(&self, st: &mut SessionState, name: &'static str, body: &Bytes, now: Instant) -> (bool, bool) {
        st.record(&self.delivery().shared.limits, Dispatch { name, body: body.clone() }, now);
        if st.ready_held > 0 && name == "GUILD_CREATE" {
            // The last one the READY waited for: the next flush writes all.
            st.ready_held -= 1;
        }
        if st.flushing && st.is_slow(&self.delivery().shared) {
            self.close_slow(st);
        }
        if st.conn.is_none() || !st.queue_last() {
            return (false, false);
        }
        let first = !st.dirty;
        st.dirty = true;
        (true, first)
    }

    /// Writes what a delivery worker framed; returns how many frames were
    /// queued (written now, or left to the socket's flusher task).
    pub(crate) fn flush(self: &Arc<Self>) -> usize {
        let mut st = self.lock();
        st.dirty = false;
        let frames = st.conn.as_ref().map_or(0, Conn::queued_frames) + (st.seq - st.sent) as usize;
        self.flush_locked(&mut st);
        frames
    }

    /// Writes the socket once; a backed-up socket is written again when it
    /// drains (by the node's reader; a test's pipe by a flusher task);
    /// closes a slow consumer (resumably).
    fn flush_locked(self: &Arc<Self>, st: &mut SessionState) {
        if st.flushing || st.ready_held > 0 || !st.has_output() {
            return;
        }
        let shared = &self.delivery().shared;
        match st.try_write() {
            Ok(true) => {
                shared.stats.writes.fetch_add(1, Ordering::Relaxed);
                st.backlogged_since = None;
            }
            Ok(false) => {
                shared.stats.pending_bytes_max.fetch_max(st.backlog(), Ordering::Relaxed);
                if st.is_slow(shared) {
                    return self.close_slow(st);
                }
                st.flushing = true;
                if let Err(e) = st.conn.as_ref().map_or(Ok(()), Conn::want_writable) {
                    tracing::debug!(error = %e, "a backed-up socket not watched for room; closed");
                    st.detach(self, None);
                } else {
                    #[cfg(test)]
                    if let Some(pipe) = st.conn.as_ref().and_then(Conn::pipe_of) {
                        let (me, gen) = (self.clone(), st.gen);
                        shared.spawn(async move { me.flusher(pipe, gen).await });
                    }
                }
            }
            Err(_) => st.detach(self, None),
        }
    }

    /// Closes a slow consumer's socket with 4000; the session stays resumable.
    fn close_slow(&self, st: &mut SessionState) {
        let shared = &self.delivery().shared;
        shared.stats.slow_consumer_closes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(session = %self.id, "slow consumer closed");
        st.detach(self, Some(CloseCode::UnknownError.into()));
    }

    /// The node's reader found socket generation `gen` of this session
    /// readable (or closed) and/or writable: a backed-up socket is written
    /// again, and what arrived is read and handled (heartbeats answered,
    /// other ops sent on), all in the reader's task.
    pub(crate) fn on_ready(self: &Arc<Self>, node: &Arc<Node>, gen: u32, readable: bool, writable: bool) {
        let end = {
            let mut st = self.lock();
            if st.gen != gen || st.ended {
                return;
            }
            if writable && st.flushing {
                st.flushing = false;
                self.flush_locked(&mut st);
            }
            if !readable || st.gen != gen {
                return;
            }
            match self.read_once(node, &mut st) {
                Some(end) => end,
                None => return,
            }
        };
        if end {
            self.end(node);
        }
    }

    /// Reads what the socket has and handles it, under the lock. `None`
    /// while the socket stays; `Some(true)` when the session ends (the
    /// caller calls `end` without the lock), `Some(false)` when the socket
    /// was taken out.
    fn read_once(self: &Arc<Self>, node: &Arc<Node>, st: &mut SessionState) -> Option<bool> {
        let conn = st.conn.as_mut()?;
        // Nothing kept between reads: an idle session's list would hold
        // 128 bytes for its next heartbeat (issue #31's memory diet); a
        // read that parses frames allocates one.
        let mut frames = Vec::new();
        let outcome = match conn.read_frames(node.config.gateway.max_client_payload, &mut frames) {
            Err(super::socket::ConnError::Io(_)) => Some(Outcome::Detach(None)),
            Err(_) => Some(Outcome::Detach(Some(CloseCode::DecodeError.into()))),
            Ok(status) => match (self.handle_frames(node, st, &mut frames), status) {
                (None, ReadStatus::Eof) => Some(Outcome::Detach(None)),
                (o, _) => o,
            },
        };
        match outcome {
            Some(Outcome::Detach(code)) => {
                st.detach(self, code);
                Some(false)
            }
            Some(Outcome::End(code)) => {
                st.detach(self, Some(code));
                Some(true)
            }
            None => {
                self.flush_locked(st);
                None
            }
        }
    }

    /// A test pipe's flusher: waits for room and writes once. Still backed
    /// up, `flush_locked` hands it to a new flusher, so one task waits per
    /// socket (looping here as well left one more waiting task per partial
    /// write until the socket drained).
    #[cfg(test)]
    async fn flusher(self: Arc<Self>, pipe: Arc<super::socket::pipe::Pipe>, gen: u32) {
        let writable = pipe.writable().await;
        let mut st = self.lock();
        if st.gen != gen {
            return;
        }
        st.flushing = false;
        match writable {
            Ok(()) => self.flush_locked(&mut st),
            Err(_) => st.detach(&self, None),
        }
    }

    /// A test pipe's reader: what the node's reader does for a real socket.
    #[cfg(test)]
    async fn read_loop(self: Arc<Self>, node: Arc<Node>, pipe: Arc<super::socket::pipe::Pipe>, gen: u32) {
        loop {
            let readable = Box::pin(pipe.readable()).await;
            let end = {
                let mut st = self.lock();
                if st.gen != gen || st.ended {
                    return;
                }
                if readable.is_err() {
                    return st.detach(&self, None);
                }
                match self.read_once(&node, &mut st) {
                    None => continue,
                    Some(end) => end,
                }
            };
            if end {
                self.end(&node);
            }
            return;
        }
    }

    /// What subscribing this session to a guild sends its actor.
    pub fn subscription(&self, node: &Node) -> Subscription {
        Subscription {
            session: self.session_ref(node),
            info: fanout::Recipient::sub_info(self),
            presence: Some(node.presences.get(self.user_id)),
        }
    }

    /// This session as guild actors name it (by the node it started on).
    pub fn session_ref(&self, node: &Node) -> fanout::SessionRef {
        fanout::SessionRef { node: node.id, id: self.id.clone() }
    }

    /// Bytes queued for the socket now.
    pub fn pending_bytes(&self) -> usize {
        let st = self.lock();
        st.conn.as_ref().map_or(0, Conn::pending_len) + st.unsent_bytes
    }

    /// Dispatches and body bytes held for RESUME.
    pub fn replay_size(&self) -> (usize, usize) {
        let st = self.lock();
        (st.replay.len(), st.replay_bytes)
    }

    /// Puts `conn` in as the session's socket without a reader (benchmarks
    /// of the delivery path use a sink connection).
    pub fn attach_for_bench(&self, conn: Conn) {
        self.lock().attach(conn);
    }

    /// Takes every dispatch recorded for replay, oldest first (tests and benchmarks).
    pub fn take_replay(&self) -> Vec<Dispatch> {
        let mut st = self.lock();
        st.replay_bytes = 0;
        std::mem::take(&mut st.replay).into_iter().map(|(_, d, _)| d).collect()
    }
}

impl SessionState {
    /// Assigns the next sequence and keeps the dispatch for replay.
    /// Assigns the next sequence number to `d` and keeps it for RESUME
    /// (and, in direct mode, as the socket's write queue). Trims the
    /// replay buffer to its bounds, but never below a dispatch the current
    /// socket has not been handed yet: those are bounded by the
    /// slow-consumer rule instead.
    fn record(&mut self, limits: &fanout::Limits, d: Dispatch, now: Instant) -> u64 {
        self.seq += 1;
        self.replay_bytes += d.body.len();
        if let Some(conn) = self.conn.as_mut().filter(|c| c.is_direct()) {
            self.unsent_bytes += super::socket::dispatch_frame_len(d.name, self.seq, d.body.len());
            conn.mark_dispatch(self.seq);
        }
        self.replay.push_back((self.seq, d, now));
        let keep = if self.conn.is_some() { self.sent + 1 } else { u64::MAX };
        while self.replay.front().is_some_and(|(q, _, t)| {
            *q < keep
                && (self.replay.len() > limits.replay_max_events
                    || self.replay_bytes > limits.replay_max_bytes
                    || now.duration_since(*t) > limits.replay_max_age)
        }) {
            self.pop_replay();
        }
        self.seq
    }

    /// Hands the last recorded dispatch to the socket: nothing to do in
    /// direct mode (the next write frames it from the replay buffer);
    /// compressed sockets compress it into their buffer. False if it could
    /// not be framed.
    fn queue_last(&mut self) -> bool {
        let Some(conn) = self.conn.as_mut() else { return false };
        if !conn.is_direct() {
            let Some((seq, d, _)) = self.replay.back() else { return false };
            if conn.send_dispatch(d.name, *seq, &d.body).is_err() {
                return false;
            }
            self.sent = *seq;
            self.forget_written_own();
        }
        true
    }

    /// Whether the socket has anything to write.
    fn has_output(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.has_pending() || (c.is_direct() && self.sent < self.seq))
    }

    /// Writes as much as the socket takes; true when everything is written.
    fn try_write(&mut self) -> std::io::Result<bool> {
        let Some(conn) = self.conn.as_mut() else { return Ok(true) };
        let done = if conn.is_direct() {
            conn.flush_direct(&self.replay, &mut self.sent, self.seq, &mut self.unsent_bytes)
        } else {
            conn.try_flush()
        };
        self.forget_written_own();
        done
    }

    /// Drops the session's own bulky dispatches (READY, GUILD_CREATE,
    /// member chunks: bodies built for this session alone) from the front
    /// of the replay buffer once they are handed to the socket, rather than
    /// keeping them until the next heartbeat acknowledges them. A client
    /// that lost some of them cannot RESUME from before them (op 9, it
    /// IDENTIFYs again, as when any replay bound is passed). Measured: at
    /// the end of a 19,000-session identify ramp these ~9 KB per session
    /// were most of the server's memory until the first heartbeats.
    fn forget_written_own(&mut self) {
        while self
            .replay
            .front()
            .is_some_and(|(q, d, _)| *q <= self.sent && matches!(d.name, "READY" | "GUILD_CREATE" | "GUILD_MEMBERS_CHUNK"))
        {
            self.pop_replay();
        }
    }

    /// Bytes queued for the socket beyond the frame being written (about).
    fn backlog(&self) -> usize {
        self.conn.as_ref().map_or(0, |c| c.backlog_len() + self.unsent_bytes)
    }

    fn pop_replay(&mut self) {
        if let Some((_, d, _)) = self.replay.pop_front() {
            self.replay_bytes -= d.body.len();
        }
    }

    /// The client confirmed receiving everything up to `seq` (heartbeat `d`).
    fn acknowledge(&mut self, seq: u64) {
        // A client cannot have received what was not handed to its socket.
        let seq = seq.min(if self.conn.is_some() { self.sent } else { self.seq });
        self.acked = self.acked.max(seq);
        while self.replay.front().is_some_and(|(s, _, _)| *s <= seq) {
            self.pop_replay();
        }
        if self.replay.is_empty() {
            self.replay = VecDeque::new();
        } else if self.replay.capacity() > 64 && self.replay.capacity() > 4 * self.replay.len() {
            self.replay.shrink_to(self.replay.len() * 2);
        }
    }

    fn record_and_send(&mut self, limits: &fanout::Limits, d: Dispatch) {
        self.record(limits, d, now());
        if self.conn.is_some() && !self.queue_last() {
            tracing::debug!("dispatch could not be framed");
        }
    }

    /// Whether a client that saw up to `seq` can resume without a gap.
    fn can_resume(&self, seq: Option<u64>) -> bool {
        let seq = seq.unwrap_or(0);
        if self.ended || seq > self.seq || seq < self.acked {
            return false;
        }
        let oldest = self.replay.front().map(|(s, _, _)| *s).unwrap_or(self.seq + 1);
        seq + 1 >= oldest
    }

    /// Whether the socket's reader is too slow: its backlog has stayed above
    /// `max_pending_bytes` for the grace period (a RESUME's replay or one
    /// burst may pass the bound briefly), or passed the hard cap at once.
    fn is_slow(&mut self, shared: &fanout::Shared) -> bool {
        if self.conn.is_none() {
            return false;
        }
        let backlog = self.backlog();
        let l = &shared.limits;
        if backlog <= l.max_pending_bytes {
            self.backlogged_since = None;
            return false;
        }
        let now = now();
        let since = *self.backlogged_since.get_or_insert(now);
        backlog > l.max_pending_hard_bytes || now.duration_since(since) >= l.slow_consumer_grace
    }

    /// Puts the current socket, if it is still of generation `gen`, in
    /// the node's reader.
    fn register(&mut self, reader: &Arc<crate::reader::Reader>, s: &Arc<SessionHandle>, gen: u32) -> std::io::Result<()> {
        match self.conn.as_mut() {
            Some(conn) if self.gen == gen => conn.register(reader, s, gen, self.flushing),
            _ => Ok(()),
        }
    }

    /// Puts a socket in and returns its generation.
    /// Every dispatch recorded so far counts as handed to it; RESUME
    /// moves `sent` back to what the client has (see `replay_from`).
    fn attach(&mut self, mut conn: Conn) -> u32 {
        conn.mark_dispatch(self.seq);
        self.ready_held = 0;
        self.conn = Some(conn);
        self.sent = self.seq;
        self.unsent_bytes = 0;
        self.detached_at = None;
        self.new_socket_generation()
    }

    /// The attached socket gets every dispatch after `after` (RESUME; the
    /// caller checked `can_resume`): direct sockets write them from the
    /// replay buffer, compressed ones get them framed now.
    fn replay_from(&mut self, after: u64) {
        let Some(conn) = self.conn.as_mut() else { return };
        if conn.is_direct() {
            self.sent = after;
            self.unsent_bytes = self
                .replay
                .iter()
                .filter(|(q, _, _)| *q > after)
                .map(|(q, d, _)| super::socket::dispatch_frame_len(d.name, *q, d.body.len()))
                .sum();
            return;
        }
        for (seq, d, _) in self.replay.iter().filter(|(q, _, _)| *q > after) {
            if conn.send_dispatch(d.name, *seq, &d.body).is_err() {
                break;
            }
        }
    }

    /// The socket changed: readers and flushers of the old one stop, and its
    /// write bookkeeping is forgotten.
    fn new_socket_generation(&mut self) -> u32 {
        self.gen = self.gen.wrapping_add(1);
        self.dirty = false;
        self.flushing = false;
        self.backlogged_since = None;
        self.gen
    }

    /// Takes the socket out (closing it with `code`, if any); the session
    /// stays resumable for the resume window.
    fn detach(&mut self, s: &SessionHandle, code: Option<Close>) {
        let Some(mut conn) = self.conn.take() else { return };
        self.new_socket_generation();
        self.detached_at = Some(now());
        let (sent, last) = (self.sent, self.seq);
        self.unsent_bytes = 0;
        match code {
            None => conn.shutdown(),
            Some(code) => {
                if conn.is_direct() {
                    conn.cut_direct(&self.replay, sent, last);
                } else {
                    conn.discard_unsent();
                }
                match code {
                    Close::Code(c) => conn.queue_close(c),
                    Close::Echo(c) => conn.queue_close_echo(c),
                }
                match conn.try_flush() {
                    Ok(true) | Err(_) => conn.shutdown(),
                    // The close frame waits (briefly) behind a full socket.
                    Ok(false) => {
                        let linger = s.delivery().shared.limits.close_linger;
                        s.delivery().shared.spawn(async move { conn.finish(linger).await })
                    }
                }
            }
        }
    }
}
