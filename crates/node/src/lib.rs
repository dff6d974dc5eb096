//! What one process shares between the listener, sessions, guild actors and
//! REST handlers. Cloned as `Arc<Node>`; every field is immutable or guards
//! itself.

pub mod attachments;
pub mod audit;
pub mod auth;
pub mod batch;
pub mod components;
pub mod convert;
pub mod emoji;
pub mod group_commit;
pub mod linger;
pub mod lookups;
pub mod perm;
pub mod presence;
pub mod ratelimit;
pub mod read_states;
pub mod route;
pub mod signing;
pub mod users;

use std::sync::Arc;

use protocol::SnowflakeGen;
use protocol::{ActorKey, GuildId};
use store::{GuildSnapshot, IdentifyRecord, Store};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Auth;
use crate::batch::Batcher;
use crate::presence::Presences;
use crate::ratelimit::RateLimiter;
use crate::route::{ClusterLink, Replies, Router};
use config::Config;
use fanout::{Delivery, Limits, Nice, NodeId, SessionTable};

/// What builds a node's routing: the router, and the cluster link if any.
pub type RouterParts = (Arc<dyn Router>, Option<Arc<dyn ClusterLink>>);

pub struct Node {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub ids: SnowflakeGen,
    pub auth: Auth,
    /// This node's id in the cluster (1 alone).
    pub id: NodeId,
    /// Carries messages to guild and DM actors, wherever they run.
    pub guilds: Arc<dyn Router>,
    /// What only a cluster does (membership, other nodes' sessions); `None`
    /// alone.
    pub cluster: Option<Arc<dyn ClusterLink>>,
    /// Requests of this node waiting for an actor's answer.
    pub replies: Replies,
    /// The sessions whose sockets (or resume windows) are on this node.
    pub sessions: Arc<dyn SessionTable>,
    /// The delivery workers fan-out runs on (`fanout::worker`).
    pub delivery: Arc<Delivery>,
    pub presences: Presences,
    /// One shared record per user for every guild actor (see `users`).
    pub users: crate::users::UserCache,
    pub rest_limits: RateLimiter,
    /// Login and registration budgets (`[auth]`).
    pub login_limits: crate::ratelimit::LoginLimits,
    /// RESUME's token lookups, batched (see `batch`).
    pub identify_lookups: Batcher<[u8; 32], IdentifyRecord>,
    /// IDENTIFY's reads (token, DMs, read states), batched together
    /// (`batch::session_starts`).
    pub session_starts: Batcher<batch::StartAsk, batch::SessionStart>,
    /// Guild actors' ownership claims in a cluster, batched (see `batch`).
    pub guild_claims: Batcher<protocol::ActorKey, u64>,
    /// Group commit of new messages (see `writer`).
    pub writer: crate::group_commit::Writer,
    /// The actor of each channel seen (its guild's, or a DM's own; a channel
    /// never changes guild), so sending a message needs no store read to
    /// find the actor.
    channel_actors: std::sync::Mutex<std::collections::HashMap<protocol::ChannelId, ActorKey>>,
    /// Callers lately found allowed to post in a channel, and when
    /// (`limits.post_check_ttl_ms`): the check a post's body waits for
    /// costs a store read only once in that time.
    posters: std::sync::Mutex<std::collections::HashMap<(protocol::UserId, protocol::ChannelId), std::time::Instant>>,
    /// Applications and commands, as interactions look them up (`lookups`).
    pub lookups: crate::lookups::Lookups,
    /// Guild actors' loads, batched (see `batch`).
    pub guild_loads: Batcher<GuildId, GuildSnapshot>,
    /// Starting actors' deduplication keys, read together
    /// (`batch::message_keys`).
    pub message_keys: Batcher<batch::KeysAsk, Vec<batch::KeyRow>>,
    /// Acks and mention counts, written in batches (see `read_states`).
    pub read_states: crate::read_states::ReadStates,
    /// Bounds IDENTIFYs in flight; `try_acquire` or the client gets op 9 `d:true`.
    pub identify_permits: Semaphore,
    /// Live gateway sockets of this process (see `limits.max_gateway_connections`).
    pub gateway_connections: Arc<std::sync::atomic::AtomicUsize>,
    /// Posts this node sent to their guild's owner again (no answer in
    /// time, the owner moved, or a reconnection): `admin/stats`.
    pub posts_resent: std::sync::atomic::AtomicU64,
    /// Cancelled on shutdown: sessions send RECONNECT and close, actors stop.
    pub shutdown: CancellationToken,
    /// Every connection and session task, so shutdown can wait for them
    /// (axum/hyper do not track upgraded sockets).
    pub tasks: TaskTracker,
    /// Uploaded files on disk and the bound on uploads in flight.
    pub blobs: crate::attachments::Blobs,
    /// Proxies whose `X-Forwarded-For` names the client (`http.trusted_proxies`).
    pub trusted_proxies: config::client_addr::TrustedProxies,
    /// Passes [`Notice`]s to every other node (set by the cluster; alone: none).
    notice_hook: std::sync::OnceLock<NoticeHook>,
}

