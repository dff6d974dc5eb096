//! `slow`: slow consumers in one guild. N sessions are READY in one guild;
//! K of them stop reading their sockets (the kernel buffers fill and the
//! server must queue or drop); one member posts M numbered messages over
//! REST, one at a time, paced. Then:
//!
//! - the N-K readers must have every message exactly once, in posting order
//!   (per-session bitset plus order check on the embedded number), with their
//!   e2e latency compared against a run with `--stalled 0`;
//! - each stalled session reads again: how its socket ended (close code,
//!   EOF, reset, or still open), whether RESUME on a new connection gets
//!   RESUMED or op 9, and whether the replay gives it every message in order
//!   (missing ones are counted, not hidden);
//! - server memory: RSS sampled every 100 ms, and the server's own queue
//!   bytes from `GET /api/v10/_throng/admin/stats` when `--admin-token` is
//!   given and the server has the route.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use serde_json::Value;

use crate::fleet::Fleet;
use crate::procfs;
use crate::report::{AdminStats, Criterion, Pcts, ServerRes, SlowRes, StalledDetail};
use crate::scenario::{client_mark, drain, RunArgs};
use crate::session::CATCH_UP;
use crate::wire::{new_hist, Command, Final};

/// What the phases measured, for [`evaluate`].
pub struct Phases {
    /// Client CPU and deliveries at the start and end of the message phase.
    pub client_window: (f64, u64, f64, u64),
    pub stalled_users: Vec<u32>,
    pub sessions: usize,
    pub posters: usize,
    pub post_s: f64,
    /// How long the stalled sessions did not read.
    pub stall_s: f64,
    pub rss_before_messages: Option<u64>,
    /// Peak server RSS from the first post until the replays were read.
    pub rss_peak: Option<u64>,
    /// Whether every stalled session reached an outcome before the deadline.
    pub outcomes_complete: bool,
    /// Kernel send queues of the server's gateway sockets just before the
    /// stalled sessions read again (local servers only): non-empty ones.
    pub server_send_queues: Vec<u64>,
}

/// K sessions spread evenly over the members, never one of the posters
/// (the first `posters` members).
pub fn pick_stalled(users: &[u32], k: usize, posters: usize) -> Vec<u32> {
    let rest = &users[posters.min(users.len())..];
    if k == 0 || rest.is_empty() {
        return Vec::new();
    }
    let k = k.min(rest.len());
    (0..k).map(|i| rest[i * rest.len() / k]).collect()
}

/// Runs the slow-consumer phases on sessions that are already READY.
pub async fn run_phases(
    fleet: &mut Fleet,
    users: &[u32],
    guild: u32,
    a: &RunArgs,
    messages: u32,
    interval: Duration,
    gateway_port: u16,
) -> anyhow::Result<Phases> {
    // Subscriptions follow READY; let them settle before anything happens.
    fleet.pump(Instant::now() + Duration::from_secs(1), false, |_| false).await?;
    let posters = a.posters.clamp(1, users.len() - a.stalled.min(users.len() - 1));
    let stalled = pick_stalled(users, a.stalled, posters);
    let t_stall = Instant::now();
    if !stalled.is_empty() {
        fleet.send_all(&Command::Stall { users: stalled.clone() }).await?;
    }
    fleet.progress.line(&format!(
        "slow: {} of {} sessions stop reading; {posters} members post {messages} messages of {} bytes in turn, one every {} ms",
        stalled.len(),
        users.len(),
        a.message_size.unwrap_or(200),
        interval.as_millis()
    ));
    fleet.phase = "stalled";
    fleet.pump(Instant::now() + Duration::from_millis(500), false, |_| false).await?;
    let rss_before = (!fleet.server_pids.is_empty()).then(|| procfs::sample_sum(&fleet.server_pids).0);
    fleet.peak_server_rss = 0;
    let c0 = client_mark(fleet);
    let t_post = Instant::now();
    let iv = interval.as_millis() as u64;
    fleet.send(0, &Command::Sequence { users: users[..posters].to_vec(), guild, count: messages, interval_ms: iv }).await?;
    fleet.phase = "messages";
    let limit = interval * messages + Duration::from_secs(120);
    fleet.pump(t_post + limit, true, |f| f.totals().sequences_done >= 1).await?;
    let post_s = t_post.elapsed().as_secs_f64();
    let sent = fleet.totals();
    fleet.progress.line(&format!(
        "slow: {} posted ({} errors) in {post_s:.1} s ({:.0}/s)",
        sent.sent,
        sent.send_errors,
        sent.sent as f64 / post_s.max(1e-3)
    ));
    fleet.phase = "drain";
    drain(fleet, a.settle, a.drain_max).await?;
    let c1 = client_mark(fleet);
    let mut outcomes_complete = true;
    let mut stall_s = 0.0;
    let mut server_send_queues = Vec::new();
    if !fleet.server_pids.is_empty() {
        server_send_queues = procfs::tcp_send_queues(gateway_port).into_iter().filter(|&q| q > 0).collect();
        server_send_queues.sort_unstable_by(|a, b| b.cmp(a));
    }
    if !stalled.is_empty() {
        stall_s = t_stall.elapsed().as_secs_f64();
        fleet.progress.line(&format!("slow: stalled sessions read again after {stall_s:.1} s"));
        if stall_s > 40.0 {
            fleet
                .progress
                .line("slow: stalled for over 40 s: a server heartbeat timeout (Discord's 41.25 s interval) may have closed them");
        }
        fleet.phase = "unstall";
        fleet.send_all(&Command::Unstall).await?;
        let k = stalled.len() as u64;
        fleet.pump(Instant::now() + CATCH_UP + Duration::from_secs(30), true, |f| f.totals().stall_outcomes >= k).await?;
        let got = fleet.totals().stall_outcomes;
        outcomes_complete = got >= k;
        fleet.progress.line(&format!("slow: {got}/{k} stalled sessions have an outcome (RESUMED, op 9 or given up)"));
        // The replays.
        fleet.phase = "replay";
        drain(fleet, Duration::from_secs(1), a.drain_max).await?;
    }
    let rss_peak = (!fleet.server_pids.is_empty()).then_some(fleet.peak_server_rss);
    Ok(Phases {
        client_window: (c0.0, c0.1, c1.0, c1.1),
        stalled_users: stalled,
        sessions: users.len(),
        posters,
        post_s,
        stall_s,
        rss_before_messages: rss_before,
        rss_peak,
        outcomes_complete,
        server_send_queues,
    })
}

