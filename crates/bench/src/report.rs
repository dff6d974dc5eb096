//! The report directory: `report.json` (every number), `report.md` (what a
//! person reads) and PNG plots drawn with plotters and an embedded font.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

use anyhow::Context;
use hdrhistogram::Histogram;
use plotters::prelude::*;
use serde::Serialize;

use crate::fleet::Sample;
use crate::scenario::Scenario;

/// Percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pcts {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Pcts {
    pub fn of(h: &Histogram<u64>) -> Pcts {
        let ms = |v: u64| v as f64 / 1000.0;
        Pcts {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Delivery {
    /// Messages accepted by the server (2xx).
    pub messages: u64,
    /// Receipts the member lists and session lives call for, and those seen
    /// by the end of the run (late ones included).
    pub expected: u64,
    pub received: u64,
    /// Expected receipts that never arrived, not even in the late window.
    pub lost: u64,
    pub messages_with_loss: u64,
    /// Lost receipts of messages accepted after the window: nobody waited for
    /// them unless --late-window was long enough, so they may only be late.
    pub lost_of_messages_after_window: u64,
    /// Received receipts that arrived after the delivery window closed
    /// (after --drain/--drain-max; a shorter run would have called them lost).
    pub late: u64,
    pub messages_with_late: u64,
    /// Late receipts of messages accepted inside the window: a tool that
    /// stops reading when the window closes counts exactly these as lost.
    pub late_of_messages_in_window: u64,
    /// Accepted messages whose 2xx came after the delivery window closed.
    pub accepted_after_window: u64,
    /// Sends still in flight when the run ended (not counted as messages),
    /// and the receipts that arrived for them anyway.
    pub unanswered_sends: u64,
    pub receipts_of_unanswered: u64,
    /// Extra receipts, including dispatches whose `s` was already seen.
    pub duplicates: u64,
    pub duplicates_seq: u64,
    /// Dispatches whose `s` skipped ahead (events the server never sent to that session).
    pub seq_gaps: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BroadcastRes {
    pub messages: u64,
    pub recipients_per_message: u64,
    /// Messages every expected member received.
    pub complete: u64,
    /// Time from send until the last member had the message.
    pub last_member: Option<Pcts>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StormRes {
    pub dropped: u64,
    pub recovered: u64,
    /// Time from the drop until every dropped session was READY/RESUMED
    /// again, as the coordinator saw it (worker reports come once a second).
    pub recovery_s: Option<f64>,
    /// The slowest session's own drop-to-RESUMED time (exact).
    pub slowest_session_s: Option<f64>,
    pub resumes: u64,
    pub reidentifies: u64,
    pub invalid_sessions: u64,
    pub connect_failures: u64,
    pub peak_server_rss_mib: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CapacityStep {
    pub sessions: u64,
    pub ramp_s: f64,
    pub msgs_per_s: f64,
    pub deliveries_per_s: f64,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub failures: u64,
    pub failure_ratio: f64,
    pub server_cpu_pct: Option<f64>,
    pub server_rss_mib: Option<f64>,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CapacityRes {
    pub stop_reason: String,
    pub top_speed: Option<CapacityStep>,
    pub steps: Vec<CapacityStep>,
}

/// What `GET /api/v10/_throng/admin/stats` said during the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AdminStats {
    pub url: String,
    pub polls: u64,
    /// Polls answered 200 with JSON.
    pub answered: u64,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Largest `pending_bytes` seen, and the last `pending_bytes_max` and `slow_consumer_closes`.
    pub pending_bytes_peak: Option<u64>,
    pub pending_bytes_max: Option<u64>,
    pub slow_consumer_closes: Option<u64>,
    pub sessions_peak: Option<u64>,
    pub connections_peak: Option<u64>,
    /// The last answer as sent.
    pub last: Option<serde_json::Value>,
    /// (seconds since the run started, pending_bytes).
    pub pending_bytes_series: Vec<(f64, u64)>,
}

/// One pass/fail line of a scenario's verdict.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Criterion {
    pub name: String,
    /// PASS, FAIL or n/a.
    pub verdict: String,
    pub detail: String,
}

/// One stalled session of `slow`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StalledDetail {
    pub user: u32,
    /// How the stalled socket ended once read again.
    pub end: String,
    pub close_code: Option<u16>,
    /// Bytes in the client's receive queue when it read again.
    pub queued_bytes_at_unstall: Option<u64>,
    /// Numbered messages read from the old socket after that.
    pub read_after_unstall: u32,
    pub resumed: bool,
    pub invalid_sessions: u32,
    /// Time from the old socket's end to RESUMED.
    pub resume_ms: Option<f64>,
    /// Numbered messages on the new connection (the replay and anything after).
    pub after_resume: u32,
    pub received: u32,
    /// Accepted messages this session never got.
    pub missing: u64,
    pub out_of_order: u32,
    pub duplicates: u32,
}

/// `slow`: slow consumers in one guild.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SlowRes {
    pub sessions: u64,
    pub stalled: u64,
    /// Members taking turns posting (one POST at a time overall).
    pub posters: u64,
    pub messages_requested: u32,
    pub messages_accepted: u64,
    pub post_errors: u64,
    pub post_s: f64,
    pub post_rate: f64,
    /// Content bytes per message.
    pub message_size: usize,
    /// How long the stalled sessions did not read.
    pub stall_s: f64,
    /// The reading sessions.
    pub readers: u64,
    /// Readers with every accepted message exactly once, in order.
    pub readers_complete: u64,
    pub readers_missing: u64,
    pub readers_with_loss: u64,
    /// Numbered messages whose POST got no 2xx but which arrived anyway.
    pub readers_unexpected: u64,
    pub readers_out_of_order: u64,
    pub readers_duplicates: u64,
    /// Readers whose connection ended during the run (they should not).
    pub readers_disconnected: u64,
    pub readers_ok: bool,
    /// e2e (post start -> receipt) of numbered messages at readers, and at stalled sessions.
    pub readers_e2e: Option<Pcts>,
    pub stalled_e2e: Option<Pcts>,
    pub baseline_report: Option<String>,
    pub baseline_p50_ms: Option<f64>,
    pub baseline_p99_ms: Option<f64>,
    /// Readers' p99 / baseline p99.
    pub p99_ratio: Option<f64>,
    /// How the stalled sockets ended: label -> count.
    pub stalled_ends: BTreeMap<String, u64>,
    pub stalled_closed_resumable: u64,
    pub stalled_closed_other: u64,
    /// EOF or reset without a close frame.
    pub stalled_no_close_frame: u64,
    /// The server never closed them (the client dropped them to RESUME).
    pub stalled_still_open: u64,
    pub stalled_resumed: u64,
    pub stalled_invalid_session: u64,
    pub stalled_gave_up: u64,
    /// Stalled sessions with every accepted message exactly once, in order, by the end.
    pub stalled_complete: u64,
    pub stalled_missing: u64,
    pub stalled_out_of_order: u64,
    pub stalled_duplicates: u64,
    pub stalled_detail: Vec<StalledDetail>,
    pub rss_after_ramp_mib: Option<f64>,
    /// Server RSS just before the first post, the peak from then until the replays were read, and the difference.
    pub rss_before_messages_mib: Option<f64>,
    pub rss_peak_mib: Option<f64>,
    pub rss_growth_mib: Option<f64>,
    pub baseline_rss_growth_mib: Option<f64>,
    pub queue_bound_bytes: u64,
    /// Kernel send-queue bytes of the server's gateway sockets (open, or
    /// closed and still draining) that were not empty just before the stalled
    /// sessions read again (largest first; local servers only), and the most
    /// any stalled client had in its receive queue.
    pub server_send_queues: Vec<u64>,
    pub client_queued_max: Option<u64>,
    pub admin: Option<AdminStats>,
    pub criteria: Vec<Criterion>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerRes {
    pub pids: Vec<u32>,
    pub rss_baseline_mib: f64,
    pub rss_after_ramp_mib: f64,
    pub rss_end_mib: f64,
    pub rss_peak_mib: f64,
    /// (RSS after the ramp - baseline) / ready sessions, user space only.
    pub kib_per_session: f64,
    pub cpu_s: f64,
}

/// What the load generator itself cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientCost {
    pub workers: usize,
    pub peak_rss_mib: f64,
    /// Peak ready sessions / peak RSS of all workers (baseline included).
    pub sessions_per_gib: f64,
    /// (Worker RSS after the ramp - before it) / ready sessions.
    pub kib_per_session: Option<f64>,
    /// Worker CPU during the message phase / deliveries in it (sending,
    /// heartbeats and decoding included).
    pub cpu_us_per_delivery: Option<f64>,
    pub cpu_s_in_window: f64,
    pub deliveries_in_window: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Results {
    pub scenario: Scenario,
    pub command: String,
    pub started_unix: u64,
    pub servers: Vec<String>,
    pub compress: String,
    pub workers: usize,
    pub source_addrs: usize,
    pub sessions_target: u64,
    pub sessions_ready: u64,
    pub started: u64,
    pub connect_failures: u64,
    pub failed: u64,
    pub resumes: u64,
    pub reidentifies: u64,
    pub invalid_sessions: u64,
    pub zombies: u64,
    pub decode_errors: u64,
    pub sent: u64,
    pub send_errors: u64,
    pub send_skipped: u64,
    pub deliveries: u64,
    pub ramp_s: Option<f64>,
    pub connect_rate: Option<f64>,
    /// Percentiles in ms: connect (TCP + upgrade), ready (connect start to
    /// READY plus every GUILD_CREATE), e2e, rest_send, storm_recovery.
    pub latency: BTreeMap<String, Pcts>,
    pub delivery: Option<Delivery>,
    pub broadcast: Option<BroadcastRes>,
    pub storm: Option<StormRes>,
    pub capacity: Option<CapacityRes>,
    pub slow: Option<SlowRes>,
    /// Admin stats polled during a run other than slow (slow keeps them in `slow`).
    pub admin: Option<AdminStats>,
    pub server: Option<ServerRes>,
    pub client: ClientCost,
    pub errors: Vec<(String, u64)>,
    /// Why the run is not clean (empty: clean).
    pub problems: Vec<String>,
    pub samples: Vec<Sample>,
}

impl Default for Results {
    fn default() -> Self {
        Results {
            scenario: Scenario::Connect,
            command: String::new(),
            started_unix: 0,
            servers: Vec::new(),
            compress: String::new(),
            workers: 0,
            source_addrs: 0,
            sessions_target: 0,
            sessions_ready: 0,
            started: 0,
            connect_failures: 0,
            failed: 0,
            resumes: 0,
            reidentifies: 0,
            invalid_sessions: 0,
            zombies: 0,
            decode_errors: 0,
            sent: 0,
            send_errors: 0,
            send_skipped: 0,
            deliveries: 0,
            ramp_s: None,
            connect_rate: None,
            latency: BTreeMap::new(),
            delivery: None,
            broadcast: None,
            storm: None,
            capacity: None,
            slow: None,
            admin: None,
            server: None,
            client: ClientCost::default(),
            errors: Vec::new(),
            problems: Vec::new(),
            samples: Vec::new(),
        }
    }
}

pub fn name(s: Scenario) -> &'static str {
    match s {
        Scenario::Connect => "connect",
        Scenario::Chat => "chat",
        Scenario::Broadcast => "broadcast",
        Scenario::Storm => "storm",
        Scenario::Capacity => "capacity",
        Scenario::Slow => "slow",
    }
}

pub fn write(dir: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(r)?)?;
    std::fs::write(dir.join("report.md"), markdown(r))?;
    plots(dir, r).context("drawing plots")?;
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "-".into())
}