/// What every node of a cluster must hear about at once, whichever node it
/// happened on (see [`Node::notify`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Notice {
    /// Tokens whose user changed: drop them from the token caches
    /// (SHA-256 of each token, hex).
    ForgetTokens(Vec<String>),
    /// Tokens revoked (a logout, "log out everywhere else", a password
    /// change): dropped from the caches, and every gateway session opened
    /// with one is closed with 4004.
    RevokeTokens(Vec<String>),
    /// A user's own account changed: USER_UPDATE to every session of theirs.
    UserUpdate { user: protocol::UserId, body: Box<serde_json::value::RawValue> },
    /// A user read a channel: MESSAGE_ACK to every session of theirs.
    MessageAck { user: protocol::UserId, body: Box<serde_json::value::RawValue> },
}

impl Notice {
    pub fn forget_tokens(hashes: &[[u8; 32]]) -> Notice {
        Notice::ForgetTokens(hashes.iter().map(hex::encode).collect())
    }

    pub fn revoke_tokens(hashes: &[[u8; 32]]) -> Notice {
        Notice::RevokeTokens(hashes.iter().map(hex::encode).collect())
    }
}

type NoticeHook = Box<dyn Fn(&Notice) + Send + Sync>;

/// Token hashes as a notice carries them (hex), skipping malformed ones.
fn decode_hashes(hashes: &[String]) -> Vec<[u8; 32]> {
    hashes.iter().filter_map(|h| hex::decode(h).ok().and_then(|b| <[u8; 32]>::try_from(b).ok())).collect()
}

impl Node {
    /// Starts the node's delivery workers; call inside a tokio runtime.
    /// `sessions` is the table of the layer that owns sessions (the
    /// gateway's), seen here as recipients. `router` builds the node's
    /// guild router (it may keep a weak reference to the node, to spawn
    /// actors).
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        sessions: Arc<dyn SessionTable>,
        router: impl FnOnce(std::sync::Weak<Node>) -> RouterParts,
    ) -> Arc<Node> {
        let ids = SnowflakeGen::new(config.worker_id, config.process_id);
        let tasks = TaskTracker::new();
        let gw = &config.gateway;
        let workers = match gw.delivery_workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let delivery = Delivery::start(
            workers,
            Nice { base: gw.delivery_nice, burst: gw.delivery_burst_nice },
            Limits::from_config(gw),
            tokio::runtime::Handle::current(),
            tasks.clone(),
        );
        let id = NodeId(config.node_id);
        let read_linger = std::time::Duration::from_millis(config.limits.read_linger_ms);
        Arc::new_cyclic(|weak| {
            let (guilds, cluster) = router(weak.clone());
            Node {
                id,
                guilds,
                cluster,
                replies: Replies::new(id),
                delivery,
                auth: Auth::new(store.clone(), &config),
                login_limits: crate::ratelimit::LoginLimits::new(&config.auth),
                sessions,
                presences: Presences::default(),
                users: Default::default(),
                rest_limits: RateLimiter::new(config.limits.rest_requests_per_window, config.limits.rest_window_ms),
                identify_lookups: batch::identify_lookups(store.clone(), read_linger),
                session_starts: batch::session_starts(store.clone(), read_linger),
                guild_loads: batch::guild_loads(store.clone(), read_linger),
                message_keys: batch::message_keys(store.clone(), read_linger),
                read_states: crate::read_states::ReadStates::start(store.clone(), config.read_states.queue, config.read_states.batch_max),
                guild_claims: batch::guild_claims(store.clone(), config.node_id, read_linger),
                writer: crate::group_commit::Writer::start(
                    store.clone(),
                    config.limits.write_queue,
                    config.limits.write_batch_max,
                    std::time::Duration::from_millis(config.limits.write_linger_ms),
                ),
                channel_actors: Default::default(),
                posters: Default::default(),
                lookups: crate::lookups::Lookups::new(config.interactions.lookup_ttl_ms),
                identify_permits: Semaphore::new(config.gateway.identify_concurrency.max(1)),
                gateway_connections: Arc::default(),
                posts_resent: std::sync::atomic::AtomicU64::new(0),
                shutdown: CancellationToken::new(),
                tasks,
                blobs: crate::attachments::Blobs::new(&config),
                // Checked by `Config::validate`.
                trusted_proxies: config::client_addr::TrustedProxies::parse(&config.http.trusted_proxies).unwrap_or_default(),
                notice_hook: std::sync::OnceLock::new(),
                ids,
                store,
                config,
            }
        })
    }
}