/// Polls the server's admin stats every 500 ms in the background.
pub struct AdminPoller {
    handle: tokio::task::JoinHandle<()>,
    state: Arc<Mutex<AdminStats>>,
}

impl AdminPoller {
    pub fn start(server: &str, token: &str, t0: Instant) -> AdminPoller {
        let url = format!("{}/api/v10/_throng/admin/stats", server.trim_end_matches('/'));
        let state = Arc::new(Mutex::new(AdminStats { url: url.clone(), ..AdminStats::default() }));
        let (st, token) = (state.clone(), token.to_owned());
        let handle = tokio::spawn(async move {
            let http = match reqwest::Client::builder().timeout(Duration::from_secs(2)).build() {
                Ok(h) => h,
                Err(e) => {
                    st.lock().expect("poisoned only by a panic").last_error = Some(e.to_string());
                    return;
                }
            };
            let mut iv = tokio::time::interval(Duration::from_millis(500));
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                iv.tick().await;
                let r = http.get(&url).header("X-Throng-Admin-Token", &token).send().await;
                let (status, body) = match r {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        (Some(status), resp.bytes().await.ok())
                    }
                    Err(e) => {
                        st.lock().expect("poisoned only by a panic").last_error = Some(e.to_string());
                        (None, None)
                    }
                };
                let v: Option<Value> = match (status, body) {
                    (Some(200), Some(b)) => serde_json::from_slice(&b).ok(),
                    _ => None,
                };
                st.lock().expect("poisoned only by a panic").absorb(t0.elapsed().as_secs_f64(), status, v);
            }
        });
        AdminPoller { handle, state }
    }

    pub fn stop(self) -> AdminStats {
        self.handle.abort();
        let s = self.state.lock().expect("poisoned only by a panic");
        s.clone()
    }
}

impl AdminStats {
    fn absorb(&mut self, t_s: f64, status: Option<u16>, v: Option<Value>) {
        self.polls += 1;
        if status.is_some() {
            self.last_status = status;
        }
        let Some(v) = v else { return };
        self.answered += 1;
        let field = |k: &str| v.get(k).and_then(Value::as_u64);
        if let Some(p) = field("pending_bytes") {
            self.pending_bytes_peak = Some(self.pending_bytes_peak.unwrap_or(0).max(p));
            self.pending_bytes_series.push((t_s, p));
        }
        if let Some(p) = field("pending_bytes_max") {
            self.pending_bytes_max = Some(p);
        }
        if let Some(c) = field("slow_consumer_closes") {
            self.slow_consumer_closes = Some(c);
        }
        if let Some(s) = field("sessions") {
            self.sessions_peak = Some(self.sessions_peak.unwrap_or(0).max(s));
        }
        if let Some(c) = field("connections") {
            self.connections_peak = Some(self.connections_peak.unwrap_or(0).max(c));
        }
        self.last = Some(v);
    }
}

