//! SQLite backend: the embedded default.
//!
//! WAL journal so readers never block the writer and several processes can
//! share one data directory; `synchronous=NORMAL`, which in WAL mode keeps
//! every committed transaction across a process crash (`kill -9`); only an
//! OS crash or power loss may lose the last transactions (set
//! `synchronous_full` to rule that out too). All writes go through a pool of
//! one connection (SQLite has one writer anyway; this avoids busy retries
//! inside the process), reads through a small pool.
//!
//! The SQL is mostly the one both backends run (`sql`); here is what
//! SQLite does its own way: multi-row inserts (`inserts`), the group
//! commit's writer thread (`batch`), IDENTIFY's lookup and claims of many
//! guilds.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use protocol::{ActorKey, GuildId};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::sql::rows::{qualified, IdentifyRow, USER_COLS};
use crate::sql::{i, Backend, Pool};
use crate::*;

mod batch;
pub(crate) mod inserts;

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
    /// Dropped with the store: its checkpoint thread ends.
    _checkpoints: Option<std::sync::mpsc::Sender<()>>,
}

#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub readers: u32,
    pub synchronous_full: bool,
    pub busy_timeout: Duration,
    /// Checkpoints on a thread of their own, this often (see [`checkpointer`]);
    /// `None`: SQLite's automatic ones, inside commits.
    pub checkpoint_every: Option<Duration>,
    /// `PRAGMA mmap_size` of the reader connections (0: none).
    pub mmap_bytes: u64,
    /// Page cache of each reader connection, KiB (`PRAGMA cache_size=-N`).
    pub reader_cache_kb: u64,
    /// Once the WAL holds this many bytes of frames, the checkpointer makes
    /// the next commit start it over from its beginning (see
    /// [`checkpointer`]); also the size the file is cut back to then
    /// (`PRAGMA journal_size_limit`).
    pub wal_restart_bytes: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            readers: 4,
            synchronous_full: false,
            busy_timeout: Duration::from_secs(20),
            checkpoint_every: Some(Duration::from_millis(100)),
            mmap_bytes: 0,
            reader_cache_kb: 1_000,
            wal_restart_bytes: 64 << 20,
        }
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
            .pragma("cache_size", "-16000")
            .pragma("journal_size_limit", opts.wal_restart_bytes.to_string());
        // With a checkpointer, no commit runs a checkpoint (and its fsyncs).
        let connect = match opts.checkpoint_every {
            Some(_) => connect.pragma("wal_autocheckpoint", "0"),
            None => connect,
        };
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
        let rebuild = path.clone();
        tokio::task::spawn_blocking(move || rebuild_search(&rebuild))
            .await
            .map_err(|e| StoreError::Db(sqlx::Error::Io(std::io::Error::other(e))))??;
        let reader = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(opts.readers.max(1))
            .connect_with(
                connect
                    .clone()
                    .read_only(true)
                    .pragma("mmap_size", opts.mmap_bytes.to_string())
                    .pragma("cache_size", format!("-{}", opts.reader_cache_kb.max(1))),
            )
            .await?;
        // It reads tokens, users and memberships only: a smaller page cache.
        let lookup = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .connect_with(connect.read_only(true).pragma("cache_size", "-4000"))
            .await?;
        let batches = batch::BatchWriter::start(&path, opts, tries)?;
        let checkpoints = opts.checkpoint_every.map(|every| checkpointer(&path, every, opts.wal_restart_bytes)).transpose()?;
        Ok(Self { batches, writer, reader, lookup, _checkpoints: checkpoints })
    }

    /// The writer pool, for bulk tools (seeding) that batch their own transactions.
    pub fn writer(&self) -> &SqlitePool {
        &self.writer
    }
}

