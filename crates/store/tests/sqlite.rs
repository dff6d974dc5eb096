//! The conformance suite against the SQLite backend, plus SQLite specifics.

use store::sqlite::{SqliteOptions, SqliteStore};
use store::Store;

#[tokio::test]
async fn sqlite_passes_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
    store::conformance::run_all(&s).await;
}

#[tokio::test]
async fn reopening_keeps_data_and_reapplies_no_migration() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
        let u = store::UserRecord {
            id: protocol::UserId(42),
            username: "x".into(),
            global_name: None,
            avatar: None,
            bot: false,
            flags: 0,
            created_at: 0,
        };
        s.create_user(&u, Some("h")).await.unwrap();
    }
    let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
    assert_eq!(s.get_user(protocol::UserId(42)).await.unwrap().unwrap().username, "x");
}

/// Migration 0015 empties the search index for `open` to fill it again
/// in Rust (its word pairs); here the same is asked of a store that
/// already has a message.
#[tokio::test]
async fn open_rebuilds_the_search_index_when_a_migration_asks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
        store::conformance::rebuild_sample(&s).await;
        store::conformance::rebuilt_index_finds(&s).await;
    }
    {
        let db = rusqlite::Connection::open(dir.path().join("throng.db")).unwrap();
        db.execute_batch("INSERT INTO messages_fts (messages_fts) VALUES ('delete-all'); INSERT INTO search_rebuild VALUES (1);").unwrap();
    }
    let s = SqliteStore::open(dir.path(), &SqliteOptions::default()).await.unwrap();
    store::conformance::rebuilt_index_finds(&s).await;
    let db = rusqlite::Connection::open(dir.path().join("throng.db")).unwrap();
    let pending: i64 = db.query_row("SELECT COUNT(*) FROM search_rebuild", [], |r| r.get(0)).unwrap();
    assert_eq!(pending, 0, "the rebuild is done once");
}

/// Readers that map the file (`storage.sqlite_mmap_mb`) see what the
/// writer commits as readers without a mapping do.
#[tokio::test]
async fn mapped_readers_pass_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions { mmap_bytes: 64 << 20, ..SqliteOptions::default() };
    let s = SqliteStore::open(dir.path(), &opts).await.unwrap();
    store::conformance::run_all(&s).await;
}

/// Migration 0018 lets a level of the index hold up to 15 segments (cheaper
/// writes); the checkpoint thread merges them while the writer rests.
#[tokio::test]
async fn an_idle_store_merges_its_search_index() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions { checkpoint_every: Some(std::time::Duration::from_millis(20)), ..SqliteOptions::default() };
    let s = SqliteStore::open(dir.path(), &opts).await.unwrap();
    let db = rusqlite::Connection::open(dir.path().join("throng.db")).unwrap();
    let automerge: i64 = db.query_row("SELECT v FROM messages_fts_config WHERE k = 'automerge'", [], |r| r.get(0)).unwrap();
    assert_eq!(automerge, 16);
    store::conformance::rebuild_sample(&s).await;
    store::conformance::one_commit_each(&s, 12).await;
    let segments = || -> i64 { db.query_row("SELECT COUNT(DISTINCT segid) FROM messages_fts_idx", [], |r| r.get(0)).unwrap() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while segments() > 2 {
        assert!(std::time::Instant::now() < deadline, "still {} segments after 20 s idle", segments());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    store::conformance::rebuilt_index_finds(&s).await;
}

/// Under a steady stream of commits PASSIVE checkpoints never let the WAL
/// start over, and the file grew with every commit; once it holds
/// `wal_restart_bytes` the checkpoint thread makes the next commit start it
/// over, and the file is cut back to that size.
#[tokio::test]
async fn steady_commits_keep_the_wal_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let restart = 256 << 10;
    let opts = SqliteOptions {
        checkpoint_every: Some(std::time::Duration::from_millis(20)),
        wal_restart_bytes: restart,
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open(dir.path(), &opts).await.unwrap();
    // 2,000 commits of a message each: ~40 MB of WAL frames.
    store::conformance::one_commit_each(&s, 2_000).await;
    let wal = std::fs::metadata(dir.path().join("throng.db-wal")).unwrap().len();
    assert!(wal < 16 * restart, "the WAL is {wal} bytes after 2,000 commits (restart at {restart})");
}
