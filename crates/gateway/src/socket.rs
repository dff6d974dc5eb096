//! One client socket of the gateway: reads frames into a per-thread scratch
//! buffer, queues outgoing frames in a buffer that exists only while there is
//! unsent data, and compresses per connection when asked.
//!
//! A `Conn` is owned by its connection task until IDENTIFY or RESUME, then
//! by the session's state (behind the session's lock), where delivery
//! workers append frames and write.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::compress::{CompressParams, Compressor, Transport};
use protocol::gateway::{dispatch_envelope_len, write_dispatch, write_dispatch_envelope, write_op};
use protocol::CloseCode;
use tokio::net::TcpStream;

use super::ws::{self, Incoming};

#[cfg(test)]
pub(crate) mod pipe;

/// Per-thread buffers: reads land here, and compressed or assembled frames
/// are staged here, so idle connections hold none.
struct Scratch {
    read: Vec<u8>,
    stage: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch { read: vec![0; 64 * 1024], stage: Vec::with_capacity(64 * 1024) });
}

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    #[error("bad frame: {0}")]
    Frame(#[from] ws::FrameError),
    #[error("compression: {0}")]
    Compress(#[from] protocol::compress::CompressError),
}

fn dispatch_payload_len(name: &str, seq: u64, body_len: usize) -> usize {
    dispatch_envelope_len(name, seq) + body_len + 1
}

/// Bytes of the WebSocket frame that carries dispatch `seq` (see `frame_dispatch`).
pub fn dispatch_frame_len(name: &str, seq: u64, body_len: usize) -> usize {
    let len = dispatch_payload_len(name, seq, body_len);
    len + ws::header_len(len)
}

/// Appends what precedes the shared body in a dispatch frame: the header
/// and the per-session envelope `{"op":0,"t":"NAME","s":SEQ,"d":`. The
/// frame ends with the body and a closing brace.
fn dispatch_prefix(out: &mut Vec<u8>, name: &str, seq: u64, body_len: usize) {
    ws::write_header(out, ws::OP_TEXT, dispatch_payload_len(name, seq, body_len));
    write_dispatch_envelope(out, name, seq);
}

/// Appends one uncompressed dispatch as a WebSocket text frame: header,
/// the per-session envelope, the shared body, and the closing brace.
pub fn frame_dispatch(out: &mut Vec<u8>, name: &str, seq: u64, body: &[u8]) {
    out.reserve(dispatch_frame_len(name, seq, body.len()));
    dispatch_prefix(out, name, seq, body.len());
    out.extend_from_slice(body);
    out.push(b'}');
}

/// Most bytes one direct write is offered (about the socket's send buffer;
/// what it does not take is rendered again next time).
const MAX_WRITE: usize = 64 * 1024;

/// How long a connection closed by the gateway itself (bad payload, rate
/// limit, timeout, before or outside a session) may take to send its close
/// frame and the client's echo. The frame is a few bytes; a client that has
/// not read it in this time is cut without it. Sessions' own closes use
/// `gateway.close_linger_ms` instead (config).
pub const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// A session's dispatches by sequence number, for direct writes: the
/// replay buffer, which holds every dispatch not yet written.
pub type ReplayQueue = VecDeque<(u64, super::Dispatch, Instant)>;

/// One counted gateway socket; the count drops when the `Conn` does.
pub struct ConnSlot(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl ConnSlot {
    /// Takes a slot unless `max` are in use.
    pub fn try_acquire(count: &std::sync::Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<ConnSlot> {
        use std::sync::atomic::Ordering;
        if count.fetch_add(1, Ordering::AcqRel) >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(ConnSlot(count.clone()))
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The socket under a `Conn`.
pub enum Sock {
    /// A connection before it is a session's: the handshake task's stream,
    /// registered with tokio.
    Tcp(Box<TcpStream>),
    /// A session's socket: no task and no tokio registration; the node's
    /// reader (`crate::reader`) waits on it.
    Session(SessionSock),
    /// Discards everything written (in-process benchmarks: no file descriptor).
    Sink,
    /// An in-memory socket whose other end is a test (see `pipe`).
    #[cfg(test)]
    Pipe(Arc<pipe::Pipe>),
}

/// A session's socket and its place in the node's reader (its slot, and
/// the reader, weakly; none yet while the reader is `Weak::new()`), which
/// it leaves before it closes. Flat, in 16 bytes: the session handle stays
/// in jemalloc's 512-byte class. (The stream is an `Option` only to move it
/// out of a type with a destructor; its niche makes that free.)
pub struct SessionSock {
    stream: Option<std::net::TcpStream>,
    slot: u32,
    reader: std::sync::Weak<crate::reader::Reader>,
}

impl SessionSock {
    fn stream(&self) -> &std::net::TcpStream {
        self.stream.as_ref().expect("a session socket's stream")
    }

    /// The stream, out of the reader.
    fn into_stream(mut self) -> std::net::TcpStream {
        self.release();
        self.stream.take().expect("a session socket's stream")
    }

    fn release(&mut self) {
        let reader = std::mem::take(&mut self.reader);
        if let Some(s) = self.stream.as_ref() {
            crate::reader::release(reader, self.slot, s.as_raw_fd());
        }
    }
}

impl Drop for SessionSock {
    fn drop(&mut self) {
        self.release();
    }
}

/// Encoded frames not yet accepted by a socket. Boxed in `Conn` and only
/// while there are some: an idle session's `Conn` holds 8 bytes for them
/// rather than 56, so its handle fits jemalloc's 448-byte class (issue
/// #31's memory diet).
#[derive(Default)]
struct Out {
    pending: Vec<u8>,
    /// The frames in `pending`, oldest first: length, and the last dispatch
    /// queued before it (direct writes send dispatches up to that one
    /// first). Lets a slow consumer's queue be cut at a frame boundary so
    /// its close frame still parses.
    frames: VecDeque<(u32, u64)>,
}

/// What a `Conn` without queued frames reads as its queue.
static NO_OUT: Out = Out { pending: Vec::new(), frames: VecDeque::new() };

pub struct Conn {
    /// Held for the socket's lifetime (counts toward the process's cap).
    _slot: Option<ConnSlot>,
    sock: Sock,
    /// Bytes of an incomplete frame carried between reads; none otherwise.
    /// Boxed on purpose: 8 bytes here rather than a `Vec`'s 24 keep the
    /// session handle in its 448-byte class, and the box exists only
    /// between the two reads of a split frame.
    #[allow(clippy::box_collection)]
    rbuf: Option<Box<Vec<u8>>>,
    reasm: ws::Reassembly,
    /// Frames not yet accepted by the socket; none (unallocated) when idle.
    out: Option<Box<Out>>,
    /// The head element of the outgoing stream (a frame of `Out::pending`
    /// or, in direct mode, a dispatch) may be partly written: this many
    /// bytes of it.
    head_sent: u32,
    /// The last dispatch queued (direct mode): frames queued now follow it.
    mark: u64,
    /// Boxed: most sockets have none (8 bytes here rather than 40).
    compressor: Option<Box<Compressor>>,
    /// Client-event rate limit window.
    window_start: Instant,
    window_events: u32,
    /// Last heartbeat (or connection start).
    pub last_heartbeat: Instant,
}

pub enum ReadStatus {
    Open,
    /// The peer closed the TCP stream.
    Eof,
}

impl Conn {
    /// `answer`: bytes of the HTTP answer not yet sent (the 101), written
    /// ahead of the first frame and with it; `leftover`: what the client
    /// sent after its request, read as the first frames.
    pub fn new(
        slot: ConnSlot,
        stream: TcpStream,
        answer: Vec<u8>,
        leftover: &[u8],
        transport: Transport,
        params: &CompressParams,
    ) -> Result<Conn, ConnError> {
        let c = Conn::with_sock(Some(slot), Sock::Tcp(Box::new(stream)), transport, params)?;
        let out = (!answer.is_empty()).then(|| Box::new(Out { frames: VecDeque::from([(answer.len() as u32, 0)]), pending: answer }));
        Ok(Conn { rbuf: (!leftover.is_empty()).then(|| Box::new(leftover.to_vec())), out, ..c })
    }

    /// A connection whose writes go nowhere (benchmarks of the delivery path).
    pub fn sink(transport: Transport, params: &CompressParams) -> Result<Conn, ConnError> {
        Conn::with_sock(None, Sock::Sink, transport, params)
    }

    /// A connection over an in-memory pipe whose client end is the test.
    #[cfg(test)]
    pub fn pipe(p: Arc<pipe::Pipe>, transport: Transport, params: &CompressParams) -> Result<Conn, ConnError> {
        Conn::with_sock(None, Sock::Pipe(p), transport, params)
    }

    fn with_sock(slot: Option<ConnSlot>, sock: Sock, transport: Transport, params: &CompressParams) -> Result<Conn, ConnError> {
        Ok(Conn {
            _slot: slot,
            sock,
            rbuf: None,
            reasm: ws::Reassembly::default(),
            out: None,
            head_sent: 0,
            mark: 0,
            compressor: Compressor::new(transport, params)?.map(Box::new),
            window_start: Instant::now(),
            window_events: 0,
            last_heartbeat: Instant::now(),
        })
    }

    /// Takes the socket off tokio for a session: from now on the node's
    /// reader waits on it once [`register`](Self::register)ed.
    pub fn into_session(mut self) -> io::Result<Conn> {
        if let Sock::Tcp(_) = self.sock {
            let Sock::Tcp(t) = std::mem::replace(&mut self.sock, Sock::Sink) else { unreachable!() };
            self.sock = Sock::Session(SessionSock { stream: Some((*t).into_std()?), slot: 0, reader: std::sync::Weak::new() });
        }
        Ok(self)
    }

    /// Puts a session's socket in the node's reader (sockets of other
    /// kinds have none).
    /// A socket that has `backed_up` is watched for room to write as well.
    pub(crate) fn register(
        &mut self,
        reader: &Arc<crate::reader::Reader>,
        s: &Arc<crate::SessionHandle>,
        gen: u32,
        backed_up: bool,
    ) -> io::Result<()> {
        if let Sock::Session(ss) = &mut self.sock {
            ss.slot = reader.register(ss.stream().as_raw_fd(), s, gen, backed_up)?;
            ss.reader = Arc::downgrade(reader);
        }
        Ok(())
    }

    /// A session's socket that backed up: the reader is to write it again
    /// when it drains (it watches only for reads until the first time).
    pub(crate) fn want_writable(&self) -> io::Result<()> {
        match &self.sock {
            Sock::Session(ss) => match (ss.reader.upgrade(), ss.stream.as_ref()) {
                (Some(r), Some(s)) => r.watch_writes(ss.slot, s.as_raw_fd()),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// The in-memory pipe under a test's connection.
    #[cfg(test)]
    pub(crate) fn pipe_of(&self) -> Option<Arc<pipe::Pipe>> {
        match &self.sock {
            Sock::Pipe(p) => Some(p.clone()),
            _ => None,
        }
    }

    /// Shuts both directions down now (the peer sees EOF).
    pub fn shutdown(&self) {
        self.sock.shutdown()
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    fn out(&self) -> &Out {
        self.out.as_deref().unwrap_or(&NO_OUT)
    }

    pub fn has_pending(&self) -> bool {
        !self.out().pending.is_empty()
    }

    /// Frames queued (the first may be partly written).
    pub fn queued_frames(&self) -> usize {
        self.out().frames.len()
    }

    pub fn pending_len(&self) -> usize {
        self.out().pending.len()
    }

    /// Queued bytes beyond the frame being written now: what a slow reader
    /// has let pile up (one large frame, e.g. a big GUILD_CREATE, is not
    /// slowness by itself).
    pub fn backlog_len(&self) -> usize {
        let o = self.out();
        let head = o.frames.front().map_or(0, |&(l, _)| l as usize).saturating_sub(self.head_sent as usize);
        o.pending.len() - head.min(o.pending.len())
    }

    /// Whether dispatches are written straight from the session's replay
    /// buffer (no compression: every session's frame is its envelope
    /// around the shared body) instead of being framed into `pending`.
    pub fn is_direct(&self) -> bool {
        self.compressor.is_none()
    }

    /// Direct mode: dispatch `seq` was queued; frames queued from now on follow it.
    pub fn mark_dispatch(&mut self, seq: u64) {
        self.mark = seq;
    }

    /// Reads whatever the socket has and parses complete frames into `out`.
    pub fn read_frames(&mut self, max_payload: usize, out: &mut Vec<Incoming>) -> Result<ReadStatus, ConnError> {
        // Frames left over from the handshake read come first.
        if let Some(r) = self.rbuf.as_mut() {
            let n = ws::parse(r, max_payload, &mut self.reasm, out)?;
            r.drain(..n);
            if r.is_empty() {
                self.rbuf = None;
            }
        }
        if let Sock::Sink = self.sock {
            return Ok(ReadStatus::Open);
        }
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            loop {
                match self.sock.try_read(&mut s.read) {
                    Ok(0) => return Ok(ReadStatus::Eof),
                    Ok(n) => {
                        match self.rbuf.as_mut() {
                            None => {
                                let used = ws::parse(&s.read[..n], max_payload, &mut self.reasm, out)?;
                                if used < n {
                                    self.rbuf = Some(Box::new(s.read[used..n].to_vec()));
                                }
                            }
                            Some(r) => {
                                r.extend_from_slice(&s.read[..n]);
                                let used = ws::parse(r, max_payload, &mut self.reasm, out)?;
                                r.drain(..used);
                                if r.is_empty() {
                                    self.rbuf = None;
                                }
                            }
                        }
                        if n < s.read.len() {
                            return Ok(ReadStatus::Open);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadStatus::Open),
                    Err(e) => return Err(e.into()),
                }
            }
        })
    }

    /// Counts one client event; false once the window's budget is spent.
    pub fn count_event(&mut self, limit: u32, window: Duration) -> bool {
        let now = Instant::now();
        if now.duration_since(self.window_start) >= window {
            self.window_start = now;
            self.window_events = 0;
        }
        self.window_events += 1;
        self.window_events <= limit
    }

    /// Appends one frame to `pending` through `write`, remembering its length.
    fn push_frame(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let o = self.out.get_or_insert_with(Default::default);
        let before = o.pending.len();
        write(&mut o.pending);
        o.frames.push_back(((o.pending.len() - before) as u32, self.mark));
    }

    /// Queues one gateway message (a complete JSON document).
    pub fn send_json(&mut self, json: &[u8]) -> Result<(), ConnError> {
        match &mut self.compressor {
            None => self.push_frame(|p| ws::write_frame(p, ws::OP_TEXT, json)),
            Some(c) => SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                s.stage.clear();
                c.compress(json, &mut s.stage)?;
                let o = self.out.get_or_insert_with(Default::default);
                let before = o.pending.len();
                ws::write_frame(&mut o.pending, ws::OP_BINARY, &s.stage);
                o.frames.push_back(((o.pending.len() - before) as u32, self.mark));
                Ok::<(), ConnError>(())
            })?,
        }
        Ok(())
    }

    /// Queues a dispatch: the per-session envelope around a shared body.
    pub fn send_dispatch(&mut self, name: &str, seq: u64, body: &[u8]) -> Result<(), ConnError> {
        if self.compressor.is_none() {
            self.push_frame(|p| frame_dispatch(p, name, seq, body));
            return Ok(());
        }
        let json = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            let mut v = std::mem::take(&mut s.stage);
            v.clear();
            write_dispatch(&mut v, name, seq, body);
            v
        });
        let r = self.send_json(&json);
        SCRATCH.with(|s| s.borrow_mut().stage = json);
        r
    }

    /// Queues a non-dispatch op.
    pub fn send_op(&mut self, op: u8, d: &[u8]) -> Result<(), ConnError> {
        if op == protocol::gateway::op::INVALID_SESSION {
            super::counters::COUNTERS.invalid_sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let mut v = Vec::with_capacity(48 + d.len());
        write_op(&mut v, op, d);
        self.send_json(&v)
    }

    /// Writes as much pending data as the socket takes now, in one `write`
    /// for everything queued (frames coalesce). Returns true when everything
    /// is written (and the buffer is released).
    pub fn try_flush(&mut self) -> io::Result<bool> {
        let Some(o) = self.out.as_deref_mut() else {
            self.head_sent = 0;
            return Ok(true);
        };
        let mut off = 0;
        while off < o.pending.len() {
            match self.sock.try_write(&o.pending[off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if off == o.pending.len() {
            self.out = None;
            self.head_sent = 0;
            Ok(true)
        } else {
            o.pending.drain(..off);
            let mut left = self.head_sent as usize + off;
            while let Some(&(len, _)) = o.frames.front() {
                if (len as usize) > left {
                    break;
                }
                left -= len as usize;
                o.frames.pop_front();
            }
            self.head_sent = left as u32;
            Ok(false)
        }
    }

    /// Direct mode: writes the outgoing stream (the frames of `pending`,
    /// each after the dispatch it was queued behind, and dispatches
    /// `sent + 1 ..= last` framed from `replay`, whose front is at or
    /// before `sent + 1`), as much as the socket takes. Dispatches are
    /// framed into a per-thread buffer at write time, so nothing waits
    /// framed per session. Advances `sent` and `unsent` (bytes of unwritten
    /// dispatch frames); returns true when everything is written.
    pub fn flush_direct(&mut self, replay: &ReplayQueue, sent: &mut u64, last: u64, unsent: &mut usize) -> io::Result<bool> {
        let front = replay.front().map_or(last + 1, |(q, _, _)| *q);
        debug_assert!(*sent + 1 >= front || *sent == last, "unwritten dispatches left the replay buffer");
        let (mut no_pending, mut no_frames) = (Vec::new(), VecDeque::new());
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            loop {
                let (pending, frames) = match self.out.as_deref_mut() {
                    Some(o) => (&mut o.pending, &mut o.frames),
                    None => (&mut no_pending, &mut no_frames),
                };
                // Render one write into the per-thread stage buffer: the
                // copy is a few hundred hot bytes per frame, cheaper than
                // the kernel walking three slices per frame of a vectored
                // write, and nothing is held per session.
                s.stage.clear();
                let (mut fi, mut poff, mut d) = (0usize, 0usize, *sent + 1);
                let mut skip = self.head_sent as usize;
                while s.stage.len() < MAX_WRITE {
                    if fi < frames.len() && frames[fi].1 < d {
                        let len = frames[fi].0 as usize - skip;
                        s.stage.extend_from_slice(&pending[poff..poff + len]);
                        poff += len;
                        fi += 1;
                    } else if d <= last {
                        let (_, disp, _) = &replay[(d - front) as usize];
                        let start = s.stage.len();
                        frame_dispatch(&mut s.stage, disp.name, d, &disp.body);
                        // Drop what an earlier write sent of this frame.
                        if skip > 0 {
                            s.stage.drain(start..start + skip);
                        }
                        d += 1;
                    } else {
                        break;
                    }
                    skip = 0;
                }
                if s.stage.is_empty() {
                    return Ok(true);
                }
                let bytes = s.stage.len();
                let wrote = match self.sock.try_write(&s.stage) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                };
                // Consume whole elements, in the order they were planned.
                let mut left = wrote;
                let mut pend_done = 0usize;
                let mut first = true;
                loop {
                    let head_frame = frames.front().is_some_and(|f| f.1 < *sent + 1);
                    let skip = if first { self.head_sent as usize } else { 0 };
                    let len = if head_frame {
                        frames[0].0 as usize
                    } else if *sent < last {
                        let (_, disp, _) = &replay[(*sent + 1 - front) as usize];
                        dispatch_frame_len(disp.name, *sent + 1, disp.body.len())
                    } else {
                        break;
                    };
                    let rem = len - skip;
                    if left < rem {
                        self.head_sent = (skip + left) as u32;
                        if head_frame {
                            pend_done += left;
                        }
                        left = 0;
                        break;
                    }
                    left -= rem;
                    if head_frame {
                        pend_done += rem;
                        frames.pop_front();
                    } else {
                        *sent += 1;
                        *unsent = unsent.saturating_sub(len);
                    }
                    self.head_sent = 0;
                    first = false;
                    if left == 0 {
                        break;
                    }
                }
                debug_assert_eq!(left, 0);
                pending.drain(..pend_done);
                if pending.is_empty() && frames.is_empty() {
                    self.out = None;
                }
                if wrote < bytes {
                    return Ok(false);
                }
            }
        })
    }

    /// Direct mode, before a close: keeps only the rest of a partly written
    /// head element (rendering a dispatch's rest into `pending`), so the
    /// close frame that follows starts at a frame boundary.
    pub fn cut_direct(&mut self, replay: &ReplayQueue, sent: u64, last: u64) {
        let head_frame = self.out().frames.front().is_some_and(|f| f.1 < sent + 1);
        if head_frame || self.head_sent == 0 || sent >= last {
            return self.discard_unsent();
        }
        let front = replay.front().map_or(last + 1, |(q, _, _)| *q);
        let Some((_, d, _)) = replay.get((sent + 1).wrapping_sub(front) as usize) else { return self.discard_unsent() };
        let mut v = Vec::new();
        frame_dispatch(&mut v, d.name, sent + 1, &d.body);
        let len = v.len();
        v.drain(..self.head_sent as usize);
        self.out = Some(Box::new(Out { pending: v, frames: VecDeque::from([(len as u32, 0)]) }));
    }

    /// Answers a ping.
    pub fn pong(&mut self, payload: &[u8]) {
        self.push_frame(|p| ws::write_frame(p, ws::OP_PONG, payload));
    }

    /// Drops every queued frame not yet started, so a close frame can follow
    /// the partly written one (a slow consumer's queue is abandoned; its
    /// session replays from the replay buffer on RESUME).
    pub fn discard_unsent(&mut self) {
        if let Some(o) = self.out.as_deref_mut() {
            let head = o.frames.front().map_or(0, |&(l, _)| l as usize - self.head_sent as usize);
            o.pending.truncate(head);
            o.frames.truncate(1.min(o.frames.len()));
            if !o.pending.is_empty() {
                return;
            }
        }
        self.out = None;
        self.head_sent = 0;
    }

    /// Queues a close frame with `code` (never 1000: clients treat it as a drop anyway).
    pub fn queue_close(&mut self, code: CloseCode) {
        super::counters::closed(code.code());
        self.push_frame(|p| ws::write_close(p, code.code(), code.reason()));
    }

    /// Sends a close frame with `code`, waits briefly for it to leave, and
    /// closes the socket.
    pub async fn close(mut self, code: CloseCode) {
        self.queue_close(code);
        self.finish(CLOSE_LINGER).await;
    }

    /// Queues the answer to a client's close frame: the same code, or an
    /// empty close frame if it sent none.
    pub fn queue_close_echo(&mut self, code: Option<u16>) {
        match code {
            Some(c) => self.push_frame(|p| ws::write_close(p, c, "")),
            None => self.push_frame(|p| ws::write_frame(p, ws::OP_CLOSE, &[])),
        }
    }

    /// Answers a client's close frame with the same code, then closes.
    pub async fn close_echo(mut self, code: Option<u16>) {
        self.queue_close_echo(code);
        self.finish(CLOSE_LINGER).await;
    }

    /// Writes what is queued (for at most `linger`), then shuts the socket down.
    pub async fn finish(&mut self, linger: Duration) {
        let deadline = tokio::time::Instant::now() + linger;
        if self.has_pending() {
            if let Sock::Session(_) = self.sock {
                // Waiting for room takes tokio: the socket leaves the reader.
                let Sock::Session(ss) = std::mem::replace(&mut self.sock, Sock::Sink) else { unreachable!() };
                match TcpStream::from_std(ss.into_stream()) {
                    Ok(t) => self.sock = Sock::Tcp(Box::new(t)),
                    Err(e) => return tracing::trace!(error = %e, "closing socket back to tokio"),
                }
            }
        }
        while self.has_pending() {
            if self.try_flush().is_err() {
                break;
            }
            if !self.has_pending() {
                break;
            }
            match tokio::time::timeout_at(deadline, self.sock.writable()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        self.sock.shutdown();
    }
}

impl Sock {
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.readable().await,
            Sock::Session(_) | Sock::Sink => std::future::pending().await,
            #[cfg(test)]
            Sock::Pipe(p) => p.readable().await,
        }
    }

    /// Waits for room to write. A session's socket has no tokio
    /// registration to wait with: the node's reader writes it again when
    /// it drains (`SessionHandle::on_ready`).
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.writable().await,
            Sock::Session(_) => Err(io::ErrorKind::Unsupported.into()),
            Sock::Sink => Ok(()),
            #[cfg(test)]
            Sock::Pipe(p) => p.writable().await,
        }
    }

    /// Writes what the socket takes now, through its descriptor ([`send`]).
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            // A session's socket is edge-triggered in the reader's epoll
            // set: a full one reports when it drains, nothing to clear.
            Sock::Session(ss) => send(ss.stream().as_raw_fd(), buf),
            Sock::Tcp(s) => match send(s.as_raw_fd(), buf) {
                // Full: once more through tokio, which then clears the
                // socket's write readiness (only if no newer event came),
                // so a task waiting for room really waits.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.try_write(buf),
                r => r,
            },
            Sock::Sink => Ok(buf.len()),
            #[cfg(test)]
            Sock::Pipe(p) => p.try_write(buf),
        }
    }

    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.try_read(buf),
            Sock::Session(ss) => io::Read::read(&mut ss.stream(), buf),
            Sock::Sink => Err(io::ErrorKind::WouldBlock.into()),
            #[cfg(test)]
            Sock::Pipe(p) => p.try_read(buf),
        }
    }

    /// Shuts both directions down now: the peer sees EOF, and a task waiting
    /// for readability on this socket wakes (and finds it is no longer current).
    pub fn shutdown(&self) {
        let r = match self {
            Sock::Tcp(s) => socket2::SockRef::from(&**s).shutdown(std::net::Shutdown::Both),
            Sock::Session(ss) => ss.stream().shutdown(std::net::Shutdown::Both),
            Sock::Sink => Ok(()),
            #[cfg(test)]
            Sock::Pipe(p) => {
                p.shutdown();
                Ok(())
            }
        };
        if let Err(e) = r {
            tracing::trace!(error = %e, "socket shutdown");
        }
    }
}

