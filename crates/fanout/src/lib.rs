//! Fan-out: who receives a guild's events on this node, and the delivery
//! workers that write them. Below both the gateway (whose sessions are
//! [`Recipient`]s) and the guild actors (which publish [`FanEvent`]s to an
//! audience): neither knows the other's types.
//!
//! The delivery workers are in [`worker`]; a guild's audience is
//! [`Subscribers`] ([`subscribers`]).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::{model, UserId};

pub mod subscribers;
pub mod worker;

pub use subscribers::*;
pub use worker::*;

mod by_id;
pub mod registry;

pub use registry::{NoSessions, Registry, SessionTable};

/// One encoded dispatch, shared by every recipient: the event name and the
/// JSON of `d`. Cloning is two reference-count bumps, never a copy.
#[derive(Clone, Debug)]
pub struct Dispatch {
    pub name: &'static str,
    pub body: Bytes,
}

/// The name of a control dispatch, never sent to a client: its body is a
/// guild id, and it tells a session taken over from another node that
/// everything that node had of that guild came before it (see
/// `Recipient::write_forwarded`).
pub const MOVED: &str = "\u{0}MOVED";

/// A node of the cluster (1 for a single node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NodeId(pub u64);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A session anywhere in the cluster, as plain data: the node that holds
/// its socket and its id there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SessionRef {
    pub node: NodeId,
    pub id: Arc<str>,
}

/// What a guild needs to know of a subscribing session (plain data).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SubInfo {
    pub user_id: UserId,
    pub bot: bool,
    pub intents: Intents,
    /// Guilds above this member count send only online members in GUILD_CREATE.
    pub large_threshold: u32,
}

/// A session as fan-out sees it: who it is, and how a delivery worker
/// frames a dispatch into it and writes it. The gateway's sessions
/// implement it; fan-out never sees sockets.
pub trait Recipient: Send + Sync + 'static {
    fn id(&self) -> &Arc<str>;
    fn user_id(&self) -> UserId;
    fn bot(&self) -> bool;
    fn intents(&self) -> Intents;
    /// The delivery worker this recipient is pinned to.
    fn shard(&self) -> u16;
    /// What a guild needs to know of it.
    fn sub_info(&self) -> SubInfo;
    /// Frames one dispatch (recording it for replay). Returns (framed into
    /// a socket's buffer, first frame since the last flush).
    fn write_dispatch(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool);
    /// Frames a dispatch that another node forwarded for this session (it
    /// held the session before): those come first, in their node's order,
    /// and [`MOVED`] markers among them say a guild's own events may follow.
    /// A recipient that does not move between nodes writes it as any other.
    fn write_forwarded(&self, name: &'static str, body: &Bytes, now: std::time::Instant) -> (bool, bool) {
        self.write_dispatch(name, body, now)
    }
    /// Writes what was framed; returns how many frames left.
    fn flush(self: Arc<Self>) -> usize;
    /// Queues one dispatch for this recipient alone, behind everything
    /// already queued for it (its worker's queue is FIFO). Never waits.
    fn push(self: Arc<Self>, d: Dispatch);
    /// Frames `d` on the caller's thread if this is a session that has just
    /// started and still holds its READY for its guilds' GUILD_CREATEs
    /// (written with them in one write once the last is framed): no hand-off
    /// to a delivery thread. False otherwise: the caller queues it
    /// ([`Delivery::one`](crate::worker::Delivery::one)). Nothing of the
    /// caller's can be queued for such a session yet, so the order of the
    /// caller's own events is kept.
    fn frame_if_starting(self: Arc<Self>, _d: &Dispatch) -> bool {
        false
    }
    /// Closes the recipient's connection for good (4004) if it was opened
    /// with one of these tokens (their SHA-256), which were just revoked.
    /// Whether it was. Recipients without a token: never.
    fn revoke(&self, _token_hashes: &[[u8; 32]]) -> bool {
        false
    }
    /// The recipient now receives (no longer receives) `guild`'s events.
    fn joined(&self, key: protocol::ActorKey);
    fn left(&self, key: protocol::ActorKey);
}

/// A recipient as fan-out holds it.
pub type Sink = Arc<dyn Recipient>;

