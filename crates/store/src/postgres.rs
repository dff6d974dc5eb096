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

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, UserId};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{FromRow, Row};

use crate::*;

mod attachments;
mod change;
mod dms_threads_commands;
mod expressions;
mod roles;

pub struct PostgresStore {
    pool: PgPool,
    /// IDENTIFY's batched token lookups only.
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

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

fn conflict_or(e: sqlx::Error) -> StoreError {
    if is_unique_violation(&e) {
        StoreError::Conflict
    } else {
        e.into()
    }
}

fn ids_json(ids: impl IntoIterator<Item = u64>) -> String {
    let v: Vec<u64> = ids.into_iter().collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".into())
}

macro_rules! into_u64 {
    ($($t:ty),*) => {$(impl From<$t> for U64 { fn from(v: $t) -> Self { U64(v.0) } })*};
}
/// Any id, to be stored as i64.
struct U64(u64);
into_u64!(UserId, GuildId, ChannelId, MessageId, RoleId, ApplicationId);

fn i(v: impl Into<U64>) -> i64 {
    v.into().0 as i64
}

#[derive(FromRow)]
struct UserRow {
    id: i64,
    username: String,
    global_name: Option<String>,
    avatar: Option<String>,
    bot: bool,
    flags: i64,
    created_at: i64,
}

impl From<UserRow> for UserRecord {
    fn from(r: UserRow) -> Self {
        UserRecord {
            id: UserId(r.id as u64),
            username: r.username,
            global_name: r.global_name,
            avatar: r.avatar,
            bot: r.bot,
            flags: r.flags as u64,
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
struct GuildRow {
    id: i64,
    name: String,
    icon: Option<String>,
    description: Option<String>,
    owner_id: i64,
    system_channel_id: Option<i64>,
    created_at: i64,
}

impl From<GuildRow> for GuildRecord {
    fn from(r: GuildRow) -> Self {
        GuildRecord {
            id: GuildId(r.id as u64),
            name: r.name,
            icon: r.icon,
            description: r.description,
            owner_id: UserId(r.owner_id as u64),
            system_channel_id: r.system_channel_id.map(|v| ChannelId(v as u64)),
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
struct RoleRow {
    id: i64,
    guild_id: i64,
    name: String,
    color: i64,
    hoist: bool,
    position: i64,
    permissions: i64,
    mentionable: bool,
    bot_id: Option<i64>,
}

impl From<RoleRow> for RoleRecord {
    fn from(r: RoleRow) -> Self {
        RoleRecord {
            id: RoleId(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            name: r.name,
            color: r.color as u32,
            hoist: r.hoist,
            position: r.position as i32,
            permissions: r.permissions as u64,
            mentionable: r.mentionable,
            bot_id: r.bot_id.map(|b| UserId(b as u64)),
        }
    }
}

#[derive(FromRow)]
struct ChannelRow {
    id: i64,
    guild_id: Option<i64>,
    kind: i64,
    name: String,
    position: i64,
    topic: Option<String>,
    nsfw: bool,
    parent_id: Option<i64>,
    rate_limit_per_user: i64,
    overwrites: String,
    last_message_id: Option<i64>,
}

impl TryFrom<ChannelRow> for ChannelRecord {
    type Error = StoreError;
    fn try_from(r: ChannelRow) -> Result<Self> {
        Ok(ChannelRecord {
            id: ChannelId(r.id as u64),
            guild_id: r.guild_id.map(|v| GuildId(v as u64)),
            kind: r.kind as u8,
            name: r.name,
            position: r.position as i32,
            topic: r.topic,
            nsfw: r.nsfw,
            parent_id: r.parent_id.map(|v| ChannelId(v as u64)),
            rate_limit_per_user: r.rate_limit_per_user as u32,
            overwrites: serde_json::from_str(&r.overwrites)?,
            last_message_id: r.last_message_id.map(|v| MessageId(v as u64)),
        })
    }
}

#[derive(FromRow)]
struct MemberRow {
    guild_id: i64,
    user_id: i64,
    nick: Option<String>,
    roles: String,
    joined_at: i64,
    flags: i64,
}

impl TryFrom<MemberRow> for MemberRecord {
    type Error = StoreError;
    fn try_from(r: MemberRow) -> Result<Self> {
        let roles: Vec<u64> = serde_json::from_str(&r.roles)?;
        Ok(MemberRecord {
            guild_id: GuildId(r.guild_id as u64),
            user_id: UserId(r.user_id as u64),
            nick: r.nick,
            roles: roles.into_iter().map(RoleId).collect(),
            joined_at: r.joined_at as u64,
            flags: r.flags as u64,
        })
    }
}

/// One member as `load_guilds` aggregates it: a JSON array in this order.
#[derive(serde::Deserialize)]
struct MemberJson(
    i64,            // user_id
    Option<String>, // nick
    Vec<u64>,       // roles
    i64,            // joined_at
    i64,            // member flags
    String,         // username
    Option<String>, // global_name
    Option<String>, // avatar
    bool,           // bot
    i64,            // user flags
    i64,            // created_at
);

impl MemberJson {
    fn into_records(self, guild_id: GuildId) -> (MemberRecord, UserRecord) {
        let MemberJson(user_id, nick, roles, joined_at, mflags, username, global_name, avatar, bot, flags, created_at) = self;
        let user_id = UserId(user_id as u64);
        let member = MemberRecord {
            guild_id,
            user_id,
            nick,
            roles: roles.into_iter().map(RoleId).collect(),
            joined_at: joined_at as u64,
            flags: mflags as u64,
        };
        let user = UserRecord { id: user_id, username, global_name, avatar, bot, flags: flags as u64, created_at: created_at as u64 };
        (member, user)
    }
}

#[derive(FromRow)]
struct MessageRow {
    id: i64,
    channel_id: i64,
    guild_id: Option<i64>,
    author_id: i64,
    content: String,
    edited_at: Option<i64>,
    kind: i64,
    flags: i64,
    tts: bool,
    mention_everyone: bool,
    mentions: String,
    reference: Option<String>,
    extra: String,
}

impl TryFrom<MessageRow> for MessageRecord {
    type Error = StoreError;
    fn try_from(r: MessageRow) -> Result<Self> {
        let mentions: Vec<u64> = serde_json::from_str(&r.mentions)?;
        Ok(MessageRecord {
            id: MessageId(r.id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            guild_id: r.guild_id.map(|v| GuildId(v as u64)),
            author_id: UserId(r.author_id as u64),
            content: r.content,
            edited_at: r.edited_at.map(|v| v as u64),
            kind: r.kind as u8,
            flags: r.flags as u64,
            tts: r.tts,
            mention_everyone: r.mention_everyone,
            mentions: mentions.into_iter().map(UserId).collect(),
            reference: r.reference.as_deref().map(serde_json::from_str).transpose()?,
            extra: serde_json::from_str(&r.extra)?,
        })
    }
}

#[derive(FromRow)]
struct InviteRow {
    code: String,
    guild_id: i64,
    channel_id: i64,
    inviter_id: Option<i64>,
    max_age: i64,
    max_uses: i64,
    uses: i64,
    created_at: i64,
}

impl From<InviteRow> for InviteRecord {
    fn from(r: InviteRow) -> Self {
        InviteRecord {
            code: r.code,
            guild_id: GuildId(r.guild_id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            inviter_id: r.inviter_id.map(|v| UserId(v as u64)),
            max_age: r.max_age as u32,
            max_uses: r.max_uses as u32,
            uses: r.uses as u32,
            created_at: r.created_at as u64,
        }
    }
}

const USER_COLS: &str = "id, username, global_name, avatar, bot, flags, created_at";
const GUILD_COLS: &str = "id, name, icon, description, owner_id, system_channel_id, created_at";
const ROLE_COLS: &str = "id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id";
const CHANNEL_COLS: &str = "id, guild_id, kind, name, position, topic, nsfw, parent_id, rate_limit_per_user, overwrites, last_message_id";
const MEMBER_COLS: &str = "guild_id, user_id, nick, roles, joined_at, flags";
const MESSAGE_COLS: &str =
    "id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra";

type Tx<'a> = sqlx::Transaction<'a, sqlx::Postgres>;

/// Inserts users with one statement (arrays, so any number of rows).
async fn insert_users(tx: &mut Tx<'_>, users: &[UserRecord]) -> Result<()> {
    if users.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO users (id, username, global_name, avatar, bot, flags, created_at)
         SELECT * FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::BIGINT[], $7::BIGINT[])",
    )
    .bind(users.iter().map(|u| i(u.id)).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.username.as_str()).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.global_name.as_deref()).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.avatar.as_deref()).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.bot).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.flags as i64).collect::<Vec<_>>())
    .bind(users.iter().map(|u| u.created_at as i64).collect::<Vec<_>>())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Guild rows with their roles and channels (members are inserted apart):
/// three statements for any number of guilds.
async fn insert_guild_shells(tx: &mut Tx<'_>, guilds: &[&NewGuild]) -> Result<()> {
    if guilds.is_empty() {
        return Ok(());
    }
    let g: Vec<&GuildRecord> = guilds.iter().map(|n| &n.guild).collect();
    sqlx::query(
        "INSERT INTO guilds (id, name, icon, description, owner_id, system_channel_id, created_at)
         SELECT * FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[])",
    )
    .bind(g.iter().map(|g| i(g.id)).collect::<Vec<_>>())
    .bind(g.iter().map(|g| g.name.as_str()).collect::<Vec<_>>())
    .bind(g.iter().map(|g| g.icon.as_deref()).collect::<Vec<_>>())
    .bind(g.iter().map(|g| g.description.as_deref()).collect::<Vec<_>>())
    .bind(g.iter().map(|g| i(g.owner_id)).collect::<Vec<_>>())
    .bind(g.iter().map(|g| g.system_channel_id.map(i)).collect::<Vec<_>>())
    .bind(g.iter().map(|g| g.created_at as i64).collect::<Vec<_>>())
    .execute(&mut **tx)
    .await?;
    let roles: Vec<&RoleRecord> = guilds.iter().flat_map(|n| &n.roles).collect();
    insert_roles(tx, &roles).await?;
    let channels: Vec<&ChannelRecord> = guilds.iter().flat_map(|n| &n.channels).collect();
    insert_channels(&mut **tx, &channels).await
}

async fn insert_roles(tx: &mut Tx<'_>, roles: &[&RoleRecord]) -> Result<()> {
    if roles.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO roles (id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id)
         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BOOLEAN[], $6::BIGINT[], $7::BIGINT[], $8::BOOLEAN[], $9::BIGINT[])",
    )
    .bind(roles.iter().map(|r| i(r.id)).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| i(r.guild_id)).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| r.name.as_str()).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| i64::from(r.color)).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| r.hoist).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| i64::from(r.position)).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| r.permissions as i64).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| r.mentionable).collect::<Vec<_>>())
    .bind(roles.iter().map(|r| r.bot_id.map(i)).collect::<Vec<_>>())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_channels<'e, E: sqlx::PgExecutor<'e>>(e: E, channels: &[&ChannelRecord]) -> Result<()> {
    if channels.is_empty() {
        return Ok(());
    }
    let overwrites = channels.iter().map(|c| serde_json::to_string(&c.overwrites)).collect::<serde_json::Result<Vec<_>>>()?;
    sqlx::query(
        "INSERT INTO channels (id, guild_id, kind, name, position, topic, nsfw, parent_id, rate_limit_per_user, overwrites, last_message_id)
         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::TEXT[], $7::BOOLEAN[],
                              $8::BIGINT[], $9::BIGINT[], $10::TEXT[], $11::BIGINT[])",
    )
    .bind(channels.iter().map(|c| i(c.id)).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| c.guild_id.map(i)).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| i64::from(c.kind)).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| c.name.as_str()).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| i64::from(c.position)).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| c.topic.as_deref()).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| c.nsfw).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| c.parent_id.map(i)).collect::<Vec<_>>())
    .bind(channels.iter().map(|c| i64::from(c.rate_limit_per_user)).collect::<Vec<_>>())
    .bind(overwrites)
    .bind(channels.iter().map(|c| c.last_message_id.map(i)).collect::<Vec<_>>())
    .execute(e)
    .await?;
    Ok(())
}

