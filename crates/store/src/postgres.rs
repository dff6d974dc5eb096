//! PostgreSQL backend: what several nodes of a cluster share.
//!
//! - One pool of connections for everything, plus a small pool of its own
//!   for IDENTIFY's batched lookups (as in SQLite: a burst of cold guild
//!   loads never queues ahead of READY).
//! - Several nodes may share the database, so no method reads a row and
//!   writes it back: every change is one statement (conditional `UPDATE`,
//!   upsert with `RETURNING`) or holds row locks until it commits.
//! - Lists of ids and rows travel as arrays (`= ANY($1)`, `UNNEST`): one
//!   statement for any number of rows, with no bound-parameter limit.
//! - The schema mirrors SQLite's (`migrations/postgres`): ids and integers
//!   are `BIGINT` (u64 stored as i64), lists and JSON objects are JSON text.
//!   Migrations run at open; sqlx holds an advisory lock while they run, so
//!   nodes starting together apply them once.
//!
//! The SQL is mostly the one both backends run (`sql`); here is what
//! PostgreSQL does its own way: `UNNEST` inserts (`inserts`), the group
//! commit's fences, IDENTIFY's lookup and claims of many guilds.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use protocol::{ActorKey, GuildId};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::sql::rows::{qualified, IdentifyRow, USER_COLS};
use crate::sql::{i, Backend, Pool};
use crate::*;

pub(crate) mod inserts;

pub struct PostgresStore {
    pool: PgPool,
    /// IDENTIFY's batched lookups only (tokens, and READY's DM lists).
    lookup: PgPool,
}