/// Who gets an event's body, and which variant.
pub enum Filter {
    /// Sessions with this intent.
    Intent(u64),
    /// Sessions with this intent, except the user's own (presence: they set it).
    IntentNotUser(u64, UserId),
    /// MESSAGE_CREATE/UPDATE: sessions with GUILD_MESSAGES; bots without
    /// MESSAGE_CONTENT get the redacted variant unless they wrote or are
    /// mentioned in the message. The redacted body is encoded at most once.
    Message { message: Arc<model::Message>, redacted: OnceLock<Bytes> },
}

/// One guild event, encoded once, for all of its recipients.
pub struct FanEvent {
    pub name: &'static str,
    pub body: Bytes,
    pub filter: Filter,
}

impl FanEvent {
    pub fn new(name: &'static str, body: Bytes, filter: Filter) -> Arc<FanEvent> {
        Arc::new(FanEvent { name, body, filter })
    }

    /// Whether a session described by `info` may get this event at all
    /// (messages: decided where the session lives).
    pub fn may_reach(&self, info: &SubInfo) -> bool {
        self.reaches(info.intents, info.user_id)
    }

    /// [`FanEvent::may_reach`] for a session with `intents`, of `user`.
    #[inline]
    fn reaches(&self, intents: Intents, user: UserId) -> bool {
        match &self.filter {
            Filter::Intent(i) => intents.contains(*i),
            Filter::IntentNotUser(i, u) => intents.contains(*i) && user != *u,
            Filter::Message { .. } => true,
        }
    }

    /// The body `s` gets, if any.
    pub fn body_for(&self, s: &dyn Recipient) -> Option<&Bytes> {
        let (intents, user) = (s.intents(), s.user_id());
        match &self.filter {
            Filter::Intent(_) | Filter::IntentNotUser(..) => self.reaches(intents, user).then_some(&self.body),
            Filter::Message { message: m, redacted } => {
                // DMs: DIRECT_MESSAGES, and content whatever MESSAGE_CONTENT says.
                let dm = m.guild_id.is_none();
                if !intents.contains(if dm { Intents::DIRECT_MESSAGES } else { Intents::GUILD_MESSAGES }) {
                    return None;
                }
                let entitled = dm
                    || !s.bot()
                    || intents.contains(Intents::MESSAGE_CONTENT)
                    || user == m.author.id
                    || m.mentions.iter().any(|u| u.id == user);
                Some(if entitled { &self.body } else { redacted.get_or_init(|| encode(&m.redacted())) })
            }
        }
    }
}

