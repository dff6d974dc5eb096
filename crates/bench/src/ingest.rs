//! `ingest`: the write path at full speed. Many users post as fast as the
//! server accepts, over keep-alive HTTP connections (each request goes to
//! the next user, so per-user rate limits hold); a few reader sessions
//! check that every accepted message is delivered to them exactly once.
//!
//! Reports accepted msg/s, ack latency, server CPU per accepted message
//! and, with `--admin-token` on a throng server, the writer's commits/s and
//! rows per commit.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};

use crate::fixture::{Fixture, Index};
use crate::procfs;
use crate::ws::{self, Event, WsConn};

#[derive(clap::Args, Clone, Debug)]
pub struct IngestArgs {
    /// Server HTTP base URL; repeat for several servers (requests go round-robin).
    #[arg(long = "server", default_value = "http://127.0.0.1:8080")]
    pub servers: Vec<String>,
    /// Fixture JSON (from `setup` or `throng seed`).
    #[arg(long)]
    pub fixture: PathBuf,
    /// Length of the measured phase.
    #[arg(long, default_value = "20s", value_parser = crate::scenario::parse_duration)]
    pub duration: Duration,
    /// Unmeasured sending before the measured phase.
    #[arg(long, default_value = "3s", value_parser = crate::scenario::parse_duration)]
    pub warmup: Duration,
    /// Requests in flight at once (each on its own keep-alive connection).
    #[arg(long, default_value_t = 128)]
    pub connections: usize,
    /// Reader sessions that check delivery; messages go to their guilds.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Server process ids, for CPU per accepted message.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// A throng admin token: reads the writer's commit counters.
    #[arg(long)]
    pub admin_token: Option<String>,
    /// Bytes of each message's content.
    #[arg(long, default_value_t = 64)]
    pub message_size: usize,
    /// Content of 5 to 20 words instead, drawn with a Zipf distribution
    /// (exponent 1) from 5,000 made-up words, as `throng seed --messages`
    /// writes them: what a search index sees in a chat.
    #[arg(long)]
    pub words: bool,
    /// Report directory (ingest.json and README.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A durability run: SIGKILL every --server-pid this long into the
    /// measured phase, stop posting a second later and skip the delivery
    /// check (check history with `history-check` after a restart).
    #[arg(long, value_parser = crate::scenario::parse_duration)]
    pub kill_after: Option<Duration>,
    /// Write every acknowledged message as a "CHANNEL_ID MESSAGE_ID" line.
    #[arg(long)]
    pub acked_out: Option<PathBuf>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct HistoryCheckArgs {
    /// Server HTTP base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// The fixture the acknowledged messages were posted with (for tokens).
    #[arg(long)]
    pub fixture: PathBuf,
    /// "CHANNEL_ID MESSAGE_ID" lines, from `ingest --acked-out`.
    #[arg(long)]
    pub acked: PathBuf,
}

#[derive(Serialize, Debug)]
pub struct IngestRes {
    pub servers: Vec<String>,
    pub connections: usize,
    pub posters: usize,
    pub guilds: usize,
    pub readers: usize,
    pub duration_s: f64,
    pub accepted: u64,
    pub accepted_per_s: f64,
    pub refused_503: u64,
    pub refused_429: u64,
    pub failed_other: u64,
    pub ack_p50_ms: f64,
    pub ack_p99_ms: f64,
    pub ack_max_ms: f64,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_msg: Option<f64>,
    /// This load generator's own CPU (posters and readers) per accepted
    /// message: on one machine it shares the cores with the server.
    pub client_cpu_us_per_msg: f64,
    pub commits_per_s: Option<f64>,
    pub rows_per_commit: Option<f64>,
    /// Accepted messages (whole run) each reader had to receive, summed over readers.
    pub expected_deliveries: u64,
    pub delivered: u64,
    pub missing: u64,
    pub duplicates: u64,
}

/// One posting slot: a user and a channel of a guild the readers are in.
struct Slot {
    token: String,
    channel: String,
    guild: u32,
}

struct Shared {
    slots: Vec<Slot>,
    next: AtomicUsize,
    stop: AtomicBool,
    measuring: AtomicBool,
    accepted: AtomicU64,
    refused_503: AtomicU64,
    refused_429: AtomicU64,
    failed: AtomicU64,
    /// Every accepted message: (id, guild index).
    acked: Mutex<Vec<(u64, u32)>>,
    hist: Mutex<Histogram<u64>>,
}

pub async fn run(a: IngestArgs) -> anyhow::Result<()> {
    let ix = Index::new(Fixture::load(&a.fixture)?);
    let readers: Vec<u32> =
        (0..ix.fixture.users.len() as u32).filter(|&u| !ix.guilds_of[u as usize].is_empty()).take(a.readers.max(1)).collect();
    if readers.is_empty() {
        bail!("no fixture user is in a guild");
    }
    let mut guilds: Vec<u32> = readers.iter().flat_map(|&u| ix.guilds_of[u as usize].iter().copied()).collect();
    guilds.sort_unstable();
    guilds.dedup();
    let mut slots = Vec::new();
    for &g in &guilds {
        let fg = &ix.fixture.guilds[g as usize];
        let Some(channel) = fg.channel_ids.first() else { continue };
        for &m in &ix.members_of[g as usize] {
            slots.push(Slot { token: ix.fixture.users[m as usize].token.clone(), channel: channel.clone(), guild: g });
        }
    }
    // Interleave guilds so consecutive requests hit different guilds and users.
    rand::seq::SliceRandom::shuffle(&mut slots[..], &mut rand::thread_rng());
    let posters = {
        let mut t: Vec<&str> = slots.iter().map(|s| s.token.as_str()).collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    eprintln!("ingest: {} readers in {} guilds; {} posting slots ({} users)", readers.len(), guilds.len(), slots.len(), posters);

    // Readers first: each counts the MESSAGE_CREATEs it receives, by id.
    let gateway = gateway_url(&a.servers[0]).await?;
    let seen: Vec<Arc<Mutex<HashMap<u64, u32>>>> = readers.iter().map(|_| Arc::default()).collect();
    let reader_stop = Arc::new(AtomicBool::new(false));
    let mut reader_tasks = Vec::new();
    for (i, &u) in readers.iter().enumerate() {
        let token = ix.fixture.users[u as usize].token.clone();
        let (gw, seen, stop) = (gateway.clone(), seen[i].clone(), reader_stop.clone());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        reader_tasks.push(tokio::spawn(async move { reader(&gw, &token, seen, stop, ready_tx).await }));
        tokio::time::timeout(Duration::from_secs(30), ready_rx).await.context("reader READY timed out")?.context("reader failed")?;
    }
    // Let GUILD_CREATEs arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let shared = Arc::new(Shared {
        slots,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        accepted: AtomicU64::new(0),
        refused_503: AtomicU64::new(0),
        refused_429: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        acked: Mutex::new(Vec::new()),
        hist: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3)?),
    });
    let bodies = Arc::new(if a.words { word_bodies(4096) } else { vec!["x".repeat(a.message_size.max(1))] });
    let mut tasks = Vec::new();
    for i in 0..a.connections.max(1) {
        let (sh, base, body) = (shared.clone(), a.servers[i % a.servers.len()].clone(), bodies.clone());
        tasks.push(tokio::spawn(async move { poster(sh, base, body).await }));
    }
    tokio::time::sleep(a.warmup).await;
    let admin_before = admin_stats(&a).await;
    let cpu_before = (!a.server_pids.is_empty()).then(|| procfs::sample_sum(&a.server_pids).1);
    let own_before = procfs::sample_sum(&[std::process::id()]).1;
    let base_accepted = shared.accepted.load(Ordering::Relaxed);
    shared.measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let killed = if let Some(after) = a.kill_after {
        tokio::time::sleep(after).await;
        for &pid in &a.server_pids {
            // SAFETY: kill(2) with a pid we were given; no memory involved.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        eprintln!("ingest: SIGKILL sent to {:?} after {:.1} s", a.server_pids, started.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_secs(1)).await;
        true
    } else {
        tokio::time::sleep(a.duration).await;
        false
    };
    let elapsed = started.elapsed().as_secs_f64();
    let accepted = shared.accepted.load(Ordering::Relaxed) - base_accepted;
    let cpu_after = (!a.server_pids.is_empty()).then(|| procfs::sample_sum(&a.server_pids).1);
    let own_cpu = procfs::sample_sum(&[std::process::id()]).1 - own_before;
    let admin_after = admin_stats(&a).await;
    shared.measuring.store(false, Ordering::Relaxed);
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    // Deliveries still on their way.
    let acked = std::mem::take(&mut *shared.acked.lock().expect("acked poisoned"));
    if let Some(path) = &a.acked_out {
        let mut text = String::with_capacity(acked.len() * 40);
        for (id, g) in &acked {
            let channel = ix.fixture.guilds[*g as usize].channel_ids.first().map_or("", String::as_str);
            text.push_str(&format!("{channel} {id}\n"));
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if killed {
        println!(
            "durability run: {} messages acknowledged before and while the server was killed (SIGKILL at {:.1} s); failed requests: {}; delivery not checked",
            acked.len(),
            a.kill_after.unwrap_or_default().as_secs_f64(),
            shared.failed.load(Ordering::Relaxed)
        );
        reader_stop.store(true, Ordering::Relaxed);
        for t in reader_tasks {
            t.abort();
        }
        return Ok(());
    }
    let expected: Vec<Vec<u64>> = readers
        .iter()
        .map(|&u| {
            let mine: std::collections::HashSet<u32> = ix.guilds_of[u as usize].iter().copied().collect();
            acked.iter().filter(|(_, g)| mine.contains(g)).map(|(id, _)| *id).collect()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = expected.iter().zip(&seen).all(|(e, s)| {
            let s = s.lock().expect("seen poisoned");
            e.iter().all(|id| s.contains_key(id))
        });
        if done || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reader_stop.store(true, Ordering::Relaxed);
    let (mut missing, mut duplicates, mut delivered) = (0u64, 0u64, 0u64);
    for (e, s) in expected.iter().zip(&seen) {
        let s = s.lock().expect("seen poisoned");
        for id in e {
            match s.get(id) {
                None => missing += 1,
                Some(&n) => {
                    delivered += 1;
                    duplicates += u64::from(n.saturating_sub(1));
                }
            }
        }
    }
    for t in reader_tasks {
        t.abort();
    }
    let hist = shared.hist.lock().expect("hist poisoned");
    let cpu = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) => Some(a - b),
        _ => None,
    };
    let (commits, rows) = match (admin_before, admin_after) {
        (Some(b), Some(a)) => (Some(a.0.saturating_sub(b.0)), Some(a.1.saturating_sub(b.1))),
        _ => (None, None),
    };
    let res = IngestRes {
        servers: a.servers.clone(),
        connections: a.connections,
        posters,
        guilds: guilds.len(),
        readers: readers.len(),
        duration_s: elapsed,
        accepted,
        accepted_per_s: accepted as f64 / elapsed,
        refused_503: shared.refused_503.load(Ordering::Relaxed),
        refused_429: shared.refused_429.load(Ordering::Relaxed),
        failed_other: shared.failed.load(Ordering::Relaxed),
        ack_p50_ms: hist.value_at_quantile(0.5) as f64 / 1000.0,
        ack_p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
        ack_max_ms: hist.max() as f64 / 1000.0,
        server_cpu_s: cpu,
        server_cpu_us_per_msg: cpu.filter(|_| accepted > 0).map(|c| c * 1e6 / accepted as f64),
        client_cpu_us_per_msg: own_cpu * 1e6 / accepted.max(1) as f64,
        commits_per_s: commits.map(|c| c as f64 / elapsed),
        rows_per_commit: commits.zip(rows).filter(|(c, _)| *c > 0).map(|(c, r)| r as f64 / c as f64),
        expected_deliveries: expected.iter().map(|e| e.len() as u64).sum(),
        delivered,
        missing,
        duplicates,
    };
    let text = summary(&res);
    println!("{text}");
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("ingest.json"), serde_json::to_vec_pretty(&res)?)?;
        std::fs::write(dir.join("README.md"), format!("# ingest\n\n```\n{text}\n```\n\nArguments: `{a:?}`\n"))?;
    }
    if res.missing > 0 || res.duplicates > 0 {
        bail!("{} deliveries missing, {} duplicated", res.missing, res.duplicates);
    }
    Ok(())
}

