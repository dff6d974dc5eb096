//! `log_format = "json"` (or `THRONG_LOG_FORMAT=json`): every log line on
//! stderr is one JSON object with timestamp, level, target and fields.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{free_port, wait_up};

#[tokio::test]
async fn json_log_format_writes_one_json_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .env("THRONG_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_up(&reqwest::Client::new(), &format!("http://127.0.0.1:{port}/api/v10")).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let lines: Vec<String> = BufReader::new(child.stderr.take().unwrap()).lines().map(Result::unwrap).filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty(), "the server logged nothing");
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(v.get(key).is_some(), "no {key} in {l}");
        }
    }
    assert!(lines.iter().any(|l| l.contains("listening")), "no start-up line among {lines:?}");
}

#[test]
fn an_unknown_log_format_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_throng")).args(["config"]).env("THRONG_LOG_FORMAT", "xml").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("log_format") || err.contains("xml"), "{err}");
}
