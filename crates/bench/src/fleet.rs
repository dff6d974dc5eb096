//! The coordinator's view of its worker processes: spawns them (re-executing
//! this binary with the hidden `worker` subcommand), sends commands, merges
//! their reports, samples the processes under test once a second.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::procfs;
use crate::progress::Progress;
use crate::wire::{new_hist, Command, Final, Report, Tick, WorkerConfig};

/// Time between two samples of the time series.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Time allowed for every worker's final report after Finish.
const FINAL_TIMEOUT: Duration = Duration::from_secs(60);

struct WorkerProc {
    child: Child,
    stdin: ChildStdin,
    pid: u32,
    last: Tick,
    fin: Option<Final>,
    alive: bool,
}

/// One point of the time series (once a second).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Sample {
    pub t_s: f64,
    /// What the run was doing (ramp, hold, chat, storm, drain, steps, finish).
    pub phase: Cow<'static, str>,
    pub started: u64,
    pub ready: u64,
    pub connect_failures: u64,
    pub failed: u64,
    pub resumes: u64,
    pub sent: u64,
    pub deliveries: u64,
    pub errors: u64,
    pub msgs_per_s: f64,
    pub deliveries_per_s: f64,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub server_rss_mib: Option<f64>,
    pub server_cpu_pct: Option<f64>,
    pub client_rss_mib: f64,
    pub client_cpu_pct: f64,
    /// Each server process (`--server-pid`, in that order); the two fields
    /// above are their sums. A cluster's nodes are not alike: a sum hides
    /// the one that is saturated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_procs: Vec<ProcPoint>,
}

/// One server process at one sample or over one capacity step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcPoint {
    pub pid: u32,
    /// None: the process was gone.
    pub rss_mib: Option<f64>,
    /// CPU time over wall time, 100 = one core (None: no earlier reading).
    pub cpu_pct: Option<f64>,
}

/// Per-process points from two readings of `procfs::sample_each`, `dt_s` apart.
pub fn proc_points(pids: &[u32], before: &[Option<(u64, f64)>], after: &[Option<(u64, f64)>], dt_s: f64) -> Vec<ProcPoint> {
    let dt = dt_s.max(1e-3);
    pids.iter()
        .enumerate()
        .map(|(i, &pid)| {
            let now = after.get(i).copied().flatten();
            let then = before.get(i).copied().flatten();
            ProcPoint {
                pid,
                rss_mib: now.map(|(rss, _)| rss as f64 / 1048576.0),
                cpu_pct: now.zip(then).map(|((_, c1), (_, c0))| (c1 - c0).max(0.0) / dt * 100.0),
            }
        })
        .collect()
}

/// The previous sample's counters, for rates.
struct LastSample {
    at: Instant,
    sent: u64,
    deliveries: u64,
    server: Vec<Option<(u64, f64)>>,
    client_cpu: f64,
}

pub struct Fleet {
    workers: Vec<WorkerProc>,
    rx: mpsc::UnboundedReceiver<(usize, Option<Report>)>,
    pub t0: Instant,
    pub samples: Vec<Sample>,
    pub server_pids: Vec<u32>,
    /// e2e of the current one-second window and of a caller-chosen window.
    second_e2e: Histogram<u64>,
    pub window_e2e: Histogram<u64>,
    pub full_e2e: Histogram<u64>,
    last_sample: Option<LastSample>,
    /// One sample a second across pump calls: a pump that sampled on entry
    /// would add one a few ms after the last, whose rates are noise (a
    /// 13,000 msg/s spike from a handful of messages) and whose e2e is empty.
    next_sample: Instant,
    pub peak_server_rss: u64,
    pub progress: Progress,
    /// The current phase, stamped on each sample.
    pub phase: &'static str,
}

