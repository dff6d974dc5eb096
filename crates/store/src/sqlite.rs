//! SQLite backend: the embedded default.
//!
//! WAL journal so readers never block the writer and several processes can
//! share one data directory; `synchronous=NORMAL`, which in WAL mode keeps
//! every committed transaction across a process crash (`kill -9`); only an
//! OS crash or power loss may lose the last transactions (set
//! `synchronous_full` to rule that out too). All writes go through a pool of
//! one connection (SQLite has one writer anyway; this avoids busy retries
//! inside the process), reads through a small pool.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, UserId};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{FromRow, QueryBuilder, Row, Sqlite, SqlitePool};

use crate::*;

mod attachments;
mod batch;
mod change;
mod dms_threads_commands;
mod expressions;
mod roles;

pub struct SqliteStore {
    /// New messages' group commits: a thread and connection of their own.
    batches: batch::BatchWriter,
    /// One connection: every write goes here, in order.
    writer: SqlitePool,
    /// Readers; WAL lets them run beside the writer.
    reader: SqlitePool,
    /// One reader of its own for IDENTIFY's batched lookups, so a burst of
    /// cold guild loads (four queries each, queued on `reader`) never delays
    /// READY for sessions whose guilds are already loaded. Measured: with one
    /// shared pool a 6,500/s ramp on a cold node had 987 IDENTIFYs answered
    /// op 9 while 1,000 guilds loaded.
    lookup: SqlitePool,
}

