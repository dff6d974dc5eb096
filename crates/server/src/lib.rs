//! The throng server: a Discord-compatible gateway and REST API on one port.
//!
//! The data path, one file per layer:
//! - [`listener`]: accepts TCP, serves HTTP/1 (REST) and hands WebSocket
//!   upgrades to the gateway with the raw socket.
//! - [`gateway`]: WebSocket framing ([`gateway::ws`]), a connection before
//!   IDENTIFY ([`gateway::connection`]), sessions (state behind a lock, a
//!   small reader task per socket, no task while detached:
//!   [`gateway::session`]).
//! - [`fanout`]: the per-core delivery workers that frame and write fan-out,
//!   subscribers split by worker, the session registry.
//! - [`guild`]: one actor task per guild; it owns the guild's state, applies
//!   events in one order and hands each encoded dispatch to the delivery
//!   workers, its subscribers already split by worker.
//!   Sessions reach guilds only through [`route::GuildRouter`].
//! - [`writer`]: group commit of new messages, fenced per guild.
//! - [`cluster`]: nodes over NATS (ring, per-node delivery, hand-over).
//! - [`http`]: REST routes, Discord's error bodies, rate limits.
//! - [`node`]: what one process shares between those layers.
//!
//! Invariants: a guild actor never awaits a session, a socket or a worker; a
//! delivery worker never waits on a socket; a dispatch body is encoded once
//! per guild event (per variant); queues are bounded where work enters.

pub mod attachments;
pub mod auth;
pub mod batch;
pub mod client_addr;
pub mod cluster;
pub mod config;
pub mod convert;
pub mod edge;
pub mod emoji;
pub mod fanout;
pub mod gateway;
pub mod guild;
pub mod http;
pub mod listener;
pub mod node;
pub mod perm;
pub mod presence;
pub mod ratelimit;
pub mod route;
pub mod seed;
pub mod users;
pub mod writer;

pub use config::Config;
pub use node::Node;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A running server.
pub struct Server {
    pub node: Arc<Node>,
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
            let opts = store::postgres::PostgresOptions { max_connections: config.storage.postgres_connections, ..Default::default() };
            Arc::new(store::postgres::PostgresStore::open(url, &opts).await?)
        }
        None => {
            let opts = store::sqlite::SqliteOptions {
                readers: config.storage.sqlite_readers,
                synchronous_full: config.storage.sqlite_synchronous_full,
                busy_timeout: std::time::Duration::from_millis(config.storage.sqlite_busy_timeout_ms),
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
        let node = match config.nats {
            Some(_) => {
                // Snowflakes stay unique across nodes sharing a store.
                if config.worker_id == 0 && config.process_id == 0 {
                    config.worker_id = ((config.node_id >> 5) & 31) as u8;
                    config.process_id = (config.node_id & 31) as u8;
                }
                cluster::start_node(config, store).await?
            }
            None => guild::local_node(config, store),
        };
        node.tasks.spawn(gateway::session::sweeper(node.clone()));
        node.tasks.spawn(attachments::sweeper(node.clone()));
        let accept = tokio::spawn(listener::serve(node.clone(), listener));
        Ok(Server { node, addr, accept })
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