impl Fleet {
    pub async fn spawn(n: usize, cfg: &WorkerConfig, server_pids: Vec<u32>, progress: Progress) -> anyhow::Result<Fleet> {
        let exe = std::env::current_exe().context("locating own binary")?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let mut child = tokio::process::Command::new(&exe)
                .arg("worker")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("spawning worker {i}"))?;
            let pid = child.id().context("worker pid")?;
            let mut stdin = child.stdin.take().context("worker stdin")?;
            let stdout = child.stdout.take().context("worker stdout")?;
            let mut c = cfg.clone();
            c.worker = i as u32;
            let line = serde_json::to_string(&c)? + "\n";
            stdin.write_all(line.as_bytes()).await?;
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                loop {
                    match lines.next_line().await {
                        Ok(Some(l)) => match serde_json::from_str::<Report>(&l) {
                            Ok(r) => {
                                if tx.send((i, Some(r))).is_err() {
                                    return;
                                }
                            }
                            Err(e) => eprintln!("worker {i}: unreadable report: {e}"),
                        },
                        _ => {
                            // EOF or a broken pipe: the worker is gone.
                            let _closed_is_fine = tx.send((i, None));
                            return;
                        }
                    }
                }
            });
            workers.push(WorkerProc { child, stdin, pid, last: Tick::default(), fin: None, alive: true });
        }
        Ok(Fleet {
            workers,
            rx,
            t0: Instant::now(),
            samples: Vec::new(),
            server_pids,
            second_e2e: new_hist(),
            window_e2e: new_hist(),
            full_e2e: new_hist(),
            last_sample: None,
            next_sample: Instant::now(),
            peak_server_rss: 0,
            progress,
            phase: "start",
        })
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn worker_pids(&self) -> Vec<u32> {
        self.workers.iter().map(|w| w.pid).collect()
    }

    pub async fn send(&mut self, w: usize, cmd: &Command) -> anyhow::Result<()> {
        let line = serde_json::to_string(cmd)? + "\n";
        let wp = &mut self.workers[w];
        if !wp.alive {
            bail!("worker {w} is gone");
        }
        wp.stdin.write_all(line.as_bytes()).await.with_context(|| format!("commanding worker {w}"))
    }

    pub async fn send_all(&mut self, cmd: &Command) -> anyhow::Result<()> {
        for w in 0..self.workers.len() {
            self.send(w, cmd).await?;
        }
        Ok(())
    }

    /// Cumulative counters summed over workers.
    pub fn totals(&self) -> Tick {
        let mut t = Tick::default();
        for w in &self.workers {
            let l = &w.last;
            t.started += l.started;
            t.ready += l.ready;
            t.connect_failures += l.connect_failures;
            t.failed += l.failed;
            t.resumes += l.resumes;
            t.reidentifies += l.reidentifies;
            t.invalid_sessions += l.invalid_sessions;
            t.zombies += l.zombies;
            t.drops_seen += l.drops_seen;
            t.sent += l.sent;
            t.send_errors += l.send_errors;
            t.send_skipped += l.send_skipped;
            t.deliveries += l.deliveries;
            t.duplicates_seq += l.duplicates_seq;
            t.decode_errors += l.decode_errors;
            t.recovered += l.recovered;
            t.seq_gaps += l.seq_gaps;
            t.inflight_sends += l.inflight_sends;
            t.late_deliveries += l.late_deliveries;
            t.sequences_done += l.sequences_done;
            t.stall_outcomes += l.stall_outcomes;
            t.last_ready_at_us = t.last_ready_at_us.max(l.last_ready_at_us);
        }
        t
    }

    pub fn alive(&self) -> usize {
        self.workers.iter().filter(|w| w.alive).count()
    }

    fn absorb(&mut self, i: usize, r: Option<Report>) {
        match r {
            Some(Report::Tick(t)) => {
                for h in [&mut self.second_e2e, &mut self.window_e2e, &mut self.full_e2e] {
                    if let Err(e) = t.e2e_us.merge_into(h) {
                        eprintln!("worker {i}: {e}");
                    }
                }
                self.workers[i].last = *t;
            }
            Some(Report::Final(f)) => {
                if let Err(e) = f.tick.e2e_us.merge_into(&mut self.full_e2e) {
                    eprintln!("worker {i}: {e}");
                }
                self.workers[i].last = f.tick.clone();
                self.workers[i].fin = Some(*f);
            }
            None => {
                if self.workers[i].alive && self.workers[i].fin.is_none() {
                    self.progress.line(&format!("worker {i} exited without a final report"));
                }
                self.workers[i].alive = false;
            }
        }
    }

    /// Processes reports and samples until `deadline` or until `stop` holds.
    /// `fast_rss` polls the server's RSS every 100 ms (for peaks).
    pub async fn pump(&mut self, deadline: Instant, fast_rss: bool, mut stop: impl FnMut(&Fleet) -> bool) -> anyhow::Result<()> {
        let mut rss_iv = tokio::time::interval(Duration::from_millis(100));
        rss_iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            if stop(self) || Instant::now() >= deadline {
                return Ok(());
            }
            if self.alive() == 0 {
                bail!("every worker process has exited");
            }
            tokio::select! {
                r = self.rx.recv() => {
                    let Some((i, r)) = r else { bail!("worker channel closed") };
                    self.absorb(i, r);
                }
                _ = tokio::time::sleep_until(self.next_sample.into()) => self.sample(),
                _ = rss_iv.tick(), if fast_rss && !self.server_pids.is_empty() => {
                    let (rss, _) = procfs::sample_sum(&self.server_pids);
                    self.peak_server_rss = self.peak_server_rss.max(rss);
                }
                _ = tokio::time::sleep_until(deadline.into()) => return Ok(()),
            }
        }
    }

    pub fn sample(&mut self) {
        let now = Instant::now();
        self.next_sample = now + SAMPLE_EVERY;
        let t = self.totals();
        let server = procfs::sample_each(&self.server_pids);
        let (srss, _) = procfs::sum(&server);
        let (crss, ccpu) = procfs::sample_sum(&self.worker_pids());
        self.peak_server_rss = self.peak_server_rss.max(srss);
        let mut s = Sample {
            t_s: now.duration_since(self.t0).as_secs_f64(),
            phase: Cow::Borrowed(self.phase),
            started: t.started,
            ready: t.ready,
            connect_failures: t.connect_failures,
            failed: t.failed,
            resumes: t.resumes,
            sent: t.sent,
            deliveries: t.deliveries,
            errors: t.connect_failures + t.failed + t.send_errors + t.decode_errors,
            client_rss_mib: crss as f64 / 1048576.0,
            ..Sample::default()
        };
        if !self.server_pids.is_empty() {
            s.server_rss_mib = Some(srss as f64 / 1048576.0);
        }
        if !self.second_e2e.is_empty() {
            s.e2e_p50_ms = Some(self.second_e2e.value_at_quantile(0.5) as f64 / 1000.0);
            s.e2e_p99_ms = Some(self.second_e2e.value_at_quantile(0.99) as f64 / 1000.0);
        }
        let none = vec![None; self.server_pids.len()];
        let (before, dt) = match &self.last_sample {
            Some(l) => (&l.server, now.duration_since(l.at).as_secs_f64().max(1e-3)),
            None => (&none, 1.0),
        };
        s.server_procs = proc_points(&self.server_pids, before, &server, dt);
        if let Some(l) = &self.last_sample {
            s.msgs_per_s = (t.sent.saturating_sub(l.sent)) as f64 / dt;
            s.deliveries_per_s = (t.deliveries.saturating_sub(l.deliveries)) as f64 / dt;
            if !self.server_pids.is_empty() {
                // Only processes read both times: one that exited does not make the sum negative.
                s.server_cpu_pct = Some(s.server_procs.iter().filter_map(|p| p.cpu_pct).sum());
            }
            s.client_cpu_pct = (ccpu - l.client_cpu) / dt * 100.0;
        }
        self.second_e2e.reset();
        self.progress.update(&s);
        self.last_sample = Some(LastSample { at: now, sent: t.sent, deliveries: t.deliveries, server, client_cpu: ccpu });
        self.samples.push(s);
    }

    /// Sends Finish and collects every worker's final report.
    pub async fn finish(&mut self) -> anyhow::Result<Vec<Final>> {
        self.phase = "finish";
        for w in 0..self.workers.len() {
            if self.workers[w].alive {
                if let Err(e) = self.send(w, &Command::Finish).await {
                    self.progress.line(&format!("{e:#}"));
                }
            }
        }
        let deadline = Instant::now() + FINAL_TIMEOUT;
        while self.workers.iter().any(|w| w.alive && w.fin.is_none()) && Instant::now() < deadline {
            match tokio::time::timeout_at(deadline.into(), self.rx.recv()).await {
                Ok(Some((i, r))) => self.absorb(i, r),
                _ => break,
            }
        }
        self.sample();
        let mut out = Vec::new();
        for w in &mut self.workers {
            if let Some(f) = w.fin.take() {
                out.push(f);
            }
            // Reaped so no zombie outlives the run; it has exited or is killed on drop.
            let _status = tokio::time::timeout(Duration::from_secs(2), w.child.wait()).await;
        }
        Ok(out)
    }
}

