//! The report model: every number a run records, as written to and read back
//! from `report.json`. Fields are only ever added (`#[serde(default)]`), so
//! an older report still loads.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::chart::nice_step;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
