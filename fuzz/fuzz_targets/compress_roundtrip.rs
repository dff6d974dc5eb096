//! The per-connection `zlib-stream` / `zstd-stream` compressors of
//! `protocol::compress`: a sequence of arbitrary messages is compressed
//! on one stream, one flushed frame per message, as the gateway sends them,
//! and each frame is decompressed by the client-side decompressor.
//!
//! Checks: every frame decompresses to exactly its message; zlib frames end
//! in the `00 00 ff ff` sync marker clients split on.
//!
//! Messages are never empty (a gateway message is a JSON object): zlib
//! flushes nothing for an empty input once the stream has started, so an
//! empty message would give an empty frame without the marker.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use protocol::compress::{CompressParams, Compressor, Decompressor, Transport};

#[derive(Arbitrary, Debug)]
struct Input {
    zstd: bool,
    messages: Vec<Vec<u8>>,
}

fuzz_target!(|input: Input| {
    let t = if input.zstd { Transport::ZstdStream } else { Transport::ZlibStream };
    let mut c = Compressor::new(t, &CompressParams::default()).unwrap().unwrap();
    let mut d = Decompressor::new(t).unwrap().unwrap();
    for m in input.messages.iter().filter(|m| !m.is_empty()).take(64) {
        let mut frame = Vec::new();
        c.compress(m, &mut frame).expect("compress");
        if t == Transport::ZlibStream {
            assert!(frame.ends_with(&[0, 0, 0xff, 0xff]), "zlib frame without sync marker");
        }
        let mut plain = Vec::new();
        d.decompress(&frame, &mut plain).expect("decompress our own frame");
        assert_eq!(&plain, m);
    }
});
