//! The report directory: `report.json` (every number), `report.md` (what a
//! person reads) and PNG plots drawn with plotters and an embedded font.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

use anyhow::Context;
use hdrhistogram::Histogram;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

use crate::fleet::{ProcPoint, Sample};
use crate::scenario::Scenario;

/// Percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BroadcastRes {
    pub messages: u64,
    pub recipients_per_message: u64,
    /// Messages every expected member received.
    pub complete: u64,
    /// Time from send until the last member had the message.
    pub last_member: Option<Pcts>,
    /// The same for each complete message, in sending order (ms).
    pub last_member_ms: Vec<f64>,
    /// Time from send to receipt at every recipient of every message.
    pub receipts: Option<Receipts>,
}

/// How delivery times spread over the recipients: what a CDF and a
/// histogram need, so the plots can be redrawn from report.json.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Receipts {
    pub pcts: Pcts,
    /// (ms, % of receipts at or below it), rising.
    pub cdf: Vec<(f64, f64)>,
    /// Receipts per bucket of `bucket_ms` from 0 ms.
    pub bucket_ms: f64,
    pub counts: Vec<u64>,
}

impl Receipts {
    /// Histogram buckets: about this many over 0..max.
    const BUCKETS: f64 = 60.0;

    pub fn of(h: &Histogram<u64>) -> Option<Receipts> {
        if h.is_empty() {
            return None;
        }
        let ms = |v: u64| v as f64 / 1000.0;
        let mut qs: Vec<f64> = (0..=200).map(|i| f64::from(i) / 200.0).collect();
        qs.extend([0.999, 0.9999]);
        qs.sort_by(f64::total_cmp);
        let cdf = qs.iter().map(|&q| (ms(h.value_at_quantile(q)), q * 100.0)).collect();
        let bucket_ms = nice_step(ms(h.max()) / Self::BUCKETS);
        let mut counts = vec![0u64; (ms(h.max()) / bucket_ms) as usize + 1];
        for v in h.iter_recorded() {
            let i = ((ms(v.value_iterated_to()) / bucket_ms) as usize).min(counts.len() - 1);
            counts[i] += v.count_at_value();
        }
        Some(Receipts { pcts: Pcts::of(h), cdf, bucket_ms, counts })
    }
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `x`
/// (histogram buckets people can read off an axis).
pub fn nice_step(x: f64) -> f64 {
    if !x.is_finite() || x <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&s| s >= x * (1.0 - 1e-9)).unwrap_or(10.0 * p)
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// The steady window (seconds since the run started) the numbers above
    /// cover: after the step's sessions were ready, for --step-interval.
    pub window_start_s: f64,
    pub window_end_s: f64,
    /// Each server process over the window (`server_cpu_pct` and `server_rss_mib` are the sums).
    pub server_procs: Vec<ProcPoint>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CapacityRes {
    pub stop_reason: String,
    pub top_speed: Option<CapacityStep>,
    pub steps: Vec<CapacityStep>,
    /// The limits a step had to stay within (--max-p99-ms, --max-failure-ratio).
    pub max_p99_ms: Option<f64>,
    pub max_failure_ratio: Option<f64>,
}

/// What `GET /api/v10/_throng/admin/stats` said during the run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Criterion {
    pub name: String,
    /// PASS, FAIL or n/a.
    pub verdict: String,
    pub detail: String,
}

/// One stalled session of `slow`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerRes {
    pub pids: Vec<u32>,
    /// A name for each pid ("node 2 (1234)", "nats-server (1233)"), for legends.
    pub labels: Vec<String>,
    pub rss_baseline_mib: f64,
    pub rss_after_ramp_mib: f64,
    pub rss_end_mib: f64,
    pub rss_peak_mib: f64,
    /// (RSS after the ramp - baseline) / ready sessions, user space only.
    pub kib_per_session: f64,
    pub cpu_s: f64,
}

/// What the load generator itself cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
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

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
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
    redraw(dir, r)
}