/// The few lines printed at the end of a run.
pub fn summary_text(r: &Results) -> String {
    let mut s = format!(
        "{}: {}/{} sessions ready (failed {}, connect failures {}), resumes {}, re-identifies {}",
        name(r.scenario),
        r.sessions_ready,
        r.sessions_target,
        r.failed,
        r.connect_failures,
        r.resumes,
        r.reidentifies
    );
    for (k, p) in &r.latency {
        let _ = write!(s, "\n  {k:<15} p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  (n={})", p.p50, p.p99, p.max, p.count);
    }
    if let Some(d) = &r.delivery {
        let _ = write!(
            s,
            "\n  delivery: {} messages, {}/{} receipts, lost (never arrived) {}, late {}, duplicates {}",
            d.messages, d.received, d.expected, d.lost, d.late, d.duplicates
        );
    }
    if let Some(sl) = &r.slow {
        for c in &sl.criteria {
            let _ = write!(s, "\n  {:<4} {}: {}", c.verdict, c.name, c.detail);
        }
    }
    if let Some(st) = &r.storm {
        let _ = write!(
            s,
            "\n  storm: {}/{} recovered within {} s (slowest session {} s)",
            st.recovered,
            st.dropped,
            opt(st.recovery_s, 2),
            opt(st.slowest_session_s, 2)
        );
    }
    if let Some(c) = &r.capacity {
        if let Some(t) = &c.top_speed {
            let _ = write!(s, "\n  top speed: {} sessions, {:.0} msg/s, {:.0} deliveries/s", t.sessions, t.msgs_per_s, t.deliveries_per_s);
        }
    }
    for p in &r.problems {
        let _ = write!(s, "\n  PROBLEM: {p}");
    }
    s
}

