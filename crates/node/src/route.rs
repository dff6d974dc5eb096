//! How anything reaches a guild's actor: the messages (plain data, so they
//! can cross processes) and the [`Router`] that carries them. The
//! local router (one process) is `guild::LocalRouter`; a cluster router
//! maps a guild to the node that owns it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use protocol::gateway::RequestGuildMembers;
use protocol::{model, ActorKey, ChannelId, GuildId, MessageId, UserId};
use store::{ChannelRecord, GuildRecord, MemberRecord, UserRecord};
use tokio::sync::oneshot;

use crate::presence::Presence;
use fanout::{NodeId, SessionRef, SubInfo};

pub mod dm;
pub mod interactions;
pub mod ops;
pub mod threads;
pub use ops::{Action, Op, OpReply, Set};

/// What a guild actor is asked to do. Plain data: the cluster router sends
/// it to the node that owns the guild as JSON. Requests never wait for a reply: the
/// actor answers sessions by pushing dispatches into their queues, and
/// requests that want an answer name where it goes ([`ReplyTo`]).
#[derive(serde::Serialize, serde::Deserialize)]
pub enum GuildMsg {
    /// Start sending this session the guild's events; sends GUILD_CREATE first.
    Subscribe(Box<Subscription>),
    /// Stop sending this session the guild's events; `presence`, if any,
    /// is what its user now shows from the session's node (its last session
    /// there ended), reported in the same message as `Presence` would.
    Unsubscribe {
        session: SessionRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        presence: Option<Box<(UserId, crate::presence::Presence)>>,
    },
    /// A session taken over by another node (a RESUME there): its
    /// subscription moves from `from` to `to`, with the marker that lets
    /// `to` keep the guild's order (see `gateway::session::Holding`). No
    /// GUILD_CREATE: the session has the guild already.
    Move(Box<Move>),
    /// op 8: answer with GUILD_MEMBERS_CHUNK dispatches.
    RequestMembers { session: SessionRef, req: Box<RequestGuildMembers> },
    /// op 14/37: the channels' member-list ranges this session watches now;
    /// it has the guild open, so it gets all its events (it is active).
    ListSubscribe(Box<ListSubscription>),
    /// The session has the guild open (op 14/37 for it: active, every
    /// event), or no longer has it (it opened others since: in a large
    /// guild only the unread state again, passive).
    Opened { session: SessionRef, open: bool },
    /// Time to send the passive sessions the unread state gathered since the
    /// last time (PASSIVE_UPDATE_V1); the actor's own timer.
    PassiveFlush,
    /// A member's visible presence changed on node `node` (what that node
    /// knows of the user's sessions there; the actor combines the nodes').
    Presence { user: UserId, node: u64, presence: Presence },
    /// The nodes of the cluster now (after a change): presences that nodes
    /// no longer in it reported are dropped.
    NodesLive(Vec<u64>),
    /// REST's `with_counts`: answers `[members, members not offline]` as JSON.
    Counts { reply: ReplyTo },
    /// A new message to authorize, commit and fan out (REST's create
    /// message): the guild's owner is the one writer of its messages.
    Post(Box<Post>),
    /// Any other change a user asks of the guild (see [`ops`]).
    Op(Box<Op>),
    /// A change already committed to the store. Boxed, as are the larger
    /// requests: a mailbox holds its capacity in blocks of 32 messages, so
    /// the largest variant sets the size of every slot of every guild's
    /// mailbox (GuildEvent is about 190 bytes, the other variants at most 40).
    Event(Box<GuildEvent>),
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Subscription {
    pub session: SessionRef,
    pub info: SubInfo,
    /// The user's presence as the session's node knows it, so an actor
    /// that starts (or moves) learns of users whose sessions are elsewhere.
    #[serde(default)]
    pub presence: Option<Presence>,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Move {
    pub from: SessionRef,
    pub to: SessionRef,
    pub info: SubInfo,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct ListSubscription {
    pub session: SessionRef,
    pub channels: Vec<(ChannelId, Vec<(u64, u64)>)>,
}

/// A message to create, as the REST handler read and checked it (shape,
/// length); the actor checks the author's permissions from its own state,
/// commits it through the node's writer, fans it out, then answers `reply`
/// with a [`PostReply`].
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Post {
    pub author: UserId,
    pub channel: ChannelId,
    pub content: String,
    pub tts: bool,
    pub flags: u64,
    /// `<@id>` mentions found in `content`, in order, at most 100.
    pub mentions: Vec<UserId>,
    /// Embeds, attachments, components and nonce (stored as they are).
    pub extra: serde_json::Value,
    /// A reply: its `message_reference` and the message it answers, rendered.
    pub reference: Option<model::MessageReference>,
    pub referenced: Option<Box<model::Message>>,
    /// Its deduplication key (see `store::DEDUP_FIELD`): one post with a
    /// key is committed at most once by its author in an actor within
    /// `limits.nonce_window_ms`; a repeat is answered with the first.
    #[serde(default)]
    pub key: Option<String>,
    pub reply: ReplyTo,
}

/// The actor's answer to a [`Post`], as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum PostReply {
    /// Committed and dispatched: the message as JSON (the HTTP response).
    Ok(Box<serde_json::value::RawValue>),
    UnknownChannel,
    /// Not a member, or may not view the channel.
    MissingAccess,
    MissingPermissions,
    /// This actor no longer owns the guild, or the writer is full: the
    /// caller may retry (503).
    Retry,
    /// The author's post with the same key was committed before: this
    /// message (the answer is it, read from the store).
    Duplicate(MessageId),
    Failed(String),
}

impl PostReply {
    /// `PostReply::Retry` as serde_json writes it.
    pub const RETRY: &'static [u8] = b"\"Retry\"";

    /// `PostReply::Ok(body)` exactly as serde_json writes it (`{"Ok":…}`),
    /// built with two copies instead of a UTF-8 check, a copy into a
    /// `RawValue` and a serialisation: the answer to every message posted.
    pub fn ok_bytes(body: &[u8]) -> Bytes {
        let mut v = Vec::with_capacity(body.len() + OK_PREFIX.len() + 1);
        v.extend_from_slice(OK_PREFIX);
        v.extend_from_slice(body);
        v.push(b'}');
        Bytes::from(v)
    }

    /// The message JSON of an `Ok` answer without parsing it (a slice of
    /// `answer`); `None` for any other answer.
    pub fn ok_body(answer: &Bytes) -> Option<Bytes> {
        (answer.len() > OK_PREFIX.len() && answer.starts_with(OK_PREFIX) && answer.ends_with(b"}"))
            .then(|| answer.slice(OK_PREFIX.len()..answer.len() - 1))
    }
}

const OK_PREFIX: &[u8] = b"{\"Ok\":";

/// Committed changes, applied to the actor's state and fanned out in order.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(into = "WireEvent", try_from = "WireEvent")]
pub enum GuildEvent {
    /// `body` is the message JSON, encoded once by the REST handler and also
    /// sent as its HTTP response.
    MessageCreate {
        message: std::sync::Arc<model::Message>,
        body: Bytes,
    },
    MessageUpdate {
        message: std::sync::Arc<model::Message>,
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
    /// A member's account changed (name, display name, avatar): the
    /// actor's copy is replaced and members see GUILD_MEMBER_UPDATE.
    UserUpdate(UserRecord),
}

/// A [`GuildEvent`] on the wire: a message travels as its JSON body alone
/// (verbatim), and the receiving node parses the message from it.
#[derive(serde::Serialize, serde::Deserialize)]
enum WireEvent {
    MessageCreate(Box<serde_json::value::RawValue>),
    MessageUpdate(Box<serde_json::value::RawValue>),
    MessageDelete { id: MessageId, channel_id: ChannelId },
    TypingStart { channel_id: ChannelId, user_id: UserId, timestamp: u64 },
    ChannelCreate(ChannelRecord),
    ChannelUpdate(ChannelRecord),
    ChannelDelete(ChannelRecord),
    GuildUpdate(GuildRecord),
    GuildDelete,
    MemberAdd { member: MemberRecord, user: UserRecord },
    MemberUpdate(MemberRecord),
    MemberRemove(UserId),
    UserUpdate(UserRecord),
}

/// A dispatch body (our own JSON) embedded verbatim in a bus message.
pub fn raw(body: &Bytes) -> Box<serde_json::value::RawValue> {
    // Our own JSON is UTF-8: the fast check, with the lossy copy only as a
    // fallback that never runs.
    let text = match std::str::from_utf8(body) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    serde_json::value::RawValue::from_string(text).expect("dispatch bodies are JSON")
}

fn unraw(r: &serde_json::value::RawValue) -> Result<(std::sync::Arc<model::Message>, Bytes), serde_json::Error> {
    let message = serde_json::from_str(r.get())?;
    Ok((std::sync::Arc::new(message), Bytes::copy_from_slice(r.get().as_bytes())))
}

impl From<GuildEvent> for WireEvent {
    fn from(e: GuildEvent) -> WireEvent {
        match e {
            GuildEvent::MessageCreate { body, .. } => WireEvent::MessageCreate(raw(&body)),
            GuildEvent::MessageUpdate { body, .. } => WireEvent::MessageUpdate(raw(&body)),
            GuildEvent::MessageDelete { id, channel_id } => WireEvent::MessageDelete { id, channel_id },
            GuildEvent::TypingStart { channel_id, user_id, timestamp } => WireEvent::TypingStart { channel_id, user_id, timestamp },
            GuildEvent::ChannelCreate(c) => WireEvent::ChannelCreate(c),
            GuildEvent::ChannelUpdate(c) => WireEvent::ChannelUpdate(c),
            GuildEvent::ChannelDelete(c) => WireEvent::ChannelDelete(c),
            GuildEvent::GuildUpdate(g) => WireEvent::GuildUpdate(g),
            GuildEvent::GuildDelete => WireEvent::GuildDelete,
            GuildEvent::MemberAdd { member, user } => WireEvent::MemberAdd { member, user },
            GuildEvent::MemberUpdate(m) => WireEvent::MemberUpdate(m),
            GuildEvent::MemberRemove(u) => WireEvent::MemberRemove(u),
            GuildEvent::UserUpdate(u) => WireEvent::UserUpdate(u),
        }
    }
}

impl TryFrom<WireEvent> for GuildEvent {
    type Error = serde_json::Error;
    fn try_from(e: WireEvent) -> Result<GuildEvent, serde_json::Error> {
        Ok(match e {
            WireEvent::MessageCreate(r) => {
                let (message, body) = unraw(&r)?;
                GuildEvent::MessageCreate { message, body }
            }
            WireEvent::MessageUpdate(r) => {
                let (message, body) = unraw(&r)?;
                GuildEvent::MessageUpdate { message, body }
            }
            WireEvent::MessageDelete { id, channel_id } => GuildEvent::MessageDelete { id, channel_id },
            WireEvent::TypingStart { channel_id, user_id, timestamp } => GuildEvent::TypingStart { channel_id, user_id, timestamp },
            WireEvent::ChannelCreate(c) => GuildEvent::ChannelCreate(c),
            WireEvent::ChannelUpdate(c) => GuildEvent::ChannelUpdate(c),
            WireEvent::ChannelDelete(c) => GuildEvent::ChannelDelete(c),
            WireEvent::GuildUpdate(g) => GuildEvent::GuildUpdate(g),
            WireEvent::GuildDelete => GuildEvent::GuildDelete,
            WireEvent::MemberAdd { member, user } => GuildEvent::MemberAdd { member, user },
            WireEvent::MemberUpdate(m) => GuildEvent::MemberUpdate(m),
            WireEvent::MemberRemove(u) => GuildEvent::MemberRemove(u),
            WireEvent::UserUpdate(u) => GuildEvent::UserUpdate(u),
        })
    }
}

impl From<GuildEvent> for GuildMsg {
    fn from(ev: GuildEvent) -> Self {
        GuildMsg::Event(Box::new(ev))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The guild's mailbox is full: fail fast, the caller answers 503 / retries.
    #[error("{0} is busy")]
    Busy(ActorKey),
    #[error("{0} is gone")]
    Gone(ActorKey),
    /// No node can take the guild now (this node lost the cluster's bus).
    #[error("{0} is unavailable: this node is not in its cluster")]
    Unavailable(ActorKey),
}

/// Messages waiting in a node's guild mailboxes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MailboxDepths {
    pub total: usize,
    pub max: usize,
}

/// Carries messages to the actors of guilds and DMs wherever they run, and
/// actors' answers back to the requests that asked; keeps the count of this
/// node's own actors. Never waits: a full mailbox is an error (503 / op 9
/// for the caller), not a wait. What only a cluster does is [`ClusterLink`].
pub trait Router: Send + Sync {
    fn send(&self, key: ActorKey, msg: GuildMsg) -> Result<(), RouteError>;

    /// Delivers an actor's answer to the request that named `to`.
    fn reply(&self, to: ReplyTo, body: Bytes);

    /// Actors running on this node.
    fn local_actors(&self) -> usize;

    /// Messages waiting in this node's mailboxes: the sum over all actors
    /// and the deepest one (for `/metrics`).
    fn mailbox_depths(&self) -> MailboxDepths;

    /// This node's actor of `guild` stopped (guild deleted or missing).
    fn actor_stopped(&self, key: ActorKey);
}

/// What only a cluster does: which nodes are live, where an actor runs,
/// and carrying an actor's events to sessions of other nodes. A single
/// process has none (`Node::cluster` is `None`). Everything one actor sends
/// one node travels in one ordered stream.
pub trait ClusterLink: Send + Sync {
    /// Whether this node may take new sessions (connected to its bus and in
    /// the ring), with the reason if not.
    fn health(&self) -> Result<(), &'static str>;

    /// The live nodes of the cluster as this node sees them.
    fn nodes(&self) -> Vec<u64>;

    /// Counters of the cluster bus for `/_throng/admin/stats` and `/metrics`.
    fn stats(&self) -> serde_json::Value;

    /// The node whose actor runs `guild`.
    fn owner_of(&self, key: ActorKey) -> Option<NodeId>;
    /// Goes up whenever a node of the cluster (this one or another)
    /// reconnected to NATS: what was in flight to or from it may be lost,
    /// so a post held for its owner is sent again at once.
    fn bus_epoch(&self) -> u64;
    /// Ticks whenever what `owner_of` or `bus_epoch` answer may have
    /// changed (the ring, this node's health, a reconnection): a post held
    /// for its owner waits on this instead of polling.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// One event to `node`'s subscribers of `guild` that `reach` names
    /// (all of them, or `only` these), from the actor that claimed `epoch`:
    /// a node takes no event of a guild from an older epoch than one it has
    /// seen (a fenced owner).
    fn fan(
        &self,
        node: NodeId,
        key: ActorKey,
        epoch: u64,
        event: &std::sync::Arc<fanout::FanEvent>,
        only: Option<Vec<std::sync::Arc<str>>>,
        reach: fanout::Reach,
    );
    /// `node`'s subscriber of `key` becomes passive (or active again) there
    /// (from the actor of `epoch`, in the order of its other messages).
    fn set_passive(&self, session: &SessionRef, key: ActorKey, epoch: u64, passive: bool);
    /// One dispatch to one session of `node`.
    fn one(&self, session: &SessionRef, d: fanout::Dispatch);
    /// One dispatch to one session of `node`, written as forwarded by the
    /// node that held it before (see `Recipient::write_forwarded`).
    fn forward(&self, session: &SessionRef, d: fanout::Dispatch);
    /// `node`'s session starts (stops) receiving `guild`'s events there
    /// (from the actor of `epoch`, as in `fan`).
    fn subscribed(&self, session: &SessionRef, key: ActorKey, epoch: u64, on: bool);
    /// `subscribed(.., true)` preceded by `first` for that session alone
    /// (its GUILD_CREATE), in one message: `one` then `subscribed` with one
    /// bus message fewer per subscription.
    fn subscribed_after(&self, session: &SessionRef, key: ActorKey, epoch: u64, first: fanout::Dispatch);

    /// Asks `holder` to hand a session over to this node (a RESUME that
    /// reached this node). False if the request could not be sent.
    fn take_over(&self, holder: NodeId, req: TakeOver) -> bool;
    /// A session taken over from `home` ended here: it ends there too.
    fn end(&self, home: &SessionRef);
    /// `user` joined `guild`: every other node subscribes its sessions of
    /// that user (the owner's own sessions are subscribed by the actor).
    fn member_joined(&self, guild: GuildId, user: UserId);
    /// A DM was created (`key`: its actor's): every other node subscribes
    /// its sessions of `users` to it, then tells the actor it is done. The
    /// nodes asked.
    fn dm_opened(&self, key: ActorKey, users: &[UserId]) -> Vec<NodeId>;
}

/// A RESUME of a session of another node, sent to that node.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct TakeOver {
    pub session: std::sync::Arc<str>,
    pub user: UserId,
    /// The last sequence the client saw.
    pub seq: u64,
    pub reply: ReplyTo,
}

/// Where an actor's answer goes: a pending request on some node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplyTo {
    pub node: NodeId,
    pub id: u64,
}

/// Pending requests beyond which abandoned ones are swept.
const SWEEP_REPLIES_AT: usize = 1024;

/// This node's requests waiting for an actor's answer.
pub struct Replies {
    node: NodeId,
    next: AtomicU64,
    /// Guards the map only; never held across an await.
    waiting: Mutex<HashMap<u64, oneshot::Sender<Bytes>>>,
}

impl Replies {
    pub fn new(node: NodeId) -> Replies {
        Replies { node, next: AtomicU64::new(1), waiting: Mutex::new(HashMap::new()) }
    }

