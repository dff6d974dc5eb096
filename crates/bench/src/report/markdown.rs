//! `report.md` (what a person reads) and the summary printed at the end of
//! a run.

use std::fmt::Write as _;

use super::model::{AdminStats, Results, SlowRes};
use super::name;
use super::plots::Plot;

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

pub fn markdown(r: &Results, drawn: &[Plot], skipped: &[String]) -> String {
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
    m.push_str(&plots_markdown(drawn, skipped));
    m
}

/// The plots section, last in `report.md`: the PNGs it shows and why any
/// was left out. They are drawn from report.json, so a copy that keeps only
/// the two reports (`docs/bench/`) gets them back with `throng-bench plot`.
fn plots_markdown(drawn: &[Plot], skipped: &[String]) -> String {
    let mut m = String::new();
    if drawn.is_empty() && skipped.is_empty() {
        return m;
    }
    let _ = writeln!(m, "## Plots\n");
    if !drawn.is_empty() {
        let _ = writeln!(
            m,
            "Drawn from `report.json`; where they are missing (`docs/bench/` keeps only report.json and report.md), `throng-bench plot <this directory>` draws them.\n"
        );
    }
    for p in drawn {
        let _ = writeln!(m, "![{}]({})\n", p.title, p.file);
    }
    for why in skipped {
        let _ = writeln!(m, "Not drawn: {why}.\n");
    }
    m
}

/// An existing `report.md` with its plots section (from `## Plots`, or an
/// older report's `Plots:` line, to the end) replaced by today's: the text
/// above stays as the run wrote it.
pub fn with_plots(old: &str, drawn: &[Plot], skipped: &[String]) -> String {
    let mut start = None;
    let mut at = 0;
    for line in old.split_inclusive('\n') {
        if line.trim_end() == "## Plots" || line.starts_with("Plots:") {
            start = Some(at);
            break;
        }
        at += line.len();
    }
    let mut m = match start {
        Some(i) => old[..i].to_string(),
        None if old.is_empty() || old.ends_with("\n\n") => old.to_string(),
        None => format!("{}\n\n", old.trim_end_matches('\n')),
    };
    m.push_str(&plots_markdown(drawn, skipped));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn() -> Vec<Plot> {
        vec![Plot { file: "timeseries.png", title: "chat · over time".into() }]
    }

    #[test]
    fn an_older_reports_text_stays_and_its_plots_section_is_todays() {
        let old = "# throng-bench chat report\n\nVerdict: **clean run**\n\nPlots: `sessions.png`, `latency_vs_sessions.png`.\n";
        let new = with_plots(old, &drawn(), &[]);
        assert!(new.starts_with("# throng-bench chat report\n\nVerdict: **clean run**\n\n## Plots\n\n"), "{new}");
        assert!(!new.contains("sessions.png`"), "{new}");
        assert!(new.contains("![chat · over time](timeseries.png)") && new.contains("throng-bench plot"), "{new}");
        // Done again, nothing changes.
        assert_eq!(with_plots(&new, &drawn(), &[]), new);
    }

    #[test]
    fn a_report_without_a_plots_section_gets_one_at_the_end() {
        let new = with_plots("# report\n\nno plots yet\n", &drawn(), &["`capacity.png`: no data".into()]);
        assert!(new.starts_with("# report\n\nno plots yet\n\n## Plots\n\n"), "{new}");
        assert!(new.ends_with("Not drawn: `capacity.png`: no data.\n\n"), "{new}");
        assert_eq!(with_plots("# report\n", &[], &[]), "# report\n\n");
    }
}
