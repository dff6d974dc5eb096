//! A 2xx message survives `kill -9` of the server process.

use serde_json::json;
use std::process::{Child, Command, Stdio};

use crate::common::{free_port, user_with_guild, wait_up};

fn spawn(dir: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn acknowledged_message_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v10");
    let http = reqwest::Client::new();
    let mut child = spawn(dir.path(), port);
    wait_up(&http, &base).await;
    let (tok, _, ch) = user_with_guild(&http, &base, "durable").await;
    let r = http
        .post(format!("{base}/channels/{ch}/messages"))
        .header("authorization", &tok)
        .json(&json!({"content": "survive"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // SIGKILL right after the 2xx: no shutdown path runs.
    child.kill().unwrap();
    child.wait().unwrap();

    let mut child = spawn(dir.path(), port);
    wait_up(&http, &base).await;
    let msgs: serde_json::Value =
        http.get(format!("{base}/channels/{ch}/messages")).header("authorization", &tok).send().await.unwrap().json().await.unwrap();
    assert_eq!(msgs[0]["content"], "survive");
    child.kill().unwrap();
    child.wait().unwrap();
}
