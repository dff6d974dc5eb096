//! `throng-bench failover`: repeated `kill -9` of nodes of a cluster under
//! chat load, through its balancer. Writers post to their guilds with a
//! nonce and `enforce_nonce` and send the same post again on any failure
//! (as the web client does); gateway sessions heartbeat, and on a lost
//! socket reconnect at once (RESUME, then IDENTIFY after op 9). The kills
//! and restarts go through `scripts/cluster.sh kill-node` / `start-node`.
//!
//! Per kill it records which guilds the dead node owned, then reports:
//! - the write gap of each of those guilds: from its last acknowledged post
//!   before the kill to its first after;
//! - for each session whose socket the kill closed, the time from the kill
//!   to READY (or RESUMED) again;
//! - the same write gap for the guilds that move back when the node returns;
//! - messages in history more than once (by nonce): must be 0.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::fixture::{Fixture, Index};
use crate::ws::{tcp_connect, Event, WsConn};

#[derive(clap::Args)]
pub struct FailoverArgs {
    /// The cluster's public HTTP base (HAProxy): REST and the gateway.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// The run dir of `scripts/cluster.sh start` (cluster.env, admin-token).
    #[arg(long)]
    pub run_dir: PathBuf,
    /// `scripts/cluster.sh`, which kills and starts nodes.
    #[arg(long, default_value = "scripts/cluster.sh")]
    pub cluster_sh: PathBuf,
    /// Fixture JSON (from `setup` or `throng seed`).
    #[arg(long)]
    pub fixture: PathBuf,
    /// Nodes killed, one after another (node 1, 2, ... round the cluster).
    #[arg(long, default_value_t = 20)]
    pub kills: usize,
    /// Guilds with a writer (the first of the fixture).
    #[arg(long, default_value_t = 60)]
    pub writers: usize,
    /// Each writer posts once per this long.
    #[arg(long, default_value_t = 250)]
    pub interval_ms: u64,
    /// Gateway sessions (the first users of the fixture).
    #[arg(long, default_value_t = 300)]
    pub sessions: usize,
    /// After a kill, how long before the node is started again; after it
    /// is back, how long before the next kill.
    #[arg(long, default_value_t = 4_000)]
    pub settle_ms: u64,
    /// Report directory (failover.json and README.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Shared clock: everything is recorded as ms since the run started.
struct Clock(Instant);

impl Clock {
    fn ms(&self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1000.0
    }
}

#[derive(Default)]
struct WriterLog {
    /// When each post was acknowledged (ms).
    acks: Vec<f64>,
    /// Answers other than 200 and lost connections, before the post went through.
    retries: u64,
}

/// A guild with a writer.
struct Writer {
    guild: String,
    channel: String,
    token: String,
    log: Arc<Mutex<WriterLog>>,
    task: tokio::task::JoinHandle<()>,
}

/// One kill: the node, when it died and came back (ms), and each writer
/// guild's owner before the kill and after the return.
struct Kill {
    node: usize,
    killed: f64,
    back: f64,
    before: Vec<Option<u64>>,
    after: Vec<Option<u64>>,
}

#[derive(Default)]
struct SessionLog {
    /// (socket lost, READY or RESUMED again, resumed) in ms.
    returns: Vec<(f64, f64, bool)>,
    /// Reconnections that failed before one worked.
    failed_attempts: u64,
}

pub async fn run(a: FailoverArgs) -> anyhow::Result<()> {
    let env = read_env(&a.run_dir.join("cluster.env"))?;
    let nodes: usize = env.get("NODES").context("cluster.env: NODES")?.parse()?;
    let public: u16 = env.get("PUBLIC_PORT").context("cluster.env: PUBLIC_PORT")?.parse()?;
    let admin = std::fs::read_to_string(a.run_dir.join("admin-token")).context("admin-token")?.trim().to_string();
    let idx = Index::new(Fixture::load(&a.fixture)?);
    let base = format!("{}/api/v10", a.server.trim_end_matches('/'));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let clock = Arc::new(Clock(Instant::now()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // Writers: guild i, its first member with a token, its first channel.
    let mut writers = Vec::new();
    for (gi, g) in idx.fixture.guilds.iter().enumerate().take(a.writers) {
        let (Some(&u), Some(ch)) = (idx.members_of[gi].first(), g.channel_ids.first()) else { continue };
        let token = idx.fixture.users[u as usize].token.clone();
        let log = Arc::new(Mutex::new(WriterLog::default()));
        let url = format!("{base}/channels/{ch}/messages");
        let task = tokio::spawn(writer(
            http.clone(),
            url,
            token.clone(),
            gi,
            Duration::from_millis(a.interval_ms),
            clock.clone(),
            stop.clone(),
            log.clone(),
        ));
        writers.push(Writer { guild: g.id.clone(), channel: ch.clone(), token, log, task });
    }
    if writers.is_empty() {
        bail!("the fixture has no guild with a member and a channel");
    }
    // Sessions through the balancer.
    let addr: std::net::SocketAddr =
        a.server.trim_start_matches("http://").trim_end_matches('/').parse().context("--server must be http://IP:PORT")?;
    let mut sessions = Vec::new();
    for u in idx.fixture.users.iter().take(a.sessions) {
        let log = Arc::new(Mutex::new(SessionLog::default()));
        let task = tokio::spawn(session(addr, u.token.clone(), clock.clone(), stop.clone(), log.clone()));
        sessions.push((log, task));
    }
    eprintln!("failover: {} writers, {} sessions, {} kills on {nodes} nodes", writers.len(), sessions.len(), a.kills);
    let settle = Duration::from_millis(a.settle_ms);
    tokio::time::sleep(settle).await;

    let mut kills: Vec<Kill> = Vec::new();
    for k in 0..a.kills {
        let node = k % nodes + 1;
        let owners_before = owners(&http, public, node, nodes, &admin, &writers).await;
        let killed = clock.ms();
        sh(&a.cluster_sh, &["kill-node", &node.to_string(), "--run-dir", &a.run_dir.to_string_lossy()])?;
        tokio::time::sleep(settle).await;
        let sh_path = a.cluster_sh.clone();
        let run_dir = a.run_dir.to_string_lossy().to_string();
        tokio::task::spawn_blocking(move || sh(&sh_path, &["start-node", &node.to_string(), "--run-dir", &run_dir])).await??;
        let back = clock.ms();
        tokio::time::sleep(settle).await;
        let owners_after = owners(&http, public, 0, nodes, &admin, &writers).await;
        let moved = owners_before.iter().filter(|o| **o == Some(node as u64)).count();
        eprintln!("kill {}/{}: node {node} ({moved} writer guilds) down for {:.1} s", k + 1, a.kills, (back - killed) / 1000.0);
        kills.push(Kill { node, killed, back, before: owners_before, after: owners_after });
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in &mut writers {
        let _ = tokio::time::timeout(Duration::from_secs(20), &mut w.task).await;
    }
    for (_, task) in &sessions {
        task.abort();
    }

    // Write gaps: per kill, the guilds the dead node owned.
    let gap_over = |acks: &[f64], at: f64| -> Option<f64> {
        let before = acks.iter().copied().filter(|&t| t <= at).fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))?;
        let after = acks.iter().copied().find(|&t| t > at)?;
        Some(after - before)
    };
    let largest_gap_in = |acks: &[f64], from: f64, to: f64| -> f64 {
        acks.windows(2).filter(|w| w[1] > from && w[0] < to).map(|w| w[1] - w[0]).fold(0.0, f64::max)
    };
    let mut kill_gaps = Vec::new();
    let mut return_gaps = Vec::new();
    let mut quiet_gaps = Vec::new();
    for k in &kills {
        let node = Some(k.node as u64);
        for (w, writer) in writers.iter().enumerate() {
            let acks = writer.log.lock().unwrap().acks.clone();
            if k.before[w] == node {
                if let Some(g) = gap_over(&acks, k.killed) {
                    kill_gaps.push(g);
                }
            } else if k.before[w].is_some() {
                quiet_gaps.push(largest_gap_in(&acks, k.killed, k.killed + 2_000.0));
            }
            if k.after[w] == node {
                return_gaps.push(largest_gap_in(&acks, k.back - 1_000.0, k.back + 2_000.0));
            }
        }
    }
    // Sessions: each socket lost within 2 s of a kill, kill to READY.
    let mut ready = Vec::new();
    let mut resumed = 0;
    let mut failed_attempts = 0;
    for (log, _) in &sessions {
        let l = log.lock().unwrap();
        failed_attempts += l.failed_attempts;
        for &(lost, again, r) in &l.returns {
            if let Some(k) = kills.iter().find(|k| lost >= k.killed && lost <= k.killed + 2_000.0) {
                ready.push(again - k.killed);
                resumed += usize::from(r);
            }
        }
    }
    let retries: u64 = writers.iter().map(|w| w.log.lock().unwrap().retries).sum();
    let acked: usize = writers.iter().map(|w| w.log.lock().unwrap().acks.len()).sum();
    // History: every nonce once.
    let mut repeated = 0usize;
    let mut stored = 0usize;
    for w in &writers {
        let contents = history(&http, &base, &w.channel, &w.token).await?;
        let mut seen: HashMap<String, usize> = HashMap::new();
        for c in contents.into_iter().filter(|c| c.starts_with("fo-")) {
            *seen.entry(c).or_default() += 1;
        }
        stored += seen.len();
        repeated += seen.values().filter(|&&n| n > 1).count();
    }

    let summary = json!({
        "nodes": nodes,
        "kills": kills.len(),
        "writers": writers.len(),
        "interval_ms": a.interval_ms,
        "sessions": sessions.len(),
        "acknowledged": acked,
        "stored_distinct": stored,
        "stored_more_than_once": repeated,
        "writer_retries": retries,
        "write_gap_after_kill_ms": dist(&mut kill_gaps),
        "write_gap_on_return_ms": dist(&mut return_gaps),
        "write_gap_unaffected_ms": dist(&mut quiet_gaps),
        "ready_after_kill_ms": dist(&mut ready),
        "sessions_resumed": resumed,
        "session_failed_attempts": failed_attempts,
        "kill_log": kills.iter().map(|k| json!({"node": k.node, "killed_ms": k.killed, "back_ms": k.back})).collect::<Vec<_>>(),
    });
    let text = markdown(&summary);
    println!("{text}");
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("failover.json"), serde_json::to_vec_pretty(&summary)?)?;
        std::fs::write(dir.join("README.md"), text)?;
    }
    if stored < acked || repeated > 0 {
        bail!("history: {stored} distinct of {acked} acknowledged, {repeated} stored more than once");
    }
    Ok(())
}

