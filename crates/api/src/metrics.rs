//! `GET /metrics`: the node's counters in Prometheus' text exposition
//! format (version 0.0.4), for scrapers. Rendered from the atomics the
//! server keeps anyway (delivery workers, writer, gateway counters, the
//! cluster bus): nothing is recorded twice. No token, like `/health`; it
//! holds counts, not content.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use gateway::counters::{close_code, COUNTERS};
use node::Node;

/// Appends one metric family with a single sample.
fn one(out: &mut String, name: &str, kind: &str, help: &str, node: u64, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{node=\"{node}\"}} {value}");
}

pub async fn metrics(State(node): State<Arc<Node>>, Extension(sessions): Extension<Arc<gateway::Sessions>>) -> Response {
    let n = node.id.0;
    let mut out = String::with_capacity(4096);
    let sessions = sessions.all();
    let pending: usize = sessions.iter().map(|s| s.pending_bytes()).sum();
    let st = node.delivery.stats();
    let g = |v: usize| v as f64;
    let c = |v: u64| v as f64;
    one(&mut out, "throng_sessions", "gauge", "Sessions on this node, attached or in their resume window.", n, g(sessions.len()));
    one(&mut out, "throng_gateway_connections", "gauge", "Open gateway sockets.", n, g(node.gateway_connections.load(Ordering::Relaxed)));
    one(
        &mut out,
        "throng_identifies_total",
        "counter",
        "IDENTIFYs answered with READY.",
        n,
        c(COUNTERS.identifies.load(Ordering::Relaxed)),
    );
    one(&mut out, "throng_resumes_total", "counter", "RESUMEs answered with RESUMED.", n, c(COUNTERS.resumes.load(Ordering::Relaxed)));
    one(
        &mut out,
        "throng_invalid_sessions_total",
        "counter",
        "op 9 INVALID_SESSION sent.",
        n,
        c(COUNTERS.invalid_sessions.load(Ordering::Relaxed)),
    );
    let _ = writeln!(out, "# HELP throng_gateway_closes_total Close frames sent by the server, by close code.");
    let _ = writeln!(out, "# TYPE throng_gateway_closes_total counter");
    for (i, v) in COUNTERS.closes.iter().enumerate() {
        let code = close_code(i).map_or_else(|| "other".to_string(), |c| c.to_string());
        let _ = writeln!(out, "throng_gateway_closes_total{{node=\"{n}\",code=\"{code}\"}} {}", v.load(Ordering::Relaxed));
    }
    one(
        &mut out,
        "throng_deliveries_total",
        "counter",
        "Dispatches framed for sessions by the delivery workers (fan-out and single-session sends; not READY or RESUMED).",
        n,
        c(st.delivered.load(Ordering::Relaxed)),
    );
    one(&mut out, "throng_socket_writes_total", "counter", "Socket writes by delivery workers.", n, c(st.writes.load(Ordering::Relaxed)));
    one(&mut out, "throng_delivery_backlog", "gauge", "Deliveries queued and not yet framed.", n, g(node.delivery.backlog()));
    one(&mut out, "throng_pending_socket_bytes", "gauge", "Bytes queued for sockets, all sessions.", n, g(pending));
    one(
        &mut out,
        "throng_slow_consumer_closes_total",
        "counter",
        "Sessions closed (4000, resumable) for not reading.",
        n,
        c(st.slow_consumer_closes.load(Ordering::Relaxed)),
    );
    one(&mut out, "throng_guild_actors", "gauge", "Guild actors running on this node.", n, g(node.guilds.local_actors()));
    let depths = node.guilds.mailbox_depths();
    one(&mut out, "throng_guild_mailbox_messages", "gauge", "Messages waiting in this node's guild mailboxes.", n, g(depths.total));
    one(&mut out, "throng_guild_mailbox_max", "gauge", "Messages waiting in the deepest guild mailbox.", n, g(depths.max));
    let w = &node.writer.stats;
    one(
        &mut out,
        "throng_writer_commits_total",
        "counter",
        "Group-commit transactions of new messages.",
        n,
        c(w.commits.load(Ordering::Relaxed)),
    );
    one(&mut out, "throng_writer_rows_total", "counter", "New messages committed.", n, c(w.rows.load(Ordering::Relaxed)));
    one(
        &mut out,
        "throng_writer_changes_total",
        "counter",
        "Other guild changes committed (roles, channels, members, edits...).",
        n,
        c(w.changes.load(Ordering::Relaxed)),
    );
    one(
        &mut out,
        "throng_writer_fenced_total",
        "counter",
        "Writes refused: their guild has a newer owner.",
        n,
        c(w.fenced.load(Ordering::Relaxed)),
    );
    one(&mut out, "throng_writer_failed_total", "counter", "Writes whose commit failed.", n, c(w.failed.load(Ordering::Relaxed)));
    let (buckets, sum) = w.commit_seconds.snapshot();
    let _ = writeln!(out, "# HELP throng_store_commit_seconds Store transactions of the writer (group commits and guild changes).");
    let _ = writeln!(out, "# TYPE throng_store_commit_seconds histogram");
    for (le, count) in node::group_commit::COMMIT_BUCKETS.iter().map(|b| b.to_string()).chain(["+Inf".to_string()]).zip(&buckets) {
        let _ = writeln!(out, "throng_store_commit_seconds_bucket{{node=\"{n}\",le=\"{le}\"}} {count}");
    }
    let _ = writeln!(out, "throng_store_commit_seconds_sum{{node=\"{n}\"}} {sum}");
    let _ = writeln!(out, "throng_store_commit_seconds_count{{node=\"{n}\"}} {}", buckets.last().copied().unwrap_or(0));
    one(&mut out, "throng_writer_queue", "gauge", "Writes waiting for the writer.", n, g(node.writer.queued()));
    let bus = node.cluster().map_or(serde_json::Value::Null, |c| c.stats());
    if !bus.is_null() {
        let f = |k: &str| bus[k].as_u64().unwrap_or(0) as f64;
        one(
            &mut out,
            "throng_cluster_nodes",
            "gauge",
            "Live nodes this node sees (itself included).",
            n,
            bus["nodes"].as_array().map_or(0.0, |a| a.len() as f64),
        );
        one(&mut out, "throng_nats_sent_total", "counter", "Messages this node sent to other nodes over NATS.", n, f("sent"));
        one(
            &mut out,
            "throng_nats_published_total",
            "counter",
            "NATS messages this node published (messages queued together for one subject share one).",
            n,
            f("nats_published"),
        );
        one(
            &mut out,
            "throng_nats_guild_events_sent_total",
            "counter",
            "Guild events published to other nodes (one per node with subscribers).",
            n,
            f("sent_guild_events"),
        );
        one(&mut out, "throng_nats_received_total", "counter", "Messages received on this node's NATS subjects.", n, f("received"));
        one(&mut out, "throng_nats_outbound_queue", "gauge", "Messages waiting to be published.", n, f("outbound_queued"));
    }
    let healthy = !node.shutdown.is_cancelled() && node.health().is_ok();
    one(
        &mut out,
        "throng_up",
        "gauge",
        "1 while the node takes sessions (not draining, in its cluster).",
        n,
        if healthy { 1.0 } else { 0.0 },
    );
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}
