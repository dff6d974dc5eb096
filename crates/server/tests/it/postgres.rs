//! The server on PostgreSQL (`database = postgres://…`): a user registers,
//! creates a guild and posts; history and the gateway's MESSAGE_CREATE show
//! the message; a restarted server on the same database still has it; the
//! `throng bot create` tool writes to PostgreSQL too.
//!
//! Needs `THRONG_TEST_POSTGRES_URL` (`scripts/test.sh` starts a private
//! server); each test gets a database of its own, dropped at the end.
//! Without the URL: not run (said on stderr), and a failure if
//! `THRONG_REQUIRE_POSTGRES=1`.

use std::future::Future;
use std::io::Write;

use serde_json::json;
use store::postgres::ScratchDatabase;

use crate::common::*;

fn server_url(test: &str) -> Option<String> {
    match std::env::var("THRONG_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("THRONG_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!("{test}: THRONG_REQUIRE_POSTGRES=1 but THRONG_TEST_POSTGRES_URL is not set (scripts/test.sh starts a server)");
            }
            let line = format!(
                "{test}: NOT RUN: set THRONG_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DB (scripts/postgres.sh start DIR PORT)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

/// Runs `body` with the URL of a fresh database, dropped afterwards even if `body` panics.
async fn with_scratch<F, Fut>(test: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(url) = server_url(test) else { return };
    let db = ScratchDatabase::create(&url).await.expect("creating a scratch database");
    let outcome = tokio::spawn(body(db.url.clone())).await;
    db.drop_now().await.expect("dropping the scratch database");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

#[tokio::test]
async fn server_runs_on_postgres() {
    with_scratch("server_runs_on_postgres", |url| async move {
        let pg = url.clone();
        let mut t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let (owner, owner_id) = t.user("pg_owner").await;
        let (guild, channel) = t.guild(&owner).await;

        let mut gw = Gw::connect(&t.ws).await;
        gw.identify(&owner, 1 | 512 | 32768).await;
        let created = gw.until("GUILD_CREATE").await;
        assert_eq!(created["d"]["id"], guild.as_str());

        let sent = t.say(&owner, &channel, "stored in postgres").await;
        let m = gw.until("MESSAGE_CREATE").await;
        assert_eq!(m["d"]["id"], sent["id"]);
        assert_eq!(m["d"]["content"], "stored in postgres");
        assert_eq!(m["d"]["author"]["id"], owner_id.as_str());

        let (s, history) = t.get(&format!("/channels/{channel}/messages"), &owner).await;
        assert_eq!(s, 200, "{history}");
        assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
        assert_eq!(history[0]["id"], sent["id"]);
        assert_eq!(history[0]["content"], "stored in postgres");

        // A second message in a group commit with others, then a restart on
        // the same database: everything is still there, the token works.
        let path = format!("/channels/{channel}/messages");
        let posts: Vec<_> = (0..20).map(|n| t.post(&path, &owner, json!({"content": format!("burst {n}")}))).collect();
        for (s, v) in futures_util::future::join_all(posts).await {
            assert_eq!(s, 200, "{v}");
        }
        t.shutdown().await;
        drop(gw);
        let pg = url.clone();
        let t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let (s, history) = t.get(&format!("/channels/{channel}/messages?limit=100"), &owner).await;
        assert_eq!(s, 200, "{history}");
        assert_eq!(history.as_array().map(Vec::len), Some(21), "every acknowledged message survives a restart: {history}");
        assert_eq!(history[20]["id"], sent["id"], "oldest last");
    })
    .await;
}

#[tokio::test]
async fn bot_create_tool_writes_to_postgres() {
    with_scratch("bot_create_tool_writes_to_postgres", |url| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["bot", "create", "pgbot", "--database", &url])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let token = stdout.lines().last().unwrap().to_string();
        let pg = url.clone();
        let t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let mut gw = Gw::connect(&t.ws).await;
        let ready = gw.identify(&token, BOT_INTENTS).await;
        assert_eq!(ready["d"]["user"]["username"], "pgbot");
        assert_eq!(ready["d"]["user"]["bot"], true);
    })
    .await;
}
