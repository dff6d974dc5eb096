//! The SQL both backends run, written once.
//!
//! Almost every statement reads the same on SQLite and PostgreSQL: `$N`
//! placeholders (numbered in order of first use, as SQLite assigns them),
//! `ON CONFLICT … DO …`, `RETURNING`, `IS NOT DISTINCT FROM`. Those are
//! written once, in this module's children, as functions over a [`Pool`] or
//! a [`Tx`] of either backend: a [`Query`] keeps its bound values and hands
//! them to the backend's driver when it runs. Where a clause differs by a
//! few words the statement asks its [`Dialect`]; what a backend does its
//! own way (multi-row inserts, group commit, IDENTIFY's lookup, claims of
//! many guilds) it implements itself: [`Backend`], and the inserts of
//! [`Tx`] (`sqlite/inserts.rs`, `postgres/inserts.rs`).
//!
//! Why not sqlx's `Any` driver: it binds no arrays (PostgreSQL's batches
//! are arrays) and needs pools of its own beside the typed ones. Why not
//! functions generic over `sqlx::Database`: each would spell out a bound
//! for every type it binds or decodes.

use async_trait::async_trait;
use protocol::{ActorKey, ChannelId, MessageId, UserId};
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use sqlx::{Postgres, Sqlite, Transaction};

use crate::{postgres, sqlite};
use crate::{ChannelRecord, GuildRecord, IdentifyRecord, MemberRecord, MessageRecord, Result, RoleRecord, StoreError, UserRecord};

mod accounts;
mod attachments;
mod bans;
mod changes;
mod commands;
mod community;
mod dms;
mod guilds;
mod query;
mod reactions;
pub(crate) mod rows;
mod store;
mod threads;

pub(crate) use guilds::MEMBER_RANGE;
pub(crate) use query::{i, query, On};

/// What a backend gives the SQL written once: its pools, and the methods
/// of [`crate::Store`] it implements its own way. Every other method of
/// `Store`, [`crate::AccountStore`] and [`crate::DmThreadCommandStore`] is
/// implemented once, for every `Backend` (`sql/store.rs`).
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    /// Where writes go (SQLite: its one writer connection).
    fn writer(&self) -> Pool<'_>;
    /// Where reads go.
    fn reader(&self) -> Pool<'_>;
    /// IDENTIFY's and READY's batched lookups, apart from other reads so a
    /// burst of cold guild loads never queues ahead of them.
    fn lookup(&self) -> Pool<'_>;
    // The `Store` methods of these names (never given an empty batch).
    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>>;
    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>>;
    async fn claim_guilds(&self, guilds: &[ActorKey], node: u64) -> Result<Vec<(ActorKey, u64)>>;
}

/// Which backend a statement runs on, for the clauses whose SQL differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `IN` the list bound as `param` ([`Arg::Ids`]): a JSON array on
    /// SQLite, an array on PostgreSQL.
    pub(crate) fn in_ids(self, param: &str) -> String {
        match self {
            Dialect::Sqlite => format!("IN (SELECT value FROM json_each({param}))"),
            Dialect::Postgres => format!("= ANY({param})"),
        }
    }

    /// The list bound as `param` ([`Arg::Ids`]) as rows of one column, `id`.
    pub(crate) fn each_id(self, param: &str) -> String {
        match self {
            Dialect::Sqlite => format!("SELECT value AS id FROM json_each({param})"),
            Dialect::Postgres => format!("SELECT unnest({param}::bigint[]) AS id"),
        }
    }

    /// A human account, in the words of each backend's partial index on
    /// usernames: a planner uses a partial index only for a condition it
    /// can match against the index's own.
    pub(crate) fn human(self) -> &'static str {
        match self {
            Dialect::Sqlite => "bot = 0",
            Dialect::Postgres => "NOT bot",
        }
    }
}

/// A pool of either backend.
#[derive(Clone, Copy)]
pub(crate) enum Pool<'a> {
    Sqlite(&'a SqlitePool),
    Postgres(&'a PgPool),
}

impl Pool<'_> {
    pub(crate) fn dialect(self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    /// A transaction on the writer. On SQLite it takes the write lock at
    /// once (`BEGIN IMMEDIATE`): transactions are for writes, and what one
    /// reads stays true until it commits. On PostgreSQL statements lock
    /// their rows.
    pub(crate) async fn begin(self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    /// A read-only transaction: its statements see one snapshot, on one
    /// connection. Rolled back when done.
    pub(crate) async fn snapshot(self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN DEFERRED").await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?),
        })
    }
}

/// A transaction of either backend (rolled back if dropped uncommitted).
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Tx::Sqlite(_) => Dialect::Sqlite,
            Tx::Postgres(_) => Dialect::Postgres,
        }
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.commit().await?,
            Tx::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.rollback().await?,
            Tx::Postgres(t) => t.rollback().await?,
        }
        Ok(())
    }

    // Inserts of any number of rows, each backend its own way: multi-row
    // `VALUES` on SQLite, `UNNEST` of arrays on PostgreSQL.

    pub(crate) async fn insert_users(&mut self, rows: &[UserRecord]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::users(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::users(t, rows).await,
        }
    }

    /// Tokens of seeded users: (hash, user), created at 0.
    pub(crate) async fn insert_tokens(&mut self, rows: &[([u8; 32], UserId)]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::tokens(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::tokens(t, rows).await,
        }
    }

    pub(crate) async fn insert_guilds(&mut self, rows: &[&GuildRecord]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::guilds(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::guilds(t, rows).await,
        }
    }

    pub(crate) async fn insert_roles(&mut self, rows: &[&RoleRecord]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::roles(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::roles(t, rows).await,
        }
    }

    pub(crate) async fn insert_channels(&mut self, rows: &[&ChannelRecord]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::channels(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::channels(t, rows).await,
        }
    }

    /// Skips those already members; how many were new.
    pub(crate) async fn insert_members(&mut self, rows: &[&MemberRecord]) -> Result<u64> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::members(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::members(t, rows).await,
        }
    }

    /// New messages, with their channels' `last_message_id` (never moved
    /// back) and their pending uploads linked to them.
    pub(crate) async fn insert_messages(&mut self, rows: &[&MessageRecord]) -> Result<()> {
        match self {
            Tx::Sqlite(t) => sqlite::inserts::messages(t, rows).await,
            Tx::Postgres(t) => postgres::inserts::messages(t, rows).await,
        }
    }
}

/// Moves a channel's `last_message_id` up to `id`, never back (an older
/// message may commit after a newer one).
pub(crate) async fn raise_last_message_id(on: impl Into<On<'_>>, channel: ChannelId, id: MessageId) -> Result<u64> {
    query("UPDATE channels SET last_message_id = $1 WHERE id = $2 AND (last_message_id IS NULL OR last_message_id < $1)")
        .bind(id)
        .bind(channel)
        .execute(on)
        .await
}

/// A unique key that already exists is [`StoreError::Conflict`].
pub(crate) fn conflict(e: StoreError) -> StoreError {
    match e {
        StoreError::Db(sqlx::Error::Database(d)) if d.is_unique_violation() => StoreError::Conflict,
        e => e,
    }
}
