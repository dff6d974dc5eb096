//! `interactions`: slash commands at full speed. People (fixture users)
//! invoke a guild command over keep-alive HTTP connections as fast as the
//! server accepts; a trivial bot (the fixture's `bot`, from `throng seed
//! --bot`) answers every INTERACTION_CREATE with a type 4 message; reader
//! sessions in the guilds receive the answers.
//!
//! Reports completed interactions per second (callbacks answered 204), the
//! time from sending `POST /interactions` to the bot having INTERACTION_CREATE
//! and from sending the callback to a reader having the MESSAGE_CREATE
//! (p50/p99; both include this generator's own HTTP and gateway handling on
//! the same cores), and server CPU per interaction.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::fixture::{Fixture, Index};
use crate::ingest::{connect, gateway_url};
use crate::procfs;
use crate::ws::{self, Event, WsConn};

#[derive(clap::Args, Clone, Debug)]
pub struct InteractionsArgs {
    /// Server HTTP base URL (one node).
    #[arg(long = "server", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Fixture JSON from `throng seed --bot NAME` (it must have a `bot`).
    #[arg(long)]
    pub fixture: PathBuf,
    /// Length of the measured phase.
    #[arg(long, default_value = "15s", value_parser = crate::scenario::parse_duration)]
    pub duration: Duration,
    /// Unmeasured load before the measured phase.
    #[arg(long, default_value = "3s", value_parser = crate::scenario::parse_duration)]
    pub warmup: Duration,
    /// Interactions in flight at once (invoked and not yet answered), and the
    /// invoking connections (keep-alive).
    #[arg(long, default_value_t = 128)]
    pub connections: usize,
    /// The bot's callbacks in flight at once.
    #[arg(long, default_value_t = 64)]
    pub bot_connections: usize,
    /// Reader sessions; the commands are invoked in their guilds.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Server process ids, for CPU per interaction.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// Report directory (interactions.json and README.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Serialize, Debug)]
pub struct InteractionsRes {
    pub server: String,
    pub connections: usize,
    pub guilds: usize,
    pub invokers: usize,
    pub duration_s: f64,
    pub invoked: u64,
    pub completed: u64,
    pub completed_per_s: f64,
    pub refused_invoke: u64,
    pub refused_callback: u64,
    pub invoke_to_bot_p50_ms: f64,
    pub invoke_to_bot_p99_ms: f64,
    pub callback_to_reader_p50_ms: f64,
    pub callback_to_reader_p99_ms: f64,
    pub server_cpu_us_per_interaction: Option<f64>,
    pub client_cpu_us_per_interaction: f64,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// One invocation slot: a person, a guild's channel and its command.
struct Slot {
    token: String,
    guild: String,
    channel: String,
    command: String,
    version: String,
}

struct Shared {
    slots: Vec<Slot>,
    app: String,
    next: AtomicUsize,
    stop: AtomicBool,
    measuring: AtomicBool,
    invoked: AtomicU64,
    completed: AtomicU64,
    refused_invoke: AtomicU64,
    refused_callback: AtomicU64,
    to_bot: Mutex<Histogram<u64>>,
    to_reader: Mutex<Histogram<u64>>,
    /// Interactions in flight (invoked, not yet answered): a closed loop, so
    /// the run measures what the server sustains rather than a backlog that
    /// outlives the response timeout.
    inflight: Arc<tokio::sync::Semaphore>,
}

impl Shared {
    fn record(&self, h: &Mutex<Histogram<u64>>, sent_us: u64) {
        if self.measuring.load(Ordering::Relaxed) {
            let us = now_us().saturating_sub(sent_us).clamp(1, 60_000_000);
            let _ = h.lock().expect("histogram poisoned").record(us);
        }
    }
}

pub async fn run(a: InteractionsArgs) -> anyhow::Result<()> {
    let raw: Value = serde_json::from_slice(&std::fs::read(&a.fixture).with_context(|| format!("reading {}", a.fixture.display()))?)?;
    let bot =
        raw.get("bot").filter(|b| b.is_object()).ok_or_else(|| anyhow!("the fixture has no bot: seed with `throng seed --bot NAME`"))?;
    let (bot_id, bot_token) = (
        bot["id"].as_str().ok_or_else(|| anyhow!("bot.id"))?.to_string(),
        bot["token"].as_str().ok_or_else(|| anyhow!("bot.token"))?.to_string(),
    );
    let app = bot["application_id"].as_str().ok_or_else(|| anyhow!("bot.application_id"))?.to_string();
    let ix = Index::new(Fixture::load(&a.fixture)?);
    let readers: Vec<u32> =
        (0..ix.fixture.users.len() as u32).filter(|&u| !ix.guilds_of[u as usize].is_empty()).take(a.readers.max(1)).collect();
    let mut guilds: Vec<u32> = readers.iter().flat_map(|&u| ix.guilds_of[u as usize].iter().copied()).collect();
    guilds.sort_unstable();
    guilds.dedup();
    if guilds.is_empty() {
        bail!("no fixture user is in a guild");
    }
    let base = format!("{}/api/v10", a.server.trim_end_matches('/'));
    let http = reqwest::Client::new();
    let bot_auth = format!("Bot {bot_token}");
    // One guild command per guild: `/bench t:<send time>`.
    let mut slots = Vec::new();
    for &g in &guilds {
        let fg = &ix.fixture.guilds[g as usize];
        let Some(channel) = fg.channel_ids.first() else { continue };
        let cmd: Value = http
            .post(format!("{base}/applications/{app}/guilds/{}/commands", fg.id))
            .header("authorization", &bot_auth)
            .json(&json!({"name": "bench", "description": "Answers at once",
                "options": [{"type": 3, "name": "t", "description": "When it was sent", "required": true}]}))
            .send()
            .await?
            .error_for_status()
            .context("registering the command (is the bot in the guild?)")?
            .json()
            .await?;
        let (command, version) =
            (cmd["id"].as_str().unwrap_or_default().to_string(), cmd["version"].as_str().unwrap_or_default().to_string());
        for &m in &ix.members_of[g as usize] {
            let token = ix.fixture.users[m as usize].token.clone();
            slots.push(Slot { token, guild: fg.id.clone(), channel: channel.clone(), command: command.clone(), version: version.clone() });
        }
    }
    rand::seq::SliceRandom::shuffle(&mut slots[..], &mut rand::thread_rng());
    let invokers = {
        let mut t: Vec<&str> = slots.iter().map(|s| s.token.as_str()).collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    eprintln!("interactions: {} readers in {} guilds; {} invoking users", readers.len(), guilds.len(), invokers);
    let shared = Arc::new(Shared {
        slots,
        app,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        invoked: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        refused_invoke: AtomicU64::new(0),
        refused_callback: AtomicU64::new(0),
        to_bot: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3)?),
        to_reader: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3)?),
        inflight: Arc::new(tokio::sync::Semaphore::new(a.connections.max(1))),
    });

    // The bot: every INTERACTION_CREATE goes to the callback senders.
    let gateway = gateway_url(&a.server).await?;
    let (answer_tx, answer_rx) = mpsc::unbounded_channel::<(String, String)>();
    let answer_rx = Arc::new(tokio::sync::Mutex::new(answer_rx));
    let mut tasks = Vec::new();
    let want = guilds.len();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    {
        let (sh, gw) = (shared.clone(), gateway.clone());
        let mut ready = Some(ready_tx);
        let mut seen_guilds = 0usize;
        tasks.push(tokio::spawn(async move {
            session(&gw, &bot_token, 1, sh.clone(), move |t, d| match t {
                "GUILD_CREATE" => {
                    seen_guilds += 1;
                    if seen_guilds >= want {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                    }
                }
                "INTERACTION_CREATE" => {
                    let sent: u64 = d["data"]["options"][0]["value"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
                    sh.record(&sh.to_bot, sent);
                    if let (Some(id), Some(token)) = (d["id"].as_str(), d["token"].as_str()) {
                        let _ = answer_tx.send((id.to_string(), token.to_string()));
                    }
                }
                _ => {}
            })
            .await
        }));
    }
    tokio::time::timeout(Duration::from_secs(60), ready_rx)
        .await
        .context("the bot's guilds did not arrive")?
        .context("bot session failed")?;
    let host = a.server.trim_end_matches('/').trim_start_matches("http://").to_string();
    for _ in 0..a.bot_connections.max(1) {
        let (sh, rx, host) = (shared.clone(), answer_rx.clone(), host.clone());
        tasks.push(tokio::spawn(async move {
            answerer(sh, rx, host).await;
            Ok(())
        }));
    }
    // Readers: the bot's answers, timed from the callback's send time (their content).
    for &u in &readers {
        let (sh, gw, bot) = (shared.clone(), gateway.clone(), bot_id.clone());
        let token = ix.fixture.users[u as usize].token.clone();
        tasks.push(tokio::spawn(async move {
            session(&gw, &token, 1 | 512 | 32768, sh.clone(), move |t, d| {
                if t == "MESSAGE_CREATE" && d["author"]["id"].as_str() == Some(bot.as_str()) {
                    if let Some(sent) = d["content"].as_str().and_then(|s| s.parse().ok()) {
                        sh.record(&sh.to_reader, sent);
                    }
                }
            })
            .await
        }));
    }
    for _ in 0..a.connections.max(1) {
        let (sh, host) = (shared.clone(), host.clone());
        tasks.push(tokio::spawn(async move {
            invoker(sh, host).await;
            Ok(())
        }));
    }
    tokio::time::sleep(a.warmup).await;
    let cpu_before = (!a.server_pids.is_empty()).then(|| procfs::sample_sum(&a.server_pids).1);
    let own_before = procfs::sample_sum(&[std::process::id()]).1;
    let (inv0, done0) = (shared.invoked.load(Ordering::Relaxed), shared.completed.load(Ordering::Relaxed));
    shared.measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(a.duration).await;
    let elapsed = started.elapsed().as_secs_f64();
    shared.measuring.store(false, Ordering::Relaxed);
    let (invoked, completed) = (shared.invoked.load(Ordering::Relaxed) - inv0, shared.completed.load(Ordering::Relaxed) - done0);
    let cpu = match (cpu_before, (!a.server_pids.is_empty()).then(|| procfs::sample_sum(&a.server_pids).1)) {
        (Some(b), Some(after)) => Some(after - b),
        _ => None,
    };
    let own = procfs::sample_sum(&[std::process::id()]).1 - own_before;
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    let (b, r) = (shared.to_bot.lock().expect("poisoned"), shared.to_reader.lock().expect("poisoned"));
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let res = InteractionsRes {
        server: a.server.clone(),
        connections: a.connections,
        guilds: guilds.len(),
        invokers,
        duration_s: elapsed,
        invoked,
        completed,
        completed_per_s: completed as f64 / elapsed,
        refused_invoke: shared.refused_invoke.load(Ordering::Relaxed),
        refused_callback: shared.refused_callback.load(Ordering::Relaxed),
        invoke_to_bot_p50_ms: ms(&b, 0.5),
        invoke_to_bot_p99_ms: ms(&b, 0.99),
        callback_to_reader_p50_ms: ms(&r, 0.5),
        callback_to_reader_p99_ms: ms(&r, 0.99),
        server_cpu_us_per_interaction: cpu.filter(|_| completed > 0).map(|c| c * 1e6 / completed as f64),
        client_cpu_us_per_interaction: own * 1e6 / completed.max(1) as f64,
    };
    let text = format!(
        "completed {:.0} interactions/s ({} in {:.1} s; {} invoked; {} connections, {} users in {} guilds); refused: invoke {}, callback {}\n\
         invoke → bot has INTERACTION_CREATE: p50 {:.2} ms, p99 {:.2} ms\n\
         callback → reader has MESSAGE_CREATE: p50 {:.2} ms, p99 {:.2} ms\n\
         server CPU {} µs per interaction (load generator {:.1} µs)",
        res.completed_per_s,
        res.completed,
        res.duration_s,
        res.invoked,
        res.connections,
        res.invokers,
        res.guilds,
        res.refused_invoke,
        res.refused_callback,
        res.invoke_to_bot_p50_ms,
        res.invoke_to_bot_p99_ms,
        res.callback_to_reader_p50_ms,
        res.callback_to_reader_p99_ms,
        res.server_cpu_us_per_interaction.map_or("n/a".into(), |v| format!("{v:.1}")),
        res.client_cpu_us_per_interaction,
    );
    println!("{text}");
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("interactions.json"), serde_json::to_vec_pretty(&res)?)?;
        std::fs::write(dir.join("README.md"), format!("# interactions\n\n```\n{text}\n```\n\nArguments: `{a:?}`\n"))?;
    }
    if completed == 0 {
        bail!("no interaction completed");
    }
    Ok(())
}

