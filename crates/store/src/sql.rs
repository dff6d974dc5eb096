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

use std::borrow::Cow;

use async_trait::async_trait;
use protocol::id::EmojiId;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, Snowflake, UserId};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqlitePool, SqliteRow};
use sqlx::{Arguments, FromRow, Postgres, Sqlite, Transaction};

use crate::{postgres, sqlite};
use crate::{ChannelRecord, GuildRecord, IdentifyRecord, MemberRecord, MessageRecord, Result, RoleRecord, StoreError, UserRecord};

mod accounts;
mod attachments;
mod bans;
mod changes;
mod commands;
mod dms;
mod guilds;
mod reactions;
pub(crate) mod rows;
mod store;
mod threads;

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
    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>>;
    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>>;
    async fn claim_guilds(&self, guilds: &[GuildId], node: u64) -> Result<Vec<(GuildId, u64)>>;
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

    /// A transaction. On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`): transactions are for writes, and what one reads stays
    /// true until it commits. On PostgreSQL statements lock their rows.
    pub(crate) async fn begin(self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
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

/// What a statement runs on: a pool, or a transaction's connection.
pub(crate) enum On<'a> {
    SqlitePool(&'a SqlitePool),
    Sqlite(&'a mut SqliteConnection),
    PgPool(&'a PgPool),
    Postgres(&'a mut PgConnection),
}

impl<'a> From<Pool<'a>> for On<'a> {
    fn from(p: Pool<'a>) -> Self {
        match p {
            Pool::Sqlite(p) => On::SqlitePool(p),
            Pool::Postgres(p) => On::PgPool(p),
        }
    }
}

impl<'a> From<&'a mut Tx> for On<'a> {
    fn from(t: &'a mut Tx) -> Self {
        match t {
            Tx::Sqlite(t) => On::Sqlite(t),
            Tx::Postgres(t) => On::Postgres(t),
        }
    }
}

/// A type rows of both backends decode into: a `#[derive(FromRow)]`
/// struct of `rows`, or a tuple.
pub(crate) trait FromDbRow: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}

impl<T> FromDbRow for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}

/// A bound value. A NULL keeps its type: PostgreSQL checks it against the
/// column's.
pub(crate) enum Arg<'q> {
    Int(Option<i64>),
    Bool(bool),
    Text(Option<Cow<'q, str>>),
    Bytes(Option<&'q [u8]>),
    /// A list of ids, for [`Dialect::in_ids`]: bound as a JSON array on
    /// SQLite (read by `json_each`), as a `BIGINT[]` on PostgreSQL.
    Ids(Cow<'q, [i64]>),
}

/// An integer as stored: every integer column is a 64-bit signed integer,
/// so a u64 (a snowflake, a set of flags) is stored as the i64 of its bits.
pub(crate) trait Int: Copy {
    fn int(self) -> i64;
}

macro_rules! int {
    (numbers: $($t:ty),*) => {$(impl Int for $t { fn int(self) -> i64 { self as i64 } })*};
    (ids: $($t:ty),*) => {$(impl Int for $t { fn int(self) -> i64 { self.0 as i64 } })*};
}
int!(numbers: i64, u64, u32, i32, u8);
int!(ids: UserId, GuildId, ChannelId, MessageId, RoleId, ApplicationId, EmojiId, Snowflake);

/// `v` as stored ([`Int`]).
pub(crate) fn i(v: impl Int) -> i64 {
    v.int()
}

impl<T: Int> From<T> for Arg<'_> {
    fn from(v: T) -> Self {
        Arg::Int(Some(v.int()))
    }
}

impl<T: Int> From<Option<T>> for Arg<'_> {
    fn from(v: Option<T>) -> Self {
        Arg::Int(v.map(Int::int))
    }
}

