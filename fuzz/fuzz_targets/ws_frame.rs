//! The server's WebSocket frame parser (`server::gateway::ws::parse`) on
//! arbitrary client bytes. The first two bytes pick the payload limit and
//! the read size; the rest is the byte stream.
//!
//! Checks: no panic; `parse` never claims more bytes than it was given;
//! messages respect the limit and control frames 125 bytes; feeding the
//! stream in reads of any size gives the same frames and the same error as
//! feeding it whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::gateway::ws::{parse, FrameError, Incoming, Reassembly};

fn run(stream: &[u8], max: usize, read: usize) -> (Vec<Incoming>, Option<FrameError>) {
    let mut st = Reassembly::default();
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    for piece in stream.chunks(read) {
        buf.extend_from_slice(piece);
        match parse(&buf, max, &mut st, &mut out) {
            Ok(n) => {
                assert!(n <= buf.len(), "consumed {n} of {} bytes", buf.len());
                buf.drain(..n);
            }
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let [a, b, stream @ ..] = data else { return };
    // Limits from 0 to 4096 bytes (the gateway's is 4096).
    let max = usize::from(*a) * 16 + 16;
    let read = usize::from(*b).max(1);
    let (whole, whole_err) = run(stream, max, stream.len().max(1));
    for m in &whole {
        match m {
            Incoming::Message { payload, .. } => assert!(payload.len() <= max),
            Incoming::Ping(p) => assert!(p.len() <= 125),
            Incoming::Pong | Incoming::Close(_) => {}
        }
    }
    let (split, split_err) = run(stream, max, read);
    assert_eq!(whole, split, "frames differ with reads of {read} bytes");
    assert_eq!(whole_err, split_err);
});
