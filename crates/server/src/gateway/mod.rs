//! The gateway: WebSocket connections speaking Discord's Gateway v10.

pub mod conn;
pub mod connection;
pub mod registry;
pub mod session;
pub mod ws;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::UserId;
use tokio::sync::oneshot;

/// One encoded dispatch, shared by every recipient: the event name and the
/// JSON of `d`. Cloning is two reference-count bumps, never a copy.
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub name: &'static str,
    pub body: Bytes,
}

/// Messages to a session task other than dispatches.
pub enum Control {
    /// A new connection presents RESUME for this session. The session takes
    /// the connection and replays, or hands it back (`Err`) when it cannot.
    Resume { conn: Box<conn::Conn>, seq: Option<u64>, reply: oneshot::Sender<Result<(), Box<conn::Conn>>> },
    /// Close the socket with a resumable code but keep the session (operator/test hook).
    Drop { done: oneshot::Sender<()> },
}

/// The cheap, shareable face of a session: what guild actors and the
/// registry hold. The session task owns everything else.
pub struct SessionHandle {
    pub id: Arc<str>,
    pub user_id: UserId,
    pub bot: bool,
    pub intents: Intents,
    /// Guilds above this member count send only online members in GUILD_CREATE.
    pub large_threshold: u32,
    /// The guilds this session is subscribed to. Written by guild actors on
    /// join/leave and by the session at start; guards only the list, never
    /// held across an await.
    pub guilds: std::sync::Mutex<Vec<protocol::GuildId>>,
    /// Dispatches and control messages for the session task. Guards only the
    /// queues, never held across an await. Empty queues hold no allocation,
    /// so an idle session costs nothing here (a channel would pre-allocate).
    inbox: std::sync::Mutex<Inbox>,
    /// Wakes the session task when its inbox goes from empty to non-empty.
    wake: tokio::sync::Notify,
    /// Most dispatches the inbox holds; a push beyond it marks the session lagged.
    capacity: usize,
    /// Set when a push found the inbox full: events were lost, so the
    /// session must end (it cannot be resumed without them).
    lagged: AtomicBool,
}

#[derive(Default)]
struct Inbox {
    dispatches: std::collections::VecDeque<Dispatch>,
    controls: Vec<Control>,
    /// The session task has ended: pushes fail.
    closed: bool,
}

impl SessionHandle {
    pub fn new(
        id: Arc<str>,
        user_id: UserId,
        bot: bool,
        intents: Intents,
        large_threshold: u32,
        guilds: Vec<protocol::GuildId>,
        capacity: usize,
    ) -> Arc<SessionHandle> {
        Arc::new(SessionHandle {
            id,
            user_id,
            bot,
            intents,
            large_threshold,
            guilds: std::sync::Mutex::new(guilds),
            inbox: std::sync::Mutex::new(Inbox::default()),
            wake: tokio::sync::Notify::new(),
            capacity: capacity.max(1),
            lagged: AtomicBool::new(false),
        })
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.inbox.lock().expect("session inbox poisoned")
    }

    /// Queues a dispatch without waiting. Returns false if the session is gone
    /// or lagged (a full inbox marks it lagged; it will close itself).
    pub fn push(&self, d: Dispatch) -> bool {
        let mut ib = self.inbox();
        if ib.closed {
            return false;
        }
        if ib.dispatches.len() >= self.capacity {
            self.lagged.store(true, Ordering::Release);
            drop(ib);
            self.wake.notify_one();
            return false;
        }
        ib.dispatches.push_back(d);
        let first = ib.dispatches.len() == 1 && ib.controls.is_empty();
        drop(ib);
        // Only the push into an empty inbox wakes: the task drains everything.
        if first {
            self.wake.notify_one();
        }
        true
    }

    /// Hands a control message to the session task; gives it back if the session has ended.
    pub fn control(&self, c: Control) -> Result<(), Control> {
        let mut ib = self.inbox();
        if ib.closed {
            return Err(c);
        }
        ib.controls.push(c);
        drop(ib);
        self.wake.notify_one();
        Ok(())
    }

    /// Takes everything queued (the session task's side).
    pub fn take(&self) -> (Vec<Control>, std::collections::VecDeque<Dispatch>) {
        let mut ib = self.inbox();
        (std::mem::take(&mut ib.controls), std::mem::take(&mut ib.dispatches))
    }

    /// Resolves when something may have been queued since the last `take`.
    pub async fn woken(&self) {
        self.wake.notified().await
    }

    /// Marks the session ended; returns what was still queued so controls can be answered.
    pub(crate) fn close(&self) -> Vec<Control> {
        let mut ib = self.inbox();
        ib.closed = true;
        ib.dispatches.clear();
        std::mem::take(&mut ib.controls)
    }

    /// A copy of the subscribed guild ids.
    pub fn guild_ids(&self) -> Vec<protocol::GuildId> {
        self.guilds.lock().expect("session guild list poisoned").clone()
    }

    pub fn is_lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn d() -> Dispatch {
        Dispatch { name: "X", body: Bytes::from_static(b"{}") }
    }

    #[test]
    fn inbox_is_bounded_and_marks_lag() {
        let h = SessionHandle::new("s".into(), UserId(1), false, Intents::ALL, 50, vec![], 2);
        assert!(h.push(d()) && h.push(d()));
        assert!(!h.is_lagged());
        assert!(!h.push(d()), "third push exceeds the bound");
        assert!(h.is_lagged());
        let (_, q) = h.take();
        assert_eq!(q.len(), 2);
        h.close();
        assert!(!h.push(d()), "a closed session takes nothing");
        assert!(h.control(Control::Drop { done: oneshot::channel().0 }).is_err());
    }
}
