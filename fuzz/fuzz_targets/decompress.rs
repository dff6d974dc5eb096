//! The client-side `zlib-stream` / `zstd-stream` decompressors of
//! `protocol::compress` (used by the load generator and the tests) on
//! arbitrary bytes, cut into frames at arbitrary points.
//!
//! Checks: no panic, no hang, no memory error: garbage is an `Err`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::compress::{Decompressor, Transport};

fuzz_target!(|data: &[u8]| {
    let [mode, cut, stream @ ..] = data else { return };
    let t = if mode & 1 == 0 { Transport::ZlibStream } else { Transport::ZstdStream };
    let mut d = Decompressor::new(t).unwrap().unwrap();
    let mut out = Vec::new();
    for frame in stream.chunks(usize::from(*cut).max(1)) {
        out.clear();
        if d.decompress(frame, &mut out).is_err() {
            break;
        }
    }
});