fn markdown(r: &Results) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# throng-bench {} report\n", name(r.scenario));
    let _ = writeln!(m, "Command: `{}`\n", r.command);
    let _ = writeln!(
        m,
        "Servers: {} · compression: {} · {} worker process(es) · {} source address(es)\n",
        r.servers.join(", "),
        r.compress,
        r.workers,
        r.source_addrs.max(1)
    );
    if r.problems.is_empty() {
        let _ = writeln!(m, "Verdict: **clean run**\n");
    } else {
        let _ = writeln!(m, "Verdict: **problems**: {}\n", r.problems.join("; "));
    }
    let _ = writeln!(m, "| sessions | value |\n|---|---|");
    let _ = writeln!(m, "| target / ready | {} / {} |", r.sessions_target, r.sessions_ready);
    let _ = writeln!(m, "| ramp | {} s ({} sessions/s) |", opt(r.ramp_s, 1), opt(r.connect_rate, 0));
    let _ = writeln!(m, "| connect failures (attempts) / given up | {} / {} |", r.connect_failures, r.failed);
    let _ = writeln!(
        m,
        "| resumes / re-identifies / op 9 / zombies | {} / {} / {} / {} |",
        r.resumes, r.reidentifies, r.invalid_sessions, r.zombies
    );
    let _ = writeln!(m, "| messages sent / send errors / skipped | {} / {} / {} |", r.sent, r.send_errors, r.send_skipped);
    let _ = writeln!(m, "| deliveries received | {} |", r.deliveries);
    let _ = writeln!(m, "| decode errors | {} |\n", r.decode_errors);
    let _ = writeln!(m, "| latency (ms) | n | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|");
    for (k, p) in &r.latency {
        let _ = writeln!(m, "| {k} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |", p.count, p.p50, p.p90, p.p99, p.p999, p.max);
    }
    m.push('\n');
    if let Some(d) = &r.delivery {
        let _ = writeln!(m, "Delivery: {} messages accepted; {} of {} expected receipts arrived; **lost {}** (never arrived, in {} messages); **duplicates {}** ({} seen by sequence); {} sequence gaps.\n", d.messages, d.received, d.expected, d.lost, d.messages_with_loss, d.duplicates, d.duplicates_seq, d.seq_gaps);
        let _ = writeln!(
            m,
            "Late: {} receipts (in {} messages) arrived after the delivery window closed and are counted as received, not lost; {} of them belong to messages accepted inside the window (a tool that stopped reading at the window's end would have called these lost). {} messages were accepted (2xx) after the window; {} sends were still unanswered at the end (not counted as messages; {} receipts arrived for them).\n",
            d.late, d.messages_with_late, d.late_of_messages_in_window, d.accepted_after_window, d.unanswered_sends, d.receipts_of_unanswered
        );
    }
    if let Some(d) = r.delivery.as_ref().filter(|d| d.lost_of_messages_after_window > 0) {
        let _ = writeln!(
            m,
            "**Caution:** {} of the lost receipts belong to messages accepted after the delivery window closed; the run stopped reading before they could arrive, so they may be late rather than lost (use a longer --late-window).\n",
            d.lost_of_messages_after_window
        );
    }
    if let Some(sl) = &r.slow {
        slow_markdown(&mut m, sl);
    }
    if let Some(a) = &r.admin {
        admin_markdown(&mut m, a);
    }
    if let Some(b) = &r.broadcast {
        let _ = writeln!(m, "Broadcast: {} messages to {} members each, {} complete.", b.messages, b.recipients_per_message, b.complete);
        if let Some(p) = &b.last_member {
            let _ = writeln!(m, "Time until the last member had it: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms.\n", p.p50, p.p99, p.max);
        }
    }
    if let Some(s) = &r.storm {
        let _ = writeln!(
            m,
            "Storm: {} sessions dropped at once; {} recovered (coordinator: all within {} s; slowest session {} s; {} RESUMED, {} re-identified, {} op 9, {} connect failures); peak server RSS {} MiB.\n",
            s.dropped,
            s.recovered,
            opt(s.recovery_s, 2),
            opt(s.slowest_session_s, 2),
            s.resumes,
            s.reidentifies,
            s.invalid_sessions,
            s.connect_failures,
            opt(s.peak_server_rss_mib, 1)
        );
    }
    if let Some(c) = &r.capacity {
        let _ = writeln!(m, "Capacity: stopped because {}.\n", c.stop_reason);
        let _ = writeln!(m, "| sessions | msg/s | deliveries/s | p50 ms | p99 ms | failures | server CPU % | server RSS MiB | ok |\n|---|---|---|---|---|---|---|---|---|");
        for s in &c.steps {
            let _ = writeln!(
                m,
                "| {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} |",
                s.sessions,
                s.msgs_per_s,
                s.deliveries_per_s,
                opt(s.e2e_p50_ms, 1),
                opt(s.e2e_p99_ms, 1),
                s.failures,
                opt(s.server_cpu_pct, 0),
                opt(s.server_rss_mib, 0),
                if s.passed { "yes" } else { "no" }
            );
        }
        if let Some(t) = &c.top_speed {
            let _ = writeln!(
                m,
                "\n**Top speed: {} sessions, {:.0} msg/s, {:.0} deliveries/s.**\n",
                t.sessions, t.msgs_per_s, t.deliveries_per_s
            );
        }
    }
    if let Some(s) = &r.server {
        let _ = writeln!(
            m,
            "Server (pids {:?}): RSS {:.1} MiB before, {:.1} MiB after the ramp ({:.2} KiB per session), peak {:.1} MiB; {:.1} CPU s.\n",
            s.pids, s.rss_baseline_mib, s.rss_after_ramp_mib, s.kib_per_session, s.rss_peak_mib, s.cpu_s
        );
    }
    let c = &r.client;
    let _ = writeln!(
        m,
        "Load generator: {} worker(s), peak RSS {:.1} MiB, {:.0} sessions per GiB ({} KiB per session above baseline); {} CPU µs per received message ({} deliveries, {:.1} CPU s).\n",
        c.workers,
        c.peak_rss_mib,
        c.sessions_per_gib,
        opt(c.kib_per_session, 2),
        opt(c.cpu_us_per_delivery, 1),
        c.deliveries_in_window,
        c.cpu_s_in_window
    );
    if !r.errors.is_empty() {
        let _ = writeln!(m, "Errors:\n");
        for (k, v) in &r.errors {
            let _ = writeln!(m, "- {k}: {v}");
        }
        m.push('\n');
    }
    let _ = writeln!(
        m,
        "Plots: `sessions.png`, `latency_vs_sessions.png`{}.",
        if r.server.is_some() { ", `server_vs_sessions.png`" } else { "" }
    );
    m
}