/// Splits `users` into `n` contiguous chunks and encodes each as ranges.
pub fn split_ranges(users: &[u32], n: usize) -> Vec<Vec<(u32, u32)>> {
    let n = n.max(1);
    let per = users.len().div_ceil(n);
    let mut out = vec![Vec::new(); n];
    for (w, chunk) in users.chunks(per.max(1)).enumerate() {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &u in chunk {
            match ranges.last_mut() {
                Some((_, b)) if *b == u => *b += 1,
                _ => ranges.push((u, u + 1)),
            }
        }
        out[w] = ranges;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_points_are_per_process_and_skip_missing_readings() {
        let mib = 1048576;
        let before = [Some((10 * mib, 1.0)), None, Some((5 * mib, 2.0))];
        let after = [Some((20 * mib, 1.5)), Some((7 * mib, 9.0)), None];
        let p = proc_points(&[11, 12, 13], &before, &after, 2.0);
        assert_eq!(p[0], ProcPoint { pid: 11, rss_mib: Some(20.0), cpu_pct: Some(25.0) });
        // No earlier reading: RSS yes, CPU unknown (not 450 %).
        assert_eq!(p[1], ProcPoint { pid: 12, rss_mib: Some(7.0), cpu_pct: None });
        // Gone: neither.
        assert_eq!(p[2], ProcPoint { pid: 13, rss_mib: None, cpu_pct: None });
    }

    #[test]
    fn split_ranges_covers_every_user_once() {
        let users: Vec<u32> = (0..10).chain(20..25).collect();
        let parts = split_ranges(&users, 3);
        assert_eq!(parts.len(), 3);
        let all: Vec<u32> = parts.iter().flatten().flat_map(|&(a, b)| a..b).collect();
        assert_eq!(all, users);
        assert_eq!(parts[0], vec![(0, 5)]);
    }
}
