//! One client socket of the gateway: reads frames into a per-thread scratch
//! buffer, queues outgoing frames in a buffer that exists only while there is
//! unsent data, and compresses per connection when asked.
//!
//! A `Conn` moves between tasks: the connection task owns it until IDENTIFY,
//! and a RESUME hands it to the session task it resumes.

use std::cell::RefCell;
use std::io;
use std::time::{Duration, Instant};

use protocol::compress::{CompressParams, Compressor, Transport};
use protocol::gateway::{write_dispatch, write_op};
use protocol::CloseCode;
use tokio::io::AsyncWriteExt;
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

pub struct Conn {
    /// Held for the socket's lifetime (counts toward the process's cap).
    _slot: ConnSlot,
    stream: TcpStream,
    /// Bytes of an incomplete frame carried between reads; empty otherwise.
    rbuf: Vec<u8>,
    reasm: ws::Reassembly,
    /// Encoded frames not yet accepted by the socket; empty (unallocated) when idle.
    pending: Vec<u8>,
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
        Ok(Conn {
            _slot: slot,
            stream,
            rbuf: leftover.to_vec(),
            reasm: ws::Reassembly::default(),
            pending: Vec::new(),
            compressor: Compressor::new(transport, params)?,
            transport,
            window_start: Instant::now(),
            window_events: 0,
            last_heartbeat: Instant::now(),
        })
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.stream.readable().await
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.stream.writable().await
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Reads whatever the socket has and parses complete frames into `out`.
    pub fn read_frames(&mut self, max_payload: usize, out: &mut Vec<Incoming>) -> Result<ReadStatus, ConnError> {
        // Frames left over from the handshake read come first.
        if !self.rbuf.is_empty() {
            let n = ws::parse(&self.rbuf, max_payload, &mut self.reasm, out)?;
            self.rbuf.drain(..n);
        }
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            loop {
                match self.stream.try_read(&mut s.read) {
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

    /// Queues one gateway message (a complete JSON document).
    pub fn send_json(&mut self, json: &[u8]) -> Result<(), ConnError> {
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
        Ok(())
    }

    /// Queues a dispatch: the per-session envelope around a shared body.
    pub fn send_dispatch(&mut self, name: &str, seq: u64, body: &[u8]) -> Result<(), ConnError> {
        if self.compressor.is_none() {
            frame_dispatch(&mut self.pending, name, seq, body);
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

    /// Writes as much pending data as the socket takes now. Returns true when
    /// everything is written (and the buffer is released).
    pub fn try_flush(&mut self) -> io::Result<bool> {
        let mut off = 0;
        while off < self.pending.len() {
            match self.stream.try_write(&self.pending[off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if off == self.pending.len() {
            self.pending = Vec::new();
            Ok(true)
        } else {
            self.pending.drain(..off);
            Ok(false)
        }
    }

    /// Answers a ping.
    pub fn pong(&mut self, payload: &[u8]) {
        ws::write_frame(&mut self.pending, ws::OP_PONG, payload);
    }

    /// Sends a close frame with `code`, waits briefly for it to leave, and
    /// closes the socket. Never uses 1000 (clients treat it as a drop anyway).
    pub async fn close(mut self, code: CloseCode) {
        ws::write_close(&mut self.pending, code.code(), code.reason());
        self.finish().await;
    }

    /// Answers a client's close frame with the same code, then closes.
    pub async fn close_echo(mut self, code: Option<u16>) {
        match code {
            Some(c) => ws::write_close(&mut self.pending, c, ""),
            None => ws::write_frame(&mut self.pending, ws::OP_CLOSE, &[]),
        }
        self.finish().await;
    }

    async fn finish(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while !self.pending.is_empty() {
            match tokio::time::timeout_at(deadline, self.stream.writable()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
            if self.try_flush().is_err() {
                break;
            }
        }
        if let Err(e) = self.stream.shutdown().await {
            tracing::trace!(error = %e, "shutdown after close");
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