thread_local! {
    /// Where bodies are serialised before they are copied out at their exact size.
    static ENCODE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Serialises a dispatch body once. Our own types always serialise.
///
/// The JSON is built in a per-thread buffer and copied into one allocation
/// of its exact size: serialising straight into a fresh `Vec` grows it by
/// doubling, and the freed intermediate blocks of thousands of per-session
/// GUILD_CREATEs during an identify ramp were measured as ~40 MiB of heap
/// fragmentation at 19,000 sessions.
pub fn encode<T: serde::Serialize>(v: &T) -> Bytes {
    ENCODE.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        serde_json::to_writer(&mut *buf, v).expect("dispatch bodies are plain data and always serialise");
        let out = Bytes::copy_from_slice(&buf);
        if buf.capacity() > 1 << 20 {
            *buf = Vec::new();
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recipient that is only an id and a shard (its user's id too).
    struct Fake {
        id: Arc<str>,
        shard: u16,
    }

    impl Recipient for Fake {
        fn id(&self) -> &Arc<str> {
            &self.id
        }
        fn user_id(&self) -> UserId {
            UserId(u64::from(self.shard))
        }
        fn bot(&self) -> bool {
            false
        }
        fn intents(&self) -> Intents {
            Intents::ALL
        }
        fn shard(&self) -> u16 {
            self.shard
        }
        fn sub_info(&self) -> SubInfo {
            SubInfo { user_id: UserId(1), bot: false, intents: self.intents(), large_threshold: 50 }
        }
        fn write_dispatch(&self, _: &'static str, _: &Bytes, _: std::time::Instant) -> (bool, bool) {
            (false, false)
        }
        fn flush(self: Arc<Self>) -> usize {
            0
        }
        fn push(self: Arc<Self>, _: Dispatch) {}
        fn joined(&self, _: protocol::ActorKey) {}
        fn left(&self, _: protocol::ActorKey) {}
    }

    #[test]
    fn partitions_hold_each_subscriber_once_on_its_worker_in_memory_order() {
        let mut subs = Subscribers::new(3);
        // Allocated in an order unrelated to the ids' hash order.
        let sinks: Vec<Sink> = (0..300u16).map(|i| Arc::new(Fake { id: format!("s{i}").into(), shard: i % 7 }) as Sink).collect();
        for s in &sinks {
            subs.insert(s.clone());
        }
        subs.remove("s5");
        let Partitions(parts) = subs.partitions();
        assert_eq!(parts.len(), 3);
        let mut seen: Vec<&str> = Vec::new();
        for (w, part) in parts.iter().enumerate() {
            assert!(part.iter().all(|s| s.shard() as usize % 3 == w), "a session on another worker's part");
            assert!(part.windows(2).all(|p| addr(&p[0]) < addr(&p[1])), "part {w} is not in memory order");
            seen.extend(part.iter().map(|s| &**s.id()));
        }
        seen.sort_unstable();
        let mut want: Vec<String> = (0..300).filter(|i| *i != 5).map(|i| format!("s{i}")).collect();
        want.sort_unstable();
        assert_eq!(seen, want.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn each_reach_holds_its_subscribers_and_follows_passive_changes() {
        let mut subs = Subscribers::new(2);
        for i in 0..6u16 {
            subs.insert(Arc::new(Fake { id: format!("s{i}").into(), shard: i }) as Sink);
        }
        let ids = |subs: &mut Subscribers, r: Reach| {
            let Partitions(parts) = subs.partitions_of(r);
            let mut v: Vec<String> = parts.iter().flat_map(|p| p.iter().map(|s| s.id().to_string())).collect();
            v.sort_unstable();
            v
        };
        let all: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
        assert_eq!((ids(&mut subs, Reach::Active), ids(&mut subs, Reach::Passive)), (all.clone(), vec![]));
        assert!(subs.set_passive("s1", true) && subs.set_passive("s4", true) && !subs.set_passive("s4", true));
        assert!(!subs.set_passive("nobody", true));
        assert_eq!(ids(&mut subs, Reach::Passive), ["s1", "s4"]);
        assert_eq!(ids(&mut subs, Reach::Active), ["s0", "s2", "s3", "s5"]);
        assert_eq!(ids(&mut subs, Reach::All), all);
        // Active again, or gone: out of the passive ones.
        subs.set_passive("s1", false);
        subs.remove("s4");
        assert_eq!((ids(&mut subs, Reach::Passive), subs.passive_count()), (vec![], 0));
        assert_eq!(ids(&mut subs, Reach::Active).len(), 5);
        // A subscriber inserted again starts active.
        subs.set_passive("s2", true);
        subs.insert(Arc::new(Fake { id: "s2".into(), shard: 2 }) as Sink);
        assert!(!subs.is_passive("s2"));
    }

    #[test]
    fn the_registry_finds_sessions_by_id_and_by_user() {
        let reg: Registry<Fake> = Registry::default();
        let fake = |id: &str, user: u16| Arc::new(Fake { id: id.into(), shard: user });
        for i in 0..200u16 {
            reg.insert(fake(&format!("s{i}"), i % 50));
        }
        assert_eq!(reg.len(), 200);
        let ids = |user: u64| {
            let mut v: Vec<String> = reg.of_user(UserId(user)).iter().map(|s| s.id().to_string()).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(ids(7), ["s107", "s157", "s57", "s7"]);
        reg.remove("s57");
        reg.remove("nobody");
        assert_eq!(ids(7), ["s107", "s157", "s7"]);
        assert!(reg.get("s57").is_none() && reg.get("s157").is_some());
        // The same id again replaces the session, under its new user too.
        reg.insert(fake("s7", 8));
        assert_eq!(ids(7), ["s107", "s157"]);
        assert_eq!(ids(8).len(), 5);
        assert_eq!(reg.get("s7").map(|s| s.user_id()), Some(UserId(8)));
        assert_eq!(reg.len(), 199);
        for i in 0..200u16 {
            reg.remove(&format!("s{i}"));
        }
        assert!(reg.is_empty() && ids(8).is_empty());
    }
}
