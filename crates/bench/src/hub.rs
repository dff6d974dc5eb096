//! The worker's shared reader for ready sessions.
//!
//! Once a session is ready, its task hands the socket to the worker's hub
//! and keeps only its timers and the control watch. The hub is one task
//! that waits on an epoll set of its own (the set's descriptor is the one
//! thing tokio watches) and reads, per readiness event, the socket once,
//! parses its WebSocket frames in place and accounts each dispatch. So a
//! message received costs an `epoll_wait` share, one `recv` and the parse:
//! no task wake-up, no `select!` and no per-message copy. In the big-guild
//! broadcast this took the generator from 5.4-5.8 to 4.4-4.9 µs of CPU per
//! receipt (see `docs/benchmarks-history.md`).
//!
//! The hub handles what a ready session receives all the time: dispatches
//! (seq accounting; MESSAGE_CREATE receipts; others are ignored, as the
//! session task does) and heartbeat ACKs. Anything else (a close frame,
//! HELLO, op 1, 7 or 9, a binary or ping frame, EOF or a socket error) stops
//! it before that frame: it takes the socket out of its set and wakes the
//! session task, which takes the connection back ([`Hub::take`]) and
//! handles the frame itself as before (broken framing ends the connection,
//! counted as a decode error, as in the task). The task also takes it back
//! for a Drop or Finish command, and sends heartbeats through [`Hub::beat`].
//!
//! Not used for transport compression (per-connection inflate state) nor
//! for `slow`'s tracked sessions (they stall and resume on command).

use std::cell::RefCell;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;

use protocol::gateway::op;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use crate::session::{heartbeat, on_dispatch, Frame};
use crate::worker::Worker;
use crate::ws::{parse_frames, text_frame, Parts, Piece, WsConn};

/// Sockets served per `epoll_wait`.
const EVENTS: usize = 512;
/// Readiness events handled before the hub yields to the worker's other
/// tasks (heartbeats, commands, the tick report).
const BUDGET: usize = 4096;
/// Bytes read per `recv`: a socket that holds more is read again on the
/// next turn (the set is level-triggered).
const SCRATCH: usize = 64 * 1024;

/// A session's connection while the hub reads it.
struct Slot {
    parts: Parts,
    user: u32,
    seq: Option<u64>,
    /// The last heartbeat was acknowledged.
    acked: bool,
    /// Set when the hub stopped reading: `Some(None)` a frame waits for the
    /// session task; `Some(Some(Ok))` EOF; `Some(Some(Err))` a socket error.
    stopped: Option<Option<io::Result<()>>>,
    wake: Rc<Notify>,
}

/// What [`Hub::take`] hands back.
pub struct Taken {
    /// Err only if tokio refused the socket back (the connection is lost).
    pub conn: io::Result<WsConn>,
    pub seq: Option<u64>,
    pub acked: bool,
    /// None: the connection goes on (a frame may wait in it). Some(Ok):
    /// the server closed the socket (EOF). Some(Err): a socket error.
    pub end: Option<io::Result<()>>,
}

/// [`Hub::beat`]'s outcome.
pub enum Beat {
    Sent,
    /// The previous heartbeat was never acknowledged.
    Zombie,
    /// The write failed or would block: the connection is in trouble.
    WriteFailed,
}

pub struct Hub {
    ep: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<usize>>,
    scratch: RefCell<Vec<u8>>,
}

impl Hub {
    /// A hub with an empty set (call inside the worker's runtime).
    pub fn new() -> io::Result<Hub> {
        // SAFETY: epoll_create1 has no preconditions; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns, and the
        // OwnedFd keeps it open, unchanged, for as long as the AsyncFd lives.
        let ep =
            unsafe { AsyncFd::register_with_interest(OwnedFd::from_raw_fd(fd), tokio::io::Interest::READABLE) }.map_err(io::Error::from)?;
        Ok(Hub { ep, slots: RefCell::new(Vec::new()), free: RefCell::new(Vec::new()), scratch: RefCell::new(vec![0; SCRATCH]) })
    }

