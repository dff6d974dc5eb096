//! The node's session reader: one task that waits on every session's
//! socket in one epoll set (mio: edge-triggered; reads, and writes once a
//! socket has backed up) and handles what arrives there and then: a
//! heartbeat is read, acknowledged and answered by this task, a backed-up
//! socket is written again when it drains. A session therefore has no task
//! and no tokio registration of its own (issue #31's memory diet: the read
//! loop's task and tokio's registration of its socket were ~540 of the
//! ~1,650 bytes allocated per idle session); what it costs here is one slot
//! of 16 bytes.
//!
//! Connections before IDENTIFY stay on tokio (`handshake::serve`); a socket
//! moves here when it becomes a session's (`Conn::into_session`,
//! `Reader::register`) and back to tokio only to linger over a close frame
//! (`Conn::finish`).

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use node::Node;

use crate::SessionHandle;

/// Events taken per wait.
const EVENTS: usize = 1024;

/// The epoll set and the sessions registered in it. One per node, started
/// with its task by the first session (`crate::Sessions::reader`).
pub struct Reader {
    registry: mio::Registry,
    slots: Mutex<Slots>,
}

/// Who a token names: a slot holds the session and the generation of the
/// socket it was registered for; the token carries the slot's index and
/// its tag, bumped at each reuse, so an event of a socket gone from a slot
/// never reaches the slot's next session.
#[derive(Default)]
struct Slots {
    entries: Vec<Slot>,
    free: Vec<u32>,
}

struct Slot {
    session: Option<Arc<SessionHandle>>,
    gen: u32,
    tag: u32,
}

fn token(index: u32, tag: u32) -> Token {
    Token((u64::from(tag) << 32 | u64::from(index)) as usize)
}

fn untoken(t: Token) -> (u32, u32) {
    let v = t.0 as u64;
    (v as u32, (v >> 32) as u32)
}

/// Takes socket `fd` out of `reader`'s epoll set and frees its slot
/// `index` (before the socket closes: `socket::SessionSock`'s drop). The
/// socket holds the reader weakly: the reader's slots hold the session,
/// whose socket this is.
pub(crate) fn release(reader: Weak<Reader>, index: u32, fd: RawFd) {
    let Some(reader) = reader.upgrade() else { return };
    reader.release(index, fd);
}

impl Reader {
    /// Starts the reader for `node`: a task on the node's runtime that
    /// waits for the epoll set itself to be readable (the set is one more
    /// descriptor in tokio's own epoll), then takes its events without
    /// waiting. Run as a thread of its own, it cost a thread wake-up per
    /// event where tokio's workers were awake anyway: an IDENTIFY ramp of
    /// 20,000 sessions over 4 nodes took 22.4 / 24.5 CPU s against 22.1 /
    /// 21.1 with a task per session; as this task, 22.4 / 20.8. It ends
    /// with the node (or its shutdown).
    pub(crate) fn start(node: &Arc<Node>) -> io::Result<Arc<Reader>> {
        let poll = Poll::new()?;
        let reader = Arc::new(Reader { registry: poll.registry().try_clone()?, slots: Mutex::new(Slots::default()) });
        // SAFETY: the `Poll` owns its epoll descriptor, which stays open
        // and the same for as long as the `AsyncFd` holds it.
        let set = unsafe { tokio::io::unix::AsyncFd::register_with_interest(poll, tokio::io::Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let (weak, me, stop) = (Arc::downgrade(node), reader.clone(), node.shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                r = me.run(set, weak) => if let Err(e) = r {
                    tracing::error!(error = %e, "session reader stopped");
                },
            }
        });
        Ok(reader)
    }

