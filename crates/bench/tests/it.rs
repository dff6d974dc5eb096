//! Self-checks of throng-bench against a real throng server: the tool must
//! count every delivery exactly (no false losses or duplicates), must
//! RESUME sessions the server drops, and must account for slow consumers.
//!
//! The server binary comes from `THRONG_BIN`, or `target/debug/throng` of
//! the workspace (`cargo build -p server` first).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ADMIN_TOKEN: &str = "bench-admin";

fn throng_bin() -> PathBuf {
    let p = match std::env::var_os("THRONG_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/throng"),
    };
    assert!(
        p.is_file(),
        "throng server binary not found at {}: build it (`cargo build -p server`) or set THRONG_BIN to its path",
        p.display()
    );
    p
}

/// A throng server on a free port with its own data directory; killed on drop.
struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        // The server may already be gone; killing twice is harmless.
        let _gone = self.child.kill();
        let _reaped = self.child.wait();
    }
}

fn http(url_hostport: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(url_hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {url_hostport}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let status = resp.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((status, resp))
}

fn start_server() -> Server {
    start_server_in(tempfile::tempdir().unwrap())
}

/// A server on a data directory seeded with `throng seed` (no REST
/// registration, so hundreds of users take no time); returns the fixture.
fn start_seeded_server(seed: &[&str]) -> (Server, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fixture.json");
    let st = Command::new(throng_bin())
        .arg("seed")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(seed)
        .arg("--out")
        .arg(&fixture)
        .stdout(Stdio::null())
        .status()
        .expect("running throng seed");
    assert!(st.success(), "throng seed failed");
    (start_server_in(dir), fixture)
}

fn start_server_in(dir: tempfile::TempDir) -> Server {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(throng_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--admin-token", ADMIN_TOKEN, "--heartbeat-interval-ms", "1000"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting throng");
    let server = Server { child, url: format!("http://127.0.0.1:{port}"), _dir: dir };
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, _)) = http(&format!("127.0.0.1:{port}"), "GET", "/api/v10/gateway", &[], "") {
            return server;
        }
        assert!(Instant::now() < until, "throng did not answer GET /api/v10/gateway within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_throng-bench"))
}

fn setup(server: &Server, dir: &Path, users: usize, guilds: usize, k: usize) -> PathBuf {
    let fixture = dir.join("fixture.json");
    let st = bench()
        .args(["setup", "--server", &server.url, "--users", &users.to_string(), "--guilds", &guilds.to_string()])
        .args(["--memberships-per-user", &k.to_string(), "--out"])
        .arg(&fixture)
        .status()
        .unwrap();
    assert!(st.success(), "setup failed");
    fixture
}

fn report(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("report.json")).expect("report.json written")).unwrap()
}

#[test]
fn chat_at_small_scale_counts_every_delivery_exactly_once() {
    // Ready sessions are read by the worker's shared reader (the default)
    // or by their own tasks: both count the same.
    for reader in ["shared", "task"] {
        chat_at_small_scale(reader);
    }
}

fn chat_at_small_scale(reader: &str) {
    let server = start_server();
    let tmp = tempfile::tempdir().unwrap();
    let fixture = setup(&server, tmp.path(), 12, 3, 2);
    let out = tmp.path().join("report");
    let st = bench()
        .args(["chat", "--server", &server.url, "--reader", reader, "--fixture"])
        .arg(&fixture)
        .args(["--duration", "6s", "--interval", "1s", "--drain", "2s", "--rate", "100", "--source-addrs", "2", "--quiet", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "chat run ({reader} reader) failed: {st}");
    let r = report(&out);
    assert_eq!(r["sessions_ready"], 12, "{r:#}");
    let d = &r["delivery"];
    assert!(d["messages"].as_u64().unwrap() >= 30, "too few messages: {d}");
    assert!(d["expected"].as_u64().unwrap() > d["messages"].as_u64().unwrap(), "fan-out missing: {d}");
    assert_eq!(d["lost"], 0, "{d}");
    assert_eq!(d["duplicates"], 0, "{d}");
    assert_eq!(d["received"], d["expected"], "{d}");
    assert!(r["latency"]["e2e"]["count"].as_u64().unwrap() > 0);
    assert!(out.join("timeseries.png").metadata().unwrap().len() > 1000, "timeseries.png missing");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("](timeseries.png)"), "report.md does not show the time series: {md}");
}

