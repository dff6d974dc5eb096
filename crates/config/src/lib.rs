//! The one typed configuration. Layers, later wins: defaults <- TOML file
//! (`--config`) <- `THRONG_*` environment <- command-line flags. Parsed and
//! validated once at start; nothing else reads the environment.

pub mod client_addr;

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP + gateway listener binds.
    pub listen: SocketAddr,
    /// Where the SQLite database lives (unused with `database`).
    pub data_dir: PathBuf,
    /// A PostgreSQL database (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`)
    /// instead of SQLite in `data_dir`: what nodes on several hosts share.
    pub database: Option<String>,
    /// The gateway URL clients are told (`/gateway`, READY's `resume_gateway_url`).
    /// Defaults to `ws://<listen>`. Must not carry a query string.
    pub public_url: Option<String>,
    /// Enables the test/operator hooks under `/api/v10/_throng/admin` when set.
    pub admin_token: Option<String>,
    /// Bind with SO_REUSEPORT so several processes can share one port.
    pub reuse_port: bool,
    /// This node's id in a cluster (any positive number, unique per node).
    pub node_id: u64,
    /// Snowflake worker and process ids (0-31) of this node.
    pub worker_id: u8,
    pub process_id: u8,
    /// The NATS server a cluster meets through (`nats://HOST:PORT`), or
    /// the servers of a NATS cluster separated by commas (a node moves to
    /// another when its server fails). Unset: a single node, exactly as
    /// without a cluster.
    pub nats: Option<String>,
    /// Log lines on stderr: `text` (for people) or `json` (one object a
    /// line: timestamp, level, target, message and fields, for collectors).
    pub log_format: LogFormat,
    pub gateway: GatewayConfig,
    pub limits: LimitsConfig,
    pub storage: StorageConfig,
    pub cluster: ClusterConfig,
    pub attachments: AttachmentsConfig,
    pub threads: ThreadsConfig,
    pub audit: AuditConfig,
    pub read_states: ReadStatesConfig,
    pub search: SearchConfig,
    pub http: HttpConfig,
    pub auth: AuthConfig,
    pub oauth2: OAuth2Config,
    pub interactions: InteractionsConfig,
}

/// Interactions (`[interactions]`): slash commands, components and modals
/// people invoke and bots answer.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct InteractionsConfig {
    /// How long a bot has for its initial response (3 s on Discord):
    /// later, the invoker gets INTERACTION_FAILURE and the callback 10062.
    pub response_timeout_ms: u64,
    /// How long an interaction's token works for followups and edits of
    /// its messages (15 minutes on Discord). Tests shorten both.
    pub token_ttl_ms: u64,
    /// Interactions one guild (or DM) holds at once, answered or waiting:
    /// one more is refused 429 until the oldest expire.
    pub max_pending_per_actor: usize,
    /// How long a node keeps an application and a command it looked up for
    /// an interaction (its own writes are seen at once, another node's
    /// within this).
    pub lookup_ttl_ms: u64,
    /// Hosts an application's `interactions_endpoint_url` may name (the
    /// server POSTs there): host names or addresses as written in the URL,
    /// `"*"` for any. Empty (the default): HTTP interactions are off, so a
    /// bot's owner cannot make the server call into its private network.
    pub endpoint_hosts: Vec<String>,
    /// How long the server waits for an endpoint's answer (a PING when the
    /// URL is set, an interaction after): no answer in time, no response.
    pub endpoint_timeout_ms: u64,
    /// Largest answer read from an endpoint, in bytes.
    pub endpoint_max_response_bytes: usize,
}

impl Default for InteractionsConfig {
    fn default() -> Self {
        Self {
            response_timeout_ms: 3_000,
            token_ttl_ms: 15 * 60_000,
            max_pending_per_actor: 20_000,
            lookup_ttl_ms: 2_000,
            endpoint_hosts: Vec::new(),
            endpoint_timeout_ms: 3_000,
            endpoint_max_response_bytes: 1 << 20,
        }
    }
}

/// Accounts, logins and tokens (`[auth]`). Budgets are fixed windows:
/// `N` requests per `*_window_ms`; beyond them 429 with `Retry-After`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// How long a login token lives, in ms; unset: until it is revoked
    /// (logout, password change), as on Discord.
    pub token_ttl_ms: Option<u64>,
    /// Login attempts per client address per window (a password guesser
    /// with fresh headers still meets it).
    pub login_per_address: u32,
    /// Login attempts per account (username) per window, from anywhere
    /// (a guesser spread over many addresses still meets it).
    pub login_per_account: u32,
    pub login_window_ms: u64,
    /// Accounts created per client address per window.
    pub register_per_address: u32,
    pub register_window_ms: u64,
    /// Password hashes (login, registration, password change) one client
    /// address may have running or waiting at once; one more: 429. The
    /// `limits.password_hash_concurrency` hashes that may run at once are
    /// handed out in turn across addresses, so one address's flood waits
    /// behind everyone else instead of locking them out.
    pub hash_queue_per_address: usize,
    /// How long a password hash waits for its turn before the request is
    /// answered 429.
    pub hash_queue_wait_ms: u64,
    /// How long a node's token cache keeps a token before it reads it from
    /// the store again. A revocation reaches every node's cache through a
    /// notice, and a node that may have missed one (its bus connection
    /// dropped, or the bus dropped messages to it) empties its cache, so
    /// this is only the backstop for a notice lost some other way. At
    /// chat rates a re-read is a store read for most posts (a person
    /// posting once a minute against 60 s here cost the cluster ~12% more
    /// CPU), hence 10 minutes.
    pub token_cache_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            token_ttl_ms: None,
            login_per_address: 20,
            login_per_account: 10,
            login_window_ms: 60_000,
            register_per_address: 20,
            register_window_ms: 600_000,
            hash_queue_per_address: 4,
            hash_queue_wait_ms: 5_000,
            token_cache_ms: 600_000,
        }
    }
}

