//! The throng binary's library: it wires one process from the layers,
//! each a crate of its own so that an arrow the wrong way does not compile
//! (see ARCHITECTURE.md for the graph and the data path):
//!
//! - `config`: the one typed configuration; who a client is.
//! - `fanout`: delivery workers that frame and write fan-out, subscribers
//!   split by worker, the session registry.
//! - `node`: what one process shares ([`Node`]), the seam to guild actors
//!   (`node::route`), and the services below the layers (accounts, group
//!   commit, batching, files, rate limits, presences, Discord's shapes).
//! - `guild`: one actor task per guild and per DM, member lists, the local
//!   router.
//! - `gateway`: WebSocket framing, connections before IDENTIFY, sessions.
//! - `cluster`: nodes over NATS (ring, per-node delivery, hand-over).
//! - `api`: the REST API, the HTTP edge (listener, limits), the web client.
//!
//! This crate starts them ([`Server`]) and holds the command line
//! (`main.rs`) and seeding (`seed`). The old module paths
//! (`server::gateway`, `server::http`, ...) are re-exported for tools and
//! tests.
//!
//! Invariants: a guild actor never awaits a session, a socket or a worker; a
//! delivery worker never waits on a socket; a dispatch body is encoded once
//! per guild event (per variant); queues are bounded where work enters.

pub mod seed;

pub use api as http;
pub use api::{edge, listener};
pub use config::client_addr;
pub use node::{attachments, auth, batch, convert, emoji, group_commit, perm, presence, ratelimit, route, users};
pub use {cluster, config, fanout, gateway, guild, node};

pub use config::Config;
pub use node::Node;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A running server.
pub struct Server {
    pub node: Arc<Node>,
    /// The node's sessions (the gateway's table; `node.sessions` is the same table).
    pub sessions: Arc<gateway::Sessions>,
    pub addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("storage: {0}")]
    Store(#[from] store::StoreError),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
}

/// The store `config` names: PostgreSQL at `database` if set, else SQLite
/// in `data_dir`.
pub async fn open_store(config: &Config) -> Result<Arc<dyn store::Store>, store::StoreError> {
    Ok(match &config.database {
        Some(url) => {
            let opts = store::postgres::PostgresOptions {
                max_connections: config.storage.postgres_connections,
                acquire_timeout: std::time::Duration::from_millis(config.storage.postgres_acquire_timeout_ms.max(1)),
                ..Default::default()
            };
            Arc::new(store::postgres::PostgresStore::open(url, &opts).await?)
        }
        None => {
            let opts = store::sqlite::SqliteOptions {
                readers: config.storage.sqlite_readers,
                synchronous_full: config.storage.sqlite_synchronous_full,
                busy_timeout: std::time::Duration::from_millis(config.storage.sqlite_busy_timeout_ms),
                checkpoint_every: (config.storage.sqlite_checkpoint_ms > 0)
                    .then(|| std::time::Duration::from_millis(config.storage.sqlite_checkpoint_ms)),
                mmap_bytes: config.storage.sqlite_mmap_mb << 20,
                reader_cache_kb: config.storage.sqlite_reader_cache_kb,
                wal_restart_bytes: config.storage.sqlite_wal_restart_mb.max(1) << 20,
            };
            Arc::new(store::sqlite::SqliteStore::open(&config.data_dir, &opts).await?)
        }
    })
}

impl Server {
    /// Opens the store, binds the port and starts accepting.
    pub async fn start(mut config: Config) -> Result<Server, StartError> {
        config.validate()?;
        let store = open_store(&config).await?;
        // One key for every node sharing the store (see `attachments`).
        config.attachments.url_signing_key = Some(attachments::signing_key(&config, &*store).await?);
        let listener = listener::bind(config.listen, config.reuse_port).map_err(|e| StartError::Bind(config.listen, e))?;
        let addr = listener.local_addr().map_err(|e| StartError::Bind(config.listen, e))?;
        // Port 0 binds are resolved now, so clients are told the real address.
        config.listen = addr;
        let sessions = Arc::new(gateway::Sessions::default());
        let node = match config.nats {
            Some(_) => {
                // Snowflakes stay unique across nodes sharing a store.
                if config.worker_id == 0 && config.process_id == 0 {
                    config.worker_id = ((config.node_id >> 5) & 31) as u8;
                    config.process_id = (config.node_id & 31) as u8;
                }
                cluster::start_node(config, store, sessions.clone()).await?
            }
            None => guild::local_node(config, store, sessions.clone()),
        };
        node.tasks.spawn(gateway::session::sweeper(node.clone(), sessions.clone()));
        node.tasks.spawn(attachments::sweeper(node.clone()));
        node.tasks.spawn(node::audit::pruner(node.clone()));
        let accept = tokio::spawn(listener::serve(node.clone(), sessions.clone(), listener));
        Ok(Server { node, sessions, addr, accept })
    }

    /// Graceful shutdown: stop accepting, send every session RECONNECT and a
    /// resumable close, wait (bounded) for connection tasks to finish.
    pub async fn shutdown(self) {
        self.node.shutdown.cancel();
        if let Err(e) = self.accept.await {
            tracing::warn!(error = %e, "accept loop panicked");
        }
        self.node.tasks.close();
        let grace = Duration::from_millis(self.node.config.gateway.shutdown_grace_ms);
        if tokio::time::timeout(grace, self.node.tasks.wait()).await.is_err() {
            tracing::warn!(remaining = self.node.tasks.len(), "shutdown grace elapsed with tasks still running");
        }
    }
}