fn slow_markdown(m: &mut String, s: &SlowRes) {
    let _ = writeln!(
        m,
        "## Slow consumers\n\n{} sessions in one guild, {} of them stopped reading for {:.1} s; {} of {} numbered messages ({} content bytes, {} posters in turn, one POST at a time) accepted in {:.1} s ({:.0}/s), {} post errors.\n",
        s.sessions,
        s.stalled,
        s.stall_s,
        s.messages_accepted,
        s.messages_requested,
        s.message_size,
        s.posters,
        s.post_s,
        s.post_rate,
        s.post_errors
    );
    let _ = writeln!(m, "| criterion | verdict | detail |\n|---|---|---|");
    for c in &s.criteria {
        let _ = writeln!(m, "| {} | **{}** | {} |", c.name, c.verdict, c.detail);
    }
    m.push('\n');
    let _ = writeln!(m, "| e2e of numbered messages (ms) | n | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|");
    for (k, p) in [("readers", &s.readers_e2e), ("stalled (incl. replay)", &s.stalled_e2e)] {
        if let Some(p) = p {
            let _ = writeln!(m, "| {k} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |", p.count, p.p50, p.p90, p.p99, p.p999, p.max);
        }
    }
    if let Some(bp) = s.baseline_p99_ms {
        let _ = writeln!(
            m,
            "| baseline readers (`{}`) | | {} | | {bp:.2} | | |",
            s.baseline_report.as_deref().unwrap_or("-"),
            opt(s.baseline_p50_ms, 2)
        );
    }
    m.push('\n');
    let _ = writeln!(
        m,
        "Server memory: RSS {} MiB after the ramp, {} MiB before the first post, peak {} MiB until the replays were read (+{} MiB; baseline +{} MiB).\n",
        opt(s.rss_after_ramp_mib, 1),
        opt(s.rss_before_messages_mib, 1),
        opt(s.rss_peak_mib, 1),
        opt(s.rss_growth_mib, 1),
        opt(s.baseline_rss_growth_mib, 1)
    );
    if s.stalled > 0 {
        let q = &s.server_send_queues;
        let _ = writeln!(
            m,
            "Where the stalled sessions' bytes were just before they read again: up to {} bytes in a stalled client's receive queue; {} server gateway sockets (open, or closed and still draining) with a non-empty kernel send queue (largest {}, total {} bytes); anything else they had not read was in the server's process or dropped with the socket.\n",
            s.client_queued_max.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
            q.len(),
            q.first().copied().unwrap_or(0),
            q.iter().sum::<u64>()
        );
    }
    if let Some(a) = &s.admin {
        admin_markdown(m, a);
    }
    if !s.stalled_detail.is_empty() {
        let _ = writeln!(
            m,
            "| stalled user | socket ended | queued bytes when read again | read from old socket | RESUMED | op 9 | resume ms | after RESUME | received | missing | out of order |\n|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for d in &s.stalled_detail {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                d.user,
                d.end,
                d.queued_bytes_at_unstall.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
                d.read_after_unstall,
                if d.resumed { "yes" } else { "no" },
                d.invalid_sessions,
                opt(d.resume_ms, 0),
                d.after_resume,
                d.received,
                d.missing,
                d.out_of_order
            );
        }
        m.push('\n');
    }
}