/// OAuth2 (`[oauth2]`): bot authorization and the authorization-code grant.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuth2Config {
    /// How long an authorization code may be exchanged (Discord: 10 min).
    pub code_ttl_s: u64,
    /// How long an access token works (Discord: 7 days).
    pub access_token_ttl_s: u64,
}

impl Default for OAuth2Config {
    fn default() -> Self {
        Self { code_ttl_s: 600, access_token_ttl_s: 604_800 }
    }
}

/// The HTTP edge (`[http]`): who the client is, and limits on connections
/// and requests.
///
/// Connections are counted while they speak HTTP (REST requests, and a
/// gateway socket until its upgrade). An upgraded gateway socket leaves
/// these counts and is counted by `limits.max_gateway_connections`
/// instead: a load balancer or a NAT carries thousands of gateway sockets
/// from one address, and a session is bounded already (IDENTIFY timeout,
/// heartbeats, the gateway cap).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Proxies (addresses or CIDR blocks) whose `X-Forwarded-For` names the
    /// client, e.g. the HAProxy in front of a cluster. Limits keyed on the
    /// client's address use it; empty: the TCP peer is the client. They are
    /// exempt from `max_connections_per_ip` (they carry many clients).
    pub trusted_proxies: Vec<String>,
    /// HTTP connections this process holds at once. At the cap it stops
    /// accepting until one ends (new connections wait in the kernel's
    /// backlog: backpressure, not refusal). Each holds a task and hyper's
    /// buffers; with `limits.max_gateway_connections` it also bounds file
    /// descriptors.
    pub max_connections: usize,
    /// HTTP connections one client address (the TCP peer) holds at once;
    /// one more is answered 429 with Retry-After and closed without its
    /// request being read. Browsers open about six per host and bot
    /// libraries up to a hundred; 256 leaves room for a NAT of those.
    pub max_connections_per_ip: usize,
    /// Peers (addresses or CIDR blocks) exempt from
    /// `max_connections_per_ip` besides `trusted_proxies`. Loopback by
    /// default: a local peer is a process on this host (a reverse proxy
    /// that was not named trusted, the load generator, the operator), which
    /// could exhaust the host without any socket. Empty it to cap local
    /// peers too.
    pub per_ip_exempt: Vec<String>,
    /// The rule for reading a request body: at least
    /// `body_min_bytes_per_window` must arrive in every `body_window_ms`
    /// (windows counted from the handler's first read of the body, the
    /// last partial one excused when the body ends), and the whole body
    /// within `body_timeout_ms`. A body that breaks it is cut: 408 if
    /// nothing was answered yet, and the connection is closed. By default
    /// 8 KiB per 10 s (a 1 byte per 5 s trickle is cut after 10 s; the
    /// slowest mobile link sends that in well under a second) and 15 min
    /// in all (50 MiB, the largest request, at 57 KiB/s).
    pub body_window_ms: u64,
    pub body_min_bytes_per_window: u64,
    pub body_timeout_ms: u64,
    /// When a connection closes with part of a request unread (an early
    /// refusal, a cut body), the server first stops sending (FIN), then
    /// reads and drops what the client still sends for at most this long
    /// and this many bytes before it closes, so the client reads the answer
    /// instead of a reset. A client that keeps sending holds it no longer.
    pub close_drain_ms: u64,
    pub close_drain_bytes: u64,
    /// API answers at least this long (bytes) go compressed to a client
    /// that takes gzip or Brotli (a page of messages, a member list);
    /// shorter ones (a posted message, an ack) go as they are, where
    /// compressing costs more than it saves. 0 turns compression off.
    pub compress_min_bytes: u16,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            max_connections: 8_192,
            max_connections_per_ip: 256,
            per_ip_exempt: vec!["127.0.0.0/8".into(), "::1".into()],
            body_window_ms: 10_000,
            body_min_bytes_per_window: 8 << 10,
            body_timeout_ms: 15 * 60_000,
            close_drain_ms: 2_000,
            close_drain_bytes: 1 << 20,
            compress_min_bytes: 1024,
        }
    }
}

/// The thread archive clock (DMs, threads, application commands).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThreadsConfig {
    /// How long one minute of a thread's `auto_archive_duration` lasts, in
    /// ms: 60,000 as on Discord; tests shorten it to see threads archive.
    pub archive_minute_ms: u64,
    /// How often a guild with active threads checks them for archiving.
    pub archive_sweep_ms: u64,
}

impl Default for ThreadsConfig {
    fn default() -> Self {
        Self { archive_minute_ms: 60_000, archive_sweep_ms: 60_000 }
    }
}

/// The audit log.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Entries older than this many days are deleted (Discord keeps 45);
    /// 0 keeps them forever.
    pub retention_days: u32,
    /// How often old entries are looked for.
    pub prune_interval_ms: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { retention_days: 45, prune_interval_ms: 3_600_000 }
    }
}

/// Read states (`[read_states]`): acks and mention counts, written by each
/// node's read-state writer in batches.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadStatesConfig {
    /// Writes waiting for the writer; beyond it an ack is 503 and a mention
    /// count is dropped (logged).
    pub queue: usize,
    /// Most writes one transaction carries.
    pub batch_max: usize,
}

impl Default for ReadStatesConfig {
    fn default() -> Self {
        Self { queue: 65_536, batch_max: 2_048 }
    }
}

