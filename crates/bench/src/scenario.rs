//! The scenarios, run by the coordinator: each is a sequence of phases
//! (connect ramp, chat, broadcast, storm, capacity steps, slow consumers),
//! every phase with its own deadline, so a run always ends by itself.
//!
//! Delivery windows: after the last send, `drain` waits until no REST send
//! is in flight and no delivery arrived for 2 s (up to --drain-max). Then the
//! window closes (Cutoff): receipts after it count as *late*, not lost, and
//! the sessions keep reading for up to --late-window while deliveries still
//! arrive. Lost means never arrived by the end of the run.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use protocol::gateway::Intents;

use crate::fixture::{Fixture, Index};
use crate::fleet::{proc_points, split_ranges, Fleet, ProcPoint};
use crate::procfs;
use crate::progress::Progress;
use crate::report::{self, BroadcastRes, CapacityRes, CapacityStep, ClientCost, Delivery, Pcts, Results, ServerRes, StormRes};
use crate::rest::Rest;
use crate::slow;
use crate::wire::{new_hist, Command, Final, GatewayTarget, WorkerConfig};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    Connect,
    Chat,
    Broadcast,
    Storm,
    Capacity,
    Slow,
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" | "" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("bad duration unit in {s:?} (use ms, s, m, h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// `--max-p99-ms` when not given.
pub const DEFAULT_MAX_P99_MS: f64 = 1000.0;

/// Who reads a ready session's socket (`--reader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reader {
    /// One epoll reader per worker (`hub`).
    Shared,
    /// Each session's own task.
    Task,
}

#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// Server HTTP base URL; repeat for several servers (sessions are spread over them).
    #[arg(long = "server", default_value = "http://127.0.0.1:8080")]
    pub servers: Vec<String>,
    /// Fixture JSON (from `setup` or `throng seed`).
    #[arg(long)]
    pub fixture: PathBuf,
    /// Transport compression: zlib-stream or zstd-stream.
    #[arg(long)]
    pub compress: Option<String>,
    /// Most sessions this run opens (0: every fixture user; for broadcast and slow, every member).
    #[arg(long, alias = "sessions", default_value_t = 0)]
    pub max_sessions: usize,
    /// New sessions per second, over all workers.
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Length of the measured phase (chat/storm/capacity; the hold for connect).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Time allowed for a connect ramp to complete.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Time to keep receiving after the last send (at least).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub drain: Duration,
    /// After --drain, keep receiving while deliveries still arrive or sends
    /// are in flight, up to this long in total.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub drain_max: Duration,
    /// After the delivery window closes, keep reading up to this long while
    /// deliveries still arrive; they are counted as late, not lost (0: stop at once).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub late_window: Duration,
    /// Seconds between two messages of one user (chat, capacity, storm).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Bytes of padding in each message content.
    #[arg(long, default_value_t = 0)]
    pub message_padding: usize,
    /// Pad each message content up to this many bytes (slow: default 200).
    #[arg(long)]
    pub message_size: Option<usize>,
    /// Gateway intents (default GUILDS | GUILD_MESSAGES | MESSAGE_CONTENT;
    /// slow: GUILD_MESSAGES | MESSAGE_CONTENT, so no GUILD_CREATE).
    #[arg(long)]
    pub intents: Option<u64>,
    /// Each session opens (op 14) the guilds of more members than this
    /// (their GUILD_CREATE's `member_count`): the server keeps a person's
    /// session passive in a guild over its `gateway.passive_guild_members`
    /// (default 1,000) until it opens it. A number above every guild's size
    /// leaves them all unopened (the passive model).
    #[arg(long, default_value_t = crate::wire::default_open_above())]
    pub open_guilds_above: u64,
    /// Each session opens only its first guild of the fixture, whatever its
    /// size (the passive model of a Discord-like run; with the server's
    /// `gateway.passive_guild_members` below the guilds' size): a message
    /// is then expected only by the members who have its guild open.
    #[arg(long)]
    pub open_home_only: bool,
    /// Sessions per worker process (a process holds ~19,900 sockets here).
    #[arg(long, default_value_t = 15_000)]
    pub sessions_per_worker: usize,
    /// Worker processes (default: as many as the sessions need).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Spread client sockets over 127.0.0.1..=127.0.0.N (loopback servers only; 0: off).
    #[arg(long, default_value_t = 8)]
    pub source_addrs: u8,
    /// Server process ids to sample (RSS from /proc/PID/status, CPU from /proc/PID/stat).
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// Report directory (default: bench-reports/<scenario>-<unix time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// broadcast, slow: guild index in the fixture (default: the largest).
    #[arg(long)]
    pub guild: Option<usize>,
    /// broadcast, slow: messages to send (default 20; slow: 1000).
    #[arg(long)]
    pub messages: Option<u32>,
    /// broadcast, slow: time between two messages (default 1s; slow: 10ms).
    #[arg(long, value_parser = parse_duration)]
    pub broadcast_interval: Option<Duration>,
    /// Who reads a ready session's socket: `shared`, one epoll reader per
    /// worker (the default), or `task`, each session's own task (as before).
    #[arg(long, value_enum, default_value_t = Reader::Shared)]
    pub reader: Reader,
    /// slow: sessions that stop reading their sockets.
    #[arg(long, default_value_t = 10)]
    pub stalled: usize,
    /// slow: members that take turns posting (one POST at a time overall), so
    /// each stays under a per-user REST limit (throng: 50 requests/s per route).
    #[arg(long, default_value_t = 4)]
    pub posters: usize,
    /// slow: after the last post, time before the stalled sessions read again.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub settle: Duration,
    /// slow: the server's bound on queued bytes per session (throng's
    /// max_pending_write_bytes, 128 KiB by default; this default is looser);
    /// judges "memory stays bounded".
    #[arg(long, default_value_t = 1 << 20)]
    pub queue_bound: u64,
    /// slow: a report.json of the same run with --stalled 0, for the p99 and memory comparisons.
    #[arg(long)]
    pub baseline_report: Option<PathBuf>,
    /// Polls GET /api/v10/_throng/admin/stats with this X-Throng-Admin-Token every 500 ms.
    #[arg(long)]
    pub admin_token: Option<String>,
    /// capacity: sessions added per step.
    #[arg(long, default_value_t = 1000)]
    pub step_users: usize,
    /// capacity: how long each step is measured after its sessions are ready.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub step_interval: Duration,
    /// capacity: stop when failed connections exceed this share of a step's new sessions.
    #[arg(long, default_value_t = 0.01)]
    pub max_failure_ratio: f64,
    /// capacity: stop when the step's e2e p99 exceeds this (ms).
    #[arg(long, default_value_t = DEFAULT_MAX_P99_MS)]
    pub max_p99_ms: f64,
    /// Give up a session after this many failed connection attempts in a row.
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
    /// Exit with status 3 when messages were lost or duplicated.
    #[arg(long)]
    pub strict: bool,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs one scenario and writes its report. Returns the process exit code.
