//! WebSocket framing (RFC 6455), written for the gateway's needs: the server
//! never holds a read or write buffer while a connection is idle, and a frame
//! header is built in a few bytes in front of a shared payload.
//!
//! Only what a gateway needs: text/binary messages (fragmented or not),
//! ping/pong, close. No extensions (clients do not negotiate
//! permessage-deflate with Discord; compression is in the payload).

use base64::Engine;
use sha1::{Digest, Sha1};

pub const OP_CONT: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// RFC 6455 §5.2: payload lengths below 126 fit the header's 7 bits; 126
/// announces a 16-bit length and 127 a 64-bit one.
const LEN_7BIT_MAX: usize = 125;
const LEN_16BIT: u8 = 126;
const LEN_64BIT: u8 = 127;
/// RFC 6455 §5.5: control frames carry at most 125 bytes, so a close
/// reason at most 123 (after the 2-byte code).
const MAX_CONTROL_PAYLOAD: u64 = 125;
const MAX_CLOSE_REASON: usize = 123;
/// RFC 6455 §1.3: the GUID appended to a client's key for the accept hash.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.trim().as_bytes());
    h.update(ACCEPT_GUID);
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// Appends a server (unmasked) frame header for a payload of `len` bytes.
/// Bytes of the header `write_header` writes for a payload of `len`.
pub fn header_len(len: usize) -> usize {
    if len <= LEN_7BIT_MAX {
        2
    } else if len <= 0xffff {
        4
    } else {
        10
    }
}

pub fn write_header(out: &mut Vec<u8>, opcode: u8, len: usize) {
    out.push(0x80 | opcode);
    if len <= LEN_7BIT_MAX {
        out.push(len as u8);
    } else if len <= 0xffff {
        out.push(LEN_16BIT);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends a whole frame.
pub fn write_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    write_header(out, opcode, payload.len());
    out.extend_from_slice(payload);
}

/// Appends a close frame with `code` and `reason`.
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let reason = &reason.as_bytes()[..reason.len().min(MAX_CLOSE_REASON)];
    write_header(out, OP_CLOSE, 2 + reason.len());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(reason);
}

/// A complete message or control frame from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A text or binary message (reassembled if fragmented).
    Message {
        binary: bool,
        payload: Vec<u8>,
    },
    Ping(Vec<u8>),
    Pong,
    /// The client's close code, if it sent one.
    Close(Option<u16>),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("client frame is not masked")]
    Unmasked,
    #[error("reserved bits or opcode set")]
    Protocol,
    #[error("message of {0} bytes exceeds the limit")]
    TooLarge(u64),
}

/// Reassembly state for fragmented messages: nothing (8 bytes, no
/// allocation) between messages, as nearly every session is.
#[derive(Default)]
pub struct Reassembly(Option<Box<Partial>>);

/// A fragmented message's first frames.
struct Partial {
    binary: bool,
    fragments: Vec<u8>,
}