/// Invokes `/bench` in turn as each slot's user, as fast as answered.
async fn invoker(sh: Arc<Shared>, host: String) {
    while !sh.stop.load(Ordering::Relaxed) {
        let Some(mut send) = connect(&host).await else {
            sh.refused_invoke.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !sh.stop.load(Ordering::Relaxed) {
            // Released by the answerer once the bot's callback is answered.
            let Ok(permit) = sh.inflight.clone().acquire_owned().await else { return };
            permit.forget();
            let slot = &sh.slots[sh.next.fetch_add(1, Ordering::Relaxed) % sh.slots.len()];
            let body = json!({"type": 2, "application_id": sh.app, "guild_id": slot.guild, "channel_id": slot.channel,
                "data": {"id": slot.command, "name": "bench", "type": 1, "version": slot.version,
                    "options": [{"name": "t", "type": 3, "value": now_us().to_string()}]}});
            let req = http::Request::post("/api/v10/interactions")
                .header(http::header::HOST, &host)
                .header(http::header::AUTHORIZATION, &slot.token)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .expect("valid request");
            let status = match send.send_request(req).await {
                Ok(r) => {
                    let s = r.status().as_u16();
                    let _ = http_body_util::BodyExt::collect(r.into_body()).await;
                    s
                }
                Err(_) => {
                    sh.inflight.add_permits(1);
                    break;
                }
            };
            if status == 204 {
                sh.invoked.fetch_add(1, Ordering::Relaxed);
            } else {
                sh.inflight.add_permits(1);
                sh.refused_invoke.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Answers interactions with a type 4 message whose content is its send time.
async fn answerer(sh: Arc<Shared>, rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, String)>>>, host: String) {
    'conn: while !sh.stop.load(Ordering::Relaxed) {
        let Some(mut send) = connect(&host).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        loop {
            let Some((id, token)) = rx.lock().await.recv().await else { return };
            // Whatever the answer, this interaction is no longer in flight.
            sh.inflight.add_permits(1);
            let body = json!({"type": 4, "data": {"content": now_us().to_string()}});
            let req = http::Request::post(format!("/api/v10/interactions/{id}/{token}/callback"))
                .header(http::header::HOST, &host)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .expect("valid request");
            match send.send_request(req).await {
                Ok(r) => {
                    let s = r.status().as_u16();
                    let _ = http_body_util::BodyExt::collect(r.into_body()).await;
                    if s == 204 {
                        sh.completed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        sh.refused_callback.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(_) => {
                    sh.refused_callback.fetch_add(1, Ordering::Relaxed);
                    continue 'conn;
                }
            }
        }
    }
}

/// A gateway session: IDENTIFY with `intents`, heartbeat as asked, and hand
/// every dispatch to `on`, until the run stops.
async fn session(gateway: &str, token: &str, intents: u64, sh: Arc<Shared>, mut on: impl FnMut(&str, &Value) + Send) -> anyhow::Result<()> {
    let rest = gateway.strip_prefix("ws://").ok_or_else(|| anyhow!("gateway URL {gateway} is not ws://"))?;
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let path = if path.contains('?') { format!("{path}&v=10&encoding=json") } else { format!("{path}?v=10&encoding=json") };
    let addr = tokio::net::lookup_host(host).await?.next().ok_or_else(|| anyhow!("cannot resolve {host}"))?;
    let stream = ws::tcp_connect(addr, None).await?;
    let mut conn = WsConn::handshake(stream, host, &path).await.map_err(|e| anyhow!("{e}"))?;
    let mut events = Vec::new();
    let mut beat = tokio::time::interval(Duration::from_secs(3600));
    let mut seq: Option<u64> = None;
    while !sh.stop.load(Ordering::Relaxed) {
        tokio::select! {
            r = conn.readable() => r?,
            _ = beat.tick() => {
                conn.send_text(json!({"op": 1, "d": seq}).to_string().as_bytes()).await?;
                continue;
            }
        }
        conn.read_events(&mut events).map_err(|e| anyhow!("{e}"))?;
        for ev in events.drain(..) {
            let Event::Message { payload, .. } = ev else { bail!("session closed") };
            let v: Value = serde_json::from_slice(&payload)?;
            if let Some(s) = v["s"].as_u64() {
                seq = Some(s);
            }
            match (v["op"].as_u64(), v["t"].as_str()) {
                (Some(10), _) => {
                    let every = v["d"]["heartbeat_interval"].as_u64().unwrap_or(41_250);
                    beat =
                        tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_millis(every), Duration::from_millis(every));
                    let identify = json!({"op": 2, "d": {"token": token, "intents": intents,
                        "properties": {"os": "linux", "browser": "throng-bench", "device": "throng-bench"}}});
                    conn.send_text(identify.to_string().as_bytes()).await?;
                }
                (Some(0), Some(t)) => on(t, &v["d"]),
                _ => {}
            }
        }
    }
    Ok(())
}