fn admin_markdown(m: &mut String, a: &AdminStats) {
    if a.answered == 0 {
        let _ = writeln!(
            m,
            "Admin stats (`{}`): {} polls, none answered with JSON (last status {}{}).\n",
            a.url,
            a.polls,
            a.last_status.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            a.last_error.as_ref().map(|e| format!(", last error: {e}")).unwrap_or_default()
        );
        return;
    }
    let o = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        m,
        "Admin stats (`{}`, {} of {} polls answered): max pending_bytes {}, last pending_bytes_max {}, last slow_consumer_closes {}, peak sessions {}, peak connections {}.\n",
        a.url,
        a.answered,
        a.polls,
        o(a.pending_bytes_peak),
        o(a.pending_bytes_max),
        o(a.slow_consumer_closes),
        o(a.sessions_peak),
        o(a.connections_peak)
    );
}

const FONT: &str = "dejavu";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_err() {
            eprintln!("throng-bench: the embedded font did not load; plots may lack text");
        }
    });
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

fn plots(dir: &Path, r: &Results) -> anyhow::Result<()> {
    register_font();
    let s = &r.samples;
    if s.is_empty() {
        return Ok(());
    }
    let title = |t: &str| format!("{} · {t}", name(r.scenario));
    line_chart(
        &dir.join("sessions.png"),
        &title("sessions over time"),
        "time (s)",
        "sessions",
        &[
            ("ready", s.iter().map(|x| (x.t_s, x.ready as f64)).collect()),
            ("given up", s.iter().map(|x| (x.t_s, x.failed as f64)).collect()),
        ],
    )
    .map_err(|e| anyhow::anyhow!("sessions.png: {e}"))?;
    let lat: Vec<&Sample> = s.iter().filter(|x| x.e2e_p99_ms.is_some() && x.phase != "finish").collect();
    line_chart(
        &dir.join("latency_vs_sessions.png"),
        &title("e2e delivery latency vs sessions (1 s windows)"),
        "sessions ready",
        "ms",
        &[
            ("p50", lat.iter().map(|x| (x.ready as f64, x.e2e_p50_ms.unwrap_or(0.0))).collect()),
            ("p99", lat.iter().map(|x| (x.ready as f64, x.e2e_p99_ms.unwrap_or(0.0))).collect()),
        ],
    )
    .map_err(|e| anyhow::anyhow!("latency_vs_sessions.png: {e}"))?;
    if r.server.is_some() {
        let live: Vec<Sample> = s.iter().filter(|x| x.phase != "finish" && x.phase != "start").cloned().collect();
        server_chart(&dir.join("server_vs_sessions.png"), &title("server CPU and RSS vs sessions"), &live)
            .map_err(|e| anyhow::anyhow!("server_vs_sessions.png: {e}"))?;
    }
    Ok(())
}

