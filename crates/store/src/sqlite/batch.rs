//! Group commit of new messages on a thread of its own, with its own
//! connection (rusqlite) and prepared statements.
//!
//! Why not the sqlx writer: there every statement is a hand-off to sqlx's
//! connection thread, and a batch was one multi-row INSERT whose SQL text
//! (13 placeholders a row) changed with the batch size, so SQLite parsed a
//! new statement for every commit and every value was copied into sqlx's
//! argument list first. Here a batch is one hand-off; the thread binds each
//! row into the same prepared INSERT by reference. Measured with
//! `throng-bench ingest` (docs/benchmarks.md).
//!
//! The thread ends when its `BatchWriter` is dropped. Both writer
//! connections take the write lock with `BEGIN IMMEDIATE` and wait for
//! each other with the same busy handler.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use crate::attachments::attachment_ids;
use crate::{MessageRecord, Result, StoreError};

type Reply = tokio::sync::oneshot::Sender<Result<Vec<bool>>>;

pub(super) struct BatchWriter {
    tx: mpsc::Sender<(Vec<(u64, MessageRecord)>, Reply)>,
}

impl BatchWriter {
    /// Opens a connection to `path` (migrated already) and starts the thread.
    /// SQLite checkpoints inside its commits unless `opts` has a checkpointer.
    pub(super) fn start(path: &Path, opts: &super::SqliteOptions, busy_tries: usize) -> Result<BatchWriter> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        // SAFETY: a live connection this thread owns; the handler is a plain
        // function whose argument is a number, not a pointer.
        unsafe {
            libsqlite3_sys::sqlite3_busy_handler(conn.handle(), Some(super::busy_retry), busy_tries as *mut std::ffi::c_void);
        }
        conn.pragma_update(None, "synchronous", if opts.synchronous_full { "FULL" } else { "NORMAL" })?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "cache_size", "-16000")?;
        conn.pragma_update_and_check(None, "journal_size_limit", opts.wal_restart_bytes as i64, |_| Ok(()))?;
        if opts.checkpoint_every.is_some() {
            conn.pragma_update(None, "wal_autocheckpoint", "0")?;
        }
        conn.set_prepared_statement_cache_capacity(16);
        let (tx, rx) = mpsc::channel::<(Vec<(u64, MessageRecord)>, Reply)>();
        std::thread::Builder::new()
            .name("throng-sqlite-batch".into())
            .spawn(move || {
                let mut conn = conn;
                while let Ok((batch, reply)) = rx.recv() {
                    let _ = reply.send(write(&mut conn, &batch));
                }
            })
            .map_err(|e| StoreError::Db(sqlx::Error::Io(e)))?;
        Ok(BatchWriter { tx })
    }

    pub(super) async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let gone = || StoreError::Db(sqlx::Error::WorkerCrashed);
        self.tx.send((batch.to_vec(), reply)).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// One transaction: fences checked under the write lock, then every row
/// that passes, then each channel's `last_message_id` once.
fn write(conn: &mut Connection, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut current: HashMap<i64, Option<i64>> = HashMap::new();
    {
        let mut fence = tx.prepare_cached("SELECT epoch FROM guild_owners WHERE guild_id = ?1")?;
        for (epoch, m) in batch {
            if *epoch == 0 {
                continue;
            }
            if let Some(g) = m.guild_id {
                let g = g.0 as i64;
                if let std::collections::hash_map::Entry::Vacant(e) = current.entry(g) {
                    let mut rows = fence.query(params![g])?;
                    e.insert(rows.next()?.map(|r| r.get::<_, i64>(0)).transpose()?);
                }
            }
        }
    }
    let ok: Vec<bool> = batch
        .iter()
        .map(|(e, m)| *e == 0 || m.guild_id.is_some_and(|g| current.get(&(g.0 as i64)).copied().flatten() == Some(*e as i64)))
        .collect();
    let mut last: HashMap<i64, i64> = HashMap::new();
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?;
        // The search index, in the same transaction (see migrations 0012, 0014).
        let mut index = tx.prepare_cached("INSERT INTO messages_fts (rowid, content, scope) VALUES (?1, ?2, ?3)")?;
        for ((_, m), _) in batch.iter().zip(&ok).filter(|(_, ok)| **ok) {
            let reference = m.reference.as_ref().map(serde_json::to_string).transpose()?;
            let extra = serde_json::to_string(&m.extra)?;
            let mentions = serde_json::to_string(&m.mentions.iter().map(|u| u.0).collect::<Vec<u64>>())?;
            insert.execute(params![
                m.id.0 as i64,
                m.channel_id.0 as i64,
                m.guild_id.map(|g| g.0 as i64),
                m.author_id.0 as i64,
                m.content,
                m.edited_at.map(|v| v as i64),
                i64::from(m.kind),
                m.flags as i64,
                m.tts,
                m.mention_everyone,
                mentions,
                reference,
                extra,
            ])?;
            index.execute(params![m.id.0 as i64, m.content, crate::index_scope(m)])?;
            link(&tx, m)?;
            let v = last.entry(m.channel_id.0 as i64).or_insert(0);
            *v = (*v).max(m.id.0 as i64);
        }
        let mut update = tx.prepare_cached("UPDATE channels SET last_message_id = max(coalesce(last_message_id, 0), ?2) WHERE id = ?1")?;
        for (c, m) in last {
            update.execute(params![c, m])?;
        }
    }
    tx.commit()?;
    Ok(ok)
}

/// Links a message's pending uploads to it (in its transaction).
fn link(tx: &rusqlite::Transaction<'_>, m: &MessageRecord) -> Result<()> {
    let mut ids = attachment_ids(m).peekable();
    if ids.peek().is_none() {
        return Ok(());
    }
    let mut update = tx.prepare_cached("UPDATE attachments SET message_id = ?1 WHERE id = ?2 AND message_id IS NULL")?;
    for a in ids {
        update.execute(params![m.id.0 as i64, a])?;
    }
    Ok(())
}
