//! What nodes say to each other over NATS: the messages, their encoding,
//! and reading a batch of them back.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use protocol::{ActorKey, GuildId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use fanout::{Dispatch, NodeId, SessionRef};
use node::route::TakeOver;
use node::Node;

/// A delivery to a node's own sessions, or an answer to one of its requests.
#[derive(Serialize, Deserialize)]
pub(crate) enum ToNode {
    /// One event of actor `g` for the node's subscribers of it (or `only` these),
    /// from the actor of epoch `e`.
    Fan {
        g: ActorKey,
        e: u64,
        name: String,
        body: Box<RawValue>,
        filter: WireFilter,
        only: Option<Vec<Arc<str>>>,
        /// Which of the node's subscribers (all, active, passive).
        #[serde(default, skip_serializing_if = "is_all")]
        reach: fanout::Reach,
    },
    /// A subscriber of `g` becomes passive (or active again).
    Passive {
        s: Arc<str>,
        g: ActorKey,
        e: u64,
        passive: bool,
    },
    /// One dispatch for one session.
    One {
        s: Arc<str>,
        name: String,
        body: Box<RawValue>,
    },
    /// One dispatch for a session this node took over, from the node that
    /// held it (see `Recipient::write_forwarded`).
    Fwd {
        s: Arc<str>,
        name: String,
        body: Box<RawValue>,
    },
    /// Session `s` starts (stops) receiving guild `g` here (from the actor
    /// of epoch `e`); `first` is a dispatch for it alone that comes before
    /// (its GUILD_CREATE), delivered as `One` would.
    Sub {
        s: Arc<str>,
        g: ActorKey,
        e: u64,
        on: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first: Option<(String, Box<RawValue>)>,
    },
    Reply {
        id: u64,
        body: Box<RawValue>,
    },
    /// A RESUME reached the requesting node: hand the session over.
    TakeOver(TakeOver),
    /// The session, handed over (answers `TakeOver`; later dispatches of it
    /// follow as `One`, in order, on the same stream).
    HandOver {
        id: u64,
        s: Arc<str>,
        user: UserId,
        bot: bool,
        intents: u64,
        large_threshold: u32,
        actors: Vec<ActorKey>,
        seq: u64,
        replay: Vec<(u64, String, Box<RawValue>)>,
        home: SessionRef,
    },
    /// A session handed over from this node ended where it went.
    End {
        s: Arc<str>,
    },
    /// `u` joined guild `g`: subscribe this node's sessions of `u` to it.
    Joined {
        g: GuildId,
        u: UserId,
    },
    /// DM `g` (its actor's key) was created: subscribe this node's sessions
    /// of `users` to it, then tell the actor this node is settled.
    DmOpened {
        g: ActorKey,
        users: Vec<UserId>,
    },
}

pub(crate) fn send_to(out: &mpsc::Sender<(String, Bytes)>, node: NodeId, msg: &ToNode) -> bool {
    match serde_json::to_vec(msg) {
        Ok(v) => match out.try_send((format!("throng.n.{node}.d"), Bytes::from(v))) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "NATS outbound queue full or closed");
                false
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "delivery not encoded");
            false
        }
    }
}

#[derive(Serialize, Deserialize)]
pub(crate) enum WireFilter {
    Intent(u64),
    IntentNotUser(u64, UserId),
    /// The body is the message; the receiving node parses it once for the
    /// redaction rules.
    Message,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Heartbeat {
    pub(crate) node: NodeId,
    pub(crate) url: String,
}

/// Dispatch names are static strings everywhere else; names that arrive
/// over the bus are interned (a small, fixed set of event names).
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().expect("name table poisoned");
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// A dispatch as another node sent it (name and JSON body).
pub(crate) fn wire_dispatch(name: &str, body: &RawValue) -> Dispatch {
    Dispatch { name: intern(name), body: Bytes::copy_from_slice(body.get().as_bytes()) }
}

/// One dispatch for session `s` of this node alone, if it is here.
pub(crate) fn push_one(node: &Node, s: &str, name: &str, body: &RawValue) {
    if let Some(sink) = node.sessions.get(s) {
        sink.push(wire_dispatch(name, body));
    }
}

/// The messages of one NATS message (one, or a batch of them).
pub(crate) fn messages<'a, T: serde::Deserialize<'a> + 'a>(payload: &'a [u8]) -> impl Iterator<Item = Result<T, serde_json::Error>> + 'a {
    serde_json::Deserializer::from_slice(payload).into_iter::<T>()
}

fn is_all(r: &fanout::Reach) -> bool {
    *r == fanout::Reach::All
}
