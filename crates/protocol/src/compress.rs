//! Transport compression for the gateway: one stream per connection, one
//! flush per gateway message, never the end of the stream.
//!
//! - `zlib-stream`: deflate with `Z_SYNC_FLUSH` after each message, so every
//!   binary frame ends in `00 00 ff ff` (clients buffer until they see it).
//! - `zstd-stream`: one zstd frame for the whole connection, `ZSTD_e_flush`
//!   after each message (ending the frame breaks python-zstandard).
//!
//! Parameters are trimmed for memory: zlib window 11 / memLevel 4 and zstd
//! level 1 / window 11 / hash 9 / blocks of at most 1 KiB (the block size
//! sizes zstd's sequence and literal buffers; hash 9 and 1 KiB blocks took
//! the context from 43.6 to 35.7 KB at the same ratio on chat traffic).
//! Measured per session in a 5,000-session server: see docs/benchmarks.md
//! (against 300-800 KiB per context for the libraries' defaults). Windows
//! stay larger than a typical dispatch, which keeps the ratio (window 10
//! would halve it).

use std::ffi::{c_int, c_uint, c_void};
use std::mem::MaybeUninit;

use libz_sys as z;
use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CParameter, InBuffer, OutBuffer};

/// Which transport compression a connection asked for (`compress=` query).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    None,
    ZlibStream,
    ZstdStream,
}

impl Transport {
    /// Parses the `compress` query value; `None` for unknown values.
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "zlib-stream" => Some(Transport::ZlibStream),
            "zstd-stream" => Some(Transport::ZstdStream),
            _ => None,
        }
    }
}

/// Tuning of the per-connection contexts. Defaults are measured in
/// `docs/benchmarks.md`.
#[derive(Clone, Copy, Debug)]
pub struct CompressParams {
    pub zlib_level: i32,
    pub zlib_window_bits: i32,
    pub zlib_mem_level: i32,
    pub zstd_level: i32,
    pub zstd_window_log: u32,
    pub zstd_hash_log: u32,
    pub zstd_chain_log: u32,
    /// Largest zstd block: the context sizes its sequence and literal
    /// buffers by it, and a gateway message is flushed anyway.
    pub zstd_max_block: u32,
}

