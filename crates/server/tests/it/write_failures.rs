//! Group commit when the database fails: every request of a failed batch
//! gets an error, nothing is acknowledged that was not committed, reads go
//! on meanwhile, and writes work again once the cause is gone.
//!
//! The disk-full test mounts a small tmpfs, so it needs root; CI runs as
//! root and sets `THRONG_REQUIRE_ROOT=1`, which makes a missing mount a
//! failure instead of a notice.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;

use crate::common::TestServer;

/// Every message content in `channel`, paging through the whole history.
async fn history_contents(s: &TestServer, channel: &str, auth: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut after = 0u64;
    loop {
        let (st, page) = s.get(&format!("/channels/{channel}/messages?after={after}&limit=100"), auth).await;
        assert_eq!(st, 200, "{page}");
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            return out;
        }
        for m in &page {
            out.insert(m["content"].as_str().unwrap().to_string());
            after = after.max(m["id"].as_str().unwrap().parse().unwrap());
        }
    }
}

/// Posts `n` messages at once, `tag-i` each; (content, status) of every one.
async fn post_many(s: &TestServer, channel: &str, auth: &str, tag: &str, n: usize, pad: usize) -> Vec<(String, u16, Value)> {
    let posts = (0..n).map(|i| {
        let content = format!("{tag}-{i}-{}", "x".repeat(pad));
        async move {
            let (st, v) = s.post(&format!("/channels/{channel}/messages"), auth, json!({ "content": content })).await;
            (content, st, v)
        }
    });
    futures_util::future::join_all(posts).await
}

#[tokio::test]
async fn a_locked_database_fails_every_request_of_the_batch_and_acknowledges_none() {
    let s = TestServer::start_with(|c| c.storage.sqlite_busy_timeout_ms = 300).await;
    let (owner, _) = s.user("locked").await;
    let (_, channel) = s.guild(&owner).await;
    s.say(&owner, &channel, "before").await;

    // Another process (here: a connection of this one) holds the write lock.
    let dir = s.node().config.data_dir.clone();
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.join("throng.db").display())).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE").execute(&mut other).await.unwrap();

    let t = Instant::now();
    let results = post_many(&s, &channel, &owner, "locked", 24, 0).await;
    // Not committed, and the client may retry: 503 with `retry_after`.
    for (content, st, v) in &results {
        assert_eq!(*st, 503, "{content}: {v}");
        assert_eq!((&v["code"], &v["retry_after"]), (&serde_json::json!(0), &serde_json::json!(1.0)), "{v}");
    }
    // All in one or a few batches, each failing after the busy timeout:
    // not one timeout per message.
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    // Reads do not wait for the writer (WAL readers).
    let (st, _) = s.get(&format!("/channels/{channel}/messages?limit=5"), &owner).await;
    assert_eq!(st, 200);

    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    drop(other);
    s.say(&owner, &channel, "after").await;
    let history = history_contents(&s, &channel, &owner).await;
    assert!(history.contains("before") && history.contains("after"), "{history:?}");
    for (content, _, _) in &results {
        assert!(!history.contains(content), "{content} was refused but is in history");
    }
}

/// Mounts a tmpfs of `mib` MiB at `at` (unmounted on drop).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, mib: u32) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_full_disk_fails_the_batch_acknowledges_only_what_was_committed_and_recovers() {
    let mnt = tempfile::tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(mnt.path(), 8) else {
        assert!(std::env::var("THRONG_REQUIRE_ROOT").is_err(), "THRONG_REQUIRE_ROOT=1 but a tmpfs could not be mounted");
        eprintln!("NOTICE: disk-full test not run: mounting a tmpfs needs root");
        return;
    };
    let data = mnt.path().join("data");
    let s = TestServer::start_with(|c| c.data_dir = data.clone()).await;
    let (owner, _) = s.user("full").await;
    let (_, channel) = s.guild(&owner).await;
    s.say(&owner, &channel, "before").await;

    // Fill the file system, leaving nothing for the database to grow into.
    let filler = mnt.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let small = [0u8; 512];
        while f.write_all(&small).is_ok() {}
        let _ = f.flush();
    }

    // Far more than the space the write-ahead log already holds.
    let mut results = Vec::new();
    for round in 0..8 {
        results.extend(post_many(&s, &channel, &owner, &format!("full{round}"), 100, 1900).await);
    }
    let refused: Vec<_> = results.iter().filter(|(_, st, _)| *st != 200).collect();
    assert!(!refused.is_empty(), "no write failed on a full disk");
    for (content, st, v) in &refused {
        assert_eq!(*st, 500, "{content}: {v}");
    }
    let (st, _) = s.get(&format!("/channels/{channel}/messages?limit=5"), &owner).await;
    assert_eq!(st, 200, "reads go on while the disk is full");

    std::fs::remove_file(&filler).unwrap();
    // Writes work again once there is room (the first may still meet the
    // failed state of the log: give it a few tries).
    let mut ok = false;
    for i in 0..20 {
        let (st, _) = s.post(&format!("/channels/{channel}/messages"), &owner, json!({ "content": format!("after-{i}") })).await;
        if st == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "writes did not recover after the disk had room again");
    let history = history_contents(&s, &channel, &owner).await;
    let mut acked = 0;
    for (content, st, _) in &results {
        if *st == 200 {
            acked += 1;
            assert!(history.contains(content), "{content} was acknowledged but is not in history");
        } else {
            assert!(!history.contains(content), "{content} was refused but is in history");
        }
    }
    eprintln!("disk full: {acked} acknowledged, {} refused, of {}", refused.len(), results.len());
}

/// With the checkpoint thread (`storage.sqlite_checkpoint_ms`), the WAL is
/// copied into the database while messages are written: no commit does it.
#[tokio::test]
async fn the_checkpoint_thread_keeps_the_wal_checkpointed() {
    let t = TestServer::start_with(|c| c.storage.sqlite_checkpoint_ms = 20).await;
    let w = t.world().await;
    for i in 0..20 {
        t.say(&w.owner, &w.channel, &format!("m{i}")).await;
    }
    // The database file itself, without its WAL (`immutable`): it has the
    // messages once a checkpoint copied them there.
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(t.data_dir().join("throng.db")).immutable(true).read_only(true);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: Option<i64> = match sqlx::SqliteConnection::connect_with(&opts).await {
            Ok(mut conn) => sqlx::query_scalar("SELECT count(*) FROM messages WHERE content LIKE 'm%'").fetch_one(&mut conn).await.ok(),
            Err(_) => None,
        };
        if n == Some(20) {
            break;
        }
        assert!(Instant::now() < deadline, "the database file has {n:?} of 20 messages: no checkpoint");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
