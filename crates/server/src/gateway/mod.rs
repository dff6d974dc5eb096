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
use tokio::sync::{mpsc, oneshot};

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
    /// Bounded queue of dispatches into the session task.
    tx: mpsc::Sender<Dispatch>,
    /// Set when a push found the queue full: events were lost, so the session
    /// must end (it cannot be resumed without them).
    lagged: AtomicBool,
    /// Small control queue into the session task.
    pub ctrl: mpsc::Sender<Control>,
}

impl SessionHandle {
    pub fn new(
        id: Arc<str>,
        user_id: UserId,
        bot: bool,
        intents: Intents,
        large_threshold: u32,
        guilds: Vec<protocol::GuildId>,
        queue: usize,
    ) -> (Arc<SessionHandle>, mpsc::Receiver<Dispatch>, mpsc::Receiver<Control>) {
        let (tx, rx) = mpsc::channel(queue);
        let (ctrl, ctrl_rx) = mpsc::channel(4);
        let guilds = std::sync::Mutex::new(guilds);
        let h = SessionHandle { id, user_id, bot, intents, large_threshold, guilds, tx, lagged: AtomicBool::new(false), ctrl };
        (Arc::new(h), rx, ctrl_rx)
    }

    /// Queues a dispatch without waiting. Returns false if the session is gone
    /// or lagged (a full queue marks it lagged; it will close itself).
    pub fn push(&self, d: Dispatch) -> bool {
        match self.tx.try_send(d) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.lagged.store(true, Ordering::Release);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// A copy of the subscribed guild ids.
    pub fn guild_ids(&self) -> Vec<protocol::GuildId> {
        self.guilds.lock().expect("session guild list poisoned").clone()
    }

    pub fn is_lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }
}