impl Default for CompressParams {
    fn default() -> Self {
        Self {
            zlib_level: 6,
            zlib_window_bits: 11,
            zlib_mem_level: 4,
            zstd_level: 1,
            zstd_window_log: 11,
            zstd_hash_log: 9,
            zstd_chain_log: 6,
            zstd_max_block: 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    #[error("zlib error {0}")]
    Zlib(c_int),
    #[error("zstd error {0}")]
    Zstd(usize),
}

/// A per-connection compressor.
pub enum Compressor {
    Zlib(Deflate),
    Zstd(ZstdStream),
}

impl Compressor {
    pub fn new(t: Transport, p: &CompressParams) -> Result<Option<Compressor>, CompressError> {
        Ok(match t {
            Transport::None => None,
            Transport::ZlibStream => Some(Compressor::Zlib(Deflate::new(p)?)),
            Transport::ZstdStream => Some(Compressor::Zstd(ZstdStream::new(p)?)),
        })
    }

    /// Compresses one gateway message and appends the flushed bytes to `out`.
    pub fn compress(&mut self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CompressError> {
        match self {
            Compressor::Zlib(d) => d.compress(msg, out),
            Compressor::Zstd(z) => z.compress(msg, out),
        }
    }
}

unsafe extern "C" {
    fn calloc(n: usize, size: usize) -> *mut c_void;
    fn free(p: *mut c_void);
}

unsafe extern "C" fn zalloc(_opaque: *mut c_void, items: c_uint, size: c_uint) -> *mut c_void {
    // SAFETY: plain libc allocation; zlib checks for null.
    unsafe { calloc(items as usize, size as usize) }
}

unsafe extern "C" fn zfree(_opaque: *mut c_void, p: *mut c_void) {
    // SAFETY: `p` came from `zalloc` above.
    unsafe { free(p) }
}

/// A raw zlib deflate stream. Boxed because zlib keeps a pointer back to the
/// `z_stream` and checks it on every call, so it must never move.
pub struct Deflate {
    strm: Box<z::z_stream>,
}

// SAFETY: the stream is owned exclusively; zlib keeps no thread-local state.
unsafe impl Send for Deflate {}
// SAFETY: every method that touches the stream takes `&mut self`; `&Deflate` exposes nothing.
unsafe impl Sync for Deflate {}

impl Deflate {
    pub fn new(p: &CompressParams) -> Result<Self, CompressError> {
        // SAFETY: zeroed z_stream except the allocator callbacks, which are set
        // before init; deflateInit2_ initialises everything else.
        let mut strm: Box<z::z_stream> = unsafe {
            let mut s = Box::new(MaybeUninit::<z::z_stream>::zeroed());
            let ptr = s.as_mut_ptr();
            std::ptr::addr_of_mut!((*ptr).zalloc).write(zalloc);
            std::ptr::addr_of_mut!((*ptr).zfree).write(zfree);
            Box::from_raw(Box::into_raw(s).cast())
        };
        // SAFETY: valid stream pointer, version string from the linked zlib.
        let rc = unsafe {
            z::deflateInit2_(
                strm.as_mut(),
                p.zlib_level,
                z::Z_DEFLATED,
                p.zlib_window_bits,
                p.zlib_mem_level,
                z::Z_DEFAULT_STRATEGY,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if rc != z::Z_OK {
            return Err(CompressError::Zlib(rc));
        }
        Ok(Self { strm })
    }

    pub fn compress(&mut self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CompressError> {
        let s = self.strm.as_mut();
        s.next_in = msg.as_ptr() as *mut u8;
        s.avail_in = msg.len() as c_uint;
        loop {
            out.reserve(msg.len() / 2 + 64);
            let spare = out.capacity() - out.len();
            // SAFETY: next_out points at `spare` writable bytes past len.
            unsafe {
                s.next_out = out.as_mut_ptr().add(out.len());
                s.avail_out = spare as c_uint;
            }
            // SAFETY: stream initialised in `new`; buffers valid for the call.
            let rc = unsafe { z::deflate(s, z::Z_SYNC_FLUSH) };
            let written = spare - s.avail_out as usize;
            // SAFETY: zlib wrote `written` bytes into the spare capacity.
            unsafe { out.set_len(out.len() + written) };
            if rc != z::Z_OK && rc != z::Z_BUF_ERROR {
                return Err(CompressError::Zlib(rc));
            }
            // Done when all input is consumed and zlib had output space left over.
            if s.avail_in == 0 && s.avail_out != 0 {
                break;
            }
        }
        s.next_in = std::ptr::null_mut();
        s.next_out = std::ptr::null_mut();
        Ok(())
    }
}

impl Drop for Deflate {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, ended once.
        unsafe { z::deflateEnd(self.strm.as_mut()) };
    }
}

/// A zstd compression stream that stays in one frame for the connection.
pub struct ZstdStream {
    cctx: zstd_safe::CCtx<'static>,
}

impl ZstdStream {
    pub fn new(p: &CompressParams) -> Result<Self, CompressError> {
        let mut cctx = zstd_safe::CCtx::create();
        for param in [
            CParameter::CompressionLevel(p.zstd_level),
            CParameter::WindowLog(p.zstd_window_log),
            CParameter::HashLog(p.zstd_hash_log),
            CParameter::ChainLog(p.zstd_chain_log),
            CParameter::MaxBlockSize(p.zstd_max_block),
        ] {
            cctx.set_parameter(param).map_err(CompressError::Zstd)?;
        }
        Ok(Self { cctx })
    }

    pub fn compress(&mut self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CompressError> {
        let mut input = InBuffer::around(msg);
        loop {
            out.reserve(msg.len() / 2 + 64);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let remaining =
                self.cctx.compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush).map_err(CompressError::Zstd)?;
            if remaining == 0 && input.pos() == msg.len() {
                return Ok(());
            }
        }
    }
}

/// Client-side decompressor for tests and the load generator.
pub enum Decompressor {
    Zlib(flate::Inflate),
    Zstd(zstd_safe::DCtx<'static>),
}

/// A minimal inflate stream over the same system zlib.
pub mod flate {
    use super::*;

    pub struct Inflate {
        strm: Box<z::z_stream>,
    }
    // SAFETY: owned exclusively.
    unsafe impl Send for Inflate {}
    // SAFETY: every method that touches the stream takes `&mut self`.
    unsafe impl Sync for Inflate {}

    impl Inflate {
        pub fn new() -> Result<Self, CompressError> {
            // SAFETY: as in `Deflate::new`.
            let mut strm: Box<z::z_stream> = unsafe {
                let mut s = Box::new(MaybeUninit::<z::z_stream>::zeroed());
                let ptr = s.as_mut_ptr();
                std::ptr::addr_of_mut!((*ptr).zalloc).write(zalloc);
                std::ptr::addr_of_mut!((*ptr).zfree).write(zfree);
                Box::from_raw(Box::into_raw(s).cast())
            };
            // SAFETY: valid stream pointer.
            let rc = unsafe { z::inflateInit_(strm.as_mut(), z::zlibVersion(), std::mem::size_of::<z::z_stream>() as c_int) };
            if rc != z::Z_OK {
                return Err(CompressError::Zlib(rc));
            }
            Ok(Self { strm })
        }

        pub fn inflate(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), CompressError> {
            let s = self.strm.as_mut();
            s.next_in = data.as_ptr() as *mut u8;
            s.avail_in = data.len() as c_uint;
            loop {
                out.reserve(data.len() * 4 + 256);
                let spare = out.capacity() - out.len();
                // SAFETY: as in `Deflate::compress`.
                unsafe {
                    s.next_out = out.as_mut_ptr().add(out.len());
                    s.avail_out = spare as c_uint;
                }
                // SAFETY: initialised stream, valid buffers.
                let rc = unsafe { z::inflate(s, z::Z_SYNC_FLUSH) };
                let written = spare - s.avail_out as usize;
                // SAFETY: zlib wrote `written` bytes.
                unsafe { out.set_len(out.len() + written) };
                if rc != z::Z_OK && rc != z::Z_BUF_ERROR {
                    return Err(CompressError::Zlib(rc));
                }
                if s.avail_in == 0 && s.avail_out != 0 {
                    break;
                }
            }
            s.next_in = std::ptr::null_mut();
            s.next_out = std::ptr::null_mut();
            Ok(())
        }
    }

    impl Drop for Inflate {
        fn drop(&mut self) {
            // SAFETY: initialised, ended once.
            unsafe { z::inflateEnd(self.strm.as_mut()) };
        }
    }
}

impl Decompressor {
    pub fn new(t: Transport) -> Result<Option<Decompressor>, CompressError> {
        Ok(match t {
            Transport::None => None,
            Transport::ZlibStream => Some(Decompressor::Zlib(flate::Inflate::new()?)),
            Transport::ZstdStream => Some(Decompressor::Zstd(zstd_safe::DCtx::create())),
        })
    }

    /// Decompresses one binary frame (one gateway message) into `out`.
    pub fn decompress(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), CompressError> {
        match self {
            Decompressor::Zlib(i) => i.inflate(frame, out),
            Decompressor::Zstd(d) => {
                let mut input = InBuffer::around(frame);
                loop {
                    out.reserve(frame.len() * 4 + 256);
                    let pos = out.len();
                    let mut output = OutBuffer::around_pos(out, pos);
                    d.decompress_stream(&mut output, &mut input).map_err(CompressError::Zstd)?;
                    let full = output.pos() == output.capacity();
                    if input.pos() == frame.len() && !full {
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn messages() -> Vec<Vec<u8>> {
        (0..50)
            .map(|i| format!(r#"{{"op":0,"t":"MESSAGE_CREATE","s":{i},"d":{{"content":"{}"}}}}"#, "x".repeat(i * 37)).into_bytes())
            .collect()
    }

    #[test]
    fn zlib_stream_frames_end_in_sync_marker_and_inflate_with_stock_zlib() {
        let mut c = Compressor::new(Transport::ZlibStream, &CompressParams::default()).unwrap().unwrap();
        let mut all = Vec::new();
        let mut inflater = flate2::Decompress::new(true);
        for m in messages() {
            let mut out = Vec::new();
            c.compress(&m, &mut out).unwrap();
            assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
            all.extend_from_slice(&out);
            let mut plain = Vec::with_capacity(m.len() + 64);
            inflater.decompress_vec(&out, &mut plain, flate2::FlushDecompress::Sync).unwrap();
            assert_eq!(plain, m);
        }
        // The whole stream is one valid zlib stream prefix.
        let mut d = flate2::read::ZlibDecoder::new(&all[..]);
        let mut s = Vec::new();
        let _ = d.read_to_end(&mut s);
        assert_eq!(s, messages().concat());
    }

    #[test]
    fn both_streams_round_trip_through_our_decompressor() {
        for t in [Transport::ZlibStream, Transport::ZstdStream] {
            let mut c = Compressor::new(t, &CompressParams::default()).unwrap().unwrap();
            let mut d = Decompressor::new(t).unwrap().unwrap();
            for m in messages() {
                let mut out = Vec::new();
                c.compress(&m, &mut out).unwrap();
                let mut plain = Vec::new();
                d.decompress(&out, &mut plain).unwrap();
                assert_eq!(plain, m, "{t:?}");
            }
        }
    }

    #[test]
    fn zstd_context_stays_within_its_memory_budget() {
        // Per-session budget: the context plus the session itself within
        // 40 KiB (docs/benchmarks.md). libzstd sizes the context by window,
        // hash log and block size; the defaults give 35.7 KB once warmed up.
        let mut z = ZstdStream::new(&CompressParams::default()).unwrap();
        let mut out = Vec::new();
        for m in messages() {
            z.compress(&m, &mut out).unwrap();
        }
        let size = z.cctx.sizeof();
        assert!(size <= 36 * 1024, "zstd context holds {size} bytes");
        // And the stream still decodes with a stock decoder.
        let mut d = Decompressor::new(Transport::ZstdStream).unwrap().unwrap();
        let mut plain = Vec::new();
        d.decompress(&out, &mut plain).unwrap();
        assert_eq!(plain, messages().concat());
    }
}
