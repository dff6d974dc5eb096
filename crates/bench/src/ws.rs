//! A lean WebSocket client (RFC 6455) over a tokio `TcpStream`, written so an
//! idle connection holds no buffers: reads land in a per-thread scratch
//! buffer, and only the bytes of an incomplete frame are kept per connection.
//!
//! Client frames are masked (the RFC requires it); server frames must not be.
//! No extensions are negotiated: gateway compression lives in the payload.

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use base64::Engine;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const OP_CONT: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// Largest message accepted from the server (a READY of a user in many
/// guilds, or a GUILD_CREATE of a large guild, is the biggest).
const MAX_MESSAGE: usize = 64 << 20;

thread_local! {
    /// Every read of every connection on this thread lands here first.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; 64 * 1024]);
}

#[derive(Debug)]
pub enum WsError {
    Io(io::Error),
    /// The upgrade was refused or malformed (status line or accept key).
    Handshake(String),
    /// The server broke framing rules (masked frame, reserved bits, size).
    Protocol(&'static str),
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WsError::Io(e) => write!(f, "socket: {e}"),
            WsError::Handshake(s) => write!(f, "handshake: {s}"),
            WsError::Protocol(s) => write!(f, "framing: {s}"),
        }
    }
}

impl From<io::Error> for WsError {
    fn from(e: io::Error) -> Self {
        WsError::Io(e)
    }
}

/// What a read produced.
pub enum Event {
    /// A complete text or binary message.
    Message { binary: bool, payload: Vec<u8> },
    /// The server closed with this code (None if the close frame had none).
    Close(Option<u16>),
}

pub struct WsConn {
    stream: TcpStream,
    /// Bytes of an incomplete frame carried between reads; empty otherwise.
    rbuf: Vec<u8>,
    /// A fragmented message being reassembled: (binary, bytes so far).
    partial: Option<(bool, Vec<u8>)>,
}