fn summary(r: &IngestRes) -> String {
    let opt = |v: Option<f64>, d: usize| v.map_or("n/a".to_string(), |v| format!("{v:.d$}"));
    format!(
        "accepted {:.0} msg/s ({} in {:.1} s; {} connections, {} posters in {} guilds); refused 503: {}, 429: {}, other: {}\n\
         ack p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms\n\
         server CPU {} µs per accepted message (load generator {:.1} µs); writer {} commits/s, {} rows per commit\n\
         delivery to {} readers: {} of {} expected, {} missing, {} duplicates",
        r.accepted_per_s,
        r.accepted,
        r.duration_s,
        r.connections,
        r.posters,
        r.guilds,
        r.refused_503,
        r.refused_429,
        r.failed_other,
        r.ack_p50_ms,
        r.ack_p99_ms,
        r.ack_max_ms,
        opt(r.server_cpu_us_per_msg, 1),
        r.client_cpu_us_per_msg,
        opt(r.commits_per_s, 0),
        opt(r.rows_per_commit, 1),
        r.readers,
        r.delivered,
        r.expected_deliveries,
        r.missing,
        r.duplicates,
    )
}

/// After a restart: every acknowledged message of `--acked` is in its
/// channel's history (read with a member's token, 100 per page).
pub async fn history_check(a: HistoryCheckArgs) -> anyhow::Result<()> {
    let ix = Index::new(Fixture::load(&a.fixture)?);
    let text = std::fs::read_to_string(&a.acked).with_context(|| format!("reading {}", a.acked.display()))?;
    let mut by_channel: HashMap<&str, Vec<u64>> = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (c, id) = line.split_once(' ').ok_or_else(|| anyhow!("bad line {line:?}"))?;
        by_channel.entry(c).or_default().push(id.parse()?);
    }
    let client = reqwest::Client::new();
    let base = format!("{}/api/v10", a.server.trim_end_matches('/'));
    let (mut checked, mut missing) = (0u64, 0u64);
    for (channel, ids) in &by_channel {
        let g = ix
            .fixture
            .guilds
            .iter()
            .position(|g| g.channel_ids.iter().any(|c| c == channel))
            .ok_or_else(|| anyhow!("channel {channel} not in the fixture"))?;
        // Pages go round the guild's members (per-user rate limits); a 429
        // waits as long as it says.
        let members = &ix.members_of[g];
        if members.is_empty() {
            bail!("guild of {channel} has no member with a token");
        }
        let mut have = std::collections::HashSet::new();
        let (mut after, mut n) = (0u64, 0usize);
        loop {
            n += 1;
            let token = &ix.fixture.users[members[n % members.len()] as usize].token;
            let r = client
                .get(format!("{base}/channels/{channel}/messages?after={after}&limit=100"))
                .header("authorization", token)
                .send()
                .await?;
            if r.status() == 429 {
                let v: Value = r.json().await.unwrap_or_default();
                tokio::time::sleep(Duration::from_secs_f64(v["retry_after"].as_f64().unwrap_or(0.1).clamp(0.01, 5.0))).await;
                continue;
            }
            let page: Value = r.error_for_status()?.json().await?;
            let page = page.as_array().ok_or_else(|| anyhow!("history page is not a list"))?;
            if page.is_empty() {
                break;
            }
            for m in page {
                let id: u64 = m["id"].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| anyhow!("message without id"))?;
                have.insert(id);
                after = after.max(id);
            }
        }
        checked += ids.len() as u64;
        missing += ids.iter().filter(|id| !have.contains(id)).count() as u64;
    }
    println!("history check: {checked} acknowledged messages in {} channels, {missing} missing", by_channel.len());
    if missing > 0 {
        bail!("{missing} acknowledged messages are not in history");
    }
    Ok(())
}