pub async fn run(kind: Scenario, a: RunArgs) -> anyhow::Result<i32> {
    let started_unix = crate::worker::now_us() / 1_000_000;
    let ix = Index::new(Fixture::load(&a.fixture)?);
    let n_users = ix.fixture.users.len();
    let cap = if a.max_sessions == 0 { usize::MAX } else { a.max_sessions };

    // Who connects.
    let (users, bguild): (Vec<u32>, Option<u32>) = match kind {
        Scenario::Broadcast | Scenario::Slow => {
            let g = match a.guild {
                Some(g) if g < ix.members_of.len() => g as u32,
                Some(g) => bail!("--guild {g}: the fixture has {} guilds", ix.members_of.len()),
                None => ix.largest_guild().context("the fixture has no guilds")?,
            };
            let mut m = ix.members_of[g as usize].clone();
            m.truncate(cap);
            (m, Some(g))
        }
        _ => ((0..n_users.min(cap) as u32).collect(), None),
    };
    if users.is_empty() {
        bail!("no users to connect");
    }

    // Where to.
    let mut gateways = Vec::new();
    let compress = a.compress.clone().unwrap_or_default();
    if !compress.is_empty() && protocol::compress::Transport::parse(&compress).is_none() {
        bail!("--compress must be zlib-stream or zstd-stream");
    }
    for s in &a.servers {
        let url = Rest::new(s, 1)?.gateway_url().await.with_context(|| format!("asking {s} for its gateway"))?;
        let g = gateway_target(&url, &compress).await?;
        // Only the addresses given are targeted: the advertised gateway must live there.
        let host = s.trim_start_matches("http://").split(['/', '?']).next().unwrap_or("");
        let host = if host.contains(':') { host.to_owned() } else { format!("{host}:80") };
        let rest_ip = tokio::net::lookup_host(&host).await?.next().with_context(|| format!("resolving {host}"))?.ip();
        if g.addr.ip() != rest_ip {
            bail!("{s} advertises gateway {url}, which is not on the address given ({rest_ip}); refusing to target it");
        }
        gateways.push(g);
    }
    let loopback = gateways.iter().all(|g| g.addr.ip().is_loopback() && g.addr.is_ipv4());
    let sources: Vec<IpAddr> =
        if loopback && a.source_addrs > 0 { (1..=a.source_addrs).map(|i| IpAddr::from([127, 0, 0, i])).collect() } else { Vec::new() };

    let n_workers = a.workers.unwrap_or_else(|| users.len().div_ceil(a.sessions_per_worker)).max(1);
    if users.len() > n_workers * a.sessions_per_worker {
        bail!("{} sessions need more than {n_workers} workers of {} sessions", users.len(), a.sessions_per_worker);
    }
    let is_slow = kind == Scenario::Slow;
    let messages = a.messages.unwrap_or(if is_slow { 1000 } else { 20 });
    let msg_interval = a.broadcast_interval.unwrap_or(if is_slow { Duration::from_millis(10) } else { Duration::from_secs(1) });
    if is_slow && a.stalled >= users.len() {
        bail!("--stalled {} leaves no reading session among {} members", a.stalled, users.len());
    }
    let cfg = WorkerConfig {
        worker: 0,
        fixture: a.fixture.clone(),
        gateways: gateways.clone(),
        rest: a.servers.clone(),
        sources: sources.clone(),
        intents: a.intents.unwrap_or(if is_slow {
            Intents::GUILD_MESSAGES | Intents::MESSAGE_CONTENT
        } else {
            Intents::GUILDS | Intents::GUILD_MESSAGES | Intents::MESSAGE_CONTENT
        }),
        open_above: a.open_guilds_above,
        open_home_only: a.open_home_only,
        message_padding: a.message_padding,
        message_size: a.message_size.unwrap_or(if is_slow { 200 } else { 0 }),
        max_attempts: a.max_attempts.max(1),
        max_inflight_sends: 2048,
        track_messages: if is_slow { messages } else { 0 },
        shared_reader: a.reader == Reader::Shared,
    };
    let progress = Progress::new(users.len() as u64, a.quiet);
    let mut fleet = Fleet::spawn(n_workers, &cfg, a.server_pids.clone(), progress).await?;
    fleet.progress.line(&format!(
        "{kind:?}: {} sessions over {n_workers} worker(s), {} source address(es), {} server(s)",
        users.len(),
        sources.len().max(1),
        gateways.len()
    ));
    let server_base = procfs::sample_sum(&a.server_pids);
    // Named now: a process that dies during the run keeps its name.
    let server_labels: Vec<String> = a.server_pids.iter().map(|&p| procfs::label(p)).collect();
    let client_base = procfs::sample_sum(&fleet.worker_pids()).0;
    fleet.sample();
    let admin = a.admin_token.as_ref().map(|t| slow::AdminPoller::start(&a.servers[0], t, fleet.t0));

    let mut r = Results {
        scenario: kind,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started_unix,
        servers: a.servers.clone(),
        compress: if compress.is_empty() { "none".into() } else { compress.clone() },
        workers: n_workers,
        source_addrs: sources.len(),
        sessions_target: users.len() as u64,
        ..Results::default()
    };
    let mut phase_ok = true;
    let mut chat_window: Option<(f64, u64, f64, u64)> = None;
    let mut cutoff_us: Option<u64> = None;
    let mut slow_run: Option<slow::Phases> = None;
    let mut rss_after_ramp = None;
    let mut client_after_ramp = None;

    match kind {
        Scenario::Connect => {
            let (ramp, all) = connect_phase(&mut fleet, &users, a.rate, a.ready_timeout).await?;
            r.ramp_s = Some(ramp);
            phase_ok &= all;
            fleet.phase = "hold";
            fleet.pump(Instant::now() + a.duration.min(Duration::from_secs(600)), false, |_| false).await?;
            rss_after_ramp = Some(procfs::sample_sum(&a.server_pids).0);
            client_after_ramp = Some(procfs::sample_sum(&fleet.worker_pids()).0);
        }
        Scenario::Chat | Scenario::Storm => {
            let (ramp, all) = connect_phase(&mut fleet, &users, a.rate, a.ready_timeout).await?;
            r.ramp_s = Some(ramp);
            phase_ok &= all;
            rss_after_ramp = Some(procfs::sample_sum(&a.server_pids).0);
            client_after_ramp = Some(procfs::sample_sum(&fleet.worker_pids()).0);
            let c0 = client_mark(&fleet);
            fleet.send_all(&Command::Chat { interval_ms: a.interval.as_millis() as u64 }).await?;
            fleet.phase = "chat";
            if kind == Scenario::Chat {
                fleet.progress.line("chat phase started");
                fleet.pump(Instant::now() + a.duration, false, |_| false).await?;
            } else {
                let hold = Duration::from_secs(3);
                fleet.pump(Instant::now() + hold, false, |_| false).await?;
                fleet.phase = "storm";
                r.storm = Some(storm_phase(&mut fleet, a.duration).await?);
                fleet.phase = "chat";
                fleet.pump(Instant::now() + hold, false, |_| false).await?;
            }
            fleet.send_all(&Command::StopSending).await?;
            fleet.phase = "drain";
            drain(&mut fleet, a.drain, a.drain_max).await?;
            let c1 = client_mark(&fleet);
            chat_window = Some((c0.0, c0.1, c1.0, c1.1));
            cutoff_us = Some(close_window(&mut fleet, a.late_window).await?);
        }
        Scenario::Broadcast => {
            let g = bguild.expect("set for broadcast");
            let (ramp, all) = connect_phase(&mut fleet, &users, a.rate, a.ready_timeout).await?;
            r.ramp_s = Some(ramp);
            phase_ok &= all;
            rss_after_ramp = Some(procfs::sample_sum(&a.server_pids).0);
            client_after_ramp = Some(procfs::sample_sum(&fleet.worker_pids()).0);
            // Subscriptions follow READY; let them settle before the first send.
            fleet.pump(Instant::now() + Duration::from_secs(1), false, |_| false).await?;
            // The sender is the first member; its worker holds it (contiguous split).
            let sender = users[0];
            let c0 = client_mark(&fleet);
            let iv = msg_interval.as_millis() as u64;
            fleet.send(0, &Command::Broadcast { user: sender, guild: g, count: messages, interval_ms: iv }).await?;
            fleet.progress.line(&format!("broadcast: {messages} messages into guild #{g} ({} members)", users.len()));
            let send_time = msg_interval * messages;
            fleet.phase = "broadcast";
            fleet.pump(Instant::now() + send_time, false, |_| false).await?;
            fleet.phase = "drain";
            drain(&mut fleet, a.drain, a.drain_max).await?;
            let c1 = client_mark(&fleet);
            chat_window = Some((c0.0, c0.1, c1.0, c1.1));
            cutoff_us = Some(close_window(&mut fleet, a.late_window).await?);
        }
        Scenario::Capacity => {
            let (cap_res, c) = capacity_phase(&mut fleet, &users, &a).await?;
            r.capacity = Some(cap_res);
            chat_window = Some(c);
            cutoff_us = Some(close_window(&mut fleet, a.late_window).await?);
        }
        Scenario::Slow => {
            let g = bguild.expect("set for slow");
            let (ramp, all) = connect_phase(&mut fleet, &users, a.rate, a.ready_timeout).await?;
            r.ramp_s = Some(ramp);
            phase_ok &= all;
            rss_after_ramp = Some(procfs::sample_sum(&a.server_pids).0);
            client_after_ramp = Some(procfs::sample_sum(&fleet.worker_pids()).0);
            let port = gateways[0].addr.port();
            let p = slow::run_phases(&mut fleet, &users, g, &a, messages, msg_interval, port).await?;
            chat_window = Some(p.client_window);
            slow_run = Some(p);
        }
    }

    let server_end = procfs::sample_sum(&a.server_pids);
    let admin = admin.map(|p| p.stop());
    let finals = fleet.finish().await?;
    fleet.progress.finish();
    let run_failed = finals.is_empty() || finals.len() < fleet.len();

    // Numbers.
    let t = fleet.totals();
    r.sessions_ready = finals.iter().map(|f| f.sessions.len() as u64).sum();
    r.started = t.started;
    r.connect_failures = t.connect_failures;
    r.failed = t.failed;
    r.resumes = t.resumes;
    r.reidentifies = t.reidentifies;
    r.invalid_sessions = t.invalid_sessions;
    r.zombies = t.zombies;
    r.decode_errors = t.decode_errors;
    r.sent = t.sent;
    r.send_errors = t.send_errors;
    r.send_skipped = t.send_skipped;
    r.deliveries = t.deliveries;
    if let Some(ramp) = r.ramp_s {
        r.connect_rate = Some(r.sessions_ready as f64 / ramp.max(1e-3));
    }
    let mut lat = BTreeMap::new();
    let merged = |pick: fn(&Final) -> &crate::wire::Hist| -> anyhow::Result<Histogram<u64>> {
        let mut h = new_hist();
        for f in &finals {
            pick(f).merge_into(&mut h)?;
        }
        Ok(h)
    };
    lat.insert("connect".to_owned(), Pcts::of(&merged(|f| &f.connect_us)?));
    lat.insert("ready".to_owned(), Pcts::of(&merged(|f| &f.ready_us)?));
    let e2e = merged(|f| &f.e2e_us)?;
    if !e2e.is_empty() {
        lat.insert("e2e".to_owned(), Pcts::of(&e2e));
        lat.insert("rest_send".to_owned(), Pcts::of(&merged(|f| &f.rest_us)?));
    }
    let storm_h = merged(|f| &f.storm_us)?;
    if !storm_h.is_empty() {
        lat.insert("storm_recovery".to_owned(), Pcts::of(&storm_h));
        if let Some(st) = r.storm.as_mut() {
            st.slowest_session_s = Some(storm_h.max() as f64 / 1e6);
        }
    }
    r.latency = lat;
    if matches!(kind, Scenario::Chat | Scenario::Storm | Scenario::Broadcast | Scenario::Capacity | Scenario::Slow) {
        let (mut d, b) = account(&ix, &finals, t.duplicates_seq, cutoff_us, a.open_home_only);
        d.seq_gaps = t.seq_gaps;
        if kind == Scenario::Broadcast {
            r.broadcast = Some(BroadcastRes { receipts: report::Receipts::of(&e2e), ..b });
        }
        r.delivery = Some(d);
    }
    let mut errors: HashMap<String, u64> = HashMap::new();
    for f in &finals {
        for (k, v) in &f.errors {
            *errors.entry(k.clone()).or_default() += v;
        }
    }
    let mut errors: Vec<(String, u64)> = errors.into_iter().collect();
    errors.sort_by_key(|e| std::cmp::Reverse(e.1));
    r.errors = errors;

    if !a.server_pids.is_empty() {
        let ready = r.sessions_ready.max(1) as f64;
        let after = rss_after_ramp.unwrap_or(server_end.0);
        r.server = Some(ServerRes {
            pids: a.server_pids.clone(),
            labels: server_labels,
            rss_baseline_mib: server_base.0 as f64 / 1048576.0,
            rss_after_ramp_mib: after as f64 / 1048576.0,
            rss_end_mib: server_end.0 as f64 / 1048576.0,
            rss_peak_mib: fleet.peak_server_rss as f64 / 1048576.0,
            kib_per_session: (after as f64 - server_base.0 as f64) / 1024.0 / ready,
            cpu_s: server_end.1 - server_base.1,
        });
    }
    let peak_client_rss = fleet.samples.iter().map(|s| s.client_rss_mib).fold(0.0, f64::max);
    let ready_peak = fleet.samples.iter().map(|s| s.ready).max().unwrap_or(0);
    let mut cost = ClientCost {
        workers: n_workers,
        peak_rss_mib: peak_client_rss,
        sessions_per_gib: if peak_client_rss > 0.0 { ready_peak as f64 / (peak_client_rss / 1024.0) } else { 0.0 },
        kib_per_session: client_after_ramp.map(|after| (after as f64 - client_base as f64) / 1024.0 / r.sessions_ready.max(1) as f64),
        ..ClientCost::default()
    };
    if let Some((cpu0, d0, cpu1, d1)) = chat_window {
        let d = d1.saturating_sub(d0);
        cost.deliveries_in_window = d;
        cost.cpu_s_in_window = cpu1 - cpu0;
        if d > 0 {
            cost.cpu_us_per_delivery = Some((cpu1 - cpu0) * 1e6 / d as f64);
        }
    }
    r.client = cost;
    r.samples = std::mem::take(&mut fleet.samples);

    // Verdict.
    let mut problems = Vec::new();
    if run_failed {
        problems.push(format!("only {} of {} workers reported", finals.len(), fleet.len()));
    }
    if r.sessions_ready == 0 {
        problems.push("no session became ready".to_owned());
    }
    if !phase_ok {
        problems.push("not every session became ready before --ready-timeout".to_owned());
    }
    if let (Some(d), false) = (&r.delivery, is_slow) {
        if d.lost > 0 || d.duplicates > 0 {
            problems.push(format!("{} receipts lost, {} duplicated", d.lost, d.duplicates));
        }
    }
    let mut readers_failed = false;
    if let Some(p) = slow_run {
        let baseline = match &a.baseline_report {
            Some(path) => Some(slow::Baseline::load(path)?),
            None => None,
        };
        let res = slow::evaluate(&finals, p, admin, baseline, &a, r.server.as_ref(), messages);
        readers_failed = !res.readers_ok;
        for c in res.criteria.iter().filter(|c| c.verdict == "FAIL") {
            problems.push(format!("{}: {}", c.name, c.detail));
        }
        if let Some(e) = res.readers_e2e.clone() {
            r.latency.insert("e2e_readers".to_owned(), e);
        }
        r.slow = Some(res);
    } else if let Some(ad) = admin {
        r.admin = Some(ad);
    }
    r.problems = problems;
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("bench-reports/{}-{started_unix}", report::name(kind))));
    report::write(&out, &r)?;
    eprintln!("{}", report::summary_text(&r));
    eprintln!("throng-bench: report in {}", out.display());
    if run_failed || r.sessions_ready == 0 {
        return Ok(2);
    }
    if readers_failed {
        return Ok(3);
    }
    if a.strict && (r.delivery.as_ref().is_some_and(|d| !is_slow && (d.lost > 0 || d.duplicates > 0)) || !r.problems.is_empty()) {
        return Ok(3);
    }
    Ok(0)
}