/// Opens a TCP connection from `source` (if any) to `addr`. Binding before
/// connect with `IP_BIND_ADDRESS_NO_PORT` lets the kernel pick the port at
/// connect time per (source, destination), so each 127.0.0.x source has its
/// own ephemeral port range.
pub async fn tcp_connect(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let sock = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    if let Some(src) = source {
        let one: libc::c_int = 1;
        // SAFETY: a valid socket fd and a pointer to a c_int of the given size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        sock.bind(SocketAddr::new(src, 0))?;
    }
    let stream = sock.connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

impl WsConn {
    /// Performs the HTTP upgrade on `stream` for `host` and `path_query`.
    pub async fn handshake(mut stream: TcpStream, host: &str, path_query: &str) -> Result<WsConn, WsError> {
        let key_bytes: [u8; 16] = rand::random();
        let key = base64::engine::general_purpose::STANDARD.encode(key_bytes);
        let req = format!(
            "GET {path_query} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: throng-bench\r\n\r\n"
        );
        stream.write_all(req.as_bytes()).await?;
        let mut buf = Vec::with_capacity(512);
        let end = loop {
            let mut chunk = [0u8; 1024];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(WsError::Handshake("connection closed during upgrade".into()));
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if buf.len() > 16 * 1024 {
                return Err(WsError::Handshake("response headers too long".into()));
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]);
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or("");
        if status.split(' ').nth(1) != Some("101") {
            return Err(WsError::Handshake(format!("status line {status:?}")));
        }
        let expected = accept_key(&key);
        let accepted =
            lines.filter_map(|l| l.split_once(':')).any(|(k, v)| k.eq_ignore_ascii_case("sec-websocket-accept") && v.trim() == expected);
        if !accepted {
            return Err(WsError::Handshake("missing or wrong Sec-WebSocket-Accept".into()));
        }
        Ok(WsConn { stream, rbuf: buf[end..].to_vec(), partial: None })
    }

    /// Waits until the socket has data (or an error/EOF to report).
    pub async fn readable(&self) -> io::Result<()> {
        if self.has_frame() {
            return Ok(());
        }
        self.stream.readable().await
    }

    /// Whether a complete frame is already held (read before, not handled yet).
    pub fn has_frame(&self) -> bool {
        frame_len(&self.rbuf).is_some_and(|l| l <= self.rbuf.len())
    }

    /// Reads what the socket has and appends complete messages to `out`.
    /// Returns false on EOF. On a socket error (a reset), the messages that
    /// arrived before it are still appended to `out`, then the error returns.
    pub fn read_events(&mut self, out: &mut Vec<Event>) -> Result<bool, WsError> {
        let mut open = true;
        let failed = SCRATCH.with(|s| -> Option<io::Error> {
            let s = &mut *s.borrow_mut();
            loop {
                // A short read emptied the socket: clear its readiness now
                // (tokio clears it only on WouldBlock, which would cost a
                // second, empty read and another wake-up per message). The
                // readiness is edge-triggered, so bytes that arrive after
                // this read raise a new event.
                let short = std::cell::Cell::new(None);
                let r = self.stream.try_io(tokio::io::Interest::READABLE, || {
                    // SAFETY: reads into our own buffer of the given length on a valid fd.
                    let n = unsafe { libc::recv(self.stream.as_raw_fd(), s.as_mut_ptr().cast(), s.len(), 0) };
                    if n < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    let n = n as usize;
                    if n > 0 && n < s.len() {
                        short.set(Some(n));
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    Ok(n)
                });
                match (r, short.get()) {
                    (_, Some(n)) => {
                        self.rbuf.extend_from_slice(&s[..n]);
                        return None;
                    }
                    (Ok(0), None) => {
                        open = false;
                        return None;
                    }
                    (Ok(n), None) => self.rbuf.extend_from_slice(&s[..n]),
                    (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => return None,
                    (Err(e), None) => return Some(e),
                }
            }
        });
        let used = self.parse(out)?;
        self.rbuf.drain(..used);
        if self.rbuf.is_empty() {
            // Release the buffer: idle connections keep nothing.
            self.rbuf = Vec::new();
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(open),
        }
    }

    /// Bytes received but not yet read: the kernel's receive queue (FIONREAD)
    /// plus an incomplete frame held here.
    pub fn queued_bytes(&self) -> Option<u64> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD on a valid socket fd writes one c_int through the pointer.
        let rc = unsafe { libc::ioctl(self.stream.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) };
        (rc == 0).then(|| n.max(0) as u64 + self.rbuf.len() as u64)
    }

    fn parse(&mut self, out: &mut Vec<Event>) -> Result<usize, WsError> {
        let stream = &self.stream;
        parse_frames(&self.rbuf, &mut self.partial, |piece| {
            match piece {
                Piece::Message { binary, payload } => out.push(Event::Message { binary, payload: payload.to_vec() }),
                Piece::Close(code) => out.push(Event::Close(code)),
                Piece::Ping(p) => {
                    // Answered in place: a pong is tiny and the socket is writable.
                    let mut frame = Vec::with_capacity(p.len() + 8);
                    encode_frame(&mut frame, OP_PONG, p);
                    stream.try_write(&frame)?;
                }
            }
            Ok(true)
        })
    }

    /// The socket and the bytes held for it, for a reader that is not a
    /// tokio task (see `hub`). The socket leaves tokio's reactor and stays
    /// non-blocking.
    pub fn into_parts(self) -> io::Result<Parts> {
        Ok(Parts { stream: self.stream.into_std()?, rbuf: self.rbuf, partial: self.partial })
    }

    /// The inverse of [`WsConn::into_parts`] (registers the socket with tokio again).
    pub fn from_parts(p: Parts) -> io::Result<WsConn> {
        Ok(WsConn { stream: TcpStream::from_std(p.stream)?, rbuf: p.rbuf, partial: p.partial })
    }

    /// Sends one masked text frame.
    pub async fn send_text(&mut self, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&text_frame(payload)).await
    }

    /// Sends a close frame with `code` (best effort) and shuts the socket down.
    pub async fn close(mut self, code: u16) {
        let mut frame = Vec::with_capacity(16);
        encode_frame(&mut frame, OP_CLOSE, &code.to_be_bytes());
        // Best effort: the peer may already be gone, which is what we want anyway.
        if self.stream.write_all(&frame).await.is_ok() {
            let _unused = self.stream.shutdown().await;
        }
    }
}

/// A connection taken apart (see [`WsConn::into_parts`]).
pub struct Parts {
    pub stream: std::net::TcpStream,
    /// Bytes of an incomplete (or not yet handled) frame.
    pub rbuf: Vec<u8>,
    /// A fragmented message being reassembled.
    pub partial: Option<(bool, Vec<u8>)>,
}

/// One unit that framing produced.
pub enum Piece<'a> {
    /// A complete message (reassembled if it came in fragments).
    Message {
        binary: bool,
        payload: &'a [u8],
    },
    Close(Option<u16>),
    Ping(&'a [u8]),
}

/// Parses the complete frames at the start of `buf`, handing each complete
/// message, close or ping to `on`, and returns the bytes consumed. If `on`
/// returns false, parsing stops *before* that frame (it is not consumed,
/// and `partial` is as it was before it), so another reader can take it up.
pub fn parse_frames(
    buf: &[u8],
    partial: &mut Option<(bool, Vec<u8>)>,
    mut on: impl FnMut(Piece<'_>) -> Result<bool, WsError>,
) -> Result<usize, WsError> {
    let mut off = 0;
    while let Some(total) = frame_len(&buf[off..]) {
        if total > MAX_MESSAGE + 14 {
            return Err(WsError::Protocol("frame too large"));
        }
        let f = &buf[off..];
        if f.len() < total {
            break;
        }
        let (b0, b1) = (f[0], f[1]);
        if b1 & 0x80 != 0 {
            return Err(WsError::Protocol("server frame is masked"));
        }
        if b0 & 0x70 != 0 {
            return Err(WsError::Protocol("reserved bits set"));
        }
        let payload = &f[header_len(b1)..total];
        let fin = b0 & 0x80 != 0;
        let go_on = match b0 & 0x0f {
            op @ (OP_TEXT | OP_BINARY) if fin => on(Piece::Message { binary: op == OP_BINARY, payload })?,
            op @ (OP_TEXT | OP_BINARY) => {
                *partial = Some((op == OP_BINARY, payload.to_vec()));
                true
            }
            OP_CONT => {
                let Some((binary, so_far)) = partial.as_mut() else { return Err(WsError::Protocol("continuation without start")) };
                let before = so_far.len();
                so_far.extend_from_slice(payload);
                if so_far.len() > MAX_MESSAGE {
                    return Err(WsError::Protocol("message too large"));
                }
                if fin {
                    let go_on = on(Piece::Message { binary: *binary, payload: so_far })?;
                    if go_on {
                        *partial = None;
                    } else {
                        so_far.truncate(before);
                    }
                    go_on
                } else {
                    true
                }
            }
            OP_CLOSE => on(Piece::Close((payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]))))?,
            OP_PING => on(Piece::Ping(payload))?,
            OP_PONG => true,
            _ => return Err(WsError::Protocol("unknown opcode")),
        };
        if !go_on {
            break;
        }
        off += total;
    }
    Ok(off)
}