/// A non-blocking `send` on a descriptor, straight to the kernel: tokio's
/// `try_write` first loads the stream and its registration's readiness,
/// two more cache misses per socket in a large fan-out (measured in the
/// 100,000-member broadcast: see docs/benchmarks-history.md).
fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the caller's socket keeps `fd` open; the buffer is valid for its length.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n >= 0 {
        Ok(n as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_dispatch_matches_the_envelope_writer() {
        for seq in [0u64, 7, 1234567890123] {
            let body = br#"{"id":"1","content":"hi"}"#;
            let mut framed = Vec::new();
            frame_dispatch(&mut framed, "MESSAGE_CREATE", seq, body);
            let mut json = Vec::new();
            write_dispatch(&mut json, "MESSAGE_CREATE", seq, body);
            let mut expect = Vec::new();
            ws::write_frame(&mut expect, ws::OP_TEXT, &json);
            assert_eq!(framed, expect);
        }
    }

    /// Direct writes through a socket that takes a little at a time: the
    /// peer gets exactly the frames in order (dispatches rendered from the
    /// replay queue, a pong queued between them), whatever the write sizes.
    #[tokio::test]
    async fn direct_writes_survive_partial_writes_in_order() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        socket2::SockRef::from(&server).set_send_buffer_size(4096).unwrap();
        let mut conn = Conn::with_sock(None, Sock::Tcp(Box::new(server)), Transport::None, &CompressParams::default()).unwrap();
        assert!(conn.is_direct());

        let mut replay = ReplayQueue::new();
        let mut expect = Vec::new();
        let now = Instant::now();
        let (mut sent, mut unsent) = (0u64, 0usize);
        for seq in 1..=400u64 {
            let body = bytes::Bytes::from(format!("{{\"n\":\"{}\"}}", "x".repeat((seq as usize * 37) % 3000)));
            frame_dispatch(&mut expect, "MESSAGE_CREATE", seq, &body);
            unsent += dispatch_frame_len("MESSAGE_CREATE", seq, body.len());
            replay.push_back((seq, crate::Dispatch { name: "MESSAGE_CREATE", body }, now));
            conn.mark_dispatch(seq);
            if seq == 150 {
                conn.pong(b"between");
                ws::write_frame(&mut expect, ws::OP_PONG, b"between");
            }
        }
        let want = expect.len();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1000];
            while got.len() < want {
                let n = client.read(&mut buf).await.unwrap();
                assert!(n > 0, "stream ended early");
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        let mut partial_writes = 0;
        while !conn.flush_direct(&replay, &mut sent, 400, &mut unsent).unwrap() {
            partial_writes += 1;
            conn.writable().await.unwrap();
        }
        assert!(partial_writes > 10, "the socket should have pushed back ({partial_writes} partial writes)");
        assert_eq!((sent, unsent), (400, 0));
        assert!(!conn.has_pending());
        let got = reader.await.unwrap();
        assert_eq!(got.len(), expect.len());
        assert!(got == expect, "the byte stream differs from the frames in order");
    }
}
