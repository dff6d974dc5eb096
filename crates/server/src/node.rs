//! What one process shares between the listener, sessions, guild actors and
//! REST handlers. Cloned as `Arc<Node>`; every field is immutable or guards
//! itself.

use std::sync::Arc;

use protocol::GuildId;
use protocol::SnowflakeGen;
use store::{GuildSnapshot, IdentifyRecord, Store};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Auth;
use crate::batch::{self, Batcher};
use crate::config::Config;
use crate::fanout::{Delivery, Limits, Nice, NodeId, Registry};
use crate::presence::Presences;
use crate::ratelimit::RateLimiter;
use crate::route::{GuildRouter, Replies};

pub struct Node {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub ids: SnowflakeGen,
    pub auth: Auth,
    /// This node's id in the cluster (1 alone).
    pub id: NodeId,
    /// Carries messages to guild actors, wherever they run.
    pub guilds: Box<dyn GuildRouter>,
    /// Requests of this node waiting for an actor's answer.
    pub replies: Replies,
    /// The sessions whose sockets (or resume windows) are on this node.
    pub sessions: Registry,
    /// The delivery workers fan-out runs on (see `gateway::delivery`).
    pub delivery: Arc<Delivery>,
    pub presences: Presences,
    /// One shared record per user for every guild actor (see `users`).
    pub users: crate::users::UserCache,
    pub rest_limits: RateLimiter,
    /// IDENTIFY's token/guild lookups, batched (see `batch`).
    pub identify_lookups: Batcher<[u8; 32], IdentifyRecord>,
    /// Guild actors' ownership claims in a cluster, batched (see `batch`).
    pub guild_claims: Batcher<GuildId, u64>,
    /// Group commit of new messages (see `writer`).
    pub writer: crate::writer::Writer,
    /// The guild of each guild channel seen (a channel never changes guild),
    /// so sending a message needs no store read to find its guild's actor.
    channel_guilds: std::sync::Mutex<std::collections::HashMap<protocol::ChannelId, GuildId>>,
    /// Guild actors' loads, batched (see `batch`).
    pub guild_loads: Batcher<GuildId, GuildSnapshot>,
    /// READY's DM channels, batched with concurrent IDENTIFYs (see `batch`).
    pub dm_lookups: Batcher<protocol::UserId, Vec<store::DmChannel>>,
    /// Bounds IDENTIFYs in flight; `try_acquire` or the client gets op 9 `d:true`.
    pub identify_permits: Semaphore,
    /// Live gateway sockets of this process (see `limits.max_gateway_connections`).
    pub gateway_connections: Arc<std::sync::atomic::AtomicUsize>,
    /// Cancelled on shutdown: sessions send RECONNECT and close, actors stop.
    pub shutdown: CancellationToken,
    /// Every connection and session task, so shutdown can wait for them
    /// (axum/hyper do not track upgraded sockets).
    pub tasks: TaskTracker,
    /// Uploaded files on disk and the bound on uploads in flight.
    pub blobs: crate::attachments::Blobs,
    /// Proxies whose `X-Forwarded-For` names the client (`http.trusted_proxies`).
    pub trusted_proxies: crate::client_addr::TrustedProxies,
}

impl Node {
    /// Starts the node's delivery workers; call inside a tokio runtime.
    /// `router` builds the node's guild router (it may keep a weak
    /// reference to the node, to spawn actors).
    pub fn new(config: Config, store: Arc<dyn Store>, router: impl FnOnce(std::sync::Weak<Node>) -> Box<dyn GuildRouter>) -> Arc<Node> {
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
        Arc::new_cyclic(|weak| Node {
            id,
            guilds: router(weak.clone()),
            replies: Replies::new(id),
            delivery,
            auth: Auth::new(store.clone(), config.limits.password_hash_concurrency),
            sessions: Registry::default(),
            presences: Presences::default(),
            users: Default::default(),
            rest_limits: RateLimiter::new(config.limits.rest_requests_per_window, config.limits.rest_window_ms),
            identify_lookups: batch::identify_lookups(store.clone()),
            guild_loads: batch::guild_loads(store.clone()),
            dm_lookups: crate::guild::dm::dm_lookups(store.clone()),
            guild_claims: batch::guild_claims(store.clone(), config.node_id),
            writer: crate::writer::Writer::start(store.clone(), config.limits.write_queue, config.limits.write_batch_max),
            channel_guilds: Default::default(),
            identify_permits: Semaphore::new(config.gateway.identify_concurrency.max(1)),
            gateway_connections: Arc::default(),
            shutdown: CancellationToken::new(),
            tasks,
            blobs: crate::attachments::Blobs::new(&config),
            // Checked by `Config::validate`.
            trusted_proxies: crate::client_addr::TrustedProxies::parse(&config.http.trusted_proxies).unwrap_or_default(),
            ids,
            store,
            config,
        })
    }
}

/// Channels remembered by [`Node::channel_guild`] before the map starts over.
const CHANNEL_GUILDS_MAX: usize = 1 << 20;

impl Node {
    /// The guild of a guild channel (`None`: no such channel, or not a guild
    /// channel). A store read only the first time this node sees the channel.
    pub async fn channel_guild(&self, channel: protocol::ChannelId) -> store::Result<Option<GuildId>> {
        if let Some(g) = self.channel_guilds.lock().expect("channel map poisoned").get(&channel) {
            return Ok(Some(*g));
        }
        // A DM's messages go to its own actor (see `route::dms_threads`).
        let dm = |c: &store::ChannelRecord| (c.kind == protocol::model::channel_type::DM).then(|| crate::route::dms_threads::dm_key(c.id));
        let Some(g) = self.store.get_channel(channel).await?.and_then(|c| c.guild_id.or_else(|| dm(&c))) else { return Ok(None) };
        let mut map = self.channel_guilds.lock().expect("channel map poisoned");
        if map.len() >= CHANNEL_GUILDS_MAX {
            map.clear();
        }
        map.insert(channel, g);
        Ok(Some(g))
    }
}