/// Inserts members, skipping those already present; returns how many were new.
async fn insert_members<'e, E: sqlx::PgExecutor<'e>>(e: E, members: &[&MemberRecord]) -> Result<u64> {
    if members.is_empty() {
        return Ok(0);
    }
    let r = sqlx::query(
        "INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags)
         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[])
         ON CONFLICT (guild_id, user_id) DO NOTHING",
    )
    .bind(members.iter().map(|m| i(m.guild_id)).collect::<Vec<_>>())
    .bind(members.iter().map(|m| i(m.user_id)).collect::<Vec<_>>())
    .bind(members.iter().map(|m| m.nick.as_deref()).collect::<Vec<_>>())
    .bind(members.iter().map(|m| ids_json(m.roles.iter().map(|r| r.0))).collect::<Vec<_>>())
    .bind(members.iter().map(|m| m.joined_at as i64).collect::<Vec<_>>())
    .bind(members.iter().map(|m| m.flags as i64).collect::<Vec<_>>())
    .execute(e)
    .await?;
    Ok(r.rows_affected())
}

/// Inserts messages with one statement.
async fn insert_messages(conn: &mut sqlx::PgConnection, rows: &[&MessageRecord]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let references =
        rows.iter().map(|m| m.reference.as_ref().map(serde_json::to_string).transpose()).collect::<serde_json::Result<Vec<_>>>()?;
    let extras = rows.iter().map(|m| serde_json::to_string(&m.extra)).collect::<serde_json::Result<Vec<_>>>()?;
    sqlx::query(
        "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra)
         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::TEXT[], $6::BIGINT[], $7::BIGINT[],
                              $8::BIGINT[], $9::BOOLEAN[], $10::BOOLEAN[], $11::TEXT[], $12::TEXT[], $13::TEXT[])",
    )
    .bind(rows.iter().map(|m| i(m.id)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| i(m.channel_id)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.guild_id.map(i)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| i(m.author_id)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.content.as_str()).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.edited_at.map(|v| v as i64)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| i64::from(m.kind)).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.flags as i64).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.tts).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| m.mention_everyone).collect::<Vec<_>>())
    .bind(rows.iter().map(|m| ids_json(m.mentions.iter().map(|u| u.0))).collect::<Vec<_>>())
    .bind(references)
    .bind(extras)
    .execute(&mut *conn)
    .await?;
    attachments::link(&mut *conn, rows).await?;
    // Each channel's newest id, in one statement; GREATEST keeps it from
    // going back if an older id commits later.
    let mut last: HashMap<i64, i64> = HashMap::new();
    for m in rows {
        let v = last.entry(i(m.channel_id)).or_insert(i64::MIN);
        *v = (*v).max(i(m.id));
    }
    // A channel's messages come from its guild's one owner, so two batches
    // rarely touch the same channel; if they ever deadlock, PostgreSQL fails
    // one of them whole, and nothing of it is acknowledged.
    let last: Vec<(i64, i64)> = last.into_iter().collect();
    sqlx::query(
        "UPDATE channels c SET last_message_id = GREATEST(c.last_message_id, v.last)
         FROM UNNEST($1::BIGINT[], $2::BIGINT[]) AS v (id, last) WHERE c.id = v.id",
    )
    .bind(last.iter().map(|p| p.0).collect::<Vec<_>>())
    .bind(last.iter().map(|p| p.1).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_user(&self, u: &UserRecord, password_hash: Option<&str>) -> Result<()> {
        sqlx::query(
            "INSERT INTO users (id, username, global_name, avatar, bot, flags, password_hash, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(i(u.id))
        .bind(&u.username)
        .bind(&u.global_name)
        .bind(&u.avatar)
        .bind(u.bot)
        .bind(u.flags as i64)
        .bind(password_hash)
        .bind(u.created_at as i64)
        .execute(&self.pool)
        .await
        .map_err(conflict_or)?;
        Ok(())
    }

    async fn get_user(&self, id: UserId) -> Result<Option<UserRecord>> {
        let q = format!("SELECT {USER_COLS} FROM users WHERE id = $1");
        Ok(sqlx::query_as::<_, UserRow>(&q).bind(i(id)).fetch_optional(&self.pool).await?.map(Into::into))
    }

    async fn get_users(&self, ids: &[UserId]) -> Result<Vec<UserRecord>> {
        let q = format!("SELECT {USER_COLS} FROM users WHERE id = ANY($1)");
        let ids: Vec<i64> = ids.iter().map(|&u| i(u)).collect();
        let rows = sqlx::query_as::<_, UserRow>(&q).bind(ids).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn user_by_username(&self, username: &str) -> Result<Option<(UserRecord, String)>> {
        let q = format!("SELECT {USER_COLS}, password_hash FROM users WHERE username = $1 AND NOT bot AND password_hash IS NOT NULL");
        let row = sqlx::query(&q).bind(username).fetch_optional(&self.pool).await?;
        match row {
            None => Ok(None),
            Some(r) => {
                let hash: String = r.try_get("password_hash")?;
                Ok(Some((UserRow::from_row(&r)?.into(), hash)))
            }
        }
    }

    async fn add_token(&self, hash: &[u8; 32], user: UserId, now_ms: u64) -> Result<()> {
        sqlx::query("INSERT INTO tokens (hash, user_id, created_at) VALUES ($1, $2, $3)")
            .bind(&hash[..])
            .bind(i(user))
            .bind(now_ms as i64)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn user_by_token(&self, hash: &[u8; 32]) -> Result<Option<UserRecord>> {
        let q = "SELECT u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
                 FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1";
        Ok(sqlx::query_as::<_, UserRow>(q).bind(&hash[..]).fetch_optional(&self.pool).await?.map(Into::into))
    }

    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let hashes: Vec<&[u8]> = hashes.iter().map(|h| &h[..]).collect();
        let rows = sqlx::query(
            "SELECT t.hash, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at,
                    ARRAY(SELECT m.guild_id FROM members m WHERE m.user_id = u.id ORDER BY m.guild_id) AS guilds,
                    a.id AS app_id, a.flags AS app_flags, t.expires_at
             FROM tokens t JOIN users u ON u.id = t.user_id
             LEFT JOIN applications a ON a.bot_user_id = u.id
             WHERE t.hash = ANY($1)",
        )
        .bind(hashes)
        .fetch_all(&self.lookup)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let hash: Vec<u8> = r.try_get("hash")?;
            let Ok(hash) = <[u8; 32]>::try_from(hash.as_slice()) else { continue };
            let user = UserRow::from_row(&r)?;
            let guilds: Vec<i64> = r.try_get("guilds")?;
            let application = match r.try_get::<Option<i64>, _>("app_id")? {
                Some(id) => Some((ApplicationId(id as u64), r.try_get::<i64, _>("app_flags")? as u64)),
                None => None,
            };
            let guilds = guilds.into_iter().map(|g| GuildId(g as u64)).collect();
            out.push((
                hash,
                IdentifyRecord {
                    user: user.into(),
                    guilds,
                    application,
                    token_expires_at: r.try_get::<Option<i64>, _>("expires_at")?.map(|e| e as u64),
                },
            ));
        }
        Ok(out)
    }

    async fn create_application(&self, a: &ApplicationRecord) -> Result<()> {
        sqlx::query("INSERT INTO applications (id, name, owner_id, bot_user_id, flags, verify_key) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(i(a.id))
            .bind(&a.name)
            .bind(a.owner_id.map(i))
            .bind(i(a.bot_user_id))
            .bind(a.flags as i64)
            .bind(&a.verify_key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn application_of_bot(&self, bot: UserId) -> Result<Option<ApplicationRecord>> {
        let row = sqlx::query("SELECT id, name, owner_id, bot_user_id, flags, verify_key FROM applications WHERE bot_user_id = $1")
            .bind(i(bot))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(ApplicationRecord {
                id: ApplicationId(r.try_get::<i64, _>("id")? as u64),
                name: r.try_get("name")?,
                owner_id: r.try_get::<Option<i64>, _>("owner_id")?.map(|v| UserId(v as u64)),
                bot_user_id: UserId(r.try_get::<i64, _>("bot_user_id")? as u64),
                flags: r.try_get::<i64, _>("flags")? as u64,
                verify_key: r.try_get("verify_key")?,
            })
        })
        .transpose()
    }

    async fn bulk_load(&self, b: &BulkLoad) -> Result<()> {
        // Rows per statement: bounds the arrays held in memory at once.
        const ROWS: usize = 50_000;
        let mut tx = self.pool.begin().await?;
        for chunk in b.users.chunks(ROWS) {
            insert_users(&mut tx, chunk).await?;
        }
        for chunk in b.tokens.chunks(ROWS) {
            sqlx::query("INSERT INTO tokens (hash, user_id, created_at) SELECT h, u, 0 FROM UNNEST($1::BYTEA[], $2::BIGINT[]) AS t (h, u)")
                .bind(chunk.iter().map(|(h, _)| &h[..]).collect::<Vec<_>>())
                .bind(chunk.iter().map(|(_, u)| i(*u)).collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
        }
        let guilds: Vec<&NewGuild> = b.guilds.iter().collect();
        for chunk in guilds.chunks(1_000) {
            insert_guild_shells(&mut tx, chunk).await?;
        }
        let members: Vec<&MemberRecord> = b.guilds.iter().flat_map(|g| &g.members).collect();
        for chunk in members.chunks(ROWS) {
            insert_members(&mut *tx, chunk).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn create_guild(&self, g: &NewGuild) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        insert_guild_shells(&mut tx, &[g]).await?;
        insert_members(&mut *tx, &g.members.iter().collect::<Vec<_>>()).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_guild(&self, id: GuildId) -> Result<Option<GuildRecord>> {
        let q = format!("SELECT {GUILD_COLS} FROM guilds WHERE id = $1");
        Ok(sqlx::query_as::<_, GuildRow>(&q).bind(i(id)).fetch_optional(&self.pool).await?.map(Into::into))
    }

    async fn load_guilds(&self, ids: &[GuildId]) -> Result<Vec<GuildSnapshot>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // Five statements for the whole batch; each guild's members come back
        // as one JSON row.
        let ids: Vec<i64> = ids.iter().map(|&g| i(g)).collect();
        let q = format!("SELECT {GUILD_COLS} FROM guilds WHERE id = ANY($1)");
        let guilds: Vec<GuildRow> = sqlx::query_as(&q).bind(&ids).fetch_all(&self.pool).await?;
        if guilds.is_empty() {
            return Ok(Vec::new());
        }
        let mut snaps: Vec<GuildSnapshot> = guilds
            .into_iter()
            .map(|g| GuildSnapshot {
                guild: g.into(),
                roles: Vec::new(),
                channels: Vec::new(),
                members: Vec::new(),
                emojis: Vec::new(),
                bans: Vec::new(),
                threads: Vec::new(),
            })
            .collect();
        let q = format!("SELECT {ROLE_COLS} FROM roles WHERE guild_id = ANY($1) ORDER BY guild_id, position, id");
        let roles: Vec<RoleRow> = sqlx::query_as(&q).bind(&ids).fetch_all(&self.pool).await?;
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id = ANY($1) ORDER BY guild_id, position, id");
        let channels: Vec<ChannelRow> = sqlx::query_as(&q).bind(&ids).fetch_all(&self.pool).await?;
        let members = sqlx::query(
            "SELECT m.guild_id,
                    json_agg(json_build_array(m.user_id, m.nick, m.roles::json, m.joined_at, m.flags,
                                              u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at)
                             ORDER BY m.user_id)::text AS members
             FROM members m JOIN users u ON u.id = m.user_id
             WHERE m.guild_id = ANY($1) GROUP BY m.guild_id",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let index: HashMap<u64, usize> = snaps.iter().enumerate().map(|(n, s)| (s.guild.id.0, n)).collect();
        let slot = |guild_id: i64| index.get(&(guild_id as u64)).copied();
        for r in roles {
            if let Some(n) = slot(r.guild_id) {
                snaps[n].roles.push(r.into());
            }
        }
        for c in channels {
            if let Some(n) = c.guild_id.and_then(slot) {
                snaps[n].channels.push(c.try_into()?);
            }
        }
        for r in members {
            let Some(n) = slot(r.try_get("guild_id")?) else { continue };
            let json: &str = r.try_get("members")?;
            let guild_id = snaps[n].guild.id;
            let rows: Vec<MemberJson> = serde_json::from_str(json)?;
            snaps[n].members = rows.into_iter().map(|m| m.into_records(guild_id)).collect();
        }
        expressions::load_emojis(&self.pool, &mut snaps).await?;
        for (g, u) in roles::bans_of_guilds(&self.pool, &ids).await? {
            if let Some(n) = slot(g.0 as i64) {
                snaps[n].bans.push(u);
            }
        }
        dms_threads_commands::load_threads(&self.pool, &mut snaps).await?;
        Ok(snaps)
    }

    async fn guilds_of_user(&self, user: UserId) -> Result<Vec<GuildId>> {
        let rows: Vec<(i64,)> =
            sqlx::query_as("SELECT guild_id FROM members WHERE user_id = $1 ORDER BY guild_id").bind(i(user)).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|(g,)| GuildId(g as u64)).collect())
    }

    async fn roles_of_guild(&self, guild: GuildId) -> Result<Vec<RoleRecord>> {
        let q = format!("SELECT {ROLE_COLS} FROM roles WHERE guild_id = $1 ORDER BY position, id");
        let rows = sqlx::query_as::<_, RoleRow>(&q).bind(i(guild)).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn get_channel(&self, id: ChannelId) -> Result<Option<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = $1");
        sqlx::query_as::<_, ChannelRow>(&q).bind(i(id)).fetch_optional(&self.pool).await?.map(TryInto::try_into).transpose()
    }

    async fn channels_of_guild(&self, guild: GuildId) -> Result<Vec<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id = $1 ORDER BY position, id");
        sqlx::query_as::<_, ChannelRow>(&q).bind(i(guild)).fetch_all(&self.pool).await?.into_iter().map(TryInto::try_into).collect()
    }

    async fn get_member(&self, guild: GuildId, user: UserId) -> Result<Option<MemberRecord>> {
        let q = format!("SELECT {MEMBER_COLS} FROM members WHERE guild_id = $1 AND user_id = $2");
        sqlx::query_as::<_, MemberRow>(&q).bind(i(guild)).bind(i(user)).fetch_optional(&self.pool).await?.map(TryInto::try_into).transpose()
    }

    async fn list_members(&self, guild: GuildId, after: UserId, limit: u32) -> Result<Vec<MemberRecord>> {
        let q = format!("SELECT {MEMBER_COLS} FROM members WHERE guild_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3");
        sqlx::query_as::<_, MemberRow>(&q)
            .bind(i(guild))
            .bind(i(after))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(TryInto::try_into)
            .collect()
    }

    async fn count_members(&self, guild: GuildId) -> Result<u64> {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM members WHERE guild_id = $1").bind(i(guild)).fetch_one(&self.pool).await?;
        Ok(n as u64)
    }

    async fn create_message(&self, m: &MessageRecord) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        insert_messages(&mut tx, &[m]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
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
            let rows = sqlx::query("SELECT guild_id, epoch FROM guild_owners WHERE guild_id = ANY($1) ORDER BY guild_id FOR SHARE")
                .bind(&fenced)
                .fetch_all(&mut *tx)
                .await?;
            for row in rows {
                current.insert(row.try_get(0)?, row.try_get(1)?);
            }
        }
        let ok: Vec<bool> =
            batch.iter().map(|(e, m)| *e == 0 || m.guild_id.is_some_and(|g| current.get(&i(g)) == Some(&(*e as i64)))).collect();
        let rows: Vec<&MessageRecord> = batch.iter().zip(&ok).filter(|(_, ok)| **ok).map(|((_, m), _)| m).collect();
        insert_messages(&mut tx, &rows).await?;
        tx.commit().await?;
        Ok(ok)
    }

    async fn claim_guild(&self, guild: GuildId, node: u64) -> Result<u64> {
        let (epoch,): (i64,) = sqlx::query_as(
            "INSERT INTO guild_owners (guild_id, node, epoch) VALUES ($1, $2, 1)
             ON CONFLICT (guild_id) DO UPDATE SET node = EXCLUDED.node, epoch = guild_owners.epoch + 1
             RETURNING epoch",
        )
        .bind(i(guild))
        .bind(node as i64)
        .fetch_one(&self.pool)
        .await?;
        Ok(epoch as u64)
    }

    async fn claim_guilds(&self, guilds: &[GuildId], node: u64) -> Result<Vec<(GuildId, u64)>> {
        if guilds.is_empty() {
            return Ok(Vec::new());
        }
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
        Ok(rows.into_iter().map(|(g, e)| (GuildId(g as u64), e as u64)).collect())
    }

    async fn apply_changes(&self, epoch: u64, guild: GuildId, changes: &[Change]) -> Result<Option<Vec<u64>>> {
        let mut tx = self.pool.begin().await?;
        if epoch != 0 {
            // FOR SHARE holds the fence row until commit, as in `create_messages`.
            let current: Option<i64> = sqlx::query_scalar("SELECT epoch FROM guild_owners WHERE guild_id = $1 FOR SHARE")
                .bind(i(guild))
                .fetch_optional(&mut *tx)
                .await?;
            if current != Some(epoch as i64) {
                return Ok(None);
            }
        }
        let mut rows = Vec::with_capacity(changes.len());
        for c in changes {
            rows.push(change::apply(&mut tx, c).await?);
        }
        tx.commit().await?;
        Ok(Some(rows))
    }

    async fn guild_owner(&self, guild: GuildId) -> Result<Option<(u64, u64)>> {
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT node, epoch FROM guild_owners WHERE guild_id = $1").bind(i(guild)).fetch_optional(&self.pool).await?;
        Ok(row.map(|(n, e)| (n as u64, e as u64)))
    }

    async fn get_message(&self, channel: ChannelId, id: MessageId) -> Result<Option<MessageRecord>> {
        let q = format!("SELECT {MESSAGE_COLS} FROM messages WHERE id = $1 AND channel_id = $2");
        sqlx::query_as::<_, MessageRow>(&q)
            .bind(i(id))
            .bind(i(channel))
            .fetch_optional(&self.pool)
            .await?
            .map(TryInto::try_into)
            .transpose()
    }

    async fn list_messages(&self, channel: ChannelId, window: MessageWindow, limit: u32) -> Result<Vec<MessageRecord>> {
        let limit = i64::from(limit);
        let c = i(channel);
        let fetch = |cond: &str, order: &str, a: i64, l: i64| {
            let q = format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = $1 AND id {cond} $2 ORDER BY id {order} LIMIT $3");
            let pool = &self.pool;
            async move { sqlx::query_as::<_, MessageRow>(&q).bind(c).bind(a).bind(l).fetch_all(pool).await }
        };
        let rows = match window {
            MessageWindow::Latest => fetch(">", "DESC", i64::MIN, limit).await?,
            MessageWindow::Before(m) => fetch("<", "DESC", i(m), limit).await?,
            MessageWindow::After(m) => {
                let mut v = fetch(">", "ASC", i(m), limit).await?;
                v.reverse();
                v
            }
            MessageWindow::Around(m) => {
                // Discord: up to limit/2 older ones, the message itself if it exists, and newer ones.
                let before = limit / 2;
                let after = limit - before - 1;
                let mut newer = fetch(">=", "ASC", i(m), after + 1).await?;
                newer.reverse();
                newer.extend(fetch("<", "DESC", i(m), before).await?);
                newer
            }
        };
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn create_invite(&self, v: &InviteRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO invites (code, guild_id, channel_id, inviter_id, max_age, max_uses, uses, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&v.code)
        .bind(i(v.guild_id))
        .bind(i(v.channel_id))
        .bind(v.inviter_id.map(i))
        .bind(i64::from(v.max_age))
        .bind(i64::from(v.max_uses))
        .bind(i64::from(v.uses))
        .bind(v.created_at as i64)
        .execute(&self.pool)
        .await
        .map_err(conflict_or)?;
        Ok(())
    }

    async fn get_invite(&self, code: &str) -> Result<Option<InviteRecord>> {
        Ok(sqlx::query_as::<_, InviteRow>(
            "SELECT code, guild_id, channel_id, inviter_id, max_age, max_uses, uses, created_at FROM invites WHERE code = $1",
        )
        .bind(code)
        .fetch_optional(&self.pool)
        .await?
        .map(Into::into))
    }

    async fn use_invite(&self, code: &str) -> Result<bool> {
        // One conditional statement: two nodes using the last use at once
        // cannot both succeed (the second re-checks the row after the first commits).
        let r = sqlx::query("UPDATE invites SET uses = uses + 1 WHERE code = $1 AND (max_uses = 0 OR uses < max_uses)")
            .bind(code)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn delete_invite(&self, code: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM invites WHERE code = $1").bind(code).execute(&self.pool).await?;
        Ok(r.rows_affected() == 1)
    }

    // Attachments, webhooks:
    async fn create_attachment(&self, a: &AttachmentRecord) -> Result<()> {
        attachments::create_attachment(&self.pool, a).await
    }
    async fn get_attachment(&self, id: protocol::Snowflake) -> Result<Option<AttachmentRecord>> {
        attachments::get_attachment(&self.pool, id).await
    }
    async fn attachments_of_message(&self, message: MessageId) -> Result<Vec<AttachmentRecord>> {
        attachments::attachments_of_message(&self.pool, message).await
    }
    async fn delete_pending_attachments(&self, ids: &[protocol::Snowflake]) -> Result<Vec<String>> {
        attachments::delete_pending_attachments(&self.pool, ids).await
    }
    async fn expire_pending_attachments(&self, before_ms: u64) -> Result<Vec<String>> {
        attachments::expire_pending_attachments(&self.pool, before_ms).await
    }
    async fn blob_refs(&self, hash: &str) -> Result<u64> {
        attachments::blob_refs(&self.pool, hash).await
    }
    async fn uploaded_bytes(&self, user: UserId) -> Result<u64> {
        attachments::uploaded_bytes(&self.pool, user).await
    }
    async fn setting_or_init(&self, name: &str, value: &str) -> Result<String> {
        attachments::setting_or_init(&self.pool, name, value).await
    }
    async fn get_webhook(&self, id: protocol::Snowflake) -> Result<Option<WebhookRecord>> {
        attachments::get_webhook(&self.pool, id).await
    }
    async fn webhooks_of_channel(&self, channel: ChannelId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(&self.pool, "channel_id", i(channel)).await
    }
    async fn webhooks_of_guild(&self, guild: GuildId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(&self.pool, "guild_id", i(guild)).await
    }

    // Reactions, emojis, pins, bulk delete:
    async fn reactions_of(&self, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
        expressions::reactions_of(&self.pool, messages, viewer).await
    }

    async fn reaction_users(&self, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
        expressions::reaction_users(&self.pool, message, key, after, limit).await
    }

    async fn pins_among(&self, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
        expressions::pins_among(&self.pool, messages).await
    }

    async fn pinned_messages(&self, channel: ChannelId, before: Option<u64>, limit: u32) -> Result<Vec<(MessageRecord, u64)>> {
        expressions::pinned_messages(&self.pool, channel, before, limit).await
    }

    async fn count_pins(&self, channel: ChannelId) -> Result<u64> {
        expressions::count_pins(&self.pool, channel).await
    }

    async fn messages_among(&self, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        expressions::messages_among(&self.pool, channel, ids).await
    }

    async fn emojis_of(&self, guild: GuildId) -> Result<Vec<EmojiRecord>> {
        expressions::emojis_of(&self.pool, guild).await
    }

    async fn get_emoji(&self, id: protocol::id::EmojiId) -> Result<Option<EmojiRecord>> {
        expressions::get_emoji(&self.pool, id).await
    }

    // Roles, overwrites, bans:
    async fn bans_of_guild(&self, guild: GuildId, before: Option<UserId>, after: UserId, limit: u32) -> Result<Vec<BanRecord>> {
        roles::bans_of_guild(&self.pool, guild, before, after, limit).await
    }

    async fn get_ban(&self, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
        roles::get_ban(&self.pool, guild, user).await
    }

    async fn messages_of_author(
        &self,
        guild: GuildId,
        author: UserId,
        since: MessageId,
        limit: u32,
    ) -> Result<Vec<(ChannelId, MessageId)>> {
        roles::messages_of_author(&self.pool, guild, author, since, limit).await
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

crate::accounts::impl_account_store!(PostgresStore, pool, pool);