    /// A new request: where its answer goes, and where to wait for it.
    /// Dropping the receiver forgets the request (on the next answer or sweep).
    pub fn register(&self) -> (ReplyTo, oneshot::Receiver<Bytes>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut w = self.waiting.lock().expect("reply map poisoned");
        // Requests whose answer never came (the caller timed out): swept
        // now and then, not on every request.
        if w.len() >= SWEEP_REPLIES_AT {
            w.retain(|_, tx| !tx.is_closed());
        }
        w.insert(id, tx);
        (ReplyTo { node: self.node, id }, rx)
    }

    /// Completes request `id` of this node (unknown or abandoned: ignored).
    pub fn complete(&self, id: u64, body: Bytes) {
        let tx = self.waiting.lock().expect("reply map poisoned").remove(&id);
        if let Some(tx) = tx {
            let _abandoned_is_fine = tx.send(body);
        }
    }

    pub fn node(&self) -> NodeId {
        self.node
    }
}

/// Tells the guilds among `keys` that `user`'s visible presence changed.
pub fn broadcast_presence(router: &dyn Router, node: u64, user: UserId, keys: &[ActorKey], presence: Presence) {
    // DM actors have no presences to show.
    for g in keys.iter().filter_map(|k| k.as_guild()) {
        if let Err(e) = router.send(g.into(), GuildMsg::Presence { user, node, presence: presence.clone() }) {
            tracing::debug!(guild = %g, error = %e, "presence update dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_is_what_serde_writes() {
        assert_eq!(serde_json::to_vec(&PostReply::Retry).unwrap(), PostReply::RETRY);
    }

    #[test]
    fn ok_bytes_are_what_serde_writes_and_ok_body_slices_them_back() {
        let body = r#"{"id":"1","content":"hi \"there\" é"}"#.as_bytes();
        let ours = PostReply::ok_bytes(body);
        let serde = serde_json::to_vec(&PostReply::Ok(raw(&Bytes::from_static(body)))).unwrap();
        assert_eq!(&ours[..], &serde[..]);
        assert_eq!(&PostReply::ok_body(&ours).unwrap()[..], body);
        assert!(matches!(serde_json::from_slice::<PostReply>(&ours).unwrap(), PostReply::Ok(b) if b.get().as_bytes() == body));
        for other in [PostReply::MissingAccess, PostReply::Failed("x}".into()), PostReply::Retry] {
            let bytes = Bytes::from(serde_json::to_vec(&other).unwrap());
            assert_eq!(PostReply::ok_body(&bytes), None);
        }
    }
}
