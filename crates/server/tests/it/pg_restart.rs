//! PostgreSQL stopped for 5 s and started again while clients post and ack
//! (issue #30): no request answered 500 (a write that cannot be done just then is
//! 503 with `Retry-After`), every acknowledged message is in history, and
//! writes flow again within 2 s of PostgreSQL's return, without restarting
//! throng.
//!
//! It starts a PostgreSQL server of its own with `scripts/postgres.sh`
//! (the binaries `scripts/test.sh` installs), so that stopping it disturbs
//! no other test. Honours `THRONG_SKIP_POSTGRES=1` as the others do.

use std::collections::HashSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::postgres::scratch;

const POSTGRES_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");

fn postgres_sh(args: &[&str]) -> String {
    let out = Command::new(POSTGRES_SH).args(args).output().expect("scripts/postgres.sh runs");
    assert!(out.status.success(), "postgres.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string()
}

/// A private server, stopped when dropped.
struct Private {
    dir: tempfile::TempDir,
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = Command::new(POSTGRES_SH).args(["stop", &self.dir.path().to_string_lossy()]).output();
    }
}

#[derive(Default)]
struct Log {
    /// Posts: (content, status, when the answer came).
    answers: Vec<(String, u16, Instant)>,
    /// Acks of the acknowledged posts: their statuses.
    acks: Vec<u16>,
}

#[tokio::test]
async fn a_postgres_restart_under_load_answers_no_500_and_loses_nothing() {
    let test = "a_postgres_restart_under_load_answers_no_500_and_loses_nothing";
    if scratch::server_url(test).is_none() {
        return;
    }
    let pg = Private { dir: tempfile::Builder::new().prefix("throng-pgr.").tempdir_in("/tmp").unwrap() };
    let dir = pg.dir.path().to_string_lossy().to_string();
    let port = free_port().to_string();
    let url = postgres_sh(&["start", &dir, &port]);
    let db = url.clone();
    let t = Arc::new(TestServer::start_with(move |c| c.database = Some(db)).await);
    let (owner, _) = t.user("pgr_owner").await;
    let (_, channel) = t.guild(&owner).await;

    // Three clients, each posting every 50 ms until told to stop.
    let log = Arc::new(Mutex::new(Log::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for k in 0..3 {
        let (t, log, stop, owner, channel) = (t.clone(), log.clone(), stop.clone(), owner.clone(), channel.clone());
        clients.push(tokio::spawn(async move {
            let (mut n, mut last) = (0, None);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let content = format!("c{k}-{n}");
                n += 1;
                let (s, v) = t.post(&format!("/channels/{channel}/messages"), &owner, json!({"content": content})).await;
                log.lock().unwrap().answers.push((content, s, Instant::now()));
                // Each round also acks the newest acknowledged post: the
                // read-state writer meets the same outage.
                if s == 200 {
                    last = v["id"].as_str().map(str::to_string);
                }
                if let Some(id) = &last {
                    let (a, _) = t.post(&format!("/channels/{channel}/messages/{id}/ack"), &owner, json!({})).await;
                    log.lock().unwrap().acks.push(a);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    let acked = |log: &Mutex<Log>| log.lock().unwrap().answers.iter().filter(|a| a.1 == 200).count();
    // Writes flow before the stop.
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked(&log) < 20 {
        assert!(Instant::now() < deadline, "no writes before the stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    postgres_sh(&["stop", &dir]);
    // The outage the scenario asks for.
    tokio::time::sleep(Duration::from_secs(5)).await;
    postgres_sh(&["start", &dir, &port]);
    let back = Instant::now();
    // Writes flow again: an acknowledgement after PostgreSQL's return.
    let deadline = back + Duration::from_secs(30);
    let first_after = loop {
        let first = log.lock().unwrap().answers.iter().filter(|a| a.1 == 200 && a.2 > back).map(|a| a.2).min();
        if let Some(at) = first {
            break at;
        }
        assert!(Instant::now() < deadline, "no write acknowledged within 30 s of PostgreSQL's return");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A while more under load, then stop.
    let more = acked(&log) + 20;
    while acked(&log) < more {
        assert!(Instant::now() < deadline, "writes stalled after PostgreSQL's return");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }

    let answers = std::mem::take(&mut log.lock().unwrap().answers);
    let acks = std::mem::take(&mut log.lock().unwrap().acks);
    let statuses: HashSet<u16> = answers.iter().map(|a| a.1).chain(acks.iter().copied()).collect();
    assert!(statuses.iter().all(|s| matches!(s, 200 | 503)), "only 200 and 503, never a 500: {statuses:?}");
    let flowing = first_after.duration_since(back);
    assert!(flowing <= Duration::from_secs(2), "writes flowing {flowing:?} after PostgreSQL's return (≤ 2 s)");
    // Every acknowledged message is in history.
    let mut history = HashSet::new();
    let mut after = 0u64;
    loop {
        let (s, page) = t.get(&format!("/channels/{channel}/messages?after={after}&limit=100"), &owner).await;
        assert_eq!(s, 200, "{page}");
        let page = page.as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        for m in &page {
            history.insert(m["content"].as_str().unwrap().to_string());
            after = after.max(m["id"].as_str().unwrap().parse().unwrap());
        }
    }
    let lost: Vec<&String> = answers.iter().filter(|a| a.1 == 200 && !history.contains(&a.0)).map(|a| &a.0).collect();
    assert!(lost.is_empty(), "acknowledged but not in history: {lost:?}");
    let refused = answers.iter().filter(|a| a.1 == 503).count();
    let acks_refused = acks.iter().filter(|&&a| a == 503).count();
    eprintln!(
        "{test}: {} acknowledged, {refused} answered 503; acks {} of which {acks_refused} answered 503; writes flowing {flowing:?} after PostgreSQL's return",
        answers.len() - refused,
        acks.len()
    );
    drop(pg);
}