/// p50, p99 and max of `v` (ms), and how many.
fn dist(v: &mut [f64]) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v.get(((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len().saturating_sub(1))).copied();
    json!({"n": v.len(), "p50": at(0.5), "p99": at(0.99), "max": v.last()})
}

fn markdown(s: &Value) -> String {
    let row = |name: &str, d: &Value| {
        let f = |k: &str| d[k].as_f64().map_or("-".to_string(), |x| format!("{:.0}", x));
        format!("| {name} | {} | {} | {} | {} |\n", d["n"], f("p50"), f("p99"), f("max"))
    };
    let mut t = format!(
        "# throng-bench failover\n\n{} kills of {} nodes; {} writers posting every {} ms with nonces; {} gateway sessions.\n\n\
         | measure (ms) | n | p50 | p99 | max |\n|---|---|---|---|---|\n",
        s["kills"], s["nodes"], s["writers"], s["interval_ms"], s["sessions"]
    );
    t += &row("write gap of a guild whose owner was killed", &s["write_gap_after_kill_ms"]);
    t += &row("kill to READY/RESUMED of a session whose node was killed", &s["ready_after_kill_ms"]);
    t += &row("write gap of a guild moving back to the restarted node", &s["write_gap_on_return_ms"]);
    t += &row("largest gap of other guilds within 2 s of a kill", &s["write_gap_unaffected_ms"]);
    t += &format!(
        "\nAcknowledged {}; in history {} distinct, {} more than once. Writers' retries (a lost connection or a non-200 answer, then the same post again): {}. Sessions resumed {}, reconnection attempts failed {}.\n",
        s["acknowledged"], s["stored_distinct"], s["stored_more_than_once"], s["writer_retries"], s["sessions_resumed"], s["session_failed_attempts"]
    );
    t
}

