//! What the coordinator and its worker processes say to each other: one JSON
//! document per line, commands on the worker's stdin, reports on its stdout.
//! Histograms travel as base64 of the HdrHistogram V2 encoding and are merged
//! by the coordinator.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Everything a worker needs to know, sent as its first stdin line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub worker: u32,
    pub fixture: std::path::PathBuf,
    /// Gateway targets: (socket address, Host header, path with query).
    pub gateways: Vec<GatewayTarget>,
    /// REST bases (`http://host:port`), one per server, used round-robin.
    pub rest: Vec<String>,
    /// Source addresses to spread connections over (empty: kernel's choice).
    pub sources: Vec<std::net::IpAddr>,
    pub intents: u64,
    /// Each session opens (op 14, as a client looking at it) every guild
    /// of more members than this that its GUILD_CREATE announces: on a
    /// server where such guilds keep unopened sessions passive, they get
    /// every event there, as before passive sessions existed.
    #[serde(default = "default_open_above")]
    pub open_above: u64,
    /// Each session opens only its first guild of the fixture (a person
    /// looking at one guild) and no other: on a server that keeps
    /// unopened sessions passive, a message is expected by the members who
    /// have its guild open.
    #[serde(default)]
    pub open_home_only: bool,
    /// Bytes of padding added to every chat message's content.
    pub message_padding: usize,
    /// Give up on a session after this many failed connection attempts in a row.
    pub max_attempts: u32,
    /// Cap on concurrent REST sends per worker (beyond: the send is skipped and counted).
    pub max_inflight_sends: usize,
    /// Pad every message content with 'x' up to this many bytes (0: only `message_padding`).
    pub message_size: usize,
    /// `slow`: the number of numbered messages whose per-session order and
    /// completeness are tracked (0: no per-session tracking).
    pub track_messages: u32,
    /// Ready sessions' sockets are read by the worker's shared epoll reader
    /// (`hub`) instead of each session's task.
    pub shared_reader: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GatewayTarget {
    pub addr: std::net::SocketAddr,
    pub host: String,
    pub path_query: String,
}

/// Coordinator -> worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Start sessions for these user indices (half-open ranges), at `rate` per second.
    Connect { ranges: Vec<(u32, u32)>, rate: f64 },
    /// Every ready user of this worker (now and later) sends one message per `interval_ms`.
    Chat { interval_ms: u64 },
    /// `user` sends `count` messages to `channel_idx` of guild `guild`, one per `interval_ms`.
    Broadcast { user: u32, guild: u32, count: u32, interval_ms: u64 },
    /// `users` take turns posting `count` numbered messages (content
    /// `tb:<key>:<µs>:<n>`) to the first channel of `guild`, one at a time:
    /// each POST waits for the previous one's answer, so posting order is the
    /// server's order. Several posters keep each under a per-user REST limit.
    Sequence { users: Vec<u32>, guild: u32, count: u32, interval_ms: u64 },
    /// Stop sending chat messages (deliveries keep being counted).
    StopSending,
    /// These users' sessions stop reading their sockets (and heartbeating).
    Stall { users: Vec<u32> },
    /// Stalled sessions read again; once the old socket ends they RESUME.
    Unstall,
    /// The end of the delivery window: receipts after `at_us` count as late.
    Cutoff { at_us: u64 },
    /// Drop every socket at once (no close frame) and reconnect with RESUME.
    Drop,
    /// Close every session, send the final report and exit.
    Finish,
}

/// Worker -> coordinator.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Report {
    Tick(Box<Tick>),
    Final(Box<Final>),
}

/// Counters are cumulative; histograms cover the time since the last tick.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Tick {
    pub worker: u32,
    /// Sessions started (targets) and currently fully ready.
    pub started: u64,
    pub ready: u64,
    pub connect_failures: u64,
    /// Sessions given up on (fatal close code or too many failed attempts).
    pub failed: u64,
    pub resumes: u64,
    pub reidentifies: u64,
    pub invalid_sessions: u64,
    pub zombies: u64,
    pub drops_seen: u64,
    pub sent: u64,
    pub send_errors: u64,
    pub send_skipped: u64,
    pub deliveries: u64,
    pub duplicates_seq: u64,
    pub decode_errors: u64,
    /// Dispatches whose `s` skipped ahead of the last one seen (a gap in the stream).
    pub seq_gaps: u64,
    /// Sessions that recovered (RESUMED or READY) since the last Drop command.
    pub recovered: u64,
    /// REST sends started and not yet answered (now, not cumulative).
    pub inflight_sends: u64,
    /// Deliveries counted after the Cutoff.
    pub late_deliveries: u64,
    /// Sequence commands that have posted their last message.
    pub sequences_done: u64,
    /// Stalled sessions with a final outcome (RESUMED, op 9 or given up).
    pub stall_outcomes: u64,
    /// Wall clock (µs since the Unix epoch) when a session of this worker
    /// last became ready: ramps are timed by it, not by when the 1 s tick
    /// that reports it arrives.
    pub last_ready_at_us: u64,
    pub e2e_us: Hist,
    pub connect_us: Hist,
    pub ready_us: Hist,
    pub rest_us: Hist,
}