#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub readers: u32,
    pub synchronous_full: bool,
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self { readers: 4, synchronous_full: false, busy_timeout: Duration::from_secs(20) }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/throng.db` and applies migrations.
    pub async fn open(dir: &Path, opts: &SqliteOptions) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Db(sqlx::Error::Io(e)))?;
        let path = dir.join("throng.db");
        let connect = SqliteConnectOptions::from_str("sqlite://")?
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(if opts.synchronous_full { SqliteSynchronous::Full } else { SqliteSynchronous::Normal })
            .busy_timeout(opts.busy_timeout)
            .foreign_keys(true)
            .pragma("cache_size", "-16000");
        let tries = busy_tries(opts.busy_timeout);
        // No ping before each acquire (sqlx's default): on SQLite it is one
        // more round trip to the connection's thread per query, and a local
        // file connection does not go stale.
        let writer = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .min_connections(1)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    let mut h = conn.lock_handle().await?;
                    // SAFETY: a live connection handle, locked for this call;
                    // the handler is a plain function with no state.
                    // The argument is the number of tries, not a pointer.
                    unsafe {
                        libsqlite3_sys::sqlite3_busy_handler(h.as_raw_handle().as_ptr(), Some(busy_retry), tries as *mut std::ffi::c_void)
                    };
                    Ok(())
                })
            })
            .connect_with(connect.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(opts.readers.max(1))
            .connect_with(connect.clone().read_only(true))
            .await?;
        // It reads tokens, users and memberships only: a smaller page cache.
        let lookup = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .connect_with(connect.read_only(true).pragma("cache_size", "-4000"))
            .await?;
        let batches = batch::BatchWriter::start(&path, opts.synchronous_full, tries)?;
        Ok(Self { batches, writer, reader, lookup })
    }

    /// The writer pool, for bulk tools (seeding) that batch their own transactions.
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }
}

/// The writer's busy handler: when another process (a cluster node sharing
/// the data directory) holds the write lock, retry every 200 µs at first,
/// then every 1 ms, for `busy_timeout` in all. SQLite's own busy timeout sleeps
/// up to 100 ms between tries, so under steady contention between processes
/// a waiting writer slept long after the lock was free: with 8 nodes on one
/// data directory, writers queued for seconds (measured in the capacity
/// run, see docs/benchmarks.md).
extern "C" fn busy_retry(limit: *mut std::ffi::c_void, tries: std::ffi::c_int) -> std::ffi::c_int {
    if tries as usize >= limit as usize {
        return 0;
    }
    std::thread::sleep(Duration::from_micros(if tries < 100 { 200 } else { 1_000 }));
    1
}

/// How many tries of [`busy_retry`] fill `timeout`: 100 of 200 µs, then 1 ms each.
fn busy_tries(timeout: Duration) -> usize {
    let ms = timeout.as_millis() as usize;
    if ms <= 20 {
        ms * 5
    } else {
        100 + (ms - 20)
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

fn ids_json<T: Copy + Into<u64>>(ids: &[T]) -> String {
    let v: Vec<u64> = ids.iter().map(|&i| i.into()).collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".into())
}

macro_rules! into_u64 {
    ($($t:ty),*) => {$(impl From<$t> for U64 { fn from(v: $t) -> Self { U64(v.0) } })*};
}
/// Helper to store any id as i64.
struct U64(u64);
into_u64!(UserId, GuildId, ChannelId, MessageId, RoleId);

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
    i64,            // bot
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
        let user =
            UserRecord { id: user_id, username, global_name, avatar, bot: bot != 0, flags: flags as u64, created_at: created_at as u64 };
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
const CHANNEL_COLS: &str = "id, guild_id, kind, name, position, topic, nsfw, parent_id, rate_limit_per_user, overwrites, last_message_id";
const MESSAGE_COLS: &str =
    "id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra";

async fn insert_channel<'e, E: sqlx::SqliteExecutor<'e>>(e: E, c: &ChannelRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO channels (id, guild_id, kind, name, position, topic, nsfw, parent_id, rate_limit_per_user, overwrites, last_message_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(i(c.id))
    .bind(c.guild_id.map(i))
    .bind(i64::from(c.kind))
    .bind(&c.name)
    .bind(i64::from(c.position))
    .bind(&c.topic)
    .bind(c.nsfw)
    .bind(c.parent_id.map(i))
    .bind(i64::from(c.rate_limit_per_user))
    .bind(serde_json::to_string(&c.overwrites)?)
    .bind(c.last_message_id.map(i))
    .execute(e)
    .await?;
    Ok(())
}

/// One new message and its channel's `last_message_id` (`create_message`,
/// and a DM's messages committed as changes).
async fn insert_message(conn: &mut sqlx::SqliteConnection, m: &MessageRecord) -> Result<()> {
    sqlx::query(
            "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(i(m.id))
        .bind(i(m.channel_id))
        .bind(m.guild_id.map(i))
        .bind(i(m.author_id))
        .bind(&m.content)
        .bind(m.edited_at.map(|v| v as i64))
        .bind(i64::from(m.kind))
        .bind(m.flags as i64)
        .bind(m.tts)
        .bind(m.mention_everyone)
        .bind(ids_json(&m.mentions.iter().map(|u| u.0).collect::<Vec<_>>()))
        .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
        .bind(serde_json::to_string(&m.extra)?)
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE channels SET last_message_id = ? WHERE id = ?").bind(i(m.id)).bind(i(m.channel_id)).execute(&mut *conn).await?;
    Ok(())
}

async fn insert_member<'e, E: sqlx::SqliteExecutor<'e>>(e: E, m: &MemberRecord) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (guild_id, user_id) DO NOTHING",
    )
    .bind(i(m.guild_id))
    .bind(i(m.user_id))
    .bind(&m.nick)
    .bind(ids_json(&m.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
    .bind(m.joined_at as i64)
    .bind(m.flags as i64)
    .execute(e)
    .await?;
    Ok(r.rows_affected() == 1)
}

async fn insert_role<'e, E: sqlx::SqliteExecutor<'e>>(e: E, r: &RoleRecord) -> Result<()> {
    sqlx::query("INSERT INTO roles (id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(i(r.id))
        .bind(i(r.guild_id))
        .bind(&r.name)
        .bind(i64::from(r.color))
        .bind(r.hoist)
        .bind(i64::from(r.position))
        .bind(r.permissions as i64)
        .bind(r.mentionable)
        .bind(r.bot_id.map(i))
        .execute(e)
        .await?;
    Ok(())
}

/// The guild row with its roles and channels (members are inserted by the caller).
async fn insert_guild_shell(tx: &mut sqlx::Transaction<'_, Sqlite>, g: &NewGuild) -> Result<()> {
    sqlx::query("INSERT INTO guilds (id, name, icon, description, owner_id, system_channel_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        .bind(i(g.guild.id))
        .bind(&g.guild.name)
        .bind(&g.guild.icon)
        .bind(&g.guild.description)
        .bind(i(g.guild.owner_id))
        .bind(g.guild.system_channel_id.map(i))
        .bind(g.guild.created_at as i64)
        .execute(&mut **tx)
        .await?;
    for r in &g.roles {
        insert_role(&mut **tx, r).await?;
    }
    for c in &g.channels {
        insert_channel(&mut **tx, c).await?;
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_user(&self, u: &UserRecord, password_hash: Option<&str>) -> Result<()> {
        sqlx::query(
            "INSERT INTO users (id, username, global_name, avatar, bot, flags, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(i(u.id))
        .bind(&u.username)
        .bind(&u.global_name)
        .bind(&u.avatar)
        .bind(u.bot)
        .bind(u.flags as i64)
        .bind(password_hash)
        .bind(u.created_at as i64)
        .execute(&self.writer)
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Conflict } else { e.into() })?;
        Ok(())
    }

    async fn get_user(&self, id: UserId) -> Result<Option<UserRecord>> {
        let q = format!("SELECT {USER_COLS} FROM users WHERE id = ?");
        Ok(sqlx::query_as::<_, UserRow>(&q).bind(i(id)).fetch_optional(&self.reader).await?.map(Into::into))
    }

    async fn get_users(&self, ids: &[UserId]) -> Result<Vec<UserRecord>> {
        let q = format!("SELECT {USER_COLS} FROM users WHERE id IN (SELECT value FROM json_each(?))");
        let rows =
            sqlx::query_as::<_, UserRow>(&q).bind(ids_json(&ids.iter().map(|u| u.0).collect::<Vec<_>>())).fetch_all(&self.reader).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn user_by_username(&self, username: &str) -> Result<Option<(UserRecord, String)>> {
        let q = format!("SELECT {USER_COLS}, password_hash FROM users WHERE username = ? AND bot = 0 AND password_hash IS NOT NULL");
        let row = sqlx::query(&q).bind(username).fetch_optional(&self.reader).await?;
        match row {
            None => Ok(None),
            Some(r) => {
                let hash: String = r.try_get("password_hash")?;
                Ok(Some((UserRow::from_row(&r)?.into(), hash)))
            }
        }
    }

    async fn add_token(&self, hash: &[u8; 32], user: UserId, now_ms: u64) -> Result<()> {
        sqlx::query("INSERT INTO tokens (hash, user_id, created_at) VALUES (?, ?, ?)")
            .bind(&hash[..])
            .bind(i(user))
            .bind(now_ms as i64)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn user_by_token(&self, hash: &[u8; 32]) -> Result<Option<UserRecord>> {
        let q = "SELECT u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
                 FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?";
        Ok(sqlx::query_as::<_, UserRow>(q).bind(&hash[..]).fetch_optional(&self.reader).await?.map(Into::into))
    }

    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        // One statement for the whole batch: each statement and row is a
        // round trip to the connection's worker thread, which dominated
        // IDENTIFY's cost when done per query.
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT t.hash, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at,
                    (SELECT group_concat(guild_id) FROM (SELECT guild_id FROM members WHERE user_id = u.id ORDER BY guild_id)) AS guilds,
                    a.id AS app_id, a.flags AS app_flags, t.expires_at
             FROM tokens t JOIN users u ON u.id = t.user_id
             LEFT JOIN applications a ON a.bot_user_id = u.id
             WHERE t.hash IN (",
        );
        let mut list = q.separated(", ");
        for h in hashes {
            list.push_bind(&h[..]);
        }
        q.push(")");
        let rows = q.build().fetch_all(&self.lookup).await?;
        let decode = |e: std::num::ParseIntError| StoreError::Db(sqlx::Error::Decode(Box::new(e)));
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let hash: Vec<u8> = r.try_get("hash")?;
            let Ok(hash) = <[u8; 32]>::try_from(hash.as_slice()) else { continue };
            let user = UserRow::from_row(&r)?;
            let guilds = match r.try_get::<Option<String>, _>("guilds")? {
                None => Vec::new(),
                Some(list) => list.split(',').map(|g| g.parse::<u64>().map(GuildId).map_err(decode)).collect::<Result<_>>()?,
            };
            let application = match r.try_get::<Option<i64>, _>("app_id")? {
                Some(id) => Some((ApplicationId(id as u64), r.try_get::<i64, _>("app_flags")? as u64)),
                None => None,
            };
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
        sqlx::query("INSERT INTO applications (id, name, owner_id, bot_user_id, flags, verify_key) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(a.id.0 as i64)
            .bind(&a.name)
            .bind(a.owner_id.map(i))
            .bind(i(a.bot_user_id))
            .bind(a.flags as i64)
            .bind(&a.verify_key)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn application_of_bot(&self, bot: UserId) -> Result<Option<ApplicationRecord>> {
        let row = sqlx::query("SELECT id, name, owner_id, bot_user_id, flags, verify_key FROM applications WHERE bot_user_id = ?")
            .bind(i(bot))
            .fetch_optional(&self.reader)
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
        // Rows per multi-row INSERT: well under SQLite's 32766 bound variables.
        const ROWS: usize = 2000;
        let mut tx = self.writer.begin().await?;
        for chunk in b.users.chunks(ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new("INSERT INTO users (id, username, global_name, avatar, bot, flags, created_at) ");
            q.push_values(chunk, |mut r, u| {
                r.push_bind(i(u.id))
                    .push_bind(&u.username)
                    .push_bind(&u.global_name)
                    .push_bind(&u.avatar)
                    .push_bind(u.bot)
                    .push_bind(u.flags as i64)
                    .push_bind(u.created_at as i64);
            });
            q.build().execute(&mut *tx).await?;
        }
        for chunk in b.tokens.chunks(ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new("INSERT INTO tokens (hash, user_id, created_at) ");
            q.push_values(chunk, |mut r, (h, u)| {
                r.push_bind(&h[..]).push_bind(i(*u)).push_bind(0i64);
            });
            q.build().execute(&mut *tx).await?;
        }
        for g in &b.guilds {
            insert_guild_shell(&mut tx, g).await?;
            for chunk in g.members.chunks(ROWS) {
                let mut q = QueryBuilder::<Sqlite>::new("INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags) ");
                q.push_values(chunk, |mut r, m| {
                    r.push_bind(i(m.guild_id))
                        .push_bind(i(m.user_id))
                        .push_bind(&m.nick)
                        .push_bind(ids_json(&m.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
                        .push_bind(m.joined_at as i64)
                        .push_bind(m.flags as i64);
                });
                q.build().execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn create_guild(&self, g: &NewGuild) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        insert_guild_shell(&mut tx, g).await?;
        for m in &g.members {
            insert_member(&mut *tx, m).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn get_guild(&self, id: GuildId) -> Result<Option<GuildRecord>> {
        Ok(sqlx::query_as::<_, GuildRow>(
            "SELECT id, name, icon, description, owner_id, system_channel_id, created_at FROM guilds WHERE id = ?",
        )
        .bind(i(id))
        .fetch_optional(&self.reader)
        .await?
        .map(Into::into))
    }

    async fn load_guilds(&self, ids: &[GuildId]) -> Result<Vec<GuildSnapshot>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // Five statements for the whole batch, and one row per guild for its
        // members (aggregated to JSON by SQLite): every statement and every
        // row is a round trip to the connection's worker thread, which cost
        // more than the query itself when 1,000 guilds loaded one by one with
        // a row per member (~10 µs of CPU per member, half of it in the kernel).
        let in_list = |sql: &str| {
            let mut q = QueryBuilder::<Sqlite>::new(sql);
            q.push(" IN (");
            let mut list = q.separated(", ");
            for &id in ids {
                list.push_bind(i(id));
            }
            q.push(")");
            q
        };
        let mut q = in_list("SELECT id, name, icon, description, owner_id, system_channel_id, created_at FROM guilds WHERE id");
        let guilds: Vec<GuildRow> = q.build_query_as().fetch_all(&self.reader).await?;
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
        let mut q =
            in_list("SELECT id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id FROM roles WHERE guild_id");
        q.push(" ORDER BY guild_id, position, id");
        let roles: Vec<RoleRow> = q.build_query_as().fetch_all(&self.reader).await?;
        let mut q = in_list(&format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id"));
        q.push(" ORDER BY guild_id, position, id");
        let channels: Vec<ChannelRow> = q.build_query_as().fetch_all(&self.reader).await?;
        let mut q = in_list(
            "SELECT m.guild_id,
                    json_group_array(json_array(m.user_id, m.nick, json(m.roles), m.joined_at, m.flags,
                                                u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at)
                                     ORDER BY m.user_id) AS members
             FROM members m JOIN users u ON u.id = m.user_id WHERE m.guild_id",
        );
        q.push(" GROUP BY m.guild_id");
        let members = q.build().fetch_all(&self.reader).await?;
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
        expressions::load_emojis(&self.reader, &mut snaps).await?;
        for (g, u) in roles::bans_of_guilds(&self.reader, ids).await? {
            if let Some(n) = slot(g.0 as i64) {
                snaps[n].bans.push(u);
            }
        }
        dms_threads_commands::load_threads(&self.reader, &mut snaps).await?;
        Ok(snaps)
    }

    async fn guilds_of_user(&self, user: UserId) -> Result<Vec<GuildId>> {
        let rows: Vec<(i64,)> = sqlx::query_as("SELECT guild_id FROM members WHERE user_id = ? ORDER BY guild_id")
            .bind(i(user))
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(|(g,)| GuildId(g as u64)).collect())
    }

    async fn roles_of_guild(&self, guild: GuildId) -> Result<Vec<RoleRecord>> {
        let rows = sqlx::query_as::<_, RoleRow>(
            "SELECT id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id FROM roles WHERE guild_id = ? ORDER BY position, id",
        )
        .bind(i(guild))
        .fetch_all(&self.reader)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn get_channel(&self, id: ChannelId) -> Result<Option<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = ?");
        sqlx::query_as::<_, ChannelRow>(&q).bind(i(id)).fetch_optional(&self.reader).await?.map(TryInto::try_into).transpose()
    }

    async fn channels_of_guild(&self, guild: GuildId) -> Result<Vec<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id = ? ORDER BY position, id");
        sqlx::query_as::<_, ChannelRow>(&q).bind(i(guild)).fetch_all(&self.reader).await?.into_iter().map(TryInto::try_into).collect()
    }

    async fn get_member(&self, guild: GuildId, user: UserId) -> Result<Option<MemberRecord>> {
        sqlx::query_as::<_, MemberRow>(
            "SELECT guild_id, user_id, nick, roles, joined_at, flags FROM members WHERE guild_id = ? AND user_id = ?",
        )
        .bind(i(guild))
        .bind(i(user))
        .fetch_optional(&self.reader)
        .await?
        .map(TryInto::try_into)
        .transpose()
    }

    async fn count_members(&self, guild: GuildId) -> Result<u64> {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM members WHERE guild_id = ?").bind(i(guild)).fetch_one(&self.reader).await?;
        Ok(n as u64)
    }

    async fn list_members(&self, guild: GuildId, after: UserId, limit: u32) -> Result<Vec<MemberRecord>> {
        sqlx::query_as::<_, MemberRow>(
            "SELECT guild_id, user_id, nick, roles, joined_at, flags FROM members WHERE guild_id = ? AND user_id > ? ORDER BY user_id LIMIT ?",
        )
        .bind(i(guild))
        .bind(i(after))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?
        .into_iter()
        .map(TryInto::try_into)
        .collect()
    }

    async fn create_message(&self, m: &MessageRecord) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        insert_message(&mut tx, m).await?;
        attachments::link(&mut tx, m).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.batches.create_messages(batch).await
    }

    async fn claim_guild(&self, guild: GuildId, node: u64) -> Result<u64> {
        let row = sqlx::query(
            "INSERT INTO guild_owners (guild_id, node, epoch) VALUES (?, ?, 1)
             ON CONFLICT (guild_id) DO UPDATE SET node = excluded.node, epoch = guild_owners.epoch + 1
             RETURNING epoch",
        )
        .bind(i(guild))
        .bind(node as i64)
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get::<i64, _>(0)? as u64)
    }

    async fn claim_guilds(&self, guilds: &[GuildId], node: u64) -> Result<Vec<(GuildId, u64)>> {
        let mut out = Vec::with_capacity(guilds.len());
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        for chunk in guilds.chunks(500) {
            let mut q = QueryBuilder::<Sqlite>::new("INSERT INTO guild_owners (guild_id, node, epoch) ");
            q.push_values(chunk, |mut b, g| {
                b.push_bind(i(*g)).push_bind(node as i64).push_bind(1i64);
            });
            q.push(" ON CONFLICT (guild_id) DO UPDATE SET node = excluded.node, epoch = guild_owners.epoch + 1 RETURNING guild_id, epoch");
            for row in q.build().fetch_all(&mut *tx).await? {
                out.push((GuildId(row.try_get::<i64, _>(0)? as u64), row.try_get::<i64, _>(1)? as u64));
            }
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn apply_changes(&self, epoch: u64, guild: GuildId, changes: &[Change]) -> Result<Option<Vec<u64>>> {
        // The write lock first, so the fence holds until the commit.
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        if epoch != 0 {
            let current: Option<i64> =
                sqlx::query_scalar("SELECT epoch FROM guild_owners WHERE guild_id = ?").bind(i(guild)).fetch_optional(&mut *tx).await?;
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
        let row =
            sqlx::query("SELECT node, epoch FROM guild_owners WHERE guild_id = ?").bind(i(guild)).fetch_optional(&self.reader).await?;
        Ok(row.map(|r| (r.get::<i64, _>(0) as u64, r.get::<i64, _>(1) as u64)))
    }

    async fn get_message(&self, channel: ChannelId, id: MessageId) -> Result<Option<MessageRecord>> {
        let q = format!("SELECT {MESSAGE_COLS} FROM messages WHERE id = ? AND channel_id = ?");
        sqlx::query_as::<_, MessageRow>(&q)
            .bind(i(id))
            .bind(i(channel))
            .fetch_optional(&self.reader)
            .await?
            .map(TryInto::try_into)
            .transpose()
    }

    async fn list_messages(&self, channel: ChannelId, window: MessageWindow, limit: u32) -> Result<Vec<MessageRecord>> {
        let limit = i64::from(limit);
        let c = i(channel);
        let fetch = |sql: String, a: i64, b: i64, l: i64| {
            let reader = &self.reader;
            async move { sqlx::query_as::<_, MessageRow>(&sql).bind(a).bind(b).bind(l).fetch_all(reader).await }
        };
        let rows = match window {
            MessageWindow::Latest => {
                fetch(format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND id > ? ORDER BY id DESC LIMIT ?"), c, -1, limit)
                    .await?
            }
            MessageWindow::Before(m) => {
                fetch(
                    format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND id < ? ORDER BY id DESC LIMIT ?"),
                    c,
                    i(m),
                    limit,
                )
                .await?
            }
            MessageWindow::After(m) => {
                let mut v = fetch(
                    format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND id > ? ORDER BY id ASC LIMIT ?"),
                    c,
                    i(m),
                    limit,
                )
                .await?;
                v.reverse();
                v
            }
            MessageWindow::Around(m) => {
                // Discord: up to limit/2 older ones, the message itself if it exists, and newer ones.
                let before = limit / 2;
                let after = limit - before - 1;
                let mut newer = fetch(
                    format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND id >= ? ORDER BY id ASC LIMIT ?"),
                    c,
                    i(m),
                    after + 1,
                )
                .await?;
                newer.reverse();
                let older = fetch(
                    format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND id < ? ORDER BY id DESC LIMIT ?"),
                    c,
                    i(m),
                    before,
                )
                .await?;
                newer.extend(older);
                newer
            }
        };
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn create_invite(&self, v: &InviteRecord) -> Result<()> {
        sqlx::query("INSERT INTO invites (code, guild_id, channel_id, inviter_id, max_age, max_uses, uses, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(&v.code)
            .bind(i(v.guild_id))
            .bind(i(v.channel_id))
            .bind(v.inviter_id.map(i))
            .bind(i64::from(v.max_age))
            .bind(i64::from(v.max_uses))
            .bind(i64::from(v.uses))
            .bind(v.created_at as i64)
            .execute(&self.writer)
            .await
            .map_err(|e| if is_unique_violation(&e) { StoreError::Conflict } else { e.into() })?;
        Ok(())
    }

    async fn get_invite(&self, code: &str) -> Result<Option<InviteRecord>> {
        Ok(sqlx::query_as::<_, InviteRow>(
            "SELECT code, guild_id, channel_id, inviter_id, max_age, max_uses, uses, created_at FROM invites WHERE code = ?",
        )
        .bind(code)
        .fetch_optional(&self.reader)
        .await?
        .map(Into::into))
    }

    async fn use_invite(&self, code: &str) -> Result<bool> {
        let r = sqlx::query("UPDATE invites SET uses = uses + 1 WHERE code = ? AND (max_uses = 0 OR uses < max_uses)")
            .bind(code)
            .execute(&self.writer)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn delete_invite(&self, code: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM invites WHERE code = ?").bind(code).execute(&self.writer).await?;
        Ok(r.rows_affected() == 1)
    }

    // Attachments, webhooks:
    async fn create_attachment(&self, a: &AttachmentRecord) -> Result<()> {
        attachments::create_attachment(&self.writer, a).await
    }
    async fn get_attachment(&self, id: protocol::Snowflake) -> Result<Option<AttachmentRecord>> {
        attachments::get_attachment(&self.reader, id).await
    }
    async fn attachments_of_message(&self, message: MessageId) -> Result<Vec<AttachmentRecord>> {
        attachments::attachments_of_message(&self.reader, message).await
    }
    async fn delete_pending_attachments(&self, ids: &[protocol::Snowflake]) -> Result<Vec<String>> {
        attachments::delete_pending_attachments(&self.writer, ids).await
    }
    async fn expire_pending_attachments(&self, before_ms: u64) -> Result<Vec<String>> {
        attachments::expire_pending_attachments(&self.writer, before_ms).await
    }
    async fn blob_refs(&self, hash: &str) -> Result<u64> {
        // The writer: a count that sees every commit before it (see the
        // release protocol in the server's `attachments`).
        attachments::blob_refs(&self.writer, hash).await
    }
    async fn uploaded_bytes(&self, user: UserId) -> Result<u64> {
        attachments::uploaded_bytes(&self.reader, user).await
    }
    async fn setting_or_init(&self, name: &str, value: &str) -> Result<String> {
        attachments::setting_or_init(&self.writer, name, value).await
    }
    async fn get_webhook(&self, id: protocol::Snowflake) -> Result<Option<WebhookRecord>> {
        attachments::get_webhook(&self.reader, id).await
    }
    async fn webhooks_of_channel(&self, channel: ChannelId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(&self.reader, "channel_id", i(channel)).await
    }
    async fn webhooks_of_guild(&self, guild: GuildId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(&self.reader, "guild_id", i(guild)).await
    }

    // Reactions, emojis, pins, bulk delete:
    async fn reactions_of(&self, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
        expressions::reactions_of(&self.reader, messages, viewer).await
    }

    async fn reaction_users(&self, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
        expressions::reaction_users(&self.reader, message, key, after, limit).await
    }

    async fn pins_among(&self, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
        expressions::pins_among(&self.reader, messages).await
    }

    async fn pinned_messages(&self, channel: ChannelId, before: Option<u64>, limit: u32) -> Result<Vec<(MessageRecord, u64)>> {
        expressions::pinned_messages(&self.reader, channel, before, limit).await
    }

    async fn count_pins(&self, channel: ChannelId) -> Result<u64> {
        expressions::count_pins(&self.reader, channel).await
    }

    async fn messages_among(&self, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        expressions::messages_among(&self.reader, channel, ids).await
    }

    async fn emojis_of(&self, guild: GuildId) -> Result<Vec<EmojiRecord>> {
        expressions::emojis_of(&self.reader, guild).await
    }

    async fn get_emoji(&self, id: protocol::id::EmojiId) -> Result<Option<EmojiRecord>> {
        expressions::get_emoji(&self.reader, id).await
    }

    // Roles, overwrites, bans:
    async fn bans_of_guild(&self, guild: GuildId, before: Option<UserId>, after: UserId, limit: u32) -> Result<Vec<BanRecord>> {
        roles::bans_of_guild(&self.reader, guild, before, after, limit).await
    }

    async fn get_ban(&self, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
        roles::get_ban(&self.reader, guild, user).await
    }

    async fn messages_of_author(
        &self,
        guild: GuildId,
        author: UserId,
        since: MessageId,
        limit: u32,
    ) -> Result<Vec<(ChannelId, MessageId)>> {
        roles::messages_of_author(&self.reader, guild, author, since, limit).await
    }
}

crate::accounts::impl_account_store!(SqliteStore, writer, reader);