#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Connections of the main pool (writes and reads).
    pub max_connections: u32,
    /// Connections kept for IDENTIFY's lookups.
    pub lookup_connections: u32,
    /// How long a query may wait for a free connection.
    pub acquire_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self { max_connections: 8, lookup_connections: 2, acquire_timeout: Duration::from_secs(10) }
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`) and
    /// applies migrations. The database must exist.
    pub async fn open(url: &str, opts: &PostgresOptions) -> Result<Self> {
        let connect = PgConnectOptions::from_str(url)?.application_name("throng");
        // No ping before each acquire (sqlx's default): it is a round trip
        // to the server before every query. A connection that broke fails
        // its query instead (a transient error: 503 with Retry-After) and is
        // not reused.
        let pool = PgPoolOptions::new()
            .test_before_acquire(false)
            .max_connections(opts.max_connections.max(1))
            .min_connections(1)
            .acquire_timeout(opts.acquire_timeout)
            .connect_with(connect.clone())
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        let lookup = PgPoolOptions::new()
            .test_before_acquire(false)
            .max_connections(opts.lookup_connections.max(1))
            .acquire_timeout(opts.acquire_timeout)
            .connect_with(connect)
            .await?;
        Ok(Self { pool, lookup })
    }

    /// The main pool (for tools and tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection (waits for queries in flight).
    pub async fn close(&self) {
        self.pool.close().await;
        self.lookup.close().await;
    }
}

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `url` with its database name replaced by `db` (query parameters kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => url.split_at(q),
        None => (url, ""),
    };
    let after_scheme = base.find("://").map_or(0, |n| n + 3);
    let host_end = base[after_scheme..].find('/').map_or(base.len(), |n| after_scheme + n);
    format!("{}/{db}{query}", &base[..host_end])
}

/// A database of its own for one test run, created on the server of a
/// given URL and dropped by [`ScratchDatabase::drop_now`].
pub struct ScratchDatabase {
    admin: PgPool,
    pub name: String,
    /// The URL of the new database.
    pub url: String,
}

impl ScratchDatabase {
    /// Creates `throng_test_<pid>_<nanos>_<n>` on the server `url` points at
    /// (connecting to `url`'s own database to do so).
    pub async fn create(url: &str) -> Result<Self> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("throng_test_{}_{nanos}_{n}", std::process::id());
        let admin = PgPoolOptions::new().max_connections(1).connect_with(PgConnectOptions::from_str(url)?).await?;
        // A name built from digits and underscores: safe to splice.
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await?;
        let url = with_database(url, &name);
        Ok(Self { admin, name, url })
    }

    /// Drops the database, ending any connection still open to it.
    pub async fn drop_now(self) -> Result<()> {
        sqlx::query(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)).execute(&self.admin).await?;
        self.admin.close().await;
        Ok(())
    }
}

#[async_trait]
impl Backend for PostgresStore {
    fn writer(&self) -> Pool<'_> {
        Pool::Postgres(&self.pool)
    }

    fn reader(&self) -> Pool<'_> {
        Pool::Postgres(&self.pool)
    }

    fn lookup(&self) -> Pool<'_> {
        Pool::Postgres(&self.lookup)
    }

    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>> {
        let hashes: Vec<&[u8]> = hashes.iter().map(|h| &h[..]).collect();
        let q = format!(
            "SELECT t.hash, {},
                    ARRAY(SELECT m.guild_id FROM members m WHERE m.user_id = u.id ORDER BY m.guild_id) AS guilds,
                    a.id AS app_id, a.flags AS app_flags, t.expires_at
             FROM tokens t JOIN users u ON u.id = t.user_id
             LEFT JOIN applications a ON a.bot_user_id = u.id
             WHERE t.hash = ANY($1)",
            qualified("u", USER_COLS)
        );
        let rows: Vec<IdentifyRow<Vec<i64>>> = sqlx::query_as(&q).bind(hashes).fetch_all(&self.lookup).await?;
        Ok(rows
            .into_iter()
            .filter_map(|mut r| {
                let guilds = std::mem::take(&mut r.guilds).into_iter().map(|g| GuildId(g as u64)).collect();
                r.into_record(guilds)
            })
            .collect())
    }

    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        let mut tx = self.pool.begin().await?;
        let mut fenced: Vec<i64> = batch.iter().filter(|(e, _)| *e != 0).filter_map(|(_, m)| m.guild_id.map(i)).collect();
        fenced.sort_unstable();
        fenced.dedup();
        let mut current: HashMap<i64, i64> = HashMap::new();
        if !fenced.is_empty() {
            // FOR SHARE holds the fence rows until commit: `claim_guild`'s
            // upsert of a row waits for this batch, and if a claim committed
            // first, the lock is taken on (and reads) the new epoch. Shared
            // locks never block each other, so batches of different nodes
            // touching the same guild do not serialise on it.
            let rows: Vec<(i64, i64)> =
                sqlx::query_as("SELECT guild_id, epoch FROM guild_owners WHERE guild_id = ANY($1) ORDER BY guild_id FOR SHARE")
                    .bind(&fenced)
                    .fetch_all(&mut *tx)
                    .await?;
            current.extend(rows);
        }
        let ok: Vec<bool> =
            batch.iter().map(|(e, m)| *e == 0 || m.guild_id.is_some_and(|g| current.get(&i(g)) == Some(&(*e as i64)))).collect();
        let rows: Vec<&MessageRecord> = batch.iter().zip(&ok).filter(|(_, ok)| **ok).map(|((_, m), _)| m).collect();
        inserts::messages(&mut tx, &rows).await?;
        tx.commit().await?;
        Ok(ok)
    }

    async fn claim_guilds(&self, guilds: &[ActorKey], node: u64) -> Result<Vec<(ActorKey, u64)>> {
        // One upsert for all, rows taken in guild id order (as group commits
        // lock them), so two nodes claiming overlapping sets cannot deadlock.
        let mut ids: Vec<i64> = guilds.iter().map(|&g| i(g)).collect();
        ids.sort_unstable();
        ids.dedup();
        let rows: Vec<(i64, i64)> = sqlx::query_as(
            "INSERT INTO guild_owners (guild_id, node, epoch)
             SELECT g, $2, 1 FROM UNNEST($1::BIGINT[]) AS g ORDER BY g
             ON CONFLICT (guild_id) DO UPDATE SET node = EXCLUDED.node, epoch = guild_owners.epoch + 1
             RETURNING guild_id, epoch",
        )
        .bind(ids)
        .bind(node as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(g, e)| (ActorKey::from_raw(g as u64), e as u64)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_database_replaces_only_the_database() {
        assert_eq!(with_database("postgres://u@h:5432/throng", "t1"), "postgres://u@h:5432/t1");
        assert_eq!(with_database("postgres://u:p@h/throng?sslmode=disable", "t1"), "postgres://u:p@h/t1?sslmode=disable");
        assert_eq!(with_database("postgresql://h:1", "t1"), "postgresql://h:1/t1");
        assert!(is_postgres_url("postgres://x") && is_postgres_url("postgresql://x") && !is_postgres_url("/var/lib/throng"));
    }
}