/// Parses as many complete frames as `buf` holds. Returns the number of bytes
/// consumed; incomplete trailing bytes are left for the next read.
pub fn parse(buf: &[u8], max_payload: usize, st: &mut Reassembly, out: &mut Vec<Incoming>) -> Result<usize, FrameError> {
    let mut pos = 0;
    loop {
        let b = &buf[pos..];
        if b.len() < 2 {
            return Ok(pos);
        }
        let fin = b[0] & 0x80 != 0;
        if b[0] & 0x70 != 0 {
            return Err(FrameError::Protocol);
        }
        let opcode = b[0] & 0x0f;
        if b[1] & 0x80 == 0 {
            return Err(FrameError::Unmasked);
        }
        let (len, mut hdr) = match b[1] & 0x7f {
            LEN_16BIT if b.len() >= 4 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
            LEN_64BIT if b.len() >= 10 => (u64::from_be_bytes(b[2..10].try_into().expect("8 bytes")), 10),
            LEN_16BIT | LEN_64BIT => return Ok(pos),
            n => (u64::from(n), 2),
        };
        let limit = if opcode >= OP_CLOSE { MAX_CONTROL_PAYLOAD } else { max_payload as u64 };
        if len > limit || (st.0.as_ref().map_or(0, |p| p.fragments.len()) as u64 + len) > max_payload as u64 {
            return Err(FrameError::TooLarge(len));
        }
        if b.len() < hdr + 4 + len as usize {
            return Ok(pos);
        }
        let mask: [u8; 4] = b[hdr..hdr + 4].try_into().expect("4 bytes");
        hdr += 4;
        let mut payload = b[hdr..hdr + len as usize].to_vec();
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i & 3];
        }
        pos += hdr + len as usize;
        match opcode {
            OP_TEXT | OP_BINARY => {
                if st.0.is_some() {
                    return Err(FrameError::Protocol);
                }
                if fin {
                    out.push(Incoming::Message { binary: opcode == OP_BINARY, payload });
                } else {
                    st.0 = Some(Box::new(Partial { binary: opcode == OP_BINARY, fragments: payload }));
                }
            }
            OP_CONT => {
                let Some(partial) = st.0.as_mut() else {
                    return Err(FrameError::Protocol);
                };
                partial.fragments.extend_from_slice(&payload);
                if fin {
                    if let Some(p) = st.0.take() {
                        out.push(Incoming::Message { binary: p.binary, payload: p.fragments });
                    }
                }
            }
            OP_PING if fin => out.push(Incoming::Ping(payload)),
            OP_PONG if fin => out.push(Incoming::Pong),
            OP_CLOSE if fin => {
                let code = (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                out.push(Incoming::Close(code));
            }
            _ => return Err(FrameError::Protocol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut v = vec![(if fin { 0x80 } else { 0 }) | opcode];
        if payload.len() < 126 {
            v.push(0x80 | payload.len() as u8);
        } else {
            v.push(0x80 | 126);
            v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(&mask);
        v.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        v
    }

    #[test]
    fn accept_key_matches_rfc_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn parses_split_and_fragmented_frames() {
        let mut bytes = client_frame(false, OP_TEXT, b"{\"op\":");
        bytes.extend(client_frame(true, OP_PING, b"hi"));
        bytes.extend(client_frame(true, OP_CONT, b"1}"));
        bytes.extend(client_frame(true, OP_TEXT, &[b'x'; 300]));
        let mut st = Reassembly::default();
        let mut out = Vec::new();
        // Feed byte by byte through a growing buffer, as reads may split anywhere.
        let mut buf = Vec::new();
        for b in bytes {
            buf.push(b);
            let n = parse(&buf, 4096, &mut st, &mut out).unwrap();
            buf.drain(..n);
        }
        assert!(buf.is_empty());
        assert_eq!(out[0], Incoming::Ping(b"hi".to_vec()));
        assert_eq!(out[1], Incoming::Message { binary: false, payload: b"{\"op\":1}".to_vec() });
        assert_eq!(out[2], Incoming::Message { binary: false, payload: vec![b'x'; 300] });
    }

    #[test]
    fn rejects_oversized_and_unmasked() {
        let mut st = Reassembly::default();
        let mut out = Vec::new();
        let big = client_frame(true, OP_TEXT, &[b'a'; 5000]);
        assert_eq!(parse(&big, 4096, &mut st, &mut out), Err(FrameError::TooLarge(5000)));
        let unmasked = [0x81u8, 0x01, b'a'];
        assert_eq!(parse(&unmasked, 4096, &mut Reassembly::default(), &mut out), Err(FrameError::Unmasked));
        let close = client_frame(true, OP_CLOSE, &1001u16.to_be_bytes());
        parse(&close, 4096, &mut Reassembly::default(), &mut out).unwrap();
        assert_eq!(out.last(), Some(&Incoming::Close(Some(1001))));
    }

    #[test]
    fn header_lengths() {
        for (len, hdr) in [(10usize, 2usize), (200, 4), (70_000, 10)] {
            let mut v = Vec::new();
            write_header(&mut v, OP_TEXT, len);
            assert_eq!(v.len(), hdr);
        }
    }
}
