//! Tests of the session state machine over an in-memory socket
//! (`conn::pipe`) whose client end is the test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use protocol::compress::{CompressParams, Transport};
use protocol::gateway::{dispatch_envelope_len, Intents};
use protocol::UserId;
use tokio_util::task::TaskTracker;

use super::super::conn::pipe::Pipe;
use super::super::conn::Conn;
use super::super::ws;
use super::SessionHandle;
use crate::fanout::{Delivery, Limits, Nice};

/// Passes of the single-threaded scheduler after each action, so every task
/// it woke (the session's reader, flushers, a closing socket's writer) has
/// run to its next wait.
const SETTLE_PASSES: usize = 16;

async fn settle() {
    for _ in 0..SETTLE_PASSES {
        tokio::task::yield_now().await;
    }
}

/// Bytes of the frame of dispatch `seq`.
fn dispatch_frame_len(name: &str, seq: u64, body: usize) -> usize {
    let len = dispatch_envelope_len(name, seq) + body + 1;
    len + ws::header_len(len)
}

fn body(w: u64, size: usize) -> Bytes {
    let head = format!(r#"{{"w":{w},"p":""#);
    let pad = size.saturating_sub(head.len() + 2);
    Bytes::from(format!(r#"{head}{}"}}"#, "x".repeat(pad)))
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// A new session, not started yet (IDENTIFY's result).
fn new_session(delivery: &Arc<Delivery>) -> Arc<SessionHandle> {
    let n = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    SessionHandle::new(format!("props{n:08}").into(), UserId(n), false, Intents::ALL, 50, Vec::new(), delivery)
}

/// A backed-up socket has one flusher. A flusher whose write was partial
/// again used to loop *and* hand over to a new flusher (`flush_locked`
/// spawns one), so each time the socket became writable every waiting
/// flusher doubled: 2^n tasks after n partial writes.
#[tokio::test(flavor = "current_thread")]
async fn a_backed_up_socket_has_one_flusher() {
    let limits = Limits { max_pending_bytes: 1 << 20, ..Limits::from_config(&crate::config::GatewayConfig::default()) };
    let delivery = Delivery::start(1, Nice { base: 0, burst: 0 }, limits, tokio::runtime::Handle::current(), TaskTracker::new());
    let s = new_session(&delivery);
    let pipe = Arc::new(Pipe::new(100));
    s.attach_for_bench(Conn::pipe(pipe.clone(), Transport::None, &CompressParams::default()).unwrap());
    let body = body(1, 3000);
    s.write_dispatch("MESSAGE_CREATE", &body, Instant::now());
    s.flush();
    settle().await;
    let mut waiters = vec![pipe.write_waiters()];
    for _ in 0..10 {
        pipe.read(100);
        settle().await;
        waiters.push(pipe.write_waiters());
    }
    assert!(waiters.iter().all(|&n| n == 1), "tasks waiting to write after each partial write: {waiters:?}");
    // And the socket drains: the client gets the whole frame.
    while pipe.read(usize::MAX) > 0 {
        settle().await;
    }
    assert_eq!(pipe.written_len(), dispatch_frame_len("MESSAGE_CREATE", 1, body.len()));
    assert_eq!(pipe.write_waiters(), 0);
}