#[test]
fn sessions_dropped_by_the_server_are_resumed_without_loss() {
    let server = start_server();
    let tmp = tempfile::tempdir().unwrap();
    let fixture = setup(&server, tmp.path(), 6, 2, 1);
    let users: Vec<String> = serde_json::from_slice::<Value>(&std::fs::read(&fixture).unwrap()).unwrap()["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect();
    let out = tmp.path().join("report");
    let mut child = bench()
        .args(["chat", "--server", &server.url, "--fixture"])
        .arg(&fixture)
        .args(["--duration", "8s", "--interval", "500ms", "--drain", "2s", "--rate", "100", "--quiet", "--out"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if line.contains("chat phase started") {
                let _receiver_may_be_gone = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("the tool never reached the chat phase");
    std::thread::sleep(Duration::from_secs(2));
    let hostport = server.url.trim_start_matches("http://");
    for u in &users {
        let (status, body) = http(
            hostport,
            "POST",
            "/api/v10/_throng/admin/drop-sessions",
            &[("X-Throng-Admin-Token", ADMIN_TOKEN)],
            &format!("{{\"user_id\":\"{u}\"}}"),
        )
        .unwrap();
        assert_eq!(status, 200, "drop-sessions: {body}");
    }
    let st = child.wait().unwrap();
    assert!(st.success(), "chat run failed: {st}");
    let r = report(&out);
    assert!(r["resumes"].as_u64().unwrap() >= users.len() as u64, "not every dropped session resumed: {r:#}");
    assert_eq!(r["reidentifies"], 0, "{r:#}");
    let d = &r["delivery"];
    assert!(d["messages"].as_u64().unwrap() > 20, "{d}");
    assert_eq!(d["lost"], 0, "{d}");
    assert_eq!(d["duplicates"], 0, "{d}");
}

#[test]
fn slow_consumers_readers_get_everything_in_order_and_stalled_sessions_are_accounted() {
    let (server, fixture) =
        start_seeded_server(&["--users", "100", "--guilds", "1", "--memberships-per-user", "0", "--huge-guild-members", "100"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    // The server's heartbeat is 1 s here, so the stalled sessions also miss
    // heartbeats: whatever ends their sockets, the tool must record it and RESUME.
    let st = bench()
        .args(["slow", "--server", &server.url, "--fixture"])
        .arg(&fixture)
        .args(["--stalled", "2", "--messages", "200", "--rate", "500", "--admin-token", ADMIN_TOKEN, "--quiet", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "slow run failed (exit 3 means a reader lost or reordered messages): {st}");
    let r = report(&out);
    let s = &r["slow"];
    assert_eq!(r["sessions_ready"], 100, "{r:#}");
    assert_eq!(s["messages_accepted"], 200, "{s:#}");
    assert_eq!(s["readers"], 98, "{s:#}");
    assert_eq!(s["readers_complete"], 98, "{s:#}");
    assert_eq!(s["readers_ok"], true, "{s:#}");
    assert!(s["readers_e2e"]["count"].as_u64().unwrap() >= 98 * 200, "{s:#}");
    assert_eq!(s["criteria"].as_array().unwrap().len(), 6, "{s:#}");
    let stalled = s["stalled_detail"].as_array().unwrap();
    assert_eq!(stalled.len(), 2, "{s:#}");
    for d in stalled {
        assert!(!d["end"].as_str().unwrap().starts_with("did not end"), "{d}");
        assert!(d["resumed"] == true || d["invalid_sessions"].as_u64().unwrap() > 0, "no RESUME outcome: {d}");
        // Every accepted message is either received (once) or counted missing.
        let distinct = d["received"].as_u64().unwrap() - d["duplicates"].as_u64().unwrap();
        assert_eq!(distinct + d["missing"].as_u64().unwrap(), 200, "{d}");
    }
}

/// `plot` draws a kept report's PNGs from its report.json (docs/bench/
/// keeps no PNG) and links them from its report.md without rewriting the
/// text the run wrote.
#[test]
fn plot_draws_a_kept_report_and_keeps_its_text() {
    let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/cap-150k-8n");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cap-150k-8n");
    std::fs::create_dir(&dir).unwrap();
    for f in ["report.json", "report.md"] {
        std::fs::copy(kept.join(f), dir.join(f)).unwrap();
    }
    let st = bench().arg("plot").arg(&dir).status().unwrap();
    assert!(st.success(), "plot failed: {st}");
    for png in ["capacity.png", "timeseries.png"] {
        assert!(dir.join(png).metadata().map(|m| m.len()).unwrap_or(0) > 10_000, "{png} not drawn");
    }
    let before = std::fs::read_to_string(kept.join("report.md")).unwrap();
    let after = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(after.contains("](capacity.png)") && after.contains("](timeseries.png)"), "{after}");
    // The text above the plots section (an older report's is one `Plots:` line).
    let text = |md: &str| {
        let end = md.find("## Plots").or_else(|| md.find("\nPlots:").map(|i| i + 1)).unwrap_or(md.len());
        md[..end].to_string()
    };
    assert_eq!(text(&after), text(&before), "the run's own text changed");
    // Once more: the same report.md (a kept report stays as committed).
    let st = bench().arg("plot").arg(dir.join("report.json")).status().unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read_to_string(dir.join("report.md")).unwrap(), after);
    // Elsewhere (--out): the report's text goes along.
    let elsewhere = tmp.path().join("elsewhere");
    let st = bench().arg("plot").arg(dir.join("report.json")).arg("--out").arg(&elsewhere).status().unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read_to_string(elsewhere.join("report.md")).unwrap(), after);
    // Without a report.md, one is written from report.json.
    let bare = tmp.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    std::fs::copy(kept.join("report.json"), bare.join("report.json")).unwrap();
    let st = bench().arg("plot").arg(&bare).status().unwrap();
    assert!(st.success());
    let md = std::fs::read_to_string(bare.join("report.md")).unwrap();
    assert!(md.starts_with("# throng-bench capacity report") && md.contains("](capacity.png)"), "{md}");
}