/// Checkpoints the WAL every `every` on a thread and connection of its
/// own, PASSIVE: it copies what no reader still needs and waits for nobody,
/// so the writers' commits never run a checkpoint (with SQLite's automatic
/// ones, the commit that fills the WAL to 1,000 pages runs it, fsyncs
/// included: the interactions benchmark's answers had a p99 of 26-35 ms
/// against a p50 of ~7 ms, and 16-19 ms with a checkpoint every 100 ms). A
/// longer period lets the WAL grow between checkpoints, and every page
/// read searches a longer WAL index: every 500 ms cost ~10% more CPU per
/// interaction than every 100 ms.
///
/// PASSIVE alone need not let the WAL start over under a steady stream of
/// commits: SQLite starts it over only when a write transaction begins with
/// every frame already copied, and a commit may land while each checkpoint
/// runs. At ~950 messages a second the WAL grew by ~17 MB a second to
/// 1.4 GB in 80 s in one run of two, and nothing bounded the file. So once
/// the WAL holds `restart_bytes` of frames the thread runs a RESTART
/// checkpoint: it takes the write lock (waiting at most [`RESTART_WAIT`]),
/// copies the few frames the last PASSIVE left, and waits as long for
/// readers of the WAL to finish, after which the next commit writes from
/// the file's start again (measured: 1-9 ms each, every ~4 s at that
/// rate). The thread ends when the returned sender drops.
fn checkpointer(path: &Path, every: Duration, restart_bytes: u64) -> Result<std::sync::mpsc::Sender<()>> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // SAFETY: a live connection this function owns; the handler is a plain
    // function whose argument is a number, not a pointer.
    unsafe {
        libsqlite3_sys::sqlite3_busy_handler(conn.handle(), Some(busy_retry), busy_tries(RESTART_WAIT) as *mut std::ffi::c_void);
    }
    conn.pragma_update(None, "wal_autocheckpoint", "0")?;
    conn.pragma_update_and_check(None, "journal_size_limit", restart_bytes as i64, |_| Ok(()))?;
    let page = conn.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))?.max(512);
    let restart_frames = (restart_bytes as i64 / page).max(1);
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("throng-sqlite-checkpoint".into())
        .spawn(move || {
            let mut seen = data_version(&conn);
            let (mut quiet, mut merged) = (0u32, false);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                // Busy (another process checkpointing, a lock held): next time.
                let frames = wal_checkpoint(&conn, "PASSIVE").unwrap_or(0);
                if frames >= restart_frames {
                    let _ = wal_checkpoint(&conn, "RESTART");
                }
                // The search index's segments, merged a step at a time
                // while no other connection (of this process or another)
                // has committed for two periods; until the next commit once
                // there is nothing left to merge.
                let now = data_version(&conn);
                if now != seen {
                    (seen, quiet, merged) = (now, 0, false);
                    continue;
                }
                quiet += 1;
                if quiet >= 2 && !merged {
                    merged = !matches!(merge_step(&conn), Ok(true));
                }
            }
        })
        .map_err(|e| StoreError::Db(sqlx::Error::Io(e)))?;
    Ok(stop)
}

/// How long a RESTART checkpoint waits for the write lock, and then (holding
/// it, so commits wait too) for readers of the WAL; when either does not come,
/// it tries again a period later. An idle merge step waits as long for the
/// write lock (a busy one ends the merging until the next commit).
const RESTART_WAIT: Duration = Duration::from_millis(10);

/// Runs `PRAGMA wal_checkpoint(MODE)`: the frames in the WAL when it ran.
fn wal_checkpoint(conn: &rusqlite::Connection, mode: &str) -> rusqlite::Result<i64> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(1))
}

/// `PRAGMA data_version`: changes when another connection commits.
fn data_version(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap_or(0)
}

/// Pages of the search index one idle merge step writes at most (a step
/// holds the write lock; a commit arriving meanwhile waits for it).
const MERGE_STEP_PAGES: i64 = 64;

/// One step of merging the search index's segments (FTS5's `merge`: levels
/// of 4 or more segments, at most [`MERGE_STEP_PAGES`] pages written).
/// Whether it did any work. Migration 0018 lets a busy index keep up to 15
/// segments a level, which makes writes cheaper and searches slower; these
/// steps bring it back while the writer rests.
fn merge_step(conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
    let before = conn.total_changes();
    conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('merge', ?1)", [MERGE_STEP_PAGES])?;
    // FTS5: a change count of 2 or more means the step merged something.
    Ok(conn.total_changes() - before >= 2)
}