/// Total length of the frame at the start of `b`, once its header is complete.
fn frame_len(b: &[u8]) -> Option<usize> {
    if b.len() < 2 {
        return None;
    }
    let hdr = header_len(b[1]);
    if b.len() < hdr {
        return None;
    }
    let len = match b[1] & 0x7f {
        126 => u16::from_be_bytes([b[2], b[3]]) as usize,
        127 => u64::from_be_bytes(b[2..10].try_into().expect("8 bytes checked by header_len")) as usize,
        n => n as usize,
    };
    Some(hdr.saturating_add(len))
}

fn header_len(b1: u8) -> usize {
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    mask + match b1 & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    }
}

/// One masked client text frame.
pub fn text_frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 14);
    encode_frame(&mut frame, OP_TEXT, payload);
    frame
}

/// Appends a masked client frame.
fn encode_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    out.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= 0xffff {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mask: [u8; 4] = rand::random();
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
}

fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_matches_rfc_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn masked_frame_unmasks_to_payload() {
        for len in [0usize, 5, 125, 126, 70_000] {
            let p: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut f = Vec::new();
            encode_frame(&mut f, OP_TEXT, &p);
            assert_eq!(f[0], 0x81);
            assert!(f[1] & 0x80 != 0);
            let hdr = header_len(f[1]);
            assert_eq!(frame_len(&f), Some(f.len()));
            let mask = &f[hdr - 4..hdr];
            let un: Vec<u8> = f[hdr..].iter().enumerate().map(|(i, b)| b ^ mask[i & 3]).collect();
            assert_eq!(un, p);
        }
    }

    /// An unmasked server frame.
    fn server_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
        assert!(payload.len() < 126);
        let mut f = vec![b0, payload.len() as u8];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn parsing_stops_before_a_refused_frame_and_leaves_it_whole() {
        // "a" whole, "b" + "c" in two fragments, a close, "d".
        let mut buf = server_frame(0x81, b"a");
        buf.extend(server_frame(0x01, b"b"));
        buf.extend(server_frame(0x80, b"c"));
        buf.extend(server_frame(0x88, &1000u16.to_be_bytes()));
        buf.extend(server_frame(0x81, b"d"));
        let after_a = 3;
        let mut partial = None;
        let mut seen = Vec::new();
        // The reader refuses the reassembled "bc": it is not consumed, and
        // the fragments so far are as before its last frame.
        let used = parse_frames(&buf, &mut partial, |p| {
            Ok(match p {
                Piece::Message { payload, .. } if payload == b"bc" => false,
                Piece::Message { payload, .. } => {
                    seen.push(String::from_utf8(payload.to_vec()).unwrap());
                    true
                }
                _ => true,
            })
        })
        .unwrap();
        assert_eq!(seen, ["a"]);
        assert_eq!(used, after_a + 3, "the first fragment is consumed, the last one is not");
        assert_eq!(partial.as_ref().map(|(b, p)| (*b, p.as_slice())), Some((false, &b"b"[..])));
        // Another reader goes on from there and sees "bc", then the close, then "d".
        let mut rest = Vec::new();
        let used2 = parse_frames(&buf[used..], &mut partial, |p| {
            rest.push(match p {
                Piece::Message { payload, .. } => String::from_utf8(payload.to_vec()).unwrap(),
                Piece::Close(code) => format!("close {code:?}"),
                Piece::Ping(_) => "ping".into(),
            });
            Ok(true)
        })
        .unwrap();
        assert_eq!(rest, ["bc", "close Some(1000)", "d"]);
        assert_eq!(used + used2, buf.len());
        assert!(partial.is_none());
    }

    #[test]
    fn frame_len_waits_for_full_header() {
        assert_eq!(frame_len(&[0x81]), None);
        assert_eq!(frame_len(&[0x81, 126, 0]), None);
        assert_eq!(frame_len(&[0x81, 126, 1, 0]), Some(4 + 256));
        assert_eq!(frame_len(&[0x81, 3]), Some(5));
    }
}
