//! Guilds: one actor task per guild owns its state and is the only writer of
//! its ordered event stream. Everything reaches a guild through
//! [`GuildRouter`] (local today; a cluster router later maps a guild to the
//! node that owns it).

pub(crate) mod actor;
pub mod list;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use protocol::gateway::RequestGuildMembers;
use protocol::{model, ChannelId, GuildId, MessageId, UserId};
use store::{ChannelRecord, GuildRecord, MemberRecord, UserRecord};
use tokio::sync::{mpsc, oneshot};

use crate::gateway::SessionHandle;
use crate::node::Node;
use crate::presence::Presence;

/// What a guild actor is asked to do. Requests never wait for a reply: the
/// actor answers sessions by pushing dispatches into their queues.
pub enum GuildMsg {
    /// Start sending this session the guild's events; sends GUILD_CREATE first.
    Subscribe {
        session: Arc<SessionHandle>,
    },
    Unsubscribe {
        session_id: Arc<str>,
    },
    /// op 8: answer with GUILD_MEMBERS_CHUNK dispatches.
    RequestMembers {
        session: Arc<SessionHandle>,
        req: Box<RequestGuildMembers>,
    },
    /// op 14/37: the channels' member-list ranges this session watches now.
    ListSubscribe {
        session: Arc<SessionHandle>,
        channels: Vec<(ChannelId, Vec<(u64, u64)>)>,
    },
    /// A member's visible presence changed.
    Presence {
        user: UserId,
        presence: Presence,
    },
    /// REST's `with_counts`: (members, members not offline).
    Counts {
        reply: oneshot::Sender<(usize, usize)>,
    },
    /// A change already committed to the store. Boxed, as is the op 8
    /// request: a mailbox holds its capacity in blocks of 32 messages, so the
    /// largest variant sets the size of every slot of every guild's mailbox
    /// (GuildEvent is about 190 bytes, the other variants at most 40).
    Event(Box<GuildEvent>),
}

/// Committed changes, applied to the actor's state and fanned out in order.
pub enum GuildEvent {
    /// `body` is the message JSON, encoded once by the REST handler and also
    /// sent as its HTTP response.
    MessageCreate {
        message: Arc<model::Message>,
        body: Bytes,
    },
    MessageUpdate {
        message: Arc<model::Message>,
        body: Bytes,
    },
    MessageDelete {
        id: MessageId,
        channel_id: ChannelId,
    },
    TypingStart {
        channel_id: ChannelId,
        user_id: UserId,
        timestamp: u64,
    },
    ChannelCreate(ChannelRecord),
    ChannelUpdate(ChannelRecord),
    ChannelDelete(ChannelRecord),
    GuildUpdate(GuildRecord),
    GuildDelete,
    MemberAdd {
        member: MemberRecord,
        user: UserRecord,
    },
    MemberUpdate(MemberRecord),
    MemberRemove(UserId),
}

impl From<GuildEvent> for GuildMsg {
    fn from(ev: GuildEvent) -> Self {
        GuildMsg::Event(Box::new(ev))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The guild's mailbox is full: fail fast, the caller answers 503 / retries.
    #[error("guild {0} is busy")]
    Busy(GuildId),
    #[error("guild {0} is gone")]
    Gone(GuildId),
}

/// Maps guild ids to their actors' mailboxes, spawning actors on first use.
pub struct GuildRouter {
    /// Guards the map only; never held across an await.
    map: Mutex<HashMap<GuildId, mpsc::Sender<GuildMsg>>>,
    /// Mailbox bound of each actor.
    capacity: usize,
}

impl GuildRouter {
    pub fn new(capacity: usize) -> Self {
        Self { map: Mutex::new(HashMap::new()), capacity }
    }

    fn mailbox(&self, node: &Arc<Node>, id: GuildId) -> mpsc::Sender<GuildMsg> {
        let mut map = self.map.lock().expect("guild router poisoned");
        if let Some(tx) = map.get(&id).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::channel(self.capacity);
        map.insert(id, tx.clone());
        node.tasks.spawn(actor::GuildActor::new(node.clone(), id, rx).run());
        tx
    }