/// Receives for at least `min`, then until no delivery arrived for two
/// seconds and no REST send is in flight (or `max` passed), so slow
/// deliveries and messages still being posted are waited for.
pub async fn drain(fleet: &mut Fleet, min: Duration, max: Duration) -> anyhow::Result<()> {
    let t = Instant::now();
    fleet.pump(t + min, false, |_| false).await?;
    loop {
        let before = fleet.totals().deliveries;
        // Worker reports come once a second: wait for two of them.
        fleet.pump(Instant::now() + Duration::from_millis(2100), false, |_| false).await?;
        let x = fleet.totals();
        if x.deliveries == before && x.inflight_sends == 0 {
            return Ok(());
        }
        if t.elapsed() >= max {
            fleet.progress.line(&format!(
                "{} at the end of the window ({} sends in flight); later receipts count as late",
                if x.deliveries == before { "no deliveries" } else { "deliveries still arriving" },
                x.inflight_sends
            ));
            return Ok(());
        }
    }
}

/// Closes the delivery window: receipts from now on count as late. Then
/// keeps reading, up to `late_window`, while deliveries still arrive, so a
/// late receipt is told apart from one that never came. Returns the cutoff (µs).
async fn close_window(fleet: &mut Fleet, late_window: Duration) -> anyhow::Result<u64> {
    let at = crate::worker::now_us();
    fleet.send_all(&Command::Cutoff { at_us: at }).await?;
    if !late_window.is_zero() {
        fleet.phase = "late";
        drain(fleet, Duration::ZERO, late_window).await?;
        let late = fleet.totals().late_deliveries;
        if late > 0 {
            fleet.progress.line(&format!("{late} deliveries arrived after the delivery window (counted as late)"));
        }
    }
    Ok(at)
}

