//! The plots of a report: which figures a scenario gets (`timeseries.png`,
//! `capacity.png`, `broadcast.png`) and what goes in them.

use std::path::Path;

use plotters::prelude::*;

use super::chart::{register_font, thousands, tick, Fig, Figure, Line, Panel, P50, P99, PALETTE};
use super::model::{CapacityRes, CapacityStep, Results};
use super::name;
use crate::fleet::{ProcPoint, Sample};

/// A plot written next to the report, and its title.
pub struct Plot {
    pub file: &'static str,
    pub title: String,
}

/// Draws every plot the results have data for. Returns the plots drawn and,
/// for each left out, why (a plot of one x value would say nothing).
pub fn plots(dir: &Path, r: &Results) -> anyhow::Result<(Vec<Plot>, Vec<String>)> {
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
    use crate::report::model::ServerRes;
    use crate::report::write;
    use crate::scenario::Scenario;

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