/// Message search (`[search]`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// `total_results` is exact up to this many matches; beyond, it is this
    /// (or one past the page asked for, so the next page is announced).
    /// Counting is most of a search's work on a common word.
    pub count_max: u32,
    /// PostgreSQL, a search sorted by id: the page is first looked for in
    /// this many newest (or oldest) messages of the searched channels, read
    /// in order, before the whole index's matches are sorted; 0: never.
    /// A word in 1 message of 200 finds its page within ~5,000 rows
    /// (~6 ms), where sorting all its matches took 28-41 ms in 10,000,000
    /// messages; a rarer one pays the window (~1 µs a row) on top.
    pub window_rows: u32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self { count_max: 1_000, window_rows: 8_192 }
    }
}

/// Timings and bounds of a cluster (used only with `nats`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// How often a node announces itself on NATS.
    pub heartbeat_ms: u64,
    /// A node not heard from for this long leaves the ring: its guilds
    /// move to their next owners.
    pub node_timeout_ms: u64,
    /// A node not heard from for this long is asked whether it lives; if
    /// NATS has nobody listening for it (its process died and its
    /// connection closed), it leaves the ring at once. 0: only the timeout.
    pub probe_after_ms: u64,
    /// Virtual nodes per node on the consistent-hash ring.
    pub vnodes: u32,
    /// Messages queued for NATS beyond which sends to other nodes fail
    /// fast (REST answers 503) instead of waiting.
    pub outbound_queue: usize,
    /// How long a RESUME that reached another node waits for the session's
    /// node to hand it over before answering op 9 `false` (at once if that
    /// node leaves the ring meanwhile).
    pub takeover_timeout_ms: u64,
    /// A post held for its guild's owner (up to `limits.write_timeout_ms`)
    /// is sent again, with its deduplication key, when the owner changes
    /// and this long after each send whose answer was "retry" (not
    /// committed) or that got no answer (a message lost with a NATS
    /// server); after each send that got no answer the interval doubles
    /// (an owner that is only slow is not flooded with repeats).
    pub post_resend_ms: u64,
    /// A node whose own NATS connections drop keeps its ring (and so its
    /// guilds' actors and their subscribers) for this long while the
    /// client reconnects to another server; disconnected longer, it leaves
    /// its ring until it is back. Below `probe_after_ms` (and
    /// `node_timeout_ms`), so the others have not dropped it meanwhile.
    pub disconnect_grace_ms: u64,
    /// A message that finds this node's NATS publisher otherwise idle waits
    /// this long for others to leave with it in one write (and, for the
    /// same node, one NATS message), so a node at a few hundred messages a
    /// second wakes nats-server and the receiving nodes once per batch
    /// rather than once per message. 0 (the default): publish at once; 5 ms
    /// measured within the noise on 8 nodes at ~125 posts a second each
    /// (docs/benchmarks-history.md), for ~6 ms more per post.
    pub publish_linger_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            heartbeat_ms: 100,
            node_timeout_ms: 1_000,
            probe_after_ms: 300,
            vnodes: 128,
            outbound_queue: 65_536,
            takeover_timeout_ms: 5_000,
            post_resend_ms: 1_000,
            disconnect_grace_ms: 150,
            publish_linger_ms: 0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// HELLO's `heartbeat_interval`.
    pub heartbeat_interval_ms: u64,
    /// Close with 4009 after this long without a heartbeat; default 1.5x the interval.
    pub heartbeat_timeout_ms: Option<u64>,
    /// Close with 4003 if neither IDENTIFY nor RESUME arrives in this time.
    pub identify_timeout_ms: u64,
    /// How long a dropped session stays resumable.
    pub resume_window_ms: u64,
    /// Replay buffer bound per session, in events.
    pub replay_max_events: usize,
    /// Replay buffer bound per session, by age.
    pub replay_max_age_ms: u64,
    /// Replay buffer bound per session, in body bytes (shared bodies count
    /// fully, so this is an upper bound on what one session keeps alive).
    pub replay_max_bytes: usize,
    /// Delivery worker threads (fan-out is split across them per session);
    /// 0 means one per available core.
    pub delivery_workers: usize,
    /// Nice value of the delivery threads (0-19) while they keep up.
    pub delivery_nice: i32,
    /// Nice value a delivery thread takes while events keep arriving during
    /// its passes (a burst): REST and the guild actors that feed it go
    /// first, so more events are queued by the time each socket is written
    /// and they leave in fewer writes. It returns to `delivery_nice` when
    /// its queue is empty. Needs the right to lower a nice value again
    /// (root or RLIMIT_NICE); without it, or when equal to `delivery_nice`,
    /// threads stay at `delivery_nice`.
    pub delivery_burst_nice: i32,
    /// Deliveries (event x recipient) queued to the workers beyond which
    /// REST refuses new messages with 503 + Retry-After (fail fast instead
    /// of letting queues grow).
    pub delivery_backlog_max: usize,
    /// Deliveries one delivery worker may have framed into session buffers
    /// and not yet written. Events that arrive while a worker writes are
    /// framed into the sockets it has not reached yet (one write carries
    /// them all); this bounds the memory that coalescing holds. Beyond it,
    /// jobs wait in the worker's queue and count toward `delivery_backlog_max`.
    pub delivery_coalesce_max: usize,
    /// How long a delivery worker that was idle waits after its first new
    /// job before it frames and writes (microseconds; 0: at once). Jobs
    /// that arrive meanwhile cost their senders no wake-up and share its
    /// writes: an IDENTIFY's READY and its guilds' GUILD_CREATEs, a burst's
    /// events. It adds at most this much latency.
    pub delivery_linger_us: u64,
    /// Bytes queued for a session's socket beyond the frame being written
    /// before the session counts as a slow consumer: it is closed with 4000
    /// and stays resumable (its replay buffer holds what it missed).
    pub max_pending_write_bytes: usize,
    /// How long a session's backlog may stay above `max_pending_write_bytes`
    /// before it is closed (a RESUME's replay or one burst passes briefly).
    /// Above the hard cap (the larger of `replay_max_bytes` and 16x the
    /// bound, plus the bound) it is closed at once.
    pub slow_consumer_grace_ms: u64,
    /// How long a session's socket, once closed (slow consumer, timeout,
    /// shutdown), may wait for room to send its close frame before it is cut
    /// without one: a reader that was only paused still learns the code.
    pub close_linger_ms: u64,
    /// SO_SNDBUF of gateway sockets (the kernel doubles it); 0 keeps the
    /// kernel's autotuning. Bounds kernel memory per socket and lets a slow
    /// reader be noticed before megabytes pile up in kernel buffers.
    pub socket_send_buffer_bytes: usize,
    /// Largest client payload accepted (Discord: 4096), else close 4002.
    pub max_client_payload: usize,
    /// Client events allowed per window (Discord: 120 per 60 s), else 4008.
    pub client_events_per_window: u32,
    pub client_event_window_ms: u64,
    /// IDENTIFYs and RESUMEs processed at once; beyond that the client gets
    /// op 9 `d:true` (retry; a session being resumed is kept).
    /// At 256, a 3,000/s ramp here answered 39,739 op 9s and reached only
    /// 860 READY/s (every retry costs a new upgrade); at 2,048, 476 and
    /// 2,104/s. With batched lookups, a 5,000-6,000/s ramp (latency p99
    /// 0.7-0.8 s on a saturated box) still hit 2,048 in flight: 447-4,519
    /// op 9s; at 8,192, none. An IDENTIFY in flight holds little more than
    /// its socket, which `max_gateway_connections` bounds anyway.
    pub identify_concurrency: usize,
    /// A new session's READY waits up to this long for the GUILD_CREATEs of
    /// its guilds (with the GUILDS intent), so that they leave in one write
    /// instead of one each: every write to a socket is a system call here
    /// and a wake-up of the client. It goes as soon as every guild has
    /// answered. 0: READY is written at once.
    pub ready_hold_ms: u64,
    /// Guilds of more members than this keep a person's session passive
    /// while it does not have the guild open (op 14/37): it gets the
    /// unread state (PASSIVE_UPDATE_V1 every `passive_update_ms`), messages
    /// that mention it and what is addressed to it, not every message,
    /// typing, presence or member change. Bots are always active. 0: never.
    pub passive_guild_members: u32,
    /// How often a large guild sends its passive sessions the channels
    /// with new messages since the last time.
    pub passive_update_ms: u64,
    /// Large guilds one session has open at once: opening one more makes
    /// the one opened longest ago passive again.
    pub open_guilds_max: usize,
    /// Default and maximum `large_threshold`.
    pub large_threshold_default: u32,
    pub large_threshold_max: u32,
    /// Time allowed for sessions to receive RECONNECT and close at shutdown.
    pub shutdown_grace_ms: u64,
    /// A bot token's IDENTIFYs: one per bucket (`shard_id %
    /// identify_max_concurrency`) per `identify_window_ms`, as `/gateway/bot`
    /// advertises in `max_concurrency`; one more is answered op 9 `d:false`,
    /// as on Discord. Counted in the store, so it holds across a cluster.
    pub identify_max_concurrency: u32,
    pub identify_window_ms: u64,
    /// IDENTIFYs a bot token may make per `session_start_period_ms`
    /// (Discord: 1,000 per 24 h); `/gateway/bot` reports what is left. The
    /// next one is closed with 4004, so libraries stop instead of retrying
    /// (Discord resets the token then).
    pub session_start_limit: u32,
    pub session_start_period_ms: u64,
    /// Live sessions one user may have on one node (bots and people);
    /// one more IDENTIFY is closed with 4008.
    pub max_sessions_per_user: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest REST request body.
    pub max_body_bytes: usize,
    /// Gateway sockets one process holds at most; beyond it the upgrade is
    /// answered 503 with Retry-After. Keep it below the process's open-file
    /// limit (20,000 here) so a reconnect storm, when old and new sockets
    /// overlap, cannot exhaust file descriptors.
    pub max_gateway_connections: usize,
    /// REST requests per user (or IP) per route bucket per window.
    pub rest_requests_per_window: u32,
    pub rest_window_ms: u64,
    /// Guild actor mailbox capacity; when full, REST answers 503 and IDENTIFY op 9.
    pub guild_mailbox_capacity: usize,
    /// Concurrent password hashes (argon2id, ~29 ms and 19 MiB each); beyond: 429.
    pub password_hash_concurrency: usize,
    /// Guilds one user may own or join.
    pub max_guilds_per_user: u32,
    /// Largest avatar image (`PATCH /users/@me`), in bytes; larger: 400
    /// 50035 (Discord allows 10 MiB; avatars are shown at 128 px).
    pub max_avatar_bytes: usize,
    /// New messages waiting for the writer's next transaction; beyond: 503.
    pub write_queue: usize,
    /// Most messages one transaction commits (group commit).
    pub write_batch_max: usize,
    /// How long a message queued alone waits for more to join its
    /// transaction (0: never; a queue holding several commits at once).
    /// Each commit has a fixed cost (WAL frames of the tables' and the
    /// search index's pages; in a cluster every other node's page cache
    /// is reset by it): at ~125 messages a second per node of an 8-node
    /// cluster, 10 ms took the rows per commit from ~1.2 to ~2.8 and the
    /// cluster's CPU per message down ~18% (docs/benchmarks-history.md).
    pub write_linger_ms: u64,
    /// How long a batched store read (IDENTIFY's and RESUME's token,
    /// IDENTIFY's DMs and read states; a starting guild actor's claim,
    /// load and deduplication keys) that finds its queue otherwise empty
    /// waits for more to share its statements (0: never; a queue holding
    /// several is read at once). At ~300 IDENTIFYs a second per node of an
    /// 8-node cluster, 20 ms cut the ramp's server CPU by ~25%
    /// (docs/benchmarks-history.md).
    pub read_linger_ms: u64,
    /// How long a REST create waits for its guild's owner to commit it
    /// before answering 503 (the owner may be another node; in a cluster
    /// the post is held for a new owner meanwhile: `cluster.post_resend_ms`).
    pub write_timeout_ms: u64,
    /// How long a caller found allowed to post in a channel is taken as
    /// allowed before the body of their next post there is read (REST
    /// `POST /channels/{c}/messages`). The guild's actor still checks every
    /// post when it commits, and a post it refuses drops the caller from
    /// this memory, so a poster who lost the right has at most one more
    /// body read. 0: the store is asked before every post.
    pub post_check_ttl_ms: u64,
    /// How long an actor remembers a post's deduplication key (a
    /// `nonce` sent with `enforce_nonce`): a repeat within it is answered
    /// with the first message, as Discord does "for a few minutes".
    pub nonce_window_ms: u64,
    /// Most keys one actor remembers (the oldest go first), and most it
    /// reads back from the store when it starts.
    pub nonce_keys_max: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// SQLite reader connections.
    pub sqlite_readers: u32,
    /// PostgreSQL connections of one node (with `database`).
    pub postgres_connections: u32,
    /// How long a PostgreSQL query waits for a connection (all busy, or
    /// the server unreachable: a restart) before it fails as transient
    /// (503 with `Retry-After`). While the server is away the pool retries
    /// with a backoff of up to a fifth of this, so it also bounds how long
    /// writes take to flow again once the server is back.
    pub postgres_acquire_timeout_ms: u64,
    /// `synchronous=FULL` (survives power loss, slower) instead of NORMAL
    /// (survives process crashes).
    pub sqlite_synchronous_full: bool,
    /// How long SQLite's writer waits for a lock another process holds (a
    /// cluster node on the same data directory, a backup) before the write
    /// fails; every request of that group commit then gets a 503 with
    /// `Retry-After`.
    pub sqlite_busy_timeout_ms: u64,
    /// How often a thread of its own checkpoints SQLite's WAL into the
    /// database (PASSIVE: it waits for no reader or writer). Commits never
    /// checkpoint themselves, so none waits for one; 0 leaves checkpoints to
    /// SQLite's own, inside the commit that fills the WAL to 1,000 pages.
    pub sqlite_checkpoint_ms: u64,
    /// MiB of the database file each SQLite reader connection maps into
    /// memory (`PRAGMA mmap_size`) instead of reading it page by page
    /// through its own page cache; 0: no mapping. The mapped pages are the
    /// kernel's page cache, shared by every reader (searches, history,
    /// guild loads), not copies per connection.
    pub sqlite_mmap_mb: u64,
    /// KiB of page cache each SQLite reader connection keeps. SQLite drops a
    /// connection's whole cache at its next read after any other
    /// connection commits (the node's own writer, or another node on the
    /// same file), walking every slot the cache ever grew to; under a
    /// steady trickle of commits a large cache buys little and costs that
    /// walk (docs/benchmarks-history.md, 2026-12-04: 1,000 against 16,000,
    /// 10% less CPU chatting on 4 nodes, search within 17% either way, the
    /// million-member guild's load no slower and 16 MiB less RSS).
    pub sqlite_reader_cache_kb: u64,
    /// MiB of frames in SQLite's WAL at which the checkpoint thread makes
    /// the next commit start the WAL over from its beginning (a RESTART
    /// checkpoint); also the size the file is cut back to then. PASSIVE
    /// checkpoints alone need not let the WAL start over under steady
    /// writes, and nothing bounded the file (1.4 GB after 80 s of ~950
    /// messages a second, docs/benchmarks-history.md, 2026-12-05).
    pub sqlite_wal_restart_mb: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".parse().expect("static address"),
            data_dir: PathBuf::from("./data"),
            database: None,
            public_url: None,
            admin_token: None,
            reuse_port: false,
            node_id: 1,
            worker_id: 0,
            process_id: 0,
            nats: None,
            log_format: LogFormat::Text,
            gateway: GatewayConfig::default(),
            limits: LimitsConfig::default(),
            storage: StorageConfig::default(),
            cluster: ClusterConfig::default(),
            attachments: AttachmentsConfig::default(),
            threads: ThreadsConfig::default(),
            audit: AuditConfig::default(),
            read_states: ReadStatesConfig::default(),
            search: SearchConfig::default(),
            http: HttpConfig::default(),
            auth: AuthConfig::default(),
            oauth2: OAuth2Config::default(),
            interactions: InteractionsConfig::default(),
        }
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: 41_250,
            heartbeat_timeout_ms: None,
            identify_timeout_ms: 30_000,
            resume_window_ms: 120_000,
            replay_max_events: 2_000,
            replay_max_age_ms: 300_000,
            replay_max_bytes: 4 << 20,
            delivery_workers: 0,
            delivery_nice: 0,
            delivery_burst_nice: 5,
            delivery_backlog_max: 2_000_000,
            delivery_coalesce_max: 131_072,
            delivery_linger_us: 500,
            max_pending_write_bytes: 128 << 10,
            slow_consumer_grace_ms: 1_000,
            close_linger_ms: 30_000,
            socket_send_buffer_bytes: 64 << 10,
            max_client_payload: 4_096,
            client_events_per_window: 120,
            client_event_window_ms: 60_000,
            identify_concurrency: 8_192,
            ready_hold_ms: 20,
            passive_guild_members: 1_000,
            passive_update_ms: 5_000,
            open_guilds_max: 3,
            large_threshold_default: 50,
            large_threshold_max: 250,
            shutdown_grace_ms: 3_000,
            identify_max_concurrency: 1,
            identify_window_ms: 5_000,
            session_start_limit: 1_000,
            session_start_period_ms: 86_400_000,
            max_sessions_per_user: 100,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 << 20,
            max_gateway_connections: 19_500,
            rest_requests_per_window: 50,
            rest_window_ms: 1_000,
            guild_mailbox_capacity: 8_192,
            password_hash_concurrency: 2,
            write_queue: 16_384,
            write_batch_max: 1_024,
            write_linger_ms: 10,
            read_linger_ms: 20,
            write_timeout_ms: 10_000,
            post_check_ttl_ms: 600_000,
            nonce_window_ms: 300_000,
            nonce_keys_max: 10_000,
            max_guilds_per_user: 200,
            max_avatar_bytes: 1 << 20,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            sqlite_readers: 4,
            postgres_connections: 8,
            postgres_acquire_timeout_ms: 2_500,
            sqlite_synchronous_full: false,
            sqlite_busy_timeout_ms: 20_000,
            sqlite_checkpoint_ms: 100,
            sqlite_mmap_mb: 0,
            sqlite_reader_cache_kb: 1_000,
            sqlite_wal_restart_mb: 64,
        }
    }
}