/// Merges the search index of the store in `dir` as far as the idle steps
/// would, then checkpoints the WAL into the database (the seeder's bulk
/// load, before a benchmark reads it).
pub fn merge_search_index(dir: &Path) -> Result<()> {
    let conn = rusqlite::Connection::open(dir.join("throng.db"))?;
    while merge_step(&conn)? {}
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
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

/// Fills the search index from the messages when a migration emptied it
/// for that (0015: the word pairs are made in Rust), in one transaction,
/// so an interrupted rebuild starts over at the next start.
fn rebuild_search(path: &Path) -> Result<()> {
    use rusqlite::{params, Connection, TransactionBehavior};
    let mut conn = Connection::open(path)?;
    let pending: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM search_rebuild)", [], |r| r.get(0))?;
    if !pending {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut read = tx.prepare("SELECT id, guild_id, channel_id, author_id, content FROM messages")?;
        let mut write = tx.prepare("INSERT INTO messages_fts (rowid, content, scope) VALUES (?1, ?2, ?3)")?;
        let mut rows = read.query([])?;
        while let Some(r) = rows.next()? {
            let (id, guild, channel, author, content): (i64, Option<i64>, i64, i64, String) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
            let scope = crate::scope_tokens(guild.map(|g| g as u64), channel as u64, author as u64, &content);
            write.execute(params![id, content, scope])?;
        }
    }
    tx.execute("DELETE FROM search_rebuild", [])?;
    tx.commit()?;
    Ok(())
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

#[async_trait]
impl Backend for SqliteStore {
    fn writer(&self) -> Pool<'_> {
        Pool::Sqlite(&self.writer)
    }

    fn reader(&self) -> Pool<'_> {
        Pool::Sqlite(&self.reader)
    }

    fn lookup(&self) -> Pool<'_> {
        Pool::Sqlite(&self.lookup)
    }

    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>> {
        // One statement for the whole batch: each statement and row is a
        // round trip to the connection's worker thread, which dominated
        // IDENTIFY's cost when done per query.
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT t.hash, {},
                    (SELECT group_concat(guild_id) FROM (SELECT guild_id FROM members WHERE user_id = u.id ORDER BY guild_id)) AS guilds,
                    a.id AS app_id, a.flags AS app_flags, t.expires_at
             FROM tokens t JOIN users u ON u.id = t.user_id
             LEFT JOIN applications a ON a.bot_user_id = u.id
             WHERE t.hash IN (",
            qualified("u", USER_COLS)
        ));
        let mut list = q.separated(", ");
        for h in hashes {
            list.push_bind(&h[..]);
        }
        q.push(")");
        let rows: Vec<IdentifyRow<Option<String>>> = q.build_query_as().fetch_all(&self.lookup).await?;
        let decode = |e: std::num::ParseIntError| StoreError::Db(sqlx::Error::Decode(Box::new(e)));
        let mut out = Vec::with_capacity(rows.len());
        for mut r in rows {
            let guilds = match r.guilds.take() {
                None => Vec::new(),
                Some(list) => list.split(',').map(|g| g.parse::<u64>().map(GuildId).map_err(decode)).collect::<Result<_>>()?,
            };
            out.extend(r.into_record(guilds));
        }
        Ok(out)
    }

    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        self.batches.create_messages(batch).await
    }

    async fn claim_guilds(&self, guilds: &[ActorKey], node: u64) -> Result<Vec<(ActorKey, u64)>> {
        let mut out = Vec::with_capacity(guilds.len());
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        for chunk in guilds.chunks(500) {
            let mut q = QueryBuilder::<Sqlite>::new("INSERT INTO guild_owners (guild_id, node, epoch) ");
            q.push_values(chunk, |mut b, g| {
                b.push_bind(i(*g)).push_bind(node as i64).push_bind(1i64);
            });
            q.push(" ON CONFLICT (guild_id) DO UPDATE SET node = excluded.node, epoch = guild_owners.epoch + 1 RETURNING guild_id, epoch");
            let rows: Vec<(i64, i64)> = q.build_query_as().fetch_all(&mut *tx).await?;
            out.extend(rows.into_iter().map(|(g, e)| (ActorKey::from_raw(g as u64), e as u64)));
        }
        tx.commit().await?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `storage.sqlite_reader_cache_kb` sizes every reader connection's page
    /// cache; the lookup connection keeps its own smaller one.
    #[tokio::test]
    async fn reader_connections_take_the_configured_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SqliteOptions { readers: 2, reader_cache_kb: 1234, ..SqliteOptions::default() };
        let s = SqliteStore::open(dir.path(), &opts).await.unwrap();
        // Two at once, so both reader connections answer.
        let (a, b) = (s.reader.acquire().await.unwrap(), s.reader.acquire().await.unwrap());
        for mut c in [a, b] {
            let kb: i64 = sqlx::query_scalar("PRAGMA cache_size").fetch_one(&mut *c).await.unwrap();
            assert_eq!(kb, -1234);
        }
        let lookup: i64 = sqlx::query_scalar("PRAGMA cache_size").fetch_one(&s.lookup).await.unwrap();
        assert_eq!(lookup, -4000);
        let writer: i64 = sqlx::query_scalar("PRAGMA cache_size").fetch_one(&s.writer).await.unwrap();
        assert_eq!(writer, -16000);
    }
}