    /// Takes over reading `conn` for `user`; `wake` is notified when the
    /// session task must take it back. If the kernel refuses, the
    /// connection comes back (Err(Ok)) or is lost (Err(Err): tokio refused
    /// it back).
    pub fn insert(&self, conn: WsConn, user: u32, seq: Option<u64>, acked: bool, wake: Rc<Notify>) -> Result<usize, io::Result<WsConn>> {
        debug_assert!(!conn.has_frame(), "frames held by a connection are handled before it is handed over");
        let parts = conn.into_parts().map_err(Err)?;
        let key = self.free.borrow_mut().pop().unwrap_or_else(|| {
            let mut s = self.slots.borrow_mut();
            s.push(None);
            s.len() - 1
        });
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: key as u64 };
        // SAFETY: both descriptors are open; `ev` is ours for the call.
        let rc = unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, parts.stream.as_raw_fd(), &mut ev) };
        if rc != 0 {
            self.free.borrow_mut().push(key);
            return Err(WsConn::from_parts(parts));
        }
        self.slots.borrow_mut()[key] = Some(Slot { parts, user, seq, acked, stopped: None, wake });
        Ok(key)
    }

    /// Gives the connection of slot `key` back to its session task.
    pub fn take(&self, key: usize) -> Taken {
        let slot = self.slots.borrow_mut()[key].take().expect("a session takes back only its own slot, once");
        self.free.borrow_mut().push(key);
        if slot.stopped.is_none() {
            self.unwatch(&slot.parts);
        }
        Taken { conn: WsConn::from_parts(slot.parts), seq: slot.seq, acked: slot.acked, end: slot.stopped.flatten() }
    }

    /// Sends a heartbeat on slot `key` (with its last seq).
    pub fn beat(&self, key: usize) -> Beat {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots[key].as_mut() else { return Beat::WriteFailed };
        if !slot.acked {
            return Beat::Zombie;
        }
        let frame = text_frame(heartbeat(slot.seq).as_bytes());
        match (&slot.parts.stream).write(&frame) {
            Ok(n) if n == frame.len() => {
                slot.acked = false;
                Beat::Sent
            }
            _ => Beat::WriteFailed,
        }
    }

    fn unwatch(&self, parts: &Parts) {
        // SAFETY: both descriptors are open; DEL ignores the event pointer.
        unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_DEL, parts.stream.as_raw_fd(), std::ptr::null_mut()) };
    }

    /// Reads slot `key`'s socket once and handles the complete frames.
    fn service(&self, w: &Worker, key: usize) {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(key).and_then(Option::as_mut) else { return };
        if slot.stopped.is_some() {
            return;
        }
        let mut scratch = self.scratch.borrow_mut();
        // SAFETY: reads into our own buffer of the given length on an open descriptor.
        let n = unsafe { libc::recv(slot.parts.stream.as_raw_fd(), scratch.as_mut_ptr().cast(), scratch.len(), libc::MSG_DONTWAIT) };
        let stop = if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                return;
            }
            Some(Some(Err(e)))
        } else if n == 0 {
            Some(Some(Ok(())))
        } else {
            let got = &scratch[..n as usize];
            let held = std::mem::take(&mut slot.parts.rbuf);
            let buf = if held.is_empty() {
                std::borrow::Cow::Borrowed(got)
            } else {
                let mut h = held;
                h.extend_from_slice(got);
                std::borrow::Cow::Owned(h)
            };
            let (seq, acked, user) = (&mut slot.seq, &mut slot.acked, slot.user);
            let mut wants_session = false;
            let used = parse_frames(&buf, &mut slot.parts.partial, |piece| {
                let Piece::Message { binary: false, payload } = piece else {
                    wants_session = true;
                    return Ok(false);
                };
                let Ok(f) = serde_json::from_slice::<Frame>(payload) else {
                    w.stats.borrow_mut().counters.decode_errors += 1;
                    return Ok(true);
                };
                match f.op {
                    op::DISPATCH => {
                        on_dispatch(w, user, seq, &f);
                    }
                    op::HEARTBEAT_ACK => *acked = true,
                    _ => {
                        wants_session = true;
                        return Ok(false);
                    }
                }
                Ok(true)
            });
            match used {
                Ok(used) => {
                    let rest = &buf[used..];
                    if !rest.is_empty() {
                        slot.parts.rbuf = rest.to_vec();
                    }
                    wants_session.then_some(None)
                }
                // Broken framing: the connection ends as the session task
                // ends it (the frames before the bad one are counted already,
                // so the bytes are not handed back to be parsed again).
                Err(e) => {
                    w.stats.borrow_mut().counters.decode_errors += 1;
                    Some(Some(Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))))
                }
            }
        };
        if let Some(why) = stop {
            self.unwatch(&slot.parts);
            slot.stopped = Some(why);
            slot.wake.notify_one();
        }
    }

    /// Serves readiness events until the worker ends.
    pub async fn run(w: Rc<Worker>) {
        let hub = &w.hub;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        loop {
            let Ok(mut guard) = hub.ep.readable().await else { return };
            let mut served = 0;
            loop {
                // SAFETY: `events` has room for the count passed; timeout 0.
                let n = unsafe { libc::epoll_wait(hub.ep.as_raw_fd(), events.as_mut_ptr(), EVENTS as i32, 0) };
                if n <= 0 {
                    // Empty (or EINTR): wait for the set to become readable again.
                    guard.clear_ready();
                    break;
                }
                for ev in &events[..n as usize] {
                    hub.service(&w, ev.u64 as usize);
                }
                served += n as usize;
                if served >= BUDGET {
                    break;
                }
            }
            if served >= BUDGET {
                drop(guard);
                tokio::task::yield_now().await;
            }
        }
    }
}