/// `report.md` and the plots from results (a fresh run's, or an old
/// report.json read back: `throng-bench plot`).
pub fn redraw(dir: &Path, r: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (drawn, skipped) = plots(dir, r).context("drawing plots")?;
    std::fs::write(dir.join("report.md"), markdown(r, &drawn, &skipped))?;
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

fn markdown(r: &Results, drawn: &[Plot], skipped: &[String]) -> String {
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
        let who = if s.labels.len() == s.pids.len() { s.labels.join(", ") } else { format!("pids {:?}", s.pids) };
        let _ = writeln!(
            m,
            "Server ({who}): RSS {:.1} MiB before, {:.1} MiB after the ramp ({:.2} KiB per session), peak {:.1} MiB; {:.1} CPU s.\n",
            s.rss_baseline_mib, s.rss_after_ramp_mib, s.kib_per_session, s.rss_peak_mib, s.cpu_s
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
    if !drawn.is_empty() || !skipped.is_empty() {
        let _ = writeln!(m, "## Plots\n");
    }
    for p in drawn {
        let _ = writeln!(m, "![{}]({})\n", p.title, p.file);
    }
    for why in skipped {
        let _ = writeln!(m, "Not drawn: {why}.\n");
    }
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

/// A plot written next to the report, and its title.
pub struct Plot {
    pub file: &'static str,
    pub title: String,
}

/// What a figure builder decided: draw it, leave it out and say why, or
/// nothing to say (the scenario has no such plot).
enum Fig {
    Draw(Figure),
    Skip(String),
    None,
}

/// Draws every plot the results have data for. Returns the plots drawn and,
/// for each left out, why (a plot of one x value would say nothing).
fn plots(dir: &Path, r: &Results) -> anyhow::Result<(Vec<Plot>, Vec<String>)> {
    register_font();
    let (mut drawn, mut skipped) = (Vec::new(), Vec::new());
    // The scenario's own plot first: it carries the answer (top speed, delivery spread).
    for (file, fig) in [("capacity.png", capacity_figure(r)), ("broadcast.png", broadcast_figure(r)), ("timeseries.png", timeseries(r))] {
        match fig.and_then(Figure::check) {
            Fig::Draw(f) => {
                f.draw(&dir.join(file)).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
                drawn.push(Plot { file, title: f.title });
            }
            Fig::Skip(why) => skipped.push(format!("`{file}`: {why}")),
            Fig::None => {}
        }
    }
    Ok((drawn, skipped))
}

impl Fig {
    fn and_then(self, f: impl FnOnce(Figure) -> Fig) -> Fig {
        match self {
            Fig::Draw(x) => f(x),
            other => other,
        }
    }
}

/// Tableau's ten colours: distinct lines for up to ten processes.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const P50: RGBColor = PALETTE[0];
const P99: RGBColor = PALETTE[3];
const LIMIT: RGBColor = RGBColor(150, 0, 0);
const TOP: RGBColor = RGBColor(0, 130, 60);
const BAND: RGBColor = RGBColor(222, 242, 222);
const GRID: RGBColor = RGBColor(225, 225, 225);

/// A stack of panels over one x axis, so a moment (or a capacity step)
/// lines up across latency, throughput and server load.
struct Figure {
    title: String,
    x_desc: String,
    /// The x quantity is a count (sessions): integer ticks.
    x_int: bool,
    x_range: (f64, f64),
    /// Where the x ticks go (the capacity steps), else 1-2-5 ones.
    x_ticks: Option<Vec<f64>>,
    /// Shaded x spans (the capacity steps' measured windows), with their legend label.
    bands: Vec<(f64, f64)>,
    band_label: &'static str,
    /// A marked x (the top speed).
    mark: Option<f64>,
    panels: Vec<Panel>,
}

#[derive(Default)]
struct Panel {
    title: String,
    y_desc: String,
    /// The y quantity is a count: integer ticks.
    y_int: bool,
    lines: Vec<Line>,
    /// Horizontal limits, dashed, with their legend labels.
    limits: Vec<(f64, String)>,
    /// A histogram: bucket width and counts from x = 0, with its legend label.
    bars: Option<(f64, Vec<u64>, String)>,
    /// A fixed top of the y axis (percentages), else from the data.
    y_max: Option<f64>,
}

struct Line {
    label: String,
    color: RGBColor,
    /// Thick: the sum of several processes.
    bold: bool,
    /// A dot on each point (few points: one per capacity step).
    markers: bool,
    /// Each point's value written above it (a few steps whose values differ by orders of magnitude).
    values: bool,
    /// A missing y breaks the line: nothing was measured then.
    points: Vec<(f64, Option<f64>)>,
}

impl Line {
    fn new(label: impl Into<String>, color: RGBColor, points: Vec<(f64, Option<f64>)>) -> Line {
        Line { label: label.into(), color, bold: false, markers: false, values: false, points }
    }
}

impl Panel {
    fn new(title: impl Into<String>, y_desc: impl Into<String>, y_int: bool, lines: Vec<Line>) -> Panel {
        Panel { title: title.into(), y_desc: y_desc.into(), y_int, lines, ..Panel::default() }
    }

    fn y_top(&self) -> f64 {
        if let Some(m) = self.y_max {
            return m;
        }
        let lines = self.lines.iter().flat_map(|l| l.points.iter().filter_map(|p| p.1));
        let bars = self.bars.iter().flat_map(|b| b.1.iter().map(|&c| c as f64));
        let max = lines.chain(bars).chain(self.limits.iter().map(|l| l.0)).fold(0.0, f64::max);
        if max > 0.0 {
            max * 1.1
        } else {
            1.0
        }
    }

    /// Distinct x values with data (bars spread over their width).
    fn x_spread(&self) -> bool {
        if self.bars.as_ref().is_some_and(|b| !b.1.is_empty()) {
            return true;
        }
        let mut xs = self.lines.iter().flat_map(|l| l.points.iter().filter(|p| p.1.is_some()).map(|p| p.0));
        let first = xs.next();
        xs.any(|x| Some(x) != first)
    }
}

impl Figure {
    const WIDTH: u32 = 1100;
    const LEGEND: u32 = 250;
    const PANEL: u32 = 260;
    const TITLE: u32 = 40;

    /// The given ticks, else 1-2-5 ones.
    fn x_ticks(&self) -> Vec<f64> {
        match &self.x_ticks {
            Some(t) => t.clone(),
            None => nice_ticks(self.x_range.0, self.x_range.1, 12, self.x_int),
        }
    }

    /// Leaves out a figure with nothing to show or a single x value.
    fn check(self) -> Fig {
        let (x0, x1) = self.x_range;
        if self.panels.is_empty() {
            return Fig::Skip("no data".into());
        }
        // (NaN bounds fail too.)
        let spread = x1.partial_cmp(&x0) == Some(std::cmp::Ordering::Greater);
        if !spread || !self.panels.iter().any(Panel::x_spread) {
            return Fig::Skip("all data at a single x value".into());
        }
        Fig::Draw(self)
    }

    fn draw(&self, path: &Path) -> PlotResult {
        let height = Self::TITLE + Self::PANEL * self.panels.len() as u32;
        let root = BitMapBackend::new(path, (Self::WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(&self.title, (FONT, 20))?;
        for (area, p) in body.split_evenly((self.panels.len(), 1)).iter().zip(&self.panels) {
            let (chart, legend) = area.split_horizontally(Self::WIDTH - Self::LEGEND);
            self.draw_panel(&chart, p)?;
            self.draw_legend(&legend, p)?;
        }
        root.present()?;
        Ok(())
    }

    fn draw_panel(&self, area: &DrawingArea<BitMapBackend<'_>, Shift>, p: &Panel) -> PlotResult {
        let (x0, x1) = self.x_range;
        let y1 = p.y_top();
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, (FONT, 15))
            .margin(6)
            .margin_right(18)
            .x_label_area_size(40)
            .y_label_area_size(78)
            .build_cartesian_2d(Axis::new(x0, x1, self.x_ticks()), Axis::new(0.0, y1, nice_ticks(0.0, y1, 8, p.y_int)))?;
        let (xi, yi, xk, yk) = (self.x_int, p.y_int, x1 >= 10_000.0, y1 >= 10_000.0);
        let xf = move |v: &f64| tick(*v, xi, xk);
        let yf = move |v: &f64| tick(*v, yi, yk);
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(p.y_desc.as_str())
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .max_light_lines(0)
            .bold_line_style(GRID)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()?;
        chart.draw_series(self.bands.iter().map(|&(a, b)| Rectangle::new([(a, 0.0), (b, y1)], BAND.filled())))?;
        if let Some((w, counts, _)) = &p.bars {
            let bars = counts.iter().enumerate().filter(|(_, &c)| c > 0);
            chart.draw_series(bars.map(|(i, &c)| {
                let x = i as f64 * w;
                Rectangle::new([(x, 0.0), (x + w, c as f64)], P50.mix(0.75).filled())
            }))?;
        }
        for (y, _) in &p.limits {
            chart.draw_series(DashedLineSeries::new([(x0, *y), (x1, *y)], 10, 6, LIMIT.stroke_width(2)))?;
        }
        // The top speed is named in the title and the legend: text here would sit on the data.
        if let Some(x) = self.mark {
            chart.draw_series(DashedLineSeries::new([(x, 0.0), (x, y1)], 8, 5, TOP.stroke_width(2)))?;
        }
        for l in &p.lines {
            let style = l.color.stroke_width(if l.bold { 3 } else { 2 });
            for seg in segments(&l.points) {
                if l.markers || seg.len() == 1 {
                    chart.draw_series(seg.iter().map(|&pt| Circle::new(pt, 4, l.color.filled())))?;
                }
                if l.values {
                    let font = TextStyle::from((FONT, 12).into_font()).color(&l.color).pos(Pos::new(HPos::Center, VPos::Bottom));
                    chart.draw_series(seg.iter().map(|&(x, y)| {
                        let t = if y >= 10.0 { tick(y.round(), true, false) } else { tick((y * 10.0).round() / 10.0, false, false) };
                        EmptyElement::at((x, y)) + Text::new(t, (0, -7), font.clone())
                    }))?;
                }
                chart.draw_series(LineSeries::new(seg, style))?;
            }
        }
        Ok(())
    }

    /// The legend beside the panel (never over the data).
    fn draw_legend(&self, area: &DrawingArea<BitMapBackend<'_>, Shift>, p: &Panel) -> PlotResult {
        const MAX: usize = 11;
        let font = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let mut y = 40;
        let mut entries = 0;
        let mut next = |area: &DrawingArea<BitMapBackend<'_>, Shift>, label: &str, sample: &dyn Fn(i32) -> PlotResult| -> PlotResult {
            entries += 1;
            if entries <= MAX {
                sample(y)?;
                area.draw(&Text::new(label.to_owned(), (36, y), font.clone()))?;
                y += 19;
            }
            Ok(())
        };
        let dash = |c: RGBColor| {
            move |y: i32| -> PlotResult {
                area.draw(&PathElement::new(vec![(4, y), (13, y)], c.stroke_width(2)))?;
                area.draw(&PathElement::new(vec![(19, y), (28, y)], c.stroke_width(2)))?;
                Ok(())
            }
        };
        if let Some((_, _, label)) = &p.bars {
            next(area, label, &|y| Ok(area.draw(&Rectangle::new([(6, y - 5), (26, y + 5)], P50.mix(0.75).filled()))?))?;
        }
        for l in &p.lines {
            let (c, w, m) = (l.color, if l.bold { 3 } else { 2 }, l.markers);
            next(area, &l.label, &|y| {
                area.draw(&PathElement::new(vec![(4, y), (28, y)], c.stroke_width(w)))?;
                if m {
                    area.draw(&Circle::new((16, y), 4, c.filled()))?;
                }
                Ok(())
            })?;
        }
        for (_, label) in &p.limits {
            next(area, label, &dash(LIMIT))?;
        }
        if !self.bands.is_empty() {
            next(area, self.band_label, &|y| Ok(area.draw(&Rectangle::new([(4, y - 6), (28, y + 6)], BAND.filled()))?))?;
        }
        if let Some(x) = self.mark {
            next(area, &format!("top speed: {}", tick(x, true, false)), &dash(TOP))?;
        }
        if entries > MAX {
            area.draw(&Text::new(format!("… {} more", entries - MAX), (36, y), font.clone()))?;
        }
        Ok(())
    }
}

/// Splits a line where it has no value, so a gap shows as a gap.
fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut open = false;
    for &(x, y) in points {
        match y {
            Some(y) if open => out.last_mut().expect("open segment").push((x, y)),
            Some(y) => {
                out.push(vec![(x, y)]);
                open = true;
            }
            None => open = false,
        }
    }
    out
}

/// A linear axis whose ticks are ours (the capacity steps, 1-2-5 multiples,
/// whole numbers on count axes) rather than plotters' choice.
struct Axis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Axis {
    fn new(lo: f64, hi: f64, ticks: Vec<f64>) -> Axis {
        Axis { linear: (lo..hi).into(), ticks }
    }
}

impl Ranged for Axis {
    // Labels come from the mesh's formatter (`tick`).
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

/// Tick positions on [lo, hi]: the multiples of the smallest 1-2-5 step
/// that gives at most `max` of them; on a count axis the step is at least 1,
/// so no tick falls between two integers.
pub fn nice_ticks(lo: f64, hi: f64, max: usize, int: bool) -> Vec<f64> {
    let span = (hi - lo).max(1e-9);
    let ticks = |step: f64| {
        let first = (lo / step - 1e-9).ceil() as i64;
        (first..).map(move |i| i as f64 * step).take_while(move |&v| v <= hi + step * 1e-9)
    };
    // From a step that gives too many ticks up through 1-2-5 steps.
    let mut step = nice_step(span / (2 * max.max(2)) as f64);
    if int {
        step = step.max(1.0);
    }
    while ticks(step).count() > max.max(2) {
        step = nice_step(step * 1.5);
    }
    ticks(step).collect()
}

/// An axis tick. Counts (`int`) are whole numbers with thousands separators
/// ("12,500") and nothing between two integers; with `k` (an axis reaching
/// 10,000) thousands read "150k", "12.5k". Other quantities keep at most two
/// decimals, without trailing zeros ("0.25", "1,200").
pub fn tick(v: f64, int: bool, k: bool) -> String {
    if int && (v - v.round()).abs() > 1e-6 {
        return String::new();
    }
    let r = if int { v.round() } else { (v * 100.0).round() / 100.0 };
    if k && r.abs() >= 1000.0 && (r / 100.0).fract() == 0.0 {
        let t = r / 1000.0;
        return if t.fract() == 0.0 { format!("{t:.0}k") } else { format!("{t:.1}k") };
    }
    let sign = if r < 0.0 { "-" } else { "" };
    let whole = r.abs().trunc() as u64;
    let cents = ((r.abs() - whole as f64) * 100.0).round() as u64;
    let frac = match cents {
        0 => String::new(),
        c if c % 10 == 0 => format!(".{}", c / 10),
        c => format!(".{c:02}"),
    };
    format!("{sign}{}{frac}", thousands(whole))
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The server processes to plot: pids in `--server-pid` order with their
/// names (from the report, else from the samples; old reports have neither).
fn server_procs(r: &Results) -> Vec<(u32, String)> {
    let pids = match &r.server {
        Some(s) if !s.pids.is_empty() => s.pids.clone(),
        _ => r
            .samples
            .iter()
            .find(|s| !s.server_procs.is_empty())
            .map(|s| s.server_procs.iter().map(|p| p.pid).collect())
            .unwrap_or_default(),
    };
    let labels = r.server.as_ref().map(|s| s.labels.as_slice()).unwrap_or(&[]);
    pids.iter().enumerate().map(|(i, &pid)| (pid, labels.get(i).cloned().unwrap_or_else(|| format!("pid {pid}")))).collect()
}

/// One line per server process and, when there are several, their sum
/// (bold, black). `at` gives each point's x, its per-process values and the sum.
fn proc_lines(
    procs: &[(u32, String)],
    at: &[(f64, &[ProcPoint], Option<f64>)],
    pick: fn(&ProcPoint) -> Option<f64>,
    markers: bool,
) -> Vec<Line> {
    let has_each = at.iter().any(|(_, each, _)| !each.is_empty());
    let mut lines = Vec::new();
    if has_each {
        for (i, (pid, label)) in procs.iter().enumerate() {
            let pts = at.iter().map(|(x, each, _)| (*x, each.iter().find(|p| p.pid == *pid).and_then(pick))).collect();
            lines.push(Line { markers, ..Line::new(label.clone(), PALETTE[i % PALETTE.len()], pts) });
        }
    }
    if !has_each || procs.len() > 1 {
        let label = if procs.len() == 1 { procs[0].1.clone() } else { format!("sum of {} processes", procs.len()) };
        let color = if procs.len() == 1 { PALETTE[0] } else { BLACK };
        let pts = at.iter().map(|(x, _, sum)| (*x, *sum)).collect();
        lines.push(Line { bold: procs.len() > 1, markers, ..Line::new(label, color, pts) });
    }
    lines
}

/// Server CPU and RSS panels, per process; `titles` for (CPU, RSS).
fn server_panels(
    r: &Results,
    at_cpu: &[(f64, &[ProcPoint], Option<f64>)],
    at_rss: &[(f64, &[ProcPoint], Option<f64>)],
    markers: bool,
    titles: (&str, &str),
) -> Vec<Panel> {
    let procs = server_procs(r);
    if procs.is_empty() || at_rss.iter().all(|a| a.2.is_none()) {
        return Vec::new();
    }
    let (cpu, rss) = titles;
    vec![
        Panel::new(cpu, "CPU % (100 = one core)", false, proc_lines(&procs, at_cpu, |p| p.cpu_pct, markers)),
        Panel::new(rss, "RSS (MiB)", false, proc_lines(&procs, at_rss, |p| p.rss_mib, markers)),
    ]
}

/// Every scenario: time on x; sessions, message rates, e2e per second and
/// each server process's CPU and RSS.
fn timeseries(r: &Results) -> Fig {
    let s: Vec<&Sample> = r.samples.iter().filter(|x| x.phase != "finish").collect();
    if s.len() < 2 {
        return Fig::Skip("fewer than two samples".into());
    }
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, Option<f64>)> { s.iter().map(|x| (x.t_s, f(x))).collect() };
    let mut sessions = vec![Line::new("ready", PALETTE[0], series(&|x| Some(x.ready as f64)))];
    if s.iter().any(|x| x.failed > 0) {
        sessions.push(Line::new("given up", PALETTE[3], series(&|x| Some(x.failed as f64))));
    }
    if s.iter().any(|x| x.resumes > 0) {
        sessions.push(Line::new("resumes (total)", PALETTE[2], series(&|x| Some(x.resumes as f64))));
    }
    let mut panels = vec![Panel::new("Sessions", "sessions", true, sessions)];
    if s.iter().any(|x| x.msgs_per_s > 0.0) {
        panels.push(Panel::new("Messages sent", "messages/s", false, vec![Line::new("sent", PALETTE[0], series(&|x| Some(x.msgs_per_s)))]));
    }
    if s.iter().any(|x| x.deliveries_per_s > 0.0) {
        let l = Line::new("received", PALETTE[2], series(&|x| Some(x.deliveries_per_s)));
        panels.push(Panel::new("Messages received (every recipient counts)", "deliveries/s", false, vec![l]));
    }
    if s.iter().any(|x| x.e2e_p99_ms.is_some()) {
        let mut p = Panel::new(
            "Delivery time, send to receipt, per second",
            "ms",
            false,
            vec![Line::new("p50", P50, series(&|x| x.e2e_p50_ms)), Line::new("p99", P99, series(&|x| x.e2e_p99_ms))],
        );
        if let Some(m) = r.capacity.as_ref().and_then(|c| p99_limit(r, c)) {
            p.limits.push((m, format!("p99 limit {} ms", tick(m, false, false))));
        }
        panels.push(p);
    }
    let cpu: Vec<_> = s.iter().map(|x| (x.t_s, x.server_procs.as_slice(), x.server_cpu_pct)).collect();
    let rss: Vec<_> = s.iter().map(|x| (x.t_s, x.server_procs.as_slice(), x.server_rss_mib)).collect();
    panels.extend(server_panels(r, &cpu, &rss, false, ("Server CPU, per second", "Server memory")));
    let steps = r.capacity.as_ref().map(|c| c.steps.as_slice()).unwrap_or(&[]);
    Fig::Draw(Figure {
        title: format!("{} · over time", name(r.scenario)),
        x_desc: "time since start (s)".into(),
        x_int: false,
        x_ticks: None,
        x_range: (0.0, s.last().map_or(1.0, |x| x.t_s)),
        bands: steps.iter().filter(|c| c.window_end_s > c.window_start_s).map(|c| (c.window_start_s, c.window_end_s)).collect(),
        band_label: "measured step window",
        mark: None,
        panels,
    })
}

/// The p99 bound steps were held to; reports older than `max_p99_ms` have it
/// only on their command line, or not at all (the default then).
fn p99_limit(r: &Results, c: &CapacityRes) -> Option<f64> {
    c.max_p99_ms.or_else(|| {
        let mut args = r.command.split_whitespace();
        let given = args.by_ref().find(|&a| a == "--max-p99-ms").and_then(|_| args.next());
        given.map_or(Some(crate::scenario::DEFAULT_MAX_P99_MS), |v| v.parse().ok())
    })
}

/// `capacity`: one point per step (its steady window), sessions on x.
fn capacity_figure(r: &Results) -> Fig {
    let Some(c) = &r.capacity else { return Fig::None };
    let mut steps: Vec<&CapacityStep> = c.steps.iter().collect();
    steps.sort_by_key(|s| s.sessions);
    if steps.len() < 2 {
        return Fig::Skip(format!("{} step(s): one point per step needs two (see the table)", steps.len()));
    }
    let xs =
        |f: &dyn Fn(&CapacityStep) -> Option<f64>| -> Vec<(f64, Option<f64>)> { steps.iter().map(|s| (s.sessions as f64, f(s))).collect() };
    let dots = |l: Line| Line { markers: true, ..l };
    let mut lat = Panel::new(
        "Delivery time, send to receipt (each step's steady window)",
        "ms",
        false,
        vec![
            dots(Line::new("p50", P50, xs(&|s| s.e2e_p50_ms))),
            Line { values: steps.len() <= 12, ..dots(Line::new("p99", P99, xs(&|s| s.e2e_p99_ms))) },
        ],
    );
    if let Some(m) = p99_limit(r, c) {
        lat.limits.push((m, format!("p99 limit {} ms", tick(m, false, false))));
    }
    let sent = Panel::new("Messages sent", "messages/s", false, vec![dots(Line::new("sent", PALETTE[0], xs(&|s| Some(s.msgs_per_s))))]);
    let recv = Panel::new(
        "Messages received (every recipient counts)",
        "deliveries/s",
        false,
        vec![dots(Line::new("received", PALETTE[2], xs(&|s| Some(s.deliveries_per_s))))],
    );
    let mut panels = vec![lat, sent, recv];
    let cpu: Vec<_> = steps.iter().map(|s| (s.sessions as f64, s.server_procs.as_slice(), s.server_cpu_pct)).collect();
    let rss: Vec<_> = steps.iter().map(|s| (s.sessions as f64, s.server_procs.as_slice(), s.server_rss_mib)).collect();
    panels.extend(server_panels(
        r,
        &cpu,
        &rss,
        true,
        ("Server CPU over each step's steady window", "Server memory at the end of each step"),
    ));
    let max = steps.last().map_or(1.0, |s| s.sessions as f64);
    // No step over the limits: the run ended first, the top speed is higher.
    let at_least = if steps.iter().all(|s| s.passed) { "≥ " } else { "" };
    let title = match &c.top_speed {
        Some(t) => format!(
            "capacity · top speed {at_least}{} sessions ({} msg/s, p99 {} ms)",
            thousands(t.sessions),
            thousands(t.msgs_per_s.round() as u64),
            t.e2e_p99_ms.map_or("-".into(), |p| tick(p.round(), true, false))
        ),
        None => "capacity · no step stayed within the limits".into(),
    };
    Fig::Draw(Figure {
        title,
        x_desc: "sessions".into(),
        x_int: true,
        x_range: (0.0, max * 1.05),
        x_ticks: (steps.len() < 12).then(|| std::iter::once(0.0).chain(steps.iter().map(|s| s.sessions as f64)).collect()),
        bands: Vec::new(),
        band_label: "",
        mark: c.top_speed.as_ref().map(|t| t.sessions as f64),
        panels,
    })
}

/// `broadcast`: how delivery times spread over the recipients.
fn broadcast_figure(r: &Results) -> Fig {
    let Some(b) = &r.broadcast else { return Fig::None };
    let last = &b.last_member_ms;
    let Some(rc) = &b.receipts else { return Fig::Skip("no receipts recorded".into()) };
    let mut panels = vec![Panel {
        bars: Some((rc.bucket_ms, rc.counts.clone(), format!("receipts per {} ms", tick(rc.bucket_ms, false, false)))),
        ..Panel::new("Receipts by time from send (every recipient of every message)", "receipts", true, Vec::new())
    }];
    let mut cdf = vec![Line::new(
        format!("every receipt (n={})", thousands(rc.pcts.count)),
        P50,
        rc.cdf.iter().map(|&(x, y)| (x, Some(y))).collect(),
    )];
    if !last.is_empty() {
        cdf.push(Line::new(format!("last member (n={})", last.len()), P99, step_cdf(last)));
    }
    panels.push(Panel { y_max: Some(100.0), ..Panel::new("Share delivered within a time (CDF)", "% at or before", false, cdf) });
    let x1 = last.iter().copied().fold(rc.pcts.max, f64::max);
    let lm = b.last_member.as_ref().map_or("-".into(), |p| format!("{:.1}", p.p50));
    Fig::Draw(Figure {
        title: format!(
            "broadcast · {} messages to {} members: receipt p50 {:.1} ms, p99 {:.1} ms; last member p50 {lm} ms",
            b.messages,
            thousands(b.recipients_per_message),
            rc.pcts.p50,
            rc.pcts.p99
        ),
        x_desc: "time from send (ms)".into(),
        x_int: false,
        x_ticks: None,
        x_range: (0.0, x1 * 1.02),
        bands: Vec::new(),
        band_label: "",
        mark: None,
        panels,
    })
}

/// An empirical CDF as a staircase: (value, % of values at or below it).
fn step_cdf(values: &[f64]) -> Vec<(f64, Option<f64>)> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out = Vec::with_capacity(v.len() * 2);
    for (i, &x) in v.iter().enumerate() {
        out.push((x, Some(i as f64 / n * 100.0)));
        out.push((x, Some((i + 1) as f64 / n * 100.0)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_integers_with_separators_or_thousands() {
        assert_eq!(tick(10_000.0, true, false), "10,000");
        assert_eq!(tick(1_234_567.0, true, false), "1,234,567");
        assert_eq!(tick(150_000.0, true, true), "150k");
        assert_eq!(tick(12_500.0, true, true), "12.5k");
        // Below 1,000 or not a multiple of 100: digits, not "k".
        assert_eq!(tick(500.0, true, true), "500");
        assert_eq!(tick(12_345.0, true, true), "12,345");
        assert_eq!(tick(0.0, true, true), "0");
        // Nothing between two integers on a count axis.
        assert_eq!(tick(2.5, true, false), "");
        assert_eq!(tick(3.0000000001, true, false), "3");
    }

    #[test]
    fn other_ticks_drop_trailing_zeros() {
        assert_eq!(tick(10_000.0, false, false), "10,000");
        assert_eq!(tick(0.30000000000000004, false, false), "0.3");
        assert_eq!(tick(12.25, false, false), "12.25");
        assert_eq!(tick(1200.5, false, false), "1,200.5");
        assert_eq!(tick(-5.0, false, false), "-5");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn ticks_are_1_2_5_multiples_and_whole_on_count_axes() {
        assert_eq!(nice_ticks(0.0, 2100.0, 12, true), (0..=10).map(|i| f64::from(i) * 200.0).collect::<Vec<_>>());
        assert_eq!(nice_ticks(0.0, 3.3, 6, true), vec![0.0, 1.0, 2.0, 3.0]);
        // A count axis never gets 0.5 steps, however short.
        assert_eq!(nice_ticks(0.0, 1.1, 6, true), vec![0.0, 1.0]);
        assert_eq!(nice_ticks(0.0, 1.1, 6, false), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(nice_ticks(12.0, 61.0, 6, false), vec![20.0, 30.0, 40.0, 50.0, 60.0]);
        assert!(nice_ticks(0.0, 78_750.0, 12, true).len() <= 12);
    }

    #[test]
    fn nice_steps_are_1_2_5() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.1), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(40.0), 50.0);
        assert!((nice_step(0.013) - 0.02).abs() < 1e-12);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn gaps_break_lines() {
        let pts = [(0.0, Some(1.0)), (1.0, Some(2.0)), (2.0, None), (3.0, Some(4.0)), (4.0, None)];
        assert_eq!(segments(&pts), vec![vec![(0.0, 1.0), (1.0, 2.0)], vec![(3.0, 4.0)]]);
        assert!(segments(&[(0.0, None)]).is_empty());
    }

    #[test]
    fn receipts_keep_every_count_and_a_rising_cdf() {
        let mut h = crate::wire::new_hist();
        for ms in 1..=290u64 {
            h.record(ms * 1000).unwrap();
        }
        let rc = Receipts::of(&h).unwrap();
        assert_eq!(rc.counts.iter().sum::<u64>(), 290);
        // 290 ms / 60 buckets = 4.8 ms: 5 ms buckets.
        assert_eq!(rc.bucket_ms, 5.0);
        assert_eq!(rc.counts[0], 4); // 1..=4 ms
        assert_eq!(rc.counts[1], 5); // 5..=9 ms
        assert!(rc.cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(rc.cdf.last().unwrap().1, 100.0);
        assert!((rc.cdf.last().unwrap().0 - 290.0).abs() < 0.5);
        assert!(Receipts::of(&crate::wire::new_hist()).is_none());
    }

    #[test]
    fn a_staircase_cdf_ends_at_100() {
        let c = step_cdf(&[30.0, 10.0]);
        assert_eq!(c, vec![(10.0, Some(0.0)), (10.0, Some(50.0)), (30.0, Some(50.0)), (30.0, Some(100.0))]);
    }

    fn step(sessions: u64, p99: f64) -> CapacityStep {
        CapacityStep {
            sessions,
            e2e_p50_ms: Some(p99 / 3.0),
            e2e_p99_ms: Some(p99),
            msgs_per_s: sessions as f64 / 60.0,
            server_cpu_pct: Some(50.0),
            server_rss_mib: Some(300.0),
            passed: p99 <= 100.0,
            server_procs: vec![
                ProcPoint { pid: 1, rss_mib: Some(200.0), cpu_pct: Some(40.0) },
                ProcPoint { pid: 2, rss_mib: Some(100.0), cpu_pct: Some(10.0) },
            ],
            ..CapacityStep::default()
        }
    }

    fn capacity_results(steps: Vec<CapacityStep>) -> Results {
        Results {
            scenario: Scenario::Capacity,
            capacity: Some(CapacityRes {
                top_speed: steps.iter().filter(|s| s.passed).max_by_key(|s| s.sessions).cloned(),
                steps,
                max_p99_ms: Some(100.0),
                ..CapacityRes::default()
            }),
            server: Some(ServerRes { pids: vec![1, 2], labels: vec!["node 1 (1)".into(), "node 2 (2)".into()], ..ServerRes::default() }),
            ..Results::default()
        }
    }

    #[test]
    fn the_capacity_figure_has_a_point_per_step_and_each_process() {
        let r = capacity_results(vec![step(1000, 10.0), step(2000, 40.0), step(3000, 400.0)]);
        let Fig::Draw(f) = capacity_figure(&r).and_then(Figure::check) else { panic!("not drawn") };
        assert!(f.x_int);
        // A tick at each step.
        assert_eq!(f.x_ticks, Some(vec![0.0, 1000.0, 2000.0, 3000.0]));
        assert_eq!(f.mark, Some(2000.0));
        assert!(f.title.contains("top speed 2,000 sessions"), "{}", f.title);
        assert_eq!(f.panels[0].lines[1].points, vec![(1000.0, Some(10.0)), (2000.0, Some(40.0)), (3000.0, Some(400.0))]);
        assert_eq!(f.panels[0].limits[0].0, 100.0);
        // CPU: node 1, node 2, and their sum.
        let cpu = &f.panels[3];
        assert_eq!(cpu.lines.iter().map(|l| l.label.as_str()).collect::<Vec<_>>(), ["node 1 (1)", "node 2 (2)", "sum of 2 processes"]);
        assert_eq!(cpu.lines[1].points[0], (1000.0, Some(10.0)));
        assert_eq!(cpu.lines[2].points[0], (1000.0, Some(50.0)));
        let r = capacity_results(vec![step(1000, 10.0), step(2000, 40.0)]);
        let Fig::Draw(f) = capacity_figure(&r).and_then(Figure::check) else { panic!("not drawn") };
        assert!(f.title.contains("top speed ≥ 2,000 sessions"), "never over the limits: {}", f.title);
    }

    #[test]
    fn one_step_or_one_x_value_is_not_plotted() {
        let r = capacity_results(vec![step(1000, 10.0)]);
        assert!(matches!(capacity_figure(&r).and_then(Figure::check), Fig::Skip(_)));
        let mut r = capacity_results(Vec::new());
        r.samples = vec![Sample { t_s: 1.0, ready: 5, ..Sample::default() }, Sample { t_s: 1.0, ready: 5, ..Sample::default() }];
        assert!(matches!(timeseries(&r).and_then(Figure::check), Fig::Skip(_)));
        r.samples[1].t_s = 2.0;
        assert!(matches!(timeseries(&r).and_then(Figure::check), Fig::Draw(_)));
    }

    #[test]
    fn plots_are_written_and_linked() {
        let mut r = capacity_results(vec![step(1000, 10.0), step(2000, 40.0), step(3000, 400.0)]);
        r.samples = (0..30u32)
            .map(|t| Sample {
                t_s: f64::from(t),
                ready: u64::from(t) * 100,
                msgs_per_s: 10.0,
                e2e_p99_ms: (t % 7 != 0).then_some(20.0),
                server_rss_mib: Some(300.0),
                server_cpu_pct: Some(50.0),
                server_procs: vec![ProcPoint { pid: 1, rss_mib: Some(200.0), cpu_pct: Some(40.0) }],
                ..Sample::default()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &r).unwrap();
        for png in ["timeseries.png", "capacity.png"] {
            assert!(dir.path().join(png).metadata().unwrap().len() > 10_000, "{png}");
        }
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("](timeseries.png)") && md.contains("](capacity.png)"), "{md}");
        assert!(!dir.path().join("broadcast.png").exists());
    }

    /// report.json only gains fields: a report written before them still loads.
    #[test]
    fn an_older_report_still_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/cap-150k-8n/report.json");
        let r: Results = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let c = r.capacity.as_ref().unwrap();
        assert_eq!(c.steps.len(), 5);
        assert!(c.max_p99_ms.is_none() && c.steps[0].server_procs.is_empty());
        assert!(matches!(capacity_figure(&r).and_then(Figure::check), Fig::Draw(_)));
        // Written again, it keeps every field it had.
        let old: serde_json::Value = serde_json::from_slice(
            &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/cap-150k-8n/report.json")).unwrap(),
        )
        .unwrap();
        let new = serde_json::to_value(&r).unwrap();
        for k in old.as_object().unwrap().keys() {
            assert!(new.get(k).is_some(), "{k} lost");
        }
        for k in old["capacity"]["steps"][0].as_object().unwrap().keys() {
            assert!(new["capacity"]["steps"][0].get(k).is_some(), "step field {k} lost");
        }
    }
}
