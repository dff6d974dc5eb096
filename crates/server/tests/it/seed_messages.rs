//! `throng seed --messages N`: the seeded messages are stored as posted
//! ones (history shows them, with their mentions) and indexed: every query
//! the seeder writes into the fixture finds, through the search route,
//! exactly the messages it counted. On SQLite, and on PostgreSQL (needs
//! `THRONG_TEST_POSTGRES_URL`, as the other PostgreSQL tests).

use std::path::Path;

use serde_json::Value;

use crate::common::*;
use crate::postgres::scratch::with_scratch;

/// Seeds into `data_dir` (or `database`), serves it, and checks every query.
async fn seed_and_search(data_dir: &Path, database: Option<String>) {
    let fixture = data_dir.join("fixture.json");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.arg("seed").arg("--data-dir").arg(data_dir.join("data"));
    if let Some(url) = &database {
        cmd.args(["--database", url]);
    }
    let out = cmd
        .args(["--users", "30", "--guilds", "2", "--memberships-per-user", "1", "--channels-per-guild", "3", "--messages", "3000"])
        .arg("--out")
        .arg(&fixture)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let f: Value = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    let search = &f["search"];
    assert_eq!(search["messages"], 3000);
    let guild = f["guilds"].as_array().unwrap().iter().find(|g| g["id"] == search["guild_id"]).unwrap().clone();
    let member = f["users"].as_array().unwrap().iter().find(|u| guild["member_ids"].as_array().unwrap().contains(&u["id"])).unwrap();
    let token = member["token"].as_str().unwrap().to_string();

    let dir = data_dir.join("data");
    let t = TestServer::start_with(move |c| {
        c.data_dir = dir;
        c.database = database;
    })
    .await;
    let url = format!("{}/guilds/{}/messages/search", t.base, guild["id"].as_str().unwrap());
    let queries = search["queries"].as_array().unwrap();
    assert!(queries.len() >= 5);
    for q in queries {
        let params: Vec<(String, String)> =
            q["params"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
        let resp = t.http.get(&url).header("Authorization", &token).query(&params).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let v: Value = resp.json().await.unwrap();
        // Exact up to the server's search.count_max.
        let want = q["expected"].as_u64().unwrap().min(config::Config::default().search.count_max.into());
        assert_eq!(v["total_results"], want, "{q}: {}", v["total_results"]);
    }
    // The common words are in many messages: the seeding is not trivially empty.
    let common = queries.iter().find(|q| q["kind"] == "common_word").unwrap();
    assert!(common["expected"].as_u64().unwrap() > 100, "{common}");
    // History shows the newest of a channel, as posted messages; a mention is stored as the API's.
    let channel = guild["channel_ids"][0].as_str().unwrap();
    let (s, history) = t.get(&format!("/channels/{channel}/messages?limit=100"), &token).await;
    assert_eq!(s, 200, "{history}");
    let history = history.as_array().unwrap();
    assert_eq!(history.len(), 100);
    assert!(history
        .windows(2)
        .all(|p| p[0]["id"].as_str().unwrap().parse::<u64>().unwrap() > p[1]["id"].as_str().unwrap().parse::<u64>().unwrap()));
    let mentioned = history.iter().find(|m| m["content"].as_str().unwrap().starts_with("<@")).expect("a mention among 100 messages");
    assert_eq!(mentioned["mentions"].as_array().unwrap().len(), 1, "{mentioned}");
    assert_eq!(mentioned["type"], 0);
}

#[tokio::test]
async fn seeded_messages_are_found_by_search_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    seed_and_search(dir.path(), None).await;
}

#[tokio::test]
async fn seeded_messages_are_found_by_search_on_postgres() {
    with_scratch("seeded_messages_are_found_by_search_on_postgres", |url| async move {
        let dir = tempfile::tempdir().unwrap();
        seed_and_search(dir.path(), Some(url)).await;
    })
    .await;
}