/// Uploaded files (`[attachments]`): where they live and the bounds on
/// uploads, which are streamed to disk, never held whole in memory.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachmentsConfig {
    /// The directory of uploaded files (`THRONG_ATTACHMENTS__DIR`); unset:
    /// `<data_dir>/attachments`. Nodes of a cluster point it at one shared
    /// directory: files are named by their content's SHA-256, and removing
    /// one is safe against another node uploading the same content.
    pub dir: Option<PathBuf>,
    /// Largest file (Discord's free tier: 25 MiB); larger: 413, code 40005.
    pub max_file_bytes: u64,
    /// Largest multipart request, every file and field together.
    pub max_request_bytes: u64,
    /// Files in one message (Discord: 10).
    pub max_files: usize,
    /// Uploads streaming to disk at once on this node; one more: 503 with
    /// Retry-After (each holds a socket, a file and a hash state).
    pub upload_concurrency: usize,
    /// An upload whose message has not committed after this long is
    /// removed by the sweeper (the REST node died in between).
    pub pending_grace_ms: u64,
    /// How often the sweeper runs.
    pub sweep_interval_ms: u64,
    /// How long an attachment URL works after it was signed, in seconds
    /// (Discord: 24 h). Every REST read of a message signs its URLs afresh;
    /// a gateway event carries the URL signed when the message was created.
    /// An unsigned, altered or expired URL is 404.
    pub url_lifetime_s: u64,
    /// The key that signs attachment URLs (any text; use 32+ random bytes,
    /// e.g. `openssl rand -hex 32`). Unset: a random key kept in the store,
    /// created by the first node that starts, so every node of a cluster
    /// signs alike. Set it only to rotate the key or to pin it across
    /// stores; every node must then have the same value.
    pub url_signing_key: Option<String>,
    /// Bytes of attachments one user may have stored (every file of theirs
    /// that a message or a pending upload still names; a webhook's files
    /// count for its creator); 0: no quota. An upload that would pass it
    /// is 413 with code 40005, judged from its Content-Length before the
    /// body is read and again as it streams. 1 GiB: about forty files at
    /// `max_file_bytes`, far more than chat use needs, while registration
    /// is open: no one account can fill the disk on its own.
    pub user_quota_bytes: u64,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        Self {
            dir: None,
            max_file_bytes: 25 << 20,
            max_request_bytes: 50 << 20,
            max_files: 10,
            upload_concurrency: 64,
            pending_grace_ms: 15 * 60_000,
            sweep_interval_ms: 60 * 60_000,
            url_lifetime_s: 86_400,
            url_signing_key: None,
            user_quota_bytes: 1 << 30,
        }
    }
}