    /// Sends without waiting; a full mailbox is an error, not a wait.
    pub fn send(&self, node: &Arc<Node>, id: GuildId, msg: GuildMsg) -> Result<(), RouteError> {
        match self.mailbox(node, id).try_send(msg) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(RouteError::Busy(id)),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(RouteError::Gone(id)),
        }
    }

    /// Reserves a place in the guild's mailbox before a change is committed,
    /// so a committed change is never dropped for a full mailbox: a busy
    /// guild refuses the write (503) instead.
    pub fn reserve(&self, node: &Arc<Node>, id: GuildId) -> Result<mpsc::OwnedPermit<GuildMsg>, RouteError> {
        match self.mailbox(node, id).try_reserve_owned() {
            Ok(p) => Ok(p),
            Err(mpsc::error::TrySendError::Full(_)) => Err(RouteError::Busy(id)),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(RouteError::Gone(id)),
        }
    }

    /// Forgets an actor that stopped (guild deleted or missing).
    fn remove(&self, id: GuildId) {
        let mut map = self.map.lock().expect("guild router poisoned");
        if map.get(&id).is_some_and(|tx| tx.is_closed()) {
            map.remove(&id);
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().expect("guild router poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `@everyone` role of a new guild: it shares the guild's id, as on Discord.
pub fn everyone_role(guild: GuildId) -> store::RoleRecord {
    store::RoleRecord {
        id: protocol::RoleId(guild.0),
        guild_id: guild,
        name: "@everyone".into(),
        color: 0,
        hoist: false,
        position: 0,
        permissions: protocol::model::permission::DEFAULT_EVERYONE,
        mentionable: false,
    }
}

/// A plain text channel of a new guild.
pub fn text_channel(id: ChannelId, guild: GuildId, name: String, position: i32) -> ChannelRecord {
    ChannelRecord {
        id,
        guild_id: Some(guild),
        kind: protocol::model::channel_type::GUILD_TEXT,
        name,
        position,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: 0,
        overwrites: Vec::new(),
        last_message_id: None,
    }
}

/// Tells each of `guilds` that `user`'s visible presence changed.
pub fn broadcast_presence(node: &Arc<Node>, user: UserId, guilds: &[GuildId], presence: Presence) {
    for &g in guilds {
        if let Err(e) = node.guilds.send(node, g, GuildMsg::Presence { user, presence: presence.clone() }) {
            tracing::debug!(guild = %g, error = %e, "presence update dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_slots_stay_small() {
        // Every guild's mailbox allocates slots of this size in blocks of 32.
        assert!(std::mem::size_of::<GuildMsg>() <= 48, "GuildMsg is {} bytes", std::mem::size_of::<GuildMsg>());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_mailbox_refuses_at_once_and_rest_answers_503() {
        use axum::response::IntoResponse;
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(store::sqlite::SqliteStore::open(dir.path(), &Default::default()).await.unwrap());
        let mut config = crate::config::Config::default();
        config.limits.guild_mailbox_capacity = 2;
        let node = Node::new(config, store);
        let g = GuildId(42);
        let msg = || GuildMsg::Unsubscribe { session_id: "s".into() };
        // The actor is spawned on this single-threaded runtime but cannot run
        // before the test yields, so nothing drains the mailbox.
        node.guilds.send(&node, g, msg()).unwrap();
        let permit = node.guilds.reserve(&node, g).unwrap();
        assert!(matches!(node.guilds.send(&node, g, msg()), Err(RouteError::Busy(id)) if id == g));
        assert!(matches!(node.guilds.reserve(&node, g), Err(RouteError::Busy(_))));
        // A released reservation frees its place.
        drop(permit);
        node.guilds.send(&node, g, msg()).unwrap();
        // What a REST caller gets for it: 503, Retry-After and Discord's error body.
        let resp = crate::http::error::ApiError::from(RouteError::Busy(g)).into_response();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], 0);
        assert!(v["retry_after"].is_number());
    }
}
