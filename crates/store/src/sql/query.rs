//! Statements for either backend: a [`Query`] keeps its SQL and bound
//! values, and builds the driver's query only when it runs [`On`] a pool or
//! transaction of one backend.

use std::borrow::Cow;

use protocol::id::EmojiId;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, Snowflake, UserId};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqlitePool, SqliteRow};
use sqlx::{Arguments, FromRow};

use super::{Pool, Tx};
use crate::{Result, StoreError};

/// What a statement runs on: a pool, or a transaction's connection.
pub(crate) enum On<'a> {
    SqlitePool(&'a SqlitePool),
    Sqlite(&'a mut SqliteConnection),
    PgPool(&'a PgPool),
    Postgres(&'a mut PgConnection),
}

impl On<'_> {
    fn is_sqlite(&self) -> bool {
        matches!(self, On::SqlitePool(_) | On::Sqlite(_))
    }
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
#[derive(Clone)]
pub(crate) enum Arg<'q> {
    Int(Option<i64>),
    Bool(bool),
    Text(Option<Cow<'q, str>>),
    Bytes(Option<&'q [u8]>),
    /// A list of ids, for [`super::Dialect::in_ids`]: bound as a JSON array on
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

impl Int for protocol::ActorKey {
    fn int(self) -> i64 {
        self.raw() as i64
    }
}
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
    /// Kept prepared on the connection (the driver's statement cache).
    persistent: bool,
}

pub(crate) fn query<'q>(sql: impl Into<Cow<'q, str>>) -> Query<'q> {
    Query { sql: sql.into(), args: Vec::new(), persistent: true }
}

/// Evaluates `$run` on whichever backend `$on` is, with `$sql` the
/// statement, `$args` its arguments for that driver and `$e` the executor.
macro_rules! on_backend {
    ($query:expr, $on:expr, |$sql:ident, $args:ident, $e:ident| $run:expr) => {{
        let Query { sql, args, .. } = $query;
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

    /// PostgreSQL: planned for its values each time it runs, never kept
    /// prepared: for a statement whose best plan depends on them (SQLite
    /// plans once either way). PostgreSQL switches a
    /// prepared statement to one generic plan after five runs when that
    /// looks no costlier; for message search it was: a common word's count
    /// took 165-335 ms with it against 15-20 ms planned for the word.
    pub(crate) fn planned_each_time(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// Runs the statement; the rows it touched.
    pub(crate) async fn execute(self, on: impl Into<On<'_>>) -> Result<u64> {
        let on = on.into();
        let persistent = self.persistent || on.is_sqlite();
        Ok(on_backend!(self, on, |sql, args, e| sqlx::query_with(sql, args).persistent(persistent).execute(e).await?.rows_affected()))
    }

    pub(crate) async fn fetch_all<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<Vec<T>> {
        let on = on.into();
        let persistent = self.persistent || on.is_sqlite();
        Ok(on_backend!(self, on, |sql, args, e| sqlx::query_as_with(sql, args).persistent(persistent).fetch_all(e).await?))
    }

    pub(crate) async fn fetch_optional<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<Option<T>> {
        let on = on.into();
        let persistent = self.persistent || on.is_sqlite();
        Ok(on_backend!(self, on, |sql, args, e| sqlx::query_as_with(sql, args).persistent(persistent).fetch_optional(e).await?))
    }

    pub(crate) async fn fetch_one<T: FromDbRow>(self, on: impl Into<On<'_>>) -> Result<T> {
        let on = on.into();
        let persistent = self.persistent || on.is_sqlite();
        Ok(on_backend!(self, on, |sql, args, e| sqlx::query_as_with(sql, args).persistent(persistent).fetch_one(e).await?))
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
            Arg::Ids(v) => out.add(serde_json::Value::from(v.into_owned()).to_string()),
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
