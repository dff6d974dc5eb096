//! A 2xx message survives `kill -9` of the server process.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

fn spawn(dir: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_up(http: &reqwest::Client, base: &str) {
    for _ in 0..100 {
        if http.get(format!("{base}/gateway")).send().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server did not come up");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn acknowledged_message_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/api/v10");
    let http = reqwest::Client::new();
    let mut child = spawn(dir.path(), port);
    wait_up(&http, &base).await;
    let reg: serde_json::Value = http
        .post(format!("{base}/auth/register"))
        .json(&json!({"username": "durable", "password": "correct horse"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tok = reg["token"].as_str().unwrap().to_string();
    let g: serde_json::Value = http
        .post(format!("{base}/guilds"))
        .header("authorization", &tok)
        .json(&json!({"name": "g1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ch = g["channels"][0]["id"].as_str().unwrap().to_string();
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
