//! The gateway: WebSocket connections speaking Discord's Gateway v10.

pub mod counters;
pub mod handshake;
pub mod reader;
pub mod session;
pub mod socket;
pub mod ws;

use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::{ActorKey, GuildId, UserId};

pub use fanout::Dispatch;
use fanout::{self as delivery, Recipient};

/// The shareable face of a session: what guild actors, delivery workers and
/// the registry hold. There is no task per session: the state behind
/// `state` is written by whoever has something for it (a delivery worker,
/// the node's reader, a RESUME), always under the lock, so sequence
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
    /// The actors (guilds and DMs) this session is subscribed to. Written
    /// by actors on join/leave and by the session at start; guards only
    /// the list.
    pub actors: std::sync::Mutex<Vec<ActorKey>>,
    delivery: Arc<delivery::Delivery>,
    state: std::sync::Mutex<session::SessionState>,
    /// A session taken over from another node by a RESUME there: its guild
    /// subscriptions move here (`GuildMsg::Move`); until they have, and for
    /// anything else that still reaches it, that node forwards its
    /// dispatches here in order. The two end together.
    pub home: std::sync::OnceLock<Box<delivery::SessionRef>>,
    /// The node this session was handed over to (a RESUME there): a later
    /// RESUME elsewhere is sent on to it.
    pub handed_to: std::sync::OnceLock<delivery::NodeId>,
    /// The SHA-256 of the token it identified with: revoking that token
    /// closes it (`Recipient::revoke`).
    pub token_hash: std::sync::OnceLock<[u8; 32]>,
}

impl SessionHandle {
    pub fn new(
        id: Arc<str>,
        user_id: UserId,
        bot: bool,
        intents: Intents,
        large_threshold: u32,
        actors: Vec<ActorKey>,
        delivery: &Arc<delivery::Delivery>,
    ) -> Arc<SessionHandle> {
        Arc::new(SessionHandle {
            id,
            user_id,
            bot,
            intents,
            large_threshold,
            shard: delivery.next_shard(),
            actors: std::sync::Mutex::new(actors),
            delivery: delivery.clone(),
            state: std::sync::Mutex::new(session::SessionState::default()),
            home: std::sync::OnceLock::new(),
            handed_to: std::sync::OnceLock::new(),
            token_hash: std::sync::OnceLock::new(),
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

    /// A copy of the subscribed actors' keys (guilds and DMs).
    pub fn actors(&self) -> Vec<ActorKey> {
        self.actors.lock().expect("session actor list poisoned").clone()
    }

    /// Whether the session is subscribed to `guild`.
    pub fn in_guild(&self, guild: GuildId) -> bool {
        self.actors.lock().expect("session actor list poisoned").contains(&ActorKey::guild(guild))
    }
}

impl Recipient for SessionHandle {
    fn id(&self) -> &Arc<str> {
        &self.id
    }
    fn user_id(&self) -> UserId {
        self.user_id
    }
    fn bot(&self) -> bool {
        self.bot
    }
    fn intents(&self) -> Intents {
        self.intents
    }
    fn shard(&self) -> u16 {
        self.shard
    }
    fn sub_info(&self) -> delivery::SubInfo {
        delivery::SubInfo { user_id: self.user_id, bot: self.bot, intents: self.intents, large_threshold: self.large_threshold }
    }
    fn write_dispatch(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool) {
        SessionHandle::write_dispatch(self, name, body, now)
    }
    fn revoke(&self, token_hashes: &[[u8; 32]]) -> bool {
        if !self.token_hash.get().is_some_and(|h| token_hashes.contains(h)) {
            return false;
        }
        self.close_revoked();
        true
    }
    fn write_forwarded(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool) {
        SessionHandle::write_forwarded(self, name, body, now)
    }
    fn flush(self: Arc<Self>) -> usize {
        SessionHandle::flush(&self)
    }
    fn push(self: Arc<Self>, d: Dispatch) {
        self.delivery.one(self.clone(), d);
    }
    fn frame_if_starting(self: Arc<Self>, d: &Dispatch) -> bool {
        self.frame_starting(d.name, &d.body)
    }
    fn joined(&self, key: ActorKey) {
        let mut keys = self.actors.lock().expect("session actor list poisoned");
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    fn left(&self, key: ActorKey) {
        self.actors.lock().expect("session actor list poisoned").retain(|k| *k != key);
    }
}

/// The node a session id was made on: ids start with the node id as four
/// hex digits (the rest is random), so a RESUME that reaches another node
/// knows where the session lives.
pub fn home_node(session_id: &str) -> Option<fanout::NodeId> {
    u16::from_str_radix(session_id.get(..4)?, 16).ok().map(|n| fanout::NodeId(u64::from(n)))
}

/// The node's sessions, owned by the gateway: the node and the actors see
/// the same table as recipients (`Node::sessions`, a
/// [`fanout::SessionTable`]); the gateway, the cluster's hand-over and the
/// admin routes use it typed. Made once per node, before the node.
#[derive(Default)]
pub struct Sessions {
    table: fanout::Registry<SessionHandle>,
    /// The thread that reads every session's socket, started by the first
    /// session (`reader`).
    reader: std::sync::OnceLock<Arc<reader::Reader>>,
    starting: std::sync::Mutex<()>,
}

impl Sessions {
    /// The node's reader, started on first use.
    pub fn reader(&self, node: &Arc<node::Node>) -> std::io::Result<&Arc<reader::Reader>> {
        if let Some(r) = self.reader.get() {
            return Ok(r);
        }
        let _one = self.starting.lock().expect("reader start poisoned");
        if let Some(r) = self.reader.get() {
            return Ok(r);
        }
        let r = reader::Reader::start(node)?;
        Ok(self.reader.get_or_init(|| r))
    }

    /// Sockets the reader waits on now (0 before the first session).
    pub fn reading(&self) -> usize {
        self.reader.get().map_or(0, |r| r.len())
    }
}

impl std::ops::Deref for Sessions {
    type Target = fanout::Registry<SessionHandle>;
    fn deref(&self) -> &Self::Target {
        &self.table
    }
}

impl fanout::SessionTable for Sessions {
    fn get(&self, id: &str) -> Option<fanout::Sink> {
        fanout::SessionTable::get(&self.table, id)
    }
    fn of_user(&self, user: UserId) -> Vec<fanout::Sink> {
        fanout::SessionTable::of_user(&self.table, user)
    }
    fn remove(&self, id: &str) {
        fanout::SessionTable::remove(&self.table, id)
    }
    fn len(&self) -> usize {
        fanout::SessionTable::len(&self.table)
    }
    fn revoke(&self, token_hashes: &[[u8; 32]]) -> usize {
        fanout::SessionTable::revoke(&self.table, token_hashes)
    }
}
#[cfg(test)]
mod sizes {
    /// Every session has one (with its `Arc`'s two counts): 448 bytes is
    /// one of jemalloc's size classes; one byte more takes 512 (issue #31's
    /// memory diet). Rarely used parts are boxed, and so are a socket's
    /// queued frames (`socket::Out`), absent while it is idle.
    #[test]
    fn a_session_handle_fits_448_bytes() {
        assert!(std::mem::size_of::<super::SessionHandle>() + 16 <= 448, "{}", std::mem::size_of::<super::SessionHandle>());
    }
}
