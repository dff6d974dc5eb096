//! The gateway: WebSocket connections speaking Discord's Gateway v10.

pub mod conn;
pub mod connection;
pub mod delivery;
pub mod registry;
pub mod session;
pub mod ws;

use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::UserId;

/// One encoded dispatch, shared by every recipient: the event name and the
/// JSON of `d`. Cloning is two reference-count bumps, never a copy.
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub name: &'static str,
    pub body: Bytes,
}

/// The shareable face of a session: what guild actors, delivery workers and
/// the registry hold. There is no task per session: the state behind
/// `state` is written by whoever has something for it (a delivery worker,
/// the socket's reader task, a RESUME), always under the lock, so sequence
/// numbers and frames go out in one order.
pub struct SessionHandle {
    pub id: Arc<str>,
    pub user_id: UserId,
    pub bot: bool,
    pub intents: Intents,
    /// Guilds above this member count send only online members in GUILD_CREATE.
    pub large_threshold: u32,
    /// The delivery worker that writes this session's dispatches.
    pub shard: u16,
    /// The guilds this session is subscribed to. Written by guild actors on
    /// join/leave and by the session at start; guards only the list.
    pub guilds: std::sync::Mutex<Vec<protocol::GuildId>>,
    delivery: Arc<delivery::Delivery>,
    state: std::sync::Mutex<session::SessionState>,
}

impl SessionHandle {
    pub fn new(
        id: Arc<str>,
        user_id: UserId,
        bot: bool,
        intents: Intents,
        large_threshold: u32,
        guilds: Vec<protocol::GuildId>,
        delivery: &Arc<delivery::Delivery>,
    ) -> Arc<SessionHandle> {
        Arc::new(SessionHandle {
            id,
            user_id,
            bot,
            intents,
            large_threshold,
            shard: delivery.next_shard(),
            guilds: std::sync::Mutex::new(guilds),
            delivery: delivery.clone(),
            state: std::sync::Mutex::new(session::SessionState::default()),
        })
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, session::SessionState> {
        self.state.lock().expect("session state poisoned")
    }

    pub(crate) fn delivery(&self) -> &Arc<delivery::Delivery> {
        &self.delivery
    }

    /// Queues one dispatch for this session alone, behind everything already
    /// queued for it (so it keeps its place in its guild's order). Never waits.
    pub fn push(self: &Arc<Self>, d: Dispatch) {
        self.delivery.one(self.clone(), d);
    }

    /// A copy of the subscribed guild ids.
    pub fn guild_ids(&self) -> Vec<protocol::GuildId> {
        self.guilds.lock().expect("session guild list poisoned").clone()
    }
}