/// The numbers of a `--stalled 0` run that this run is compared with.
pub struct Baseline {
    pub path: String,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub rss_growth_mib: Option<f64>,
}

impl Baseline {
    pub fn load(path: &Path) -> anyhow::Result<Baseline> {
        let text = std::fs::read(path).with_context(|| format!("reading baseline {}", path.display()))?;
        let v: Value = serde_json::from_slice(&text).with_context(|| format!("parsing baseline {}", path.display()))?;
        let s = &v["slow"];
        anyhow::ensure!(s.is_object(), "baseline {} is not a slow report", path.display());
        Ok(Baseline {
            path: path.display().to_string(),
            p50_ms: s["readers_e2e"]["p50"].as_f64(),
            p99_ms: s["readers_e2e"]["p99"].as_f64(),
            rss_growth_mib: s["rss_growth_mib"].as_f64(),
        })
    }
}

/// Close codes after which the session stays resumable (Discord's
/// reconnect codes minus 4007 invalid seq; throng drops with 4000 or 4009).
pub fn resumable_close(code: u16) -> bool {
    matches!(code, 4000..=4003 | 4005 | 4008 | 4009)
}

fn bit(seen: &[u8], n: usize) -> bool {
    seen.get(n / 8).is_some_and(|b| b & (1 << (n % 8)) != 0)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// Turns the workers' tracks into the slow report and its criteria.
pub fn evaluate(
    finals: &[Final],
    p: Phases,
    admin: Option<AdminStats>,
    baseline: Option<Baseline>,
    a: &RunArgs,
    server: Option<&ServerRes>,
    messages: u32,
) -> SlowRes {
    let m = messages as usize;
    let mut accepted = vec![false; m];
    let mut post_errors = 0u64;
    for f in finals {
        for s in &f.sent {
            if let Some(n) = s.number.map(|n| n as usize).filter(|&n| n < m) {
                if s.ok {
                    accepted[n] = true;
                } else {
                    post_errors += 1;
                }
            }
        }
    }
    let n_accepted = accepted.iter().filter(|&&x| x).count() as u64;
    let mut res = SlowRes {
        sessions: p.sessions as u64,
        stalled: p.stalled_users.len() as u64,
        posters: p.posters as u64,
        messages_requested: messages,
        messages_accepted: n_accepted,
        post_errors,
        post_s: p.post_s,
        post_rate: n_accepted as f64 / p.post_s.max(1e-3),
        message_size: a.message_size.unwrap_or(200),
        stall_s: p.stall_s,
        queue_bound_bytes: a.queue_bound,
        ..SlowRes::default()
    };
    let (mut readers_h, mut stalled_h) = (new_hist(), new_hist());
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    for f in finals {
        for h in [(&f.readers_e2e_us, &mut readers_h), (&f.stalled_e2e_us, &mut stalled_h)] {
            if let Err(e) = h.0.merge_into(h.1) {
                eprintln!("throng-bench: {e:#}");
            }
        }
        for t in &f.tracks {
            let seen = base64::engine::general_purpose::STANDARD.decode(&t.seen).unwrap_or_default();
            let missing = (0..m).filter(|&n| accepted[n] && !bit(&seen, n)).count() as u64;
            let unexpected = (0..m).filter(|&n| !accepted[n] && bit(&seen, n)).count() as u64;
            let complete = missing == 0 && t.out_of_order == 0 && t.duplicates == 0;
            if !t.stalled {
                res.readers += 1;
                res.readers_complete += u64::from(complete);
                res.readers_missing += missing;
                res.readers_unexpected += unexpected;
                res.readers_out_of_order += u64::from(t.out_of_order);
                res.readers_duplicates += u64::from(t.duplicates);
                res.readers_with_loss += u64::from(missing > 0);
                res.readers_disconnected += u64::from(t.connection_ends > 0);
                continue;
            }
            let end = t.end.clone().unwrap_or_else(|| "did not end before the run's deadline".to_owned());
            *ends.entry(end.clone()).or_default() += 1;
            match (t.close_code, t.end.as_deref()) {
                (Some(c), _) if resumable_close(c) => res.stalled_closed_resumable += 1,
                (Some(_), _) => res.stalled_closed_other += 1,
                (None, Some(e)) if e.starts_with("still open") => res.stalled_still_open += 1,
                (None, Some(_)) => res.stalled_no_close_frame += 1,
                (None, None) => {}
            }
            res.stalled_resumed += u64::from(t.resumed);
            res.stalled_invalid_session += u64::from(t.invalid_sessions > 0);
            res.stalled_gave_up += u64::from(t.gave_up);
            res.stalled_complete += u64::from(complete);
            res.stalled_missing += missing;
            res.stalled_out_of_order += u64::from(t.out_of_order);
            res.stalled_duplicates += u64::from(t.duplicates);
            res.stalled_detail.push(StalledDetail {
                user: t.user,
                end,
                close_code: t.close_code,
                queued_bytes_at_unstall: t.queued_bytes_at_unstall,
                read_after_unstall: t.read_after_unstall,
                resumed: t.resumed,
                invalid_sessions: t.invalid_sessions,
                resume_ms: t.resume_ms,
                after_resume: t.after_resume,
                received: t.received,
                missing,
                out_of_order: t.out_of_order,
                duplicates: t.duplicates,
            });
        }
    }
    res.stalled_detail.sort_by_key(|d| d.user);
    res.stalled_ends = ends;
    if !readers_h.is_empty() {
        res.readers_e2e = Some(Pcts::of(&readers_h));
    }
    if !stalled_h.is_empty() {
        res.stalled_e2e = Some(Pcts::of(&stalled_h));
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    res.rss_before_messages_mib = p.rss_before_messages.map(mib);
    res.rss_peak_mib = p.rss_peak.map(mib);
    res.rss_growth_mib = match (p.rss_before_messages, p.rss_peak) {
        (Some(b), Some(pk)) => Some(mib(pk) - mib(b)),
        _ => None,
    };
    res.rss_after_ramp_mib = server.map(|s| s.rss_after_ramp_mib);
    if let Some(b) = &baseline {
        res.baseline_report = Some(b.path.clone());
        res.baseline_p50_ms = b.p50_ms;
        res.baseline_p99_ms = b.p99_ms;
        res.baseline_rss_growth_mib = b.rss_growth_mib;
        if let (Some(bp), Some(e)) = (b.p99_ms, &res.readers_e2e) {
            res.p99_ratio = Some(e.p99 / bp.max(1e-3));
        }
    }
    res.admin = admin;
    res.server_send_queues = p.server_send_queues;
    let queued: Vec<u64> = res.stalled_detail.iter().filter_map(|d| d.queued_bytes_at_unstall).collect();
    res.client_queued_max = queued.iter().copied().max();

    // Criteria.
    let k = res.stalled;
    let mut c = Vec::new();
    res.readers_ok = n_accepted > 0
        && res.readers > 0
        && res.readers_complete == res.readers
        && res.readers_out_of_order == 0
        && res.readers_duplicates == 0;
    c.push(Criterion {
        name: "readers get every message once, in order".into(),
        verdict: verdict(res.readers_ok).into(),
        detail: format!(
            "{}/{} reading sessions had all {} accepted messages (of {} posted) exactly once and in posting order; missing {} (in {} sessions), duplicates {}, out of order {}, disconnected {}",
            res.readers_complete,
            res.readers,
            n_accepted,
            messages,
            res.readers_missing,
            res.readers_with_loss,
            res.readers_duplicates,
            res.readers_out_of_order,
            res.readers_disconnected
        ),
    });
    c.push(match (&res.readers_e2e, res.p99_ratio, res.baseline_p99_ms) {
        (Some(e), Some(ratio), Some(bp)) => Criterion {
            name: "readers' p99 within 2x of the run without slow consumers".into(),
            verdict: verdict(ratio <= 2.0).into(),
            detail: format!("p50 {:.2} ms, p99 {:.2} ms vs baseline p99 {bp:.2} ms: {ratio:.2}x", e.p50, e.p99),
        },
        (e, _, _) => Criterion {
            name: "readers' p99 within 2x of the run without slow consumers".into(),
            verdict: "n/a".into(),
            detail: format!(
                "{}; no baseline (give --baseline-report of a --stalled 0 run)",
                e.as_ref().map(|e| format!("p50 {:.2} ms, p99 {:.2} ms", e.p50, e.p99)).unwrap_or_else(|| "no latency".into())
            ),
        },
    });
    let ends_text = res.stalled_ends.iter().map(|(e, n)| format!("{e} ×{n}")).collect::<Vec<_>>().join(", ");
    if k == 0 {
        for name in
            ["stalled sessions closed with a resumable code", "stalled sessions RESUME", "stalled sessions get every message after RESUME"]
        {
            c.push(Criterion { name: name.into(), verdict: "n/a".into(), detail: "no stalled session (--stalled 0)".into() });
        }
    } else {
        c.push(Criterion {
            name: "stalled sessions closed with a resumable code".into(),
            verdict: verdict(res.stalled_closed_resumable == k).into(),
            detail: format!(
                "{}/{k} closed with a resumable code; other codes {}, no close frame {}, never closed by the server {}: {ends_text}",
                res.stalled_closed_resumable, res.stalled_closed_other, res.stalled_no_close_frame, res.stalled_still_open
            ),
        });
        let resume_ms: Vec<f64> = res.stalled_detail.iter().filter_map(|d| d.resume_ms).collect();
        let slowest = resume_ms.iter().copied().fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
        c.push(Criterion {
            name: "stalled sessions RESUME".into(),
            verdict: verdict(res.stalled_resumed == k).into(),
            detail: format!(
                "{}/{k} RESUMED (slowest {} ms after the old socket ended); op 9 {}, given up {}{}",
                res.stalled_resumed,
                slowest.map(|s| format!("{s:.0}")).unwrap_or_else(|| "-".into()),
                res.stalled_invalid_session,
                res.stalled_gave_up,
                if p.outcomes_complete { "" } else { "; some had no outcome before the deadline" }
            ),
        });
        c.push(Criterion {
            name: "stalled sessions get every message after RESUME".into(),
            verdict: verdict(res.stalled_complete == k).into(),
            detail: format!(
                "{}/{k} have all {n_accepted} in order (read from the old socket + replay); missing {} in total, duplicates {}, out of order {}",
                res.stalled_complete, res.stalled_missing, res.stalled_duplicates, res.stalled_out_of_order
            ),
        });
    }
    // Memory: the server's own queue bytes if it reports them, else RSS growth against the baseline's.
    let bound = (k + 1) * a.queue_bound;
    let rss_text = match (res.rss_growth_mib, res.rss_peak_mib) {
        (Some(g), Some(pk)) => format!("server RSS peak {pk:.1} MiB, +{g:.1} MiB during messages and replay"),
        _ => "server RSS not sampled (no --server-pid)".into(),
    };
    let admin_peak = res.admin.as_ref().and_then(|ad| ad.pending_bytes_peak);
    c.push(match (admin_peak, res.rss_growth_mib, res.baseline_rss_growth_mib) {
        (Some(q), _, _) => Criterion {
            name: "server memory stays bounded".into(),
            verdict: verdict(q <= bound).into(),
            detail: format!(
                "max queue bytes {q} (server's pending_bytes; bound (stalled + 1) x --queue-bound = {bound}); pending_bytes_max {}; {rss_text}",
                res.admin.as_ref().and_then(|ad| ad.pending_bytes_max).map(|v| v.to_string()).unwrap_or_else(|| "-".into())
            ),
        },
        (None, Some(g), Some(bg)) => {
            let allowed = bg + (k * a.queue_bound) as f64 / 1048576.0 + 8.0;
            Criterion {
                name: "server memory stays bounded".into(),
                verdict: verdict(g <= allowed).into(),
                detail: format!(
                    "{rss_text} vs baseline +{bg:.1} MiB (allowed: baseline + stalled x --queue-bound + 8 MiB = {allowed:.1}); server reported no queue bytes{}",
                    admin_note(res.admin.as_ref())
                ),
            }
        }
        _ => Criterion {
            name: "server memory stays bounded".into(),
            verdict: "n/a".into(),
            detail: format!("{rss_text}; no queue bytes from the server{} and no baseline to compare with", admin_note(res.admin.as_ref())),
        },
    });
    res.criteria = c;
    res
}

fn admin_note(a: Option<&AdminStats>) -> String {
    match a {
        None => " (no --admin-token)".into(),
        Some(a) if a.answered == 0 => format!(
            " (admin stats: {} polls, last status {})",
            a.polls,
            a.last_status.map(|s| s.to_string()).unwrap_or_else(|| a.last_error.clone().unwrap_or_else(|| "-".into()))
        ),
        Some(_) => " (admin stats have no pending_bytes)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_are_spread_and_never_the_poster() {
        let users: Vec<u32> = (100..200).collect();
        let s = pick_stalled(&users, 10, 1);
        assert_eq!(s.len(), 10);
        assert!(!s.contains(&100));
        assert_eq!(s[0], 101);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(pick_stalled(&users, 0, 1).is_empty());
        assert_eq!(pick_stalled(&users[..3], 10, 1), vec![101, 102]);
        assert!(pick_stalled(&users, 10, 4).iter().all(|&u| u >= 104));
    }

    #[test]
    fn resumable_codes() {
        assert!(resumable_close(4000));
        assert!(!resumable_close(4004));
        assert!(!resumable_close(4007));
        assert!(!resumable_close(1000));
    }
}