fn read_env(path: &std::path::Path) -> anyhow::Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn sh(script: &std::path::Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new(script).args(args).output().with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} {args:?}: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Each writer guild's owner, asked of a live node (not `down`).
async fn owners(http: &reqwest::Client, public: u16, down: usize, nodes: usize, admin: &str, writers: &[Writer]) -> Vec<Option<u64>> {
    let ask = (1..=nodes).find(|&n| n != down).unwrap_or(1);
    let mut out = Vec::with_capacity(writers.len());
    for w in writers {
        let url = format!("http://127.0.0.1:{}/api/v10/_throng/admin/guilds/{}/owner", public as usize + ask, w.guild);
        let v: Option<Value> = match http.get(url).header("x-throng-admin-token", admin).send().await {
            Ok(r) => r.json().await.ok(),
            Err(_) => None,
        };
        out.push(v.and_then(|v| v["node"].as_u64()));
    }
    out
}

/// Posts `fo-<writer>-<n>` once per `every` until `stop`, each with its
/// nonce; on any failure the same post again after 50 ms (a 429 waits
/// `retry_after`).
#[allow(clippy::too_many_arguments)]
async fn writer(
    http: reqwest::Client,
    url: String,
    token: String,
    id: usize,
    every: Duration,
    clock: Arc<Clock>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    log: Arc<Mutex<WriterLog>>,
) {
    let mut n = 0u64;
    let start = Instant::now();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let content = format!("fo-{id}-{n}");
        let nonce = format!("{id}-{n}");
        loop {
            let r = http
                .post(&url)
                .header("authorization", &token)
                .json(&json!({"content": content, "nonce": nonce, "enforce_nonce": true}))
                .send()
                .await;
            match r {
                Ok(r) if r.status() == 200 => {
                    log.lock().unwrap().acks.push(clock.ms());
                    break;
                }
                Ok(r) if r.status() == 429 => {
                    let v: Value = r.json().await.unwrap_or_default();
                    let wait = v["retry_after"].as_f64().unwrap_or(0.1);
                    tokio::time::sleep(Duration::from_secs_f64(wait.clamp(0.0, 5.0))).await;
                }
                _ => {
                    log.lock().unwrap().retries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        tokio::time::sleep_until((start + every * n as u32).into()).await;
    }
}

/// One gateway session that heartbeats and, when its socket is lost,
/// reconnects at once: RESUME, or IDENTIFY after op 9.
async fn session(
    addr: std::net::SocketAddr,
    token: String,
    clock: Arc<Clock>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    log: Arc<Mutex<SessionLog>>,
) {
    let mut resume: Option<(String, u64)> = None;
    let mut lost_at: Option<f64> = None;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match one_connection(addr, &token, &mut resume, &clock, &stop, |resumed| {
            if let Some(lost) = lost_at.take() {
                log.lock().unwrap().returns.push((lost, clock.ms(), resumed));
            }
        })
        .await
        {
            // The socket was lost after READY: reconnect now.
            Ok(()) => {
                lost_at.get_or_insert(clock.ms());
            }
            Err(_) => {
                log.lock().unwrap().failed_attempts += u64::from(lost_at.is_some());
                lost_at.get_or_insert(clock.ms());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One connection until it is lost: `Ok` once it had been READY or
/// RESUMED (then `ready(resumed)` was called), `Err` before that.
async fn one_connection(
    addr: std::net::SocketAddr,
    token: &str,
    resume: &mut Option<(String, u64)>,
    clock: &Clock,
    stop: &std::sync::atomic::AtomicBool,
    mut ready: impl FnMut(bool),
) -> anyhow::Result<()> {
    let _ = clock;
    let stream = tcp_connect(addr, None).await?;
    let mut ws = WsConn::handshake(stream, &addr.to_string(), "/?v=10&encoding=json").await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut events = Vec::new();
    let mut heartbeat = Duration::from_secs(40);
    let mut next_beat = Instant::now() + heartbeat;
    let mut up = false;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        tokio::select! {
            r = ws.readable() => { r?; }
            _ = tokio::time::sleep_until(next_beat.into()) => {
                let seq = resume.as_ref().map(|r| r.1);
                ws.send_text(json!({"op": 1, "d": seq}).to_string().as_bytes()).await?;
                next_beat = Instant::now() + heartbeat;
                continue;
            }
        }
        events.clear();
        let open = ws.read_events(&mut events).map_err(|e| anyhow::anyhow!("{e}"))?;
        for e in events.drain(..) {
            let Event::Message { payload, .. } = e else {
                return if up { Ok(()) } else { bail!("closed before READY") };
            };
            let v: Value = serde_json::from_slice(&payload)?;
            if let (Some(s), Some(r)) = (v["s"].as_u64(), resume.as_mut()) {
                r.1 = s;
            }
            match (v["op"].as_u64(), v["t"].as_str()) {
                (Some(10), _) => {
                    heartbeat = Duration::from_millis(v["d"]["heartbeat_interval"].as_u64().unwrap_or(41_250) * 9 / 10);
                    next_beat = Instant::now() + heartbeat;
                    let hello = match resume.as_ref() {
                        Some((sid, seq)) => json!({"op": 6, "d": {"token": token, "session_id": sid, "seq": seq}}),
                        None => {
                            json!({"op": 2, "d": {"token": token, "intents": 513, "properties": {"os": "linux", "browser": "throng-bench", "device": "throng-bench"}}})
                        }
                    };
                    ws.send_text(hello.to_string().as_bytes()).await?;
                }
                (Some(9), _) => {
                    // Not resumable: IDENTIFY on this connection.
                    *resume = None;
                    let id = json!({"op": 2, "d": {"token": token, "intents": 513, "properties": {"os": "linux", "browser": "throng-bench", "device": "throng-bench"}}});
                    ws.send_text(id.to_string().as_bytes()).await?;
                }
                (Some(0), Some("READY")) => {
                    let sid = v["d"]["session_id"].as_str().unwrap_or_default().to_string();
                    *resume = Some((sid, v["s"].as_u64().unwrap_or(0)));
                    up = true;
                    ready(false);
                }
                (Some(0), Some("RESUMED")) => {
                    up = true;
                    ready(true);
                }
                _ => {}
            }
        }
        if !open {
            return if up { Ok(()) } else { bail!("closed before READY") };
        }
    }
}

async fn history(http: &reqwest::Client, base: &str, channel: &str, token: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let url = format!("{base}/channels/{channel}/messages?after={after}&limit=100");
        let page: Value = http.get(url).header("authorization", token).send().await?.json().await?;
        let Some(page) = page.as_array() else { bail!("history of {channel}: {page}") };
        let Some(max) = page.iter().filter_map(|m| m["id"].as_str()?.parse::<u64>().ok()).max() else { return Ok(out) };
        out.extend(page.iter().filter_map(|m| m["content"].as_str().map(str::to_string)));
        after = max;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_of_the_sorted_values() {
        let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        let d = dist(&mut v);
        assert_eq!((d["n"].as_u64(), d["p50"].as_f64(), d["max"].as_f64()), (Some(5), Some(3.0), Some(5.0)));
        assert_eq!(dist(&mut []).get("p50"), Some(&Value::Null));
    }
}