/// `THRONG_*` variables of the project's own scripts and tests (a trailing
/// `_` is a prefix), not configuration.
pub const ENV_NOT_OURS: &[&str] = &["BIN", "BENCH_BIN", "NATS_SERVER", "CLUSTER_RUN", "TEST_", "REQUIRE_", "LOG"];

/// Short variable names kept from before every key could be set by its path.
pub const ENV_ALIASES: &[(&str, &str)] = &[
    ("HEARTBEAT_INTERVAL_MS", "gateway.heartbeat_interval_ms"),
    ("RESUME_WINDOW_MS", "gateway.resume_window_ms"),
    ("IDENTIFY_TIMEOUT_MS", "gateway.identify_timeout_ms"),
    ("REST_REQUESTS_PER_WINDOW", "limits.rest_requests_per_window"),
    ("MAX_GATEWAY_CONNECTIONS", "limits.max_gateway_connections"),
];

/// Keys whose values are text even when they look like numbers.
const TEXT_KEYS: &[&str] = &["listen", "data_dir", "database", "public_url", "admin_token", "nats", "log_format", "dir", "url_signing_key"];

/// The format of log lines ([`Config::log_format`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// An environment value as the TOML value it spells (number, boolean), or
/// as text.
fn env_value(key: &str, v: &str) -> toml::Value {
    if !TEXT_KEYS.contains(&key) {
        if let Ok(t) = toml::from_str::<toml::Table>(&format!("v = {v}")) {
            if let Some(x) = t.get("v").filter(|x| !x.is_table()) {
                return x.clone();
            }
        }
    }
    if LIST_KEYS.contains(&key) {
        // `a,b,c` for a list of text (a TOML array works too, above).
        return toml::Value::Array(v.split(',').map(str::trim).filter(|x| !x.is_empty()).map(|x| toml::Value::String(x.into())).collect());
    }
    toml::Value::String(v.to_string())
}