/// One chat message as its sender saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SentMsg {
    pub key: u64,
    pub guild: u32,
    pub ts_us: u64,
    /// The server answered 2xx.
    pub ok: bool,
    /// When the answer (any status) arrived; None: still in flight at the end.
    pub answered_us: Option<u64>,
    /// Position in a Sequence, if the message is numbered.
    pub number: Option<u32>,
}

/// One user's session continuity: first fully-ready time and the time its
/// first session was lost for good (IDENTIFY again, or given up).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionLife {
    pub user: u32,
    pub ready_at_us: u64,
    pub broken_at_us: Option<u64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Final {
    pub tick: Tick,
    pub sessions: Vec<SessionLife>,
    pub sent: Vec<SentMsg>,
    /// (message key, receipts by eligible sessions, last receipt time µs,
    /// receipts among them that came after the Cutoff).
    pub received: Vec<(u64, u32, u64, u32)>,
    /// `slow`: one entry per tracked session.
    pub tracks: Vec<TrackReport>,
    /// `slow`: e2e of numbered messages at sessions that kept reading, and at stalled ones.
    pub readers_e2e_us: Hist,
    pub stalled_e2e_us: Hist,
    /// Time from the Drop command until this worker's last session recovered.
    pub storm_recovery_us: Option<u64>,
    /// Full-run histograms.
    pub e2e_us: Hist,
    pub connect_us: Hist,
    pub ready_us: Hist,
    pub rest_us: Hist,
    pub storm_us: Hist,
    /// Failure reasons with counts.
    pub errors: Vec<(String, u64)>,
}

/// How one tracked session (`slow`) saw the numbered messages.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct TrackReport {
    pub user: u32,
    pub stalled: bool,
    /// Bitset of the message numbers received (bit n of byte n/8), base64.
    pub seen: String,
    pub received: u32,
    /// Numbered messages that came with a number not above the last one seen.
    pub out_of_order: u32,
    /// Numbered messages seen before (a subset of out_of_order).
    pub duplicates: u32,
    /// Connections of this session that ended before the Finish.
    pub connection_ends: u32,
    /// Stalled only: bytes waiting in the client's socket receive queue when
    /// it started reading again, and the messages read from that socket after.
    pub queued_bytes_at_unstall: Option<u64>,
    pub read_after_unstall: u32,
    /// Stalled only: how the stalled socket ended, and the close code if a close frame came.
    pub end: Option<String>,
    pub close_code: Option<u16>,
    /// Stalled only: RESUMED after the stalled socket ended, op 9 answers, time to RESUMED.
    pub resumed: bool,
    pub invalid_sessions: u32,
    pub resume_ms: Option<f64>,
    /// Stalled only: numbered messages received after RESUMED (the replay and what followed).
    pub after_resume: u32,
    /// Stalled only: given up (fatal close or too many failed connects).
    pub gave_up: bool,
}

/// An HdrHistogram in its V2 encoding, base64 on the wire.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Hist(pub String);

/// Latencies in µs from 1 µs to 1 hour, 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid")
}

impl Hist {
    pub fn encode(h: &Histogram<u64>) -> Hist {
        let mut buf = Vec::new();
        V2Serializer::new().serialize(h, &mut buf).expect("serialising into a Vec cannot fail");
        Hist(base64::engine::general_purpose::STANDARD.encode(buf))
    }

    pub fn decode(&self) -> anyhow::Result<Histogram<u64>> {
        if self.0.is_empty() {
            return Ok(new_hist());
        }
        let bytes = base64::engine::general_purpose::STANDARD.decode(&self.0)?;
        let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| anyhow::anyhow!("histogram: {e:?}"))?;
        Ok(h)
    }

    /// Adds this histogram into `into` (auto-resizing is on for merged ones).
    pub fn merge_into(&self, into: &mut Histogram<u64>) -> anyhow::Result<()> {
        let h = self.decode()?;
        into.add(&h).map_err(|e| anyhow::anyhow!("merging histograms: {e:?}"))
    }
}

/// The server's default `gateway.passive_guild_members`.
pub fn default_open_above() -> u64 {
    1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_and_merge() {
        let mut a = new_hist();
        let mut b = new_hist();
        for v in 1..=1000u64 {
            a.record(v).unwrap();
            b.record(v * 1000).unwrap();
        }
        let mut m = new_hist();
        Hist::encode(&a).merge_into(&mut m).unwrap();
        Hist::encode(&b).merge_into(&mut m).unwrap();
        assert_eq!(m.len(), 2000);
        assert_eq!(m.value_at_quantile(0.25), a.value_at_quantile(0.5));
        assert!(m.max() >= 999_000);
        let line = serde_json::to_string(&Command::Connect { ranges: vec![(0, 5)], rate: 10.0 }).unwrap();
        assert!(line.contains("\"cmd\":\"connect\""));
    }
}
