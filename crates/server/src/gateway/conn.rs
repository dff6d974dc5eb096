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
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::compress::{CompressParams, Compressor, Transport};
use protocol::gateway::{write_dispatch, write_op};
use protocol::CloseCode;
use tokio::net::TcpStream;

use super::ws::{self, Incoming};

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

/// Appends one uncompressed dispatch as a WebSocket text frame: header,
/// the per-session envelope `{"op":0,"t":"NAME","s":SEQ,"d":`, the shared
/// body, and the closing brace. No allocation beyond growing `out`.
pub fn frame_dispatch(out: &mut Vec<u8>, name: &str, seq: u64, body: &[u8]) {
    const A: &[u8] = b"{\"op\":0,\"t\":\"";
    const B: &[u8] = b"\",\"s\":";
    const C: &[u8] = b",\"d\":";
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = seq;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let seq = &digits[i..];
    let len = A.len() + name.len() + B.len() + seq.len() + C.len() + body.len() + 1;
    out.reserve(len + 10);
    ws::write_header(out, ws::OP_TEXT, len);
    for part in [A, name.as_bytes(), B, seq, C, body, b"}"] {
        out.extend_from_slice(part);
    }
}

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

/// The socket under a `Conn`: shared so a session's reader task can wait
/// for readability while delivery workers write through the session's lock.
#[derive(Clone)]
pub enum Sock {
    Tcp(Arc<TcpStream>),
    /// Discards everything written (in-process benchmarks: no file descriptor).
    Sink,
}

pub struct Conn {
    /// Held for the socket's lifetime (counts toward the process's cap).
    _slot: Option<ConnSlot>,
    sock: Sock,
    /// Bytes of an incomplete frame carried between reads; empty otherwise.
    rbuf: Vec<u8>,
    reasm: ws::Reassembly,
    /// Encoded frames not yet accepted by the socket; empty (unallocated) when idle.
    pending: Vec<u8>,
    /// Lengths of the frames in `pending`, oldest first; the first may be
    /// partly written (`head_sent` bytes of it). Lets a slow consumer's queue
    /// be cut at a frame boundary so its close frame still parses.
    frames: VecDeque<u32>,
    head_sent: usize,
    compressor: Option<Compressor>,
    pub transport: Transport,
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
    pub fn new(
        slot: ConnSlot,
        stream: TcpStream,
        leftover: &[u8],
        transport: Transport,
        params: &CompressParams,
    ) -> Result<Conn, ConnError> {
        let c = Conn::with_sock(Some(slot), Sock::Tcp(Arc::new(stream)), transport, params)?;
        Ok(Conn { rbuf: leftover.to_vec(), ..c })
    }

    /// A connection whose writes go nowhere (benchmarks of the delivery path).
    pub fn sink(transport: Transport, params: &CompressParams) -> Result<Conn, ConnError> {
        Conn::with_sock(None, Sock::Sink, transport, params)
    }

    fn with_sock(slot: Option<ConnSlot>, sock: Sock, transport: Transport, params: &CompressParams) -> Result<Conn, ConnError> {
        Ok(Conn {
            _slot: slot,
            sock,
            rbuf: Vec::new(),
            reasm: ws::Reassembly::default(),
            pending: Vec::new(),
            frames: VecDeque::new(),
            head_sent: 0,
            compressor: Compressor::new(transport, params)?,
            transport,
            window_start: Instant::now(),
            window_events: 0,
            last_heartbeat: Instant::now(),
        })
    }