const COLORS: [RGBColor; 4] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

fn bounds(series: &[(&str, Vec<(f64, f64)>)]) -> (f64, f64, f64) {
    let pts = series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0, 1.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    (x0, x1, if y1 <= 0.0 { 1.0 } else { y1 * 1.1 })
}

fn line_chart(path: &Path, title: &str, xl: &str, yl: &str, series: &[(&str, Vec<(f64, f64)>)]) -> PlotResult {
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let (x0, x1, y1) = bounds(series);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    chart.configure_mesh().x_desc(xl).y_desc(yl).label_style((FONT, 14)).draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).label_font((FONT, 14)).draw()?;
    root.present()?;
    Ok(())
}

fn server_chart(path: &Path, title: &str, s: &[Sample]) -> PlotResult {
    let root = BitMapBackend::new(path, (960, 720)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, (FONT, 22))?;
    let (top, bottom) = root.split_vertically(340);
    let cpu: Vec<(f64, f64)> = s.iter().filter_map(|x| x.server_cpu_pct.map(|c| (x.ready as f64, c))).collect();
    let rss: Vec<(f64, f64)> = s.iter().filter_map(|x| x.server_rss_mib.map(|r| (x.ready as f64, r))).collect();
    for (area, label, pts, yl) in [(&top, "CPU %", cpu, "CPU % (100 = one core)"), (&bottom, "RSS MiB", rss, "RSS (MiB)")] {
        let series = [(label, pts)];
        let (x0, x1, y1) = bounds(&series);
        let mut chart =
            ChartBuilder::on(area).margin(12).x_label_area_size(40).y_label_area_size(70).build_cartesian_2d(x0..x1, 0.0..y1)?;
        chart.configure_mesh().x_desc("sessions ready").y_desc(yl).label_style((FONT, 14)).draw()?;
        chart.draw_series(PointSeries::of_element(series[0].1.iter().copied(), 3, COLORS[0].filled(), &|c, s, st| {
            EmptyElement::at(c) + Circle::new((0, 0), s, st)
        }))?;
    }
    root.present()?;
    Ok(())
}