/// `n` message texts for `--words`: 5 to 20 words each, the word of rank
/// r (0: the most common) with probability proportional to 1/(r+1), among
/// 5,000 spelled as consonant-vowel syllables (shortest first), from a
/// fixed seed.
fn word_bodies(n: usize) -> Vec<String> {
    use rand::{Rng, SeedableRng};
    const SYLLABLES: usize = 14 * 5;
    let spell = |mut r: usize| {
        let mut len = 1;
        while r >= SYLLABLES.pow(len) {
            r -= SYLLABLES.pow(len);
            len += 1;
        }
        (0..len)
            .map(|k| {
                let s = r / SYLLABLES.pow(k) % SYLLABLES;
                format!("{}{}", b"bdfgklmnprstvz"[s / 5] as char, b"aeiou"[s % 5] as char)
            })
            .collect::<String>()
    };
    let vocabulary: Vec<String> = (0..5_000).map(spell).collect();
    let mut cdf: Vec<f64> = (0..vocabulary.len()).map(|r| 1.0 / (r + 1) as f64).collect();
    let mut sum = 0.0;
    for w in &mut cdf {
        sum += *w;
        *w = sum;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    (0..n)
        .map(|_| {
            let words = rng.gen_range(5..=20);
            (0..words)
                .map(|_| {
                    let x = rng.gen::<f64>() * sum;
                    vocabulary[cdf.partition_point(|&c| c < x).min(vocabulary.len() - 1)].as_str()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// One keep-alive connection posting in a loop (hyper's HTTP/1 connection
/// directly: reqwest's pool, URL parsing and timers cost the load generator
/// about as much CPU per request as the server spends, on the same cores).
async fn poster(sh: Arc<Shared>, base: String, bodies: Arc<Vec<String>>) {
    let host = base.trim_end_matches('/').trim_start_matches("http://").to_string();
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        let Some(mut send) = connect(&host).await else {
            sh.failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !sh.stop.load(Ordering::Relaxed) {
            let i = sh.next.fetch_add(1, Ordering::Relaxed) % sh.slots.len();
            let slot = &sh.slots[i];
            n += 1;
            let t = Instant::now();
            let req = http::Request::post(format!("/api/v10/channels/{}/messages", slot.channel))
                .header(http::header::HOST, &host)
                .header(http::header::AUTHORIZATION, &slot.token)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(format!(r#"{{"content":"{n} {}"}}"#, bodies[n as usize % bodies.len()]))
                .expect("valid request");
            let answer = match send.send_request(req).await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    http_body_util::BodyExt::collect(r.into_body()).await.map(|b| (status, b.to_bytes())).ok()
                }
                Err(_) => None,
            };
            let Some((status, bytes)) = answer else {
                // The connection broke: count it and open another.
                sh.failed.fetch_add(1, Ordering::Relaxed);
                break;
            };
            match status {
                200 => {
                    #[derive(serde::Deserialize)]
                    struct Created {
                        id: String,
                    }
                    match serde_json::from_slice::<Created>(&bytes).ok().and_then(|c| c.id.parse::<u64>().ok()) {
                        Some(id) => sh.acked.lock().expect("acked poisoned").push((id, slot.guild)),
                        None => {
                            sh.failed.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    sh.accepted.fetch_add(1, Ordering::Relaxed);
                    if sh.measuring.load(Ordering::Relaxed) {
                        let us = t.elapsed().as_micros().max(1) as u64;
                        let _ = sh.hist.lock().expect("hist poisoned").record(us.min(60_000_000));
                    }
                }
                503 => {
                    sh.refused_503.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                429 => {
                    sh.refused_429.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => {
                    sh.failed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// An HTTP/1 keep-alive connection to `host` (HOST:PORT).
pub(crate) async fn connect(host: &str) -> Option<hyper::client::conn::http1::SendRequest<String>> {
    let stream = tokio::net::TcpStream::connect(host).await.ok()?;
    stream.set_nodelay(true).ok()?;
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.ok()?;
    tokio::spawn(conn);
    Some(send)
}

/// The writer's (commits, rows) from throng's admin stats, if available.
async fn admin_stats(a: &IngestArgs) -> Option<(u64, u64)> {
    let token = a.admin_token.as_deref()?;
    let client = reqwest::Client::new();
    let (mut commits, mut rows) = (0, 0);
    for s in &a.servers {
        let v: Value = client
            .get(format!("{}/api/v10/_throng/admin/stats", s.trim_end_matches('/')))
            .header("x-throng-admin-token", token)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        commits += v["writer"]["commits"].as_u64()?;
        rows += v["writer"]["rows"].as_u64()?;
    }
    Some((commits, rows))
}

pub(crate) async fn gateway_url(server: &str) -> anyhow::Result<String> {
    let v: Value = reqwest::get(format!("{}/api/v10/gateway", server.trim_end_matches('/'))).await?.json().await?;
    v["url"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("GET /gateway: no url in {v}"))
}

/// One reader session: IDENTIFY, then count every MESSAGE_CREATE by id,
/// heartbeating as asked, until `stop`.
async fn reader(
    gateway: &str,
    token: &str,
    seen: Arc<Mutex<HashMap<u64, u32>>>,
    stop: Arc<AtomicBool>,
    ready: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<()> {
    let rest = gateway.strip_prefix("ws://").ok_or_else(|| anyhow!("gateway URL {gateway} is not ws://"))?;
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let path = if path.contains('?') { format!("{path}&v=10&encoding=json") } else { format!("{path}?v=10&encoding=json") };
    let addr = tokio::net::lookup_host(host).await?.next().ok_or_else(|| anyhow!("cannot resolve {host}"))?;
    let stream = ws::tcp_connect(addr, None).await?;
    let mut conn = WsConn::handshake(stream, host, &path).await.map_err(|e| anyhow!("{e}"))?;
    let mut events = Vec::new();
    let mut ready = Some(ready);
    let mut beat = tokio::time::interval(Duration::from_secs(3600));
    let mut seq: Option<u64> = None;
    while !stop.load(Ordering::Relaxed) {
        tokio::select! {
            r = conn.readable() => r?,
            _ = beat.tick() => {
                conn.send_text(json!({"op": 1, "d": seq}).to_string().as_bytes()).await?;
                continue;
            }
            _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
        }
        let open = conn.read_events(&mut events).map_err(|e| anyhow!("{e}"))?;
        for ev in events.drain(..) {
            let Event::Message { payload, .. } = ev else { bail!("reader session closed") };
            let v: Value = serde_json::from_slice(&payload)?;
            if let Some(s) = v["s"].as_u64() {
                seq = Some(s);
            }
            match (v["op"].as_u64(), v["t"].as_str()) {
                (Some(10), _) => {
                    let every = v["d"]["heartbeat_interval"].as_u64().unwrap_or(41_250);
                    beat =
                        tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_millis(every), Duration::from_millis(every));
                    let identify = json!({"op": 2, "d": {"token": token, "intents": 1 | 512 | 32768, "properties": {"os": "linux", "browser": "throng-bench", "device": "throng-bench"}}});
                    conn.send_text(identify.to_string().as_bytes()).await?;
                }
                (Some(0), Some("READY")) => {
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                }
                (Some(0), Some("MESSAGE_CREATE")) => {
                    if let Some(id) = v["d"]["id"].as_str().and_then(|s| s.parse::<u64>().ok()) {
                        *seen.lock().expect("seen poisoned").entry(id).or_default() += 1;
                    }
                }
                (Some(9), _) => bail!("reader got op 9"),
                _ => {}
            }
        }
        if !open {
            bail!("reader socket closed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn word_bodies_are_5_to_20_zipf_words() {
        let bodies = super::word_bodies(2_000);
        let words: Vec<&str> = bodies.iter().flat_map(|b| b.split(' ')).collect();
        assert!(bodies.iter().all(|b| (5..=20).contains(&b.split(' ').count())));
        let count = |w: &str| words.iter().filter(|&&x| x == w).count() as f64;
        // Rank 0 (`ba`) is 1/H(5000) = 11% of words and twice rank 1 (`be`).
        let (first, second) = (count("ba"), count("be"));
        assert!((1.6..2.5).contains(&(first / second)), "{first} {second}");
        assert!((0.09..0.13).contains(&(first / words.len() as f64)), "{first}");
        assert_eq!(super::word_bodies(3), super::word_bodies(3), "from a fixed seed");
    }
}