/// CPU seconds of the workers and deliveries so far.
pub fn client_mark(fleet: &Fleet) -> (f64, u64) {
    (procfs::sample_sum(&fleet.worker_pids()).1, fleet.totals().deliveries)
}

/// `ws://host:port/path` -> a target with the query a Discord client sends.
async fn gateway_target(url: &str, compress: &str) -> anyhow::Result<GatewayTarget> {
    let rest = url.strip_prefix("ws://").with_context(|| format!("gateway {url}: only ws:// is supported (terminate TLS in front)"))?;
    let (hostport, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = path.split('?').next().filter(|p| !p.is_empty()).unwrap_or("/");
    let hostport = if hostport.contains(':') { hostport.to_owned() } else { format!("{hostport}:80") };
    let addr = tokio::net::lookup_host(&hostport).await?.next().with_context(|| format!("resolving {hostport}"))?;
    let mut q = format!("{path}?v=10&encoding=json");
    if !compress.is_empty() {
        q.push_str("&compress=");
        q.push_str(compress);
    }
    Ok(GatewayTarget { addr, host: hostport, path_query: q })
}

/// Starts `users` (split over the workers) and waits until each is ready or
/// has failed. Returns (seconds, whether all became ready).
pub async fn connect_phase(fleet: &mut Fleet, users: &[u32], rate: f64, timeout: Duration) -> anyhow::Result<(f64, bool)> {
    let before = fleet.totals();
    fleet.phase = "ramp";
    let start_us = crate::worker::now_us();
    let parts = split_ranges(users, fleet.len());
    let active = parts.iter().filter(|p| !p.is_empty()).count().max(1);
    for (w, ranges) in parts.into_iter().enumerate() {
        if !ranges.is_empty() {
            fleet.send(w, &Command::Connect { ranges, rate: rate / active as f64 }).await?;
        }
    }
    let t = Instant::now();
    let n = users.len() as u64;
    let target_ready = before.ready + n;
    fleet
        .pump(t + timeout, false, |f| {
            let x = f.totals();
            x.ready >= target_ready || x.ready + (x.failed - before.failed) >= target_ready
        })
        .await?;
    let x = fleet.totals();
    let all = x.ready >= target_ready;
    // Workers report once a second: time the ramp by when its last session
    // became ready (same host, same clock), not by when that was reported.
    let took = if all && x.last_ready_at_us > start_us { (x.last_ready_at_us - start_us) as f64 / 1e6 } else { t.elapsed().as_secs_f64() };
    fleet.progress.line(&format!("all {} sessions ready in {took:.1} s ({} failed)", x.ready - before.ready, x.failed - before.failed));
    Ok((took, all))
}

async fn storm_phase(fleet: &mut Fleet, limit: Duration) -> anyhow::Result<StormRes> {
    let before = fleet.totals();
    let dropped = before.ready;
    fleet.progress.line(&format!("storm: dropping {dropped} sessions at once"));
    fleet.peak_server_rss = 0;
    let t = Instant::now();
    fleet.send_all(&Command::Drop).await?;
    fleet.pump(t + limit, true, |f| f.totals().recovered - before.recovered >= dropped).await?;
    let x = fleet.totals();
    let recovered = x.recovered - before.recovered;
    let took = t.elapsed().as_secs_f64();
    fleet.progress.line(&format!("storm: {recovered}/{dropped} recovered in {took:.2} s"));
    Ok(StormRes {
        dropped,
        recovered,
        recovery_s: (recovered >= dropped).then_some(took),
        slowest_session_s: None,
        resumes: x.resumes - before.resumes,
        reidentifies: x.reidentifies - before.reidentifies,
        invalid_sessions: x.invalid_sessions - before.invalid_sessions,
        connect_failures: x.connect_failures - before.connect_failures,
        peak_server_rss_mib: (fleet.peak_server_rss > 0).then(|| fleet.peak_server_rss as f64 / 1048576.0),
    })
}

/// MongooseIM's method: add users at the chat rate, step by step, until
/// connections fail or delivery time degrades; the last good step is the top speed.
async fn capacity_phase(fleet: &mut Fleet, users: &[u32], a: &RunArgs) -> anyhow::Result<(CapacityRes, (f64, u64, f64, u64))> {
    let c0 = client_mark(fleet);
    fleet.send_all(&Command::Chat { interval_ms: a.interval.as_millis() as u64 }).await?;
    let t0 = Instant::now();
    let mut steps: Vec<CapacityStep> = Vec::new();
    let mut added = 0usize;
    let stop_reason;
    loop {
        if added >= users.len() {
            stop_reason = "every session of the fixture / --max-sessions is connected".to_owned();
            break;
        }
        if t0.elapsed() >= a.duration {
            stop_reason = "--duration reached".to_owned();
            break;
        }
        let step = &users[added..(added + a.step_users).min(users.len())];
        added += step.len();
        let before = fleet.totals();
        let (ramp, _) = connect_phase(fleet, step, a.rate, a.step_interval.max(Duration::from_secs(5)) * 3).await?;
        let mid = fleet.totals();
        fleet.phase = "step";
        fleet.window_e2e.reset();
        let w0 = Instant::now();
        let procs0 = procfs::sample_each(&fleet.server_pids);
        fleet.pump(w0 + a.step_interval, false, |_| false).await?;
        let dt = w0.elapsed().as_secs_f64();
        let x = fleet.totals();
        let procs1 = procfs::sample_each(&fleet.server_pids);
        let h = &fleet.window_e2e;
        let (p50, p99) = if h.is_empty() {
            (None, None)
        } else {
            (Some(h.value_at_quantile(0.5) as f64 / 1e3), Some(h.value_at_quantile(0.99) as f64 / 1e3))
        };
        let window = StepWindow {
            sessions: x.ready,
            new_sessions: step.len() as u64,
            ramp_s: ramp,
            start_s: w0.duration_since(fleet.t0).as_secs_f64(),
            dt_s: dt,
            sent: x.sent - mid.sent,
            deliveries: x.deliveries - mid.deliveries,
            failures: (x.failed - before.failed) + (x.connect_failures - before.connect_failures),
            p50_ms: p50,
            p99_ms: p99,
            procs: proc_points(&fleet.server_pids, &procs0, &procs1, dt),
        };
        let s = window.into_step(a.max_failure_ratio, a.max_p99_ms);
        let failures = s.failures;
        fleet.progress.line(&format!(
            "capacity step: {} sessions, {:.0} msg/s, {:.0} deliveries/s, p99 {} ms, failures {} -> {}",
            s.sessions,
            s.msgs_per_s,
            s.deliveries_per_s,
            p99.map(|p| format!("{p:.1}")).unwrap_or("-".into()),
            failures,
            if s.passed { "ok" } else { "over threshold" }
        ));
        let passed = s.passed;
        steps.push(s);
        if !passed {
            stop_reason = format!("threshold exceeded (failure ratio > {} or p99 > {} ms)", a.max_failure_ratio, a.max_p99_ms);
            break;
        }
    }
    fleet.send_all(&Command::StopSending).await?;
    fleet.phase = "drain";
    drain(fleet, a.drain, a.drain_max).await?;
    let c1 = client_mark(fleet);
    let top = steps.iter().filter(|s| s.passed).max_by_key(|s| s.sessions).cloned();
    let res =
        CapacityRes { stop_reason, top_speed: top, steps, max_p99_ms: Some(a.max_p99_ms), max_failure_ratio: Some(a.max_failure_ratio) };
    Ok((res, (c0.0, c0.1, c1.0, c1.1)))
}

/// What one capacity step measured in its steady window: from the moment
/// its new sessions were ready, for --step-interval. The ramp is left out,
/// so a step's point is the load it holds, not the cost of getting there.
struct StepWindow {
    /// Sessions ready at the end of the window.
    sessions: u64,
    new_sessions: u64,
    ramp_s: f64,
    /// Seconds since the run started.
    start_s: f64,
    dt_s: f64,
    /// Messages sent and deliveries received in the window.
    sent: u64,
    deliveries: u64,
    /// Connection failures and given-up sessions of the step (ramp included).
    failures: u64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    procs: Vec<ProcPoint>,
}

impl StepWindow {
    /// The step's point: rates over the window, each server process's CPU
    /// and RSS and their sums, and the verdict against the limits.
    fn into_step(self, max_failure_ratio: f64, max_p99_ms: f64) -> CapacityStep {
        let dt = self.dt_s.max(1e-3);
        let ratio = self.failures as f64 / self.new_sessions.max(1) as f64;
        let any = !self.procs.is_empty();
        CapacityStep {
            sessions: self.sessions,
            ramp_s: self.ramp_s,
            msgs_per_s: self.sent as f64 / dt,
            deliveries_per_s: self.deliveries as f64 / dt,
            e2e_p50_ms: self.p50_ms,
            e2e_p99_ms: self.p99_ms,
            failures: self.failures,
            failure_ratio: ratio,
            server_cpu_pct: any.then(|| self.procs.iter().filter_map(|p| p.cpu_pct).sum()),
            server_rss_mib: any.then(|| self.procs.iter().filter_map(|p| p.rss_mib).sum()),
            passed: ratio <= max_failure_ratio && self.p99_ms.is_none_or(|p| p <= max_p99_ms),
            window_start_s: self.start_s,
            window_end_s: self.start_s + self.dt_s,
            server_procs: self.procs,
        }
    }
}

/// Expected receipts per message from the fixture's member lists and each
/// user's session life; compared with what the workers counted. Receipts
/// after `cutoff_us` are late (a subset of received); lost never arrived.
/// With `home_only`, a member expects a message only in its first guild
/// (the one it has open; `--open-home-only`).
fn account(ix: &Index, finals: &[Final], duplicates_seq: u64, cutoff_us: Option<u64>, home_only: bool) -> (Delivery, BroadcastRes) {
    let mut life: HashMap<u32, (u64, Option<u64>)> = HashMap::new();
    for f in finals {
        for s in &f.sessions {
            life.insert(s.user, (s.ready_at_us, s.broken_at_us));
        }
    }
    let mut recv: HashMap<u64, (u32, u64, u32)> = HashMap::new();
    for f in finals {
        for &(k, n, last, late) in &f.received {
            let e = recv.entry(k).or_insert((0, 0, 0));
            e.0 += n;
            e.1 = e.1.max(last);
            e.2 += late;
        }
    }
    let mut d = Delivery { duplicates: duplicates_seq, duplicates_seq, ..Delivery::default() };
    let mut completion = new_hist();
    let mut last_member: Vec<(u64, f64)> = Vec::new();
    let mut b = BroadcastRes::default();
    for f in finals {
        for m in f.sent.iter().filter(|m| !m.ok && m.answered_us.is_none()) {
            // Still in flight when the run ended: neither accepted nor refused.
            d.unanswered_sends += 1;
            d.receipts_of_unanswered += recv.get(&m.key).map(|r| u64::from(r.0)).unwrap_or(0);
        }
        for m in f.sent.iter().filter(|m| m.ok) {
            d.messages += 1;
            let after_window = cutoff_us.is_some_and(|c| m.answered_us.is_some_and(|a| a > c));
            if after_window {
                d.accepted_after_window += 1;
            }
            let expected = ix.members_of[m.guild as usize]
                .iter()
                .filter(|&&u| !home_only || ix.guilds_of[u as usize].first() == Some(&m.guild))
                .filter(|u| life.get(u).is_some_and(|&(ready, broken)| ready <= m.ts_us && broken.is_none_or(|b| m.ts_us < b)))
                .count() as u64;
            let (got, last, late) = recv.get(&m.key).map(|&(n, l, late)| (u64::from(n), l, u64::from(late))).unwrap_or((0, 0, 0));
            d.expected += expected;
            d.received += got.min(expected);
            if late > 0 {
                let late = late.min(got.min(expected));
                d.late += late;
                d.messages_with_late += 1;
                if !after_window {
                    d.late_of_messages_in_window += late;
                }
            }
            if got < expected {
                d.lost += expected - got;
                d.messages_with_loss += 1;
                if after_window {
                    d.lost_of_messages_after_window += expected - got;
                }
            } else if got > expected {
                d.duplicates += got - expected;
            }
            if got >= expected && expected > 0 {
                let took = last.saturating_sub(m.ts_us).max(1);
                completion.saturating_record(took);
                last_member.push((m.ts_us, took as f64 / 1e3));
                b.complete += 1;
            }
            b.messages += 1;
            b.recipients_per_message = b.recipients_per_message.max(expected);
        }
    }
    if !completion.is_empty() {
        b.last_member = Some(Pcts::of(&completion));
    }
    last_member.sort_by_key(|&(ts, _)| ts);
    b.last_member_ms = last_member.into_iter().map(|(_, ms)| ms).collect();
    (d, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5x").is_err());
    }

    fn window(p99: Option<f64>, failures: u64) -> StepWindow {
        StepWindow {
            sessions: 3000,
            new_sessions: 500,
            ramp_s: 1.5,
            start_s: 40.0,
            dt_s: 20.0,
            sent: 1000,
            deliveries: 30_000,
            failures,
            p50_ms: p99.map(|p| p / 4.0),
            p99_ms: p99,
            procs: vec![
                ProcPoint { pid: 1, rss_mib: Some(100.0), cpu_pct: Some(30.0) },
                ProcPoint { pid: 2, rss_mib: Some(50.0), cpu_pct: None },
                ProcPoint { pid: 3, rss_mib: None, cpu_pct: None },
            ],
        }
    }

    #[test]
    fn a_capacity_step_is_its_steady_window() {
        let s = window(Some(80.0), 0).into_step(0.01, 100.0);
        assert_eq!(s.sessions, 3000);
        assert_eq!(s.msgs_per_s, 50.0);
        assert_eq!(s.deliveries_per_s, 1500.0);
        assert_eq!((s.window_start_s, s.window_end_s), (40.0, 60.0));
        // Sums over the processes that were read; each process kept.
        assert_eq!(s.server_cpu_pct, Some(30.0));
        assert_eq!(s.server_rss_mib, Some(150.0));
        assert_eq!(s.server_procs.len(), 3);
        assert!(s.passed);
        let mut none = window(Some(80.0), 0);
        none.procs.clear();
        let s = none.into_step(0.01, 100.0);
        assert_eq!((s.server_cpu_pct, s.server_rss_mib), (None, None));
    }

    #[test]
    fn a_capacity_step_fails_on_p99_or_failures() {
        assert!(!window(Some(100.5), 0).into_step(0.01, 100.0).passed);
        // 6 of 500 new sessions failed: 1.2 % > 1 %.
        let s = window(Some(10.0), 6).into_step(0.01, 100.0);
        assert!((s.failure_ratio - 0.012).abs() < 1e-12);
        assert!(!s.passed);
        assert!(window(Some(10.0), 5).into_step(0.01, 100.0).passed);
        // No delivery in the window: latency does not fail the step.
        assert!(window(None, 0).into_step(0.01, 100.0).passed);
    }

    #[tokio::test]
    async fn gateway_url_becomes_a_discord_query() {
        let t = gateway_target("ws://127.0.0.1:9000", "zstd-stream").await.unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(t.path_query, "/?v=10&encoding=json&compress=zstd-stream");
        let t = gateway_target("ws://127.0.0.1:9000/gw/?x=1", "").await.unwrap();
        assert_eq!(t.path_query, "/gw/?v=10&encoding=json");
    }
}
