//! An in-memory socket for tests of the session state machine
//! (`gateway/session/props.rs`). The test is the client: it decides how many
//! unread bytes the "kernel" holds before writes would block, reads when it
//! likes, and sees every byte the server ever wrote, so partial writes,
//! backed-up sockets and drops happen exactly when a generated case says,
//! with no timing and no file descriptors.

use std::io;
use std::sync::Mutex;

use tokio::sync::Notify;

pub struct Pipe {
    state: Mutex<State>,
    /// Wakes the server's reader: the client sent bytes or a side closed.
    readable: Notify,
    /// Wakes tasks waiting for room: the client read or a side closed.
    writable: Notify,
}

struct State {
    /// Unread bytes the pipe holds before a write would block.
    capacity: usize,
    /// Every byte the server wrote, in order; the client has read `read` of them.
    written: Vec<u8>,
    read: usize,
    /// Client bytes the server has not read yet.
    inbound: Vec<u8>,
    server_closed: bool,
    client_closed: bool,
    /// Tasks waiting in `writable` now.
    write_waiters: usize,
}

impl State {
    fn closed(&self) -> bool {
        self.server_closed || self.client_closed
    }
}

/// Counts a task waiting for room while it waits (also when its future is dropped).
struct Waiting<'a>(&'a Pipe);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.lock().write_waiters -= 1;
    }
}

impl Pipe {
    pub fn new(capacity: usize) -> Pipe {
        let state = State {
            capacity: capacity.max(1),
            written: Vec::new(),
            read: 0,
            inbound: Vec::new(),
            server_closed: false,
            client_closed: false,
            write_waiters: 0,
        };
        Pipe { state: Mutex::new(state), readable: Notify::new(), writable: Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("pipe poisoned")
    }

    // The server's end, as `Sock` uses it.

    pub(crate) fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.lock();
        if st.closed() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let room = st.capacity - (st.written.len() - st.read);
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = room.min(buf.len());
        st.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut st = self.lock();
        if st.inbound.is_empty() {
            return if st.closed() { Ok(0) } else { Err(io::ErrorKind::WouldBlock.into()) };
        }
        let n = buf.len().min(st.inbound.len());
        buf[..n].copy_from_slice(&st.inbound[..n]);
        st.inbound.drain(..n);
        Ok(n)
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        loop {
            let woken = self.readable.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            {
                let st = self.lock();
                if !st.inbound.is_empty() || st.closed() {
                    return Ok(());
                }
            }
            woken.await;
        }
    }

    /// Ready when there is room, or when the pipe is closed (the write then fails, as on a socket).
    pub(crate) async fn writable(&self) -> io::Result<()> {
        self.lock().write_waiters += 1;
        let _waiting = Waiting(self);
        loop {
            let woken = self.writable.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            {
                let st = self.lock();
                if st.closed() || st.written.len() - st.read < st.capacity {
                    return Ok(());
                }
            }
            woken.await;
        }
    }

    pub(crate) fn shutdown(&self) {
        self.lock().server_closed = true;
        self.readable.notify_waiters();
        self.writable.notify_waiters();
    }

    // The client's end.

    /// Reads up to `max` bytes; returns how many.
    pub fn read(&self, max: usize) -> usize {
        let n = {
            let mut st = self.lock();
            let n = max.min(st.written.len() - st.read);
            st.read += n;
            n
        };
        if n > 0 {
            self.writable.notify_waiters();
        }
        n
    }

    /// Sends bytes to the server; false (and nothing sent) once either side closed.
    pub fn send(&self, bytes: &[u8]) -> bool {
        {
            let mut st = self.lock();
            if st.closed() {
                return false;
            }
            st.inbound.extend_from_slice(bytes);
        }
        self.readable.notify_waiters();
        true
    }

    /// The client goes away: the server reads EOF and its writes fail.
    pub fn close(&self) {
        self.lock().client_closed = true;
        self.readable.notify_waiters();
        self.writable.notify_waiters();
    }

    /// Bytes the server wrote from `from` on.
    pub fn written_from(&self, from: usize) -> Vec<u8> {
        self.lock().written[from..].to_vec()
    }

    pub fn written_len(&self) -> usize {
        self.lock().written.len()
    }

    /// Bytes the client has read.
    pub fn read_len(&self) -> usize {
        self.lock().read
    }

    /// Whether the server's writes would block now.
    pub fn full(&self) -> bool {
        let st = self.lock();
        st.written.len() - st.read >= st.capacity
    }

    pub fn server_closed(&self) -> bool {
        self.lock().server_closed
    }

    pub fn write_waiters(&self) -> usize {
        self.lock().write_waiters
    }
}