macro_rules! arg_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {$(impl<'q> From<$t> for Arg<'q> { fn from($v: $t) -> Self { $e } })*};
}
arg_from! {
    bool => |v| Arg::Bool(v),
    &'q str => |v| Arg::Text(Some(v.into())),
    &'q String => |v| Arg::Text(Some(v.into())),
    String => |v| Arg::Text(Some(v.into())),
    Option<&'q str> => |v| Arg::Text(v.map(Into::into)),
    &'q Option<String> => |v| Arg::Text(v.as_deref().map(Into::into)),
    Option<String> => |v| Arg::Text(v.map(Into::into)),
    &'q [u8] => |v| Arg::Bytes(Some(v)),
    Option<&'q [u8]> => |v| Arg::Bytes(v),
    &'q [i64] => |v| Arg::Ids(v.into()),
    Vec<i64> => |v| Arg::Ids(v.into()),
}

/// A statement and its bound values, for either backend.
pub(crate) struct Query<'q> {
    sql: Cow<'q, str>,
    args: Vec<Arg<'q>>,
}

pub(crate) fn query<'q>(sql: impl Into<Cow<'q, str>>) -> Query<'q> {
    Query { sql: sql.into(), args: Vec::new() }
}

/// Evaluates `$run` on whichever backend `$on` is, with `$sql` the
/// statement, `$args` its arguments for that driver and `$e` the executor.
macro_rules! on_backend {
    ($query:expr, $on:expr, |$sql:ident, $args:ident, $e:ident| $run:expr) => {{
        let Query { sql, args } = $query;
        let $sql: &str = &sql;
        match $on {
            On::SqlitePool($e) => {
                let $args = sqlite_args(args)?;
                $run
            }
            On::Sqlite($e) => {
                let $args = sqlite_args(args)?;
                $run
            }
            On::PgPool($e) => {
                let $args = pg_args(args)?;
                $run
            }
            On::Postgres($e) => {
                let $args = pg_args(args)?;
                $run
            }
        }
    }};
}

impl<'q> Query<'q> {
    pub(crate) fn bind(mut self, v: impl Into<Arg<'q>>) -> Self {
        self.args.push(v.into());
        self
    }

    /// Runs the statement; the rows it touched.
    pub(crate) async fn execute(self, on: impl Into<On<'_>>) -> Result<u64> {
        Ok(on_backend!(self, on.into(), |sql, args, e| sqlx::query_with(sql, args).execute(e).await?.rows_affected()))
    }

    pub(crate) async fn fetch_all<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<Vec<T>> {
        Ok(on_backend!(self, on.into(), |sql, args, e| sqlx::query_as_with(sql, args).fetch_all(e).await?))
    }

    pub(crate) async fn fetch_optional<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<Option<T>> {
        Ok(on_backend!(self, on.into(), |sql, args, e| sqlx::query_as_with(sql, args).fetch_optional(e).await?))
    }

    pub(crate) async fn fetch_one<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<T> {
        Ok(on_backend!(self, on.into(), |sql, args, e| sqlx::query_as_with(sql, args).fetch_one(e).await?))
    }
}

fn encode(e: BoxDynError) -> StoreError {
    StoreError::Db(sqlx::Error::Encode(e))
}

fn sqlite_args(args: Vec<Arg<'_>>) -> Result<SqliteArguments<'_>> {
    let mut out = SqliteArguments::default();
    for a in args {
        match a {
            Arg::Int(v) => out.add(v),
            Arg::Bool(v) => out.add(v),
            Arg::Text(v) => out.add(v),
            Arg::Bytes(v) => out.add(v),
            Arg::Ids(v) => out.add(serde_json::to_string(&v)?),
        }
        .map_err(encode)?;
    }
    Ok(out)
}

fn pg_args(args: Vec<Arg<'_>>) -> Result<PgArguments> {
    let mut out = PgArguments::default();
    for a in args {
        match a {
            Arg::Int(v) => out.add(v),
            Arg::Bool(v) => out.add(v),
            Arg::Text(v) => out.add(v),
            Arg::Bytes(v) => out.add(v),
            Arg::Ids(v) => out.add(v.into_owned()),
        }
        .map_err(encode)?;
    }
    Ok(out)
}

/// A unique key that already exists is [`StoreError::Conflict`].
pub(crate) fn conflict(e: StoreError) -> StoreError {
    match e {
        StoreError::Db(sqlx::Error::Database(d)) if d.is_unique_violation() => StoreError::Conflict,
        e => e,
    }
}