    pub fn sock(&self) -> Sock {
        self.sock.clone()
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Queued bytes beyond the frame being written now: what a slow reader
    /// has let pile up (one large frame, e.g. a big GUILD_CREATE, is not
    /// slowness by itself).
    pub fn backlog_len(&self) -> usize {
        let head = self.frames.front().map_or(0, |&l| l as usize - self.head_sent);
        self.pending.len() - head
    }

    /// Reads whatever the socket has and parses complete frames into `out`.
    pub fn read_frames(&mut self, max_payload: usize, out: &mut Vec<Incoming>) -> Result<ReadStatus, ConnError> {
        // Frames left over from the handshake read come first.
        if !self.rbuf.is_empty() {
            let n = ws::parse(&self.rbuf, max_payload, &mut self.reasm, out)?;
            self.rbuf.drain(..n);
        }
        let Sock::Tcp(stream) = &self.sock else { return Ok(ReadStatus::Open) };
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            loop {
                match stream.try_read(&mut s.read) {
                    Ok(0) => return Ok(ReadStatus::Eof),
                    Ok(n) => {
                        if self.rbuf.is_empty() {
                            let used = ws::parse(&s.read[..n], max_payload, &mut self.reasm, out)?;
                            self.rbuf.extend_from_slice(&s.read[used..n]);
                        } else {
                            self.rbuf.extend_from_slice(&s.read[..n]);
                            let used = ws::parse(&self.rbuf, max_payload, &mut self.reasm, out)?;
                            self.rbuf.drain(..used);
                        }
                        if self.rbuf.is_empty() {
                            self.rbuf = Vec::new();
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
        let before = self.pending.len();
        write(&mut self.pending);
        self.frames.push_back((self.pending.len() - before) as u32);
    }

    /// Queues one gateway message (a complete JSON document).
    pub fn send_json(&mut self, json: &[u8]) -> Result<(), ConnError> {
        let before = self.pending.len();
        match &mut self.compressor {
            None => ws::write_frame(&mut self.pending, ws::OP_TEXT, json),
            Some(c) => SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                s.stage.clear();
                c.compress(json, &mut s.stage)?;
                ws::write_frame(&mut self.pending, ws::OP_BINARY, &s.stage);
                Ok::<(), ConnError>(())
            })?,
        }
        self.frames.push_back((self.pending.len() - before) as u32);
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
        let mut v = Vec::with_capacity(48 + d.len());
        write_op(&mut v, op, d);
        self.send_json(&v)
    }

    /// Writes as much pending data as the socket takes now, in one `write`
    /// for everything queued (frames coalesce). Returns true when everything
    /// is written (and the buffer is released).
    pub fn try_flush(&mut self) -> io::Result<bool> {
        let mut off = 0;
        while off < self.pending.len() {
            let r = match &self.sock {
                Sock::Tcp(s) => s.try_write(&self.pending[off..]),
                Sock::Sink => Ok(self.pending.len() - off),
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if off == self.pending.len() {
            self.pending = Vec::new();
            self.frames = VecDeque::new();
            self.head_sent = 0;
            Ok(true)
        } else {
            self.pending.drain(..off);
            let mut left = self.head_sent + off;
            while let Some(&len) = self.frames.front() {
                if (len as usize) > left {
                    break;
                }
                left -= len as usize;
                self.frames.pop_front();
            }
            self.head_sent = left;
            Ok(false)
        }
    }

    /// Answers a ping.
    pub fn pong(&mut self, payload: &[u8]) {
        self.push_frame(|p| ws::write_frame(p, ws::OP_PONG, payload));
    }

    /// Drops every queued frame not yet started, so a close frame can follow
    /// the partly written one (a slow consumer's queue is abandoned; its
    /// session replays from the replay buffer on RESUME).
    pub fn discard_unsent(&mut self) {
        let head = self.frames.front().map_or(0, |&l| l as usize - self.head_sent);
        self.pending.truncate(head);
        self.frames.truncate(1.min(self.frames.len()));
        if self.pending.is_empty() {
            self.pending = Vec::new();
            self.frames = VecDeque::new();
            self.head_sent = 0;
        }
    }

    /// Queues a close frame with `code` (never 1000: clients treat it as a drop anyway).
    pub fn queue_close(&mut self, code: CloseCode) {
        self.push_frame(|p| ws::write_close(p, code.code(), code.reason()));
    }

    /// Sends a close frame with `code`, waits briefly for it to leave, and
    /// closes the socket.
    pub async fn close(mut self, code: CloseCode) {
        self.queue_close(code);
        self.finish(Duration::from_secs(2)).await;
    }

    /// Answers a client's close frame with the same code, then closes.
    pub async fn close_echo(mut self, code: Option<u16>) {
        match code {
            Some(c) => self.push_frame(|p| ws::write_close(p, c, "")),
            None => self.push_frame(|p| ws::write_frame(p, ws::OP_CLOSE, &[])),
        }
        self.finish(Duration::from_secs(2)).await;
    }

    /// Writes what is queued (for at most `linger`), then shuts the socket down.
    pub async fn finish(&mut self, linger: Duration) {
        let deadline = tokio::time::Instant::now() + linger;
        while !self.pending.is_empty() {
            if self.try_flush().is_err() {
                break;
            }
            if self.pending.is_empty() {
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
            Sock::Sink => std::future::pending().await,
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.writable().await,
            Sock::Sink => Ok(()),
        }
    }

    /// Shuts both directions down now: the peer sees EOF, and a task waiting
    /// for readability on this socket wakes (and finds it is no longer current).
    pub fn shutdown(&self) {
        if let Sock::Tcp(s) = self {
            if let Err(e) = socket2::SockRef::from(&**s).shutdown(std::net::Shutdown::Both) {
                tracing::trace!(error = %e, "socket shutdown");
            }
        }
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
}