/// Keys whose values are lists of text, which the environment may give as `a,b,c`.
const LIST_KEYS: &[&str] = &["trusted_proxies", "per_ip_exempt", "endpoint_hosts"];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("invalid config file {0}: {1}")]
    Parse(PathBuf, toml::de::Error),
    #[error("invalid value for {0}: {1}")]
    Env(String, String),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Reads the optional TOML file, then overlays `THRONG_*` variables from
    /// `env`, then deserialises once, so every key can come from either and
    /// an unknown key or variable is an error. A variable names a key by
    /// its path, sections joined by `__`: `THRONG_GATEWAY__DELIVERY_WORKERS=1`
    /// is `[gateway] delivery_workers = 1`; `THRONG_NATS` is `nats`. A few
    /// short names stay as aliases (`THRONG_HEARTBEAT_INTERVAL_MS`, …, see
    /// [`ENV_ALIASES`]). Variables of the project's own tools
    /// ([`ENV_NOT_OURS`]) are left alone.
    pub fn load(file: Option<&std::path::Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let mut table = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError::Read(p.into(), e))?;
                toml::from_str::<toml::Table>(&text).map_err(|e| ConfigError::Parse(p.into(), e))?
            }
            None => toml::Table::new(),
        };
        let mut from_env = Vec::new();
        for (k, v) in env {
            let Some(key) = k.strip_prefix("THRONG_") else { continue };
            if ENV_NOT_OURS.iter().any(|p| key == *p || (p.ends_with('_') && key.starts_with(p))) {
                continue;
            }
            let path = match ENV_ALIASES.iter().find(|(a, _)| *a == key) {
                Some((_, path)) => path.to_string(),
                None => key.to_ascii_lowercase().replace("__", "."),
            };
            let parts: Vec<&str> = path.split('.').collect();
            let (last, sections) = parts.split_last().expect("split yields one part at least");
            let mut t = &mut table;
            for sec in sections {
                let entry = t.entry(sec.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
                t = entry.as_table_mut().ok_or_else(|| ConfigError::Env(k.clone(), format!("{sec} is not a section")))?;
            }
            t.insert(last.to_string(), env_value(last, &v));
            from_env.push(k);
        }
        toml::Value::Table(table).try_into::<Config>().map_err(|e| {
            let origin =
                if from_env.is_empty() { "the config file".to_string() } else { format!("the config file or {}", from_env.join(", ")) };
            ConfigError::Env(origin, e.to_string())
        })
    }

    /// The effective configuration as TOML (`throng config`), secrets hidden.
    pub fn to_toml(&self) -> String {
        let mut c = self.clone();
        if c.admin_token.is_some() {
            c.admin_token = Some("(set)".into());
        }
        if c.attachments.url_signing_key.is_some() {
            c.attachments.url_signing_key = Some("(set)".into());
        }
        toml::to_string(&c).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.into()));
        if self.worker_id > 31 || self.process_id > 31 {
            return bad("worker_id and process_id must be 0-31");
        }
        if self.node_id == 0 {
            return bad("node_id must be positive");
        }
        if self.gateway.heartbeat_interval_ms < 100 {
            return bad("gateway.heartbeat_interval_ms must be at least 100");
        }
        if let Some(u) = &self.public_url {
            if !(u.starts_with("ws://") || u.starts_with("wss://")) || u.contains('?') {
                return bad("public_url must be a ws:// or wss:// URL without a query string");
            }
        }
        if self.gateway.replay_max_events == 0
            || self.gateway.delivery_backlog_max == 0
            || self.gateway.delivery_coalesce_max == 0
            || self.limits.guild_mailbox_capacity == 0
            || self.limits.write_queue == 0
            || self.limits.write_batch_max == 0
            || self.read_states.queue == 0
            || self.read_states.batch_max == 0
            || self.search.count_max == 0
        {
            return bad("queue bounds must be positive");
        }
        if self.database.as_deref().is_some_and(|d| !store::postgres::is_postgres_url(d)) {
            return bad("database must be a postgres:// or postgresql:// URL (leave it unset for SQLite in data_dir)");
        }
        if let Err(e) = crate::client_addr::TrustedProxies::parse(&self.http.trusted_proxies) {
            return Err(ConfigError::Invalid(format!("http.trusted_proxies: {e}")));
        }
        if let Err(e) = crate::client_addr::TrustedProxies::parse(&self.http.per_ip_exempt) {
            return Err(ConfigError::Invalid(format!("http.per_ip_exempt: {e}")));
        }
        if self.http.max_connections == 0 || self.http.max_connections_per_ip == 0 {
            return bad("http.max_connections and http.max_connections_per_ip must be positive");
        }
        if self.http.body_window_ms == 0 || self.http.body_timeout_ms == 0 {
            return bad("http.body_window_ms and http.body_timeout_ms must be positive");
        }
        if self.attachments.url_lifetime_s == 0 {
            return bad("attachments.url_lifetime_s must be positive");
        }
        let c = &self.cluster;
        if c.disconnect_grace_ms >= c.node_timeout_ms || (c.probe_after_ms > 0 && c.disconnect_grace_ms >= c.probe_after_ms) {
            return bad("cluster.disconnect_grace_ms must be below cluster.probe_after_ms and cluster.node_timeout_ms");
        }
        if self.gateway.large_threshold_default > self.gateway.large_threshold_max {
            return bad("large_threshold_default exceeds large_threshold_max");
        }
        Ok(())
    }

    /// The bounds on a bot token's session starts (`[gateway]`).
    pub fn start_limits(&self) -> store::StartLimits {
        store::StartLimits {
            concurrency_window_ms: self.gateway.identify_window_ms,
            period_ms: self.gateway.session_start_period_ms,
            total: self.gateway.session_start_limit,
        }
    }

    pub fn heartbeat_timeout_ms(&self) -> u64 {
        self.gateway.heartbeat_timeout_ms.unwrap_or(self.gateway.heartbeat_interval_ms * 3 / 2)
    }

    /// The gateway URL handed to clients, without a trailing slash or query.
    pub fn gateway_url(&self) -> String {
        match &self.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("ws://{}", self.listen),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.toml");
        std::fs::write(&f, "listen = \"127.0.0.1:9000\"\n[gateway]\nheartbeat_interval_ms = 5000\n").unwrap();
        let env = vec![("THRONG_LISTEN".to_string(), "127.0.0.1:9001".to_string()), ("PATH".into(), "/bin".into())];
        let c = Config::load(Some(&f), env).unwrap();
        assert_eq!(c.listen.port(), 9001, "env beats file");
        assert_eq!(c.gateway.heartbeat_interval_ms, 5000, "file beats default");
        assert_eq!(c.heartbeat_timeout_ms(), 7500);
        assert_eq!(c.gateway_url(), "ws://127.0.0.1:9001");
        c.validate().unwrap();
    }

    #[test]
    fn every_key_from_the_environment_by_its_path_and_unknown_ones_refused() {
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let c = Config::load(
            None,
            env(&[
                ("THRONG_GATEWAY__DELIVERY_WORKERS", "1"),
                ("THRONG_CLUSTER__VNODES", "512"),
                ("THRONG_STORAGE__SQLITE_SYNCHRONOUS_FULL", "true"),
                ("THRONG_ADMIN_TOKEN", "12345"),
                ("THRONG_HEARTBEAT_INTERVAL_MS", "5000"),
                ("THRONG_BIN", "/x/throng"),
                ("THRONG_TEST_POSTGRES_URL", "postgres://x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.gateway.delivery_workers, 1);
        assert_eq!(c.cluster.vnodes, 512);
        assert!(c.storage.sqlite_synchronous_full);
        assert_eq!(c.admin_token.as_deref(), Some("12345"), "text keys stay text");
        assert_eq!(c.gateway.heartbeat_interval_ms, 5000, "alias");
        let e = Config::load(None, env(&[("THRONG_GATEWAY__NO_SUCH_KEY", "1")])).unwrap_err().to_string();
        assert!(e.contains("THRONG_GATEWAY__NO_SUCH_KEY") && e.contains("no_such_key"), "{e}");
        assert!(Config::load(None, env(&[("THRONG_NOPE", "1")])).is_err(), "an unknown variable is an error");
        assert!(Config::load(None, env(&[("THRONG_CLUSTER__VNODES", "many")])).is_err(), "a bad value is an error");
        // The effective configuration prints as TOML that loads back.
        let text = c.to_toml();
        assert!(text.contains("delivery_workers = 1") && text.contains("admin_token = \"(set)\""), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("round.toml");
        std::fs::write(&f, &text).unwrap();
        assert_eq!(Config::load(Some(&f), Vec::new()).unwrap().cluster.vnodes, 512);
    }

    #[test]
    fn rejects_bad_values() {
        assert!(Config::load(None, vec![("THRONG_LISTEN".into(), "nope".into())]).is_err());
        let c = Config { public_url: Some("ws://x/?v=10".into()), ..Config::default() };
        assert!(c.validate().is_err());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.toml");
        std::fs::write(&f, "no_such_key = 1\n").unwrap();
        assert!(Config::load(Some(&f), Vec::<(String, String)>::new()).is_err());
        let c = Config { database: Some("mysql://h/db".into()), ..Config::default() };
        assert!(c.validate().is_err(), "only PostgreSQL URLs");
        let mut c = Config::default();
        c.validate().unwrap();
        c.cluster.disconnect_grace_ms = c.cluster.probe_after_ms;
        assert!(c.validate().is_err(), "the others would drop the node while it thinks it is in");
        c.cluster.probe_after_ms = 0;
        c.validate().unwrap();
        c.cluster.disconnect_grace_ms = c.cluster.node_timeout_ms;
        assert!(c.validate().is_err());
    }

    #[test]
    fn database_from_file_env_or_default() {
        assert_eq!(Config::default().database, None, "SQLite in data_dir by default");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.toml");
        std::fs::write(&f, "database = \"postgres://a@h/f\"\n").unwrap();
        let c = Config::load(Some(&f), Vec::<(String, String)>::new()).unwrap();
        assert_eq!(c.database.as_deref(), Some("postgres://a@h/f"));
        c.validate().unwrap();
        let c = Config::load(Some(&f), vec![("THRONG_DATABASE".to_string(), "postgres://b@h/e".to_string())]).unwrap();
        assert_eq!(c.database.as_deref(), Some("postgres://b@h/e"), "env beats file");
    }
}