    /// Registers session `s`'s socket `fd` of generation `gen`, for reads
    /// (and writes too if it has `backed_up` already); its slot's index,
    /// for [`release`].
    pub(crate) fn register(&self, fd: RawFd, s: &Arc<SessionHandle>, gen: u32, backed_up: bool) -> io::Result<u32> {
        let (index, tag) = {
            let mut slots = self.slots.lock().expect("reader slots poisoned");
            let index = match slots.free.pop() {
                Some(i) => i,
                None => {
                    slots.entries.push(Slot { session: None, gen: 0, tag: 0 });
                    (slots.entries.len() - 1) as u32
                }
            };
            let slot = &mut slots.entries[index as usize];
            slot.session = Some(s.clone());
            slot.gen = gen;
            (index, slot.tag)
        };
        // Registered after the slot is filled: epoll reports at once what
        // is already there to read. Writes are watched only once the
        // socket backs up (`watch_writes`): watched from the start, every
        // new socket, writable, woke the reader once for nothing.
        let interest = if backed_up { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        if let Err(e) = self.registry.register(&mut SourceFd(&fd), token(index, tag), interest) {
            self.release(index, fd);
            return Err(e);
        }
        Ok(index)
    }

    /// Watches socket `fd` in slot `index` for room to write as well (it
    /// backed up). Edge-triggered: reported at once if it has room now,
    /// else when it drains.
    pub(crate) fn watch_writes(&self, index: u32, fd: RawFd) -> io::Result<()> {
        let tag = self.slots.lock().expect("reader slots poisoned").entries[index as usize].tag;
        self.registry.reregister(&mut SourceFd(&fd), token(index, tag), Interest::READABLE | Interest::WRITABLE)
    }

    fn release(&self, index: u32, fd: RawFd) {
        if let Err(e) = self.registry.deregister(&mut SourceFd(&fd)) {
            tracing::trace!(error = %e, "session socket deregistration");
        }
        let mut slots = self.slots.lock().expect("reader slots poisoned");
        let slot = &mut slots.entries[index as usize];
        slot.session = None;
        slot.tag = slot.tag.wrapping_add(1);
        slots.free.push(index);
    }

    /// Sessions registered now.
    pub fn len(&self) -> usize {
        let slots = self.slots.lock().expect("reader slots poisoned");
        slots.entries.len() - slots.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    async fn run(&self, mut set: tokio::io::unix::AsyncFd<Poll>, node: Weak<Node>) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS);
        loop {
            let mut ready = set.readable_mut().await?;
            match ready.get_inner_mut().poll(&mut events, Some(Duration::ZERO)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if events.is_empty() {
                // Nothing left: wait for the set's next edge.
                ready.clear_ready();
                continue;
            }
            drop(ready);
            let Some(node) = node.upgrade() else { return Ok(()) };
            for ev in events.iter() {
                let (index, tag) = untoken(ev.token());
                let found = {
                    let slots = self.slots.lock().expect("reader slots poisoned");
                    slots.entries.get(index as usize).filter(|s| s.tag == tag).and_then(|s| Some((s.session.clone()?, s.gen)))
                };
                let Some((session, gen)) = found else { continue };
                let read = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                session.on_ready(&node, gen, read, ev.is_writable());
            }
            // A full batch: let other tasks run before the next one.
            if events.iter().count() == EVENTS {
                tokio::task::yield_now().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    use bytes::Bytes;
    use protocol::compress::{CompressParams, Transport};
    use protocol::gateway::Intents;
    use protocol::UserId;

    use super::*;
    use crate::session::{self, Identified};
    use crate::socket::{frame_dispatch, Conn, ConnSlot};
    use crate::ws;
    use node::presence::Presence;

    /// A node with this crate's session table, and a session on a real
    /// loopback socket (the client end is the test's blocking stream).
    /// Also: the node's tasks before the session started.
    async fn node_and_session(
        config: config::Config,
        ready: Bytes,
    ) -> (Arc<Node>, Arc<crate::Sessions>, Arc<SessionHandle>, std::net::TcpStream, usize, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(store::sqlite::SqliteStore::open(dir.path(), &Default::default()).await.expect("store"));
        let table = Arc::new(crate::Sessions::default());
        let node = guild::local_node(config, store, table.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // Small buffers, so that a test can back the socket up.
        socket2::SockRef::from(&server).set_send_buffer_size(4096).unwrap();
        socket2::SockRef::from(&client).set_recv_buffer_size(32 << 10).unwrap();
        server.set_nodelay(true).unwrap();
        let slot = ConnSlot::try_acquire(&Arc::new(AtomicUsize::new(0)), 1).unwrap();
        let conn = Conn::new(slot, server, Vec::new(), &[], Transport::None, &CompressParams::default()).unwrap();
        let s = SessionHandle::new("reader-test".into(), UserId(1), false, Intents::ALL, 50, Vec::new(), &node.delivery);
        let id = Identified { handle: s.clone(), ready, presence: Presence::new(protocol::gateway::Status::Online) };
        let tasks = node.tasks.len();
        session::start(&node, &table, conn, id, Vec::new());
        (node, table, s, client, tasks, dir)
    }

    /// Waits (with a deadline) until `f` holds.
    async fn until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Reads exactly `n` bytes from the client end (blocking, on a thread).
    async fn read_exact(client: &std::net::TcpStream, n: usize) -> Vec<u8> {
        let mut c = client.try_clone().unwrap();
        tokio::task::spawn_blocking(move || {
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut v = vec![0; n];
            c.read_exact(&mut v).map(|()| v)
        })
        .await
        .unwrap()
        .expect("the server's bytes")
    }

    fn client_text(payload: &[u8]) -> Vec<u8> {
        let mask = [1, 2, 3, 4];
        let mut v = vec![0x80 | ws::OP_TEXT, 0x80 | payload.len() as u8];
        v.extend_from_slice(&mask);
        v.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        v
    }

    /// A session has no task: the reader answers its heartbeats, and its
    /// socket leaves the reader's set when the client goes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_answers_heartbeats_of_a_session_without_a_task() {
        let (node, table, s, mut client, tasks, _dir) = node_and_session(config::Config::default(), Bytes::from_static(b"{}")).await;
        let mut ready = Vec::new();
        frame_dispatch(&mut ready, "READY", 1, b"{}");
        assert_eq!(read_exact(&client, ready.len()).await, ready);
        assert_eq!(table.reading(), 1);
        assert_eq!(node.tasks.len(), tasks, "a session holds no task");
        for _ in 0..3 {
            client.write_all(&client_text(br#"{"op":1,"d":1}"#)).unwrap();
            let (mut op, mut ack) = (Vec::new(), Vec::new());
            protocol::gateway::write_op(&mut op, protocol::gateway::op::HEARTBEAT_ACK, b"null");
            ws::write_frame(&mut ack, ws::OP_TEXT, &op);
            assert_eq!(read_exact(&client, ack.len()).await, ack);
        }
        // The heartbeat acknowledged READY: nothing is left to replay.
        assert_eq!(s.replay_size().0, 0);
        drop(client);
        until("the closed socket leaves the reader", || table.reading() == 0).await;
        assert!(node.sessions.get("reader-test").is_some(), "the session stays resumable");
    }

    /// A socket that backs up is written again by the reader as it drains:
    /// the client gets every frame, in order, with no task waiting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backed_up_socket_drains_through_the_reader() {
        let mut config = config::Config::default();
        config.gateway.max_pending_write_bytes = 64 << 20;
        config.gateway.replay_max_bytes = 64 << 20;
        config.gateway.replay_max_events = 100_000;
        let (node, _table, s, client, tasks_before, _dir) = node_and_session(config, Bytes::from_static(b"{}")).await;
        let mut expect = Vec::new();
        frame_dispatch(&mut expect, "READY", 1, b"{}");
        let now = Instant::now();
        for seq in 2..=201u64 {
            let body = Bytes::from(format!("{{\"n\":\"{}\"}}", "y".repeat(2000 + (seq as usize * 31) % 1000)));
            frame_dispatch(&mut expect, "MESSAGE_CREATE", seq, &body);
            s.write_dispatch("MESSAGE_CREATE", &body, now);
        }
        s.flush();
        assert!(s.pending_bytes() > 0, "the socket should have backed up");
        assert_eq!(node.tasks.len(), tasks_before, "no task waits for the socket");
        let got = read_exact(&client, expect.len()).await;
        assert!(got == expect, "the byte stream differs from the frames in order");
        until("nothing is left to write", || s.pending_bytes() == 0).await;
    }

    /// A READY that backs the socket up before the reader has it: the
    /// socket is watched for room from its registration on, and drains.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ready_that_backs_up_before_registration_drains() {
        let mut config = config::Config::default();
        config.gateway.max_pending_write_bytes = 64 << 20;
        let body = Bytes::from(format!("{{\"n\":\"{}\"}}", "z".repeat(512 << 10)));
        let mut expect = Vec::new();
        frame_dispatch(&mut expect, "READY", 1, &body);
        let (_node, _table, s, client, _tasks, _dir) = node_and_session(config, body).await;
        let got = read_exact(&client, expect.len()).await;
        assert!(got == expect, "READY arrived altered");
        until("nothing is left to write", || s.pending_bytes() == 0).await;
    }
}