impl Node {
    /// The cluster link, if this node is in a cluster.
    pub fn cluster(&self) -> Option<&dyn ClusterLink> {
        self.cluster.as_deref()
    }

    /// Whether this node may take new sessions (alone: always).
    pub fn health(&self) -> Result<(), &'static str> {
        self.cluster().map_or(Ok(()), |c| c.health())
    }

    /// The live nodes of the cluster as this node sees them (alone: none).
    pub fn cluster_nodes(&self) -> Vec<u64> {
        self.cluster().map_or_else(Vec::new, |c| c.nodes())
    }

    /// Acts on `n` here and tells every other node (in a cluster).
    pub fn notify(&self, n: Notice) {
        self.apply_notice(&n);
        if let Some(hook) = self.notice_hook.get() {
            hook(&n);
        }
    }

    /// Acts on a notice (this node's own, or another node's).
    pub fn apply_notice(&self, n: &Notice) {
        match n {
            Notice::ForgetTokens(hashes) => self.auth.forget(&decode_hashes(hashes)),
            Notice::RevokeTokens(hashes) => {
                let hashes = decode_hashes(hashes);
                self.auth.forget(&hashes);
                // Sessions opened with them end too (every node applies this).
                self.sessions.revoke(&hashes);
            }
            Notice::UserUpdate { user, body } => self.to_user(*user, "USER_UPDATE", body),
            Notice::MessageAck { user, body } => self.to_user(*user, "MESSAGE_ACK", body),
        }
    }

    /// `name` with `body` to every session of `user` on this node.
    fn to_user(&self, user: protocol::UserId, name: &'static str, body: &serde_json::value::RawValue) {
        let sessions = self.sessions.of_user(user);
        if sessions.is_empty() {
            return;
        }
        let body = bytes::Bytes::copy_from_slice(body.get().as_bytes());
        for s in sessions {
            self.delivery.one(s, fanout::Dispatch { name, body: body.clone() });
        }
    }

    /// Sets how notices reach the other nodes (once, by the cluster at start).
    pub fn on_notice(&self, hook: NoticeHook) {
        if self.notice_hook.set(hook).is_err() {
            tracing::error!("notice hook set twice");
        }
    }
}

/// Channels remembered by [`Node::channel_actor`] before the map starts over.
const CHANNEL_ACTORS_MAX: usize = 1 << 20;
/// Most (user, channel) pairs `Node::allowed_poster` keeps.
const POSTERS_MAX: usize = 1 << 18;

impl Node {
    /// Whether `user` was found allowed to post in `channel` within
    /// `limits.post_check_ttl_ms`.
    pub fn lately_allowed_poster(&self, user: protocol::UserId, channel: protocol::ChannelId) -> bool {
        let ttl = std::time::Duration::from_millis(self.config.limits.post_check_ttl_ms);
        let map = self.posters.lock().expect("poster map poisoned");
        map.get(&(user, channel)).is_some_and(|at| at.elapsed() < ttl)
    }

    /// Forgets that `user` may post in `channel` (their post was refused).
    pub fn refused_poster(&self, user: protocol::UserId, channel: protocol::ChannelId) {
        self.posters.lock().expect("poster map poisoned").remove(&(user, channel));
    }

    /// Records that `user` was just found allowed to post in `channel`.
    pub fn allowed_poster(&self, user: protocol::UserId, channel: protocol::ChannelId) {
        if self.config.limits.post_check_ttl_ms == 0 {
            return;
        }
        let mut map = self.posters.lock().expect("poster map poisoned");
        if map.len() >= POSTERS_MAX {
            let ttl = std::time::Duration::from_millis(self.config.limits.post_check_ttl_ms);
            map.retain(|_, at| at.elapsed() < ttl);
            if map.len() >= POSTERS_MAX {
                map.clear();
            }
        }
        map.insert((user, channel), std::time::Instant::now());
    }

    /// The actor of a channel: its guild's, or a DM's own (`None`: no such
    /// channel, or a channel with neither). A store read only the first
    /// time this node sees the channel.
    pub async fn channel_actor(&self, channel: protocol::ChannelId) -> store::Result<Option<ActorKey>> {
        if let Some(k) = self.channel_actors.lock().expect("channel map poisoned").get(&channel) {
            return Ok(Some(*k));
        }
        let Some(c) = self.store.get_channel(channel).await? else { return Ok(None) };
        let key = match c.guild_id {
            Some(g) => ActorKey::guild(g),
            None if c.kind == protocol::model::channel_type::DM || c.kind == protocol::model::channel_type::GROUP_DM => ActorKey::dm(c.id),
            None => return Ok(None),
        };
        let mut map = self.channel_actors.lock().expect("channel map poisoned");
        if map.len() >= CHANNEL_ACTORS_MAX {
            map.clear();
        }
        map.insert(channel, key);
        Ok(Some(key))
    }
}
