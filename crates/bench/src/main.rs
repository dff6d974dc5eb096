//! throng-bench: a load generator for any server that speaks Discord's
//! gateway and REST API. Every simulated user is a real gateway client.
//!
//! Layers, one module each:
//! - [`ws`]: a lean WebSocket client (no buffers while idle), socket binding.
//! - [`session`]: one user's gateway session (identify, heartbeat, resume);
//!   [`hub`]: the worker's shared reader of ready sessions (one epoll set).
//! - [`rest`]: the REST calls a client makes, with 429/503 retries.
//! - [`worker`]: a worker process running thousands of sessions on one thread.
//! - [`wire`]: the JSON-lines protocol between coordinator and workers.
//! - [`fleet`]: the coordinator's handle on its workers; merging, sampling.
//! - [`scenario`]: connect, chat, broadcast, storm, capacity; [`slow`]: slow consumers;
//!   [`ingest`]: the write path at full speed; [`search`]: message search latency.
//! - [`report`]: JSON, Markdown and PNG output (`plot` redraws a report's
//!   PNGs); [`progress`]: live output; [`procfs`]: server RSS, CPU, socket queues.
//! - [`setup`]: builds a fixture through REST; [`fixture`]: its format.
//!
//! Invariants: the tool only talks to the addresses it is given, every phase
//! has a deadline, and it depends on no server crate (only `protocol`).

mod failover;
mod fixture;
mod fleet;
mod hub;
mod identify_floor;
mod ingest;
mod interactions;
mod procfs;
mod progress;
mod report;
mod rest;
mod scenario;
mod search;
mod session;
mod setup;
mod slow;
mod wire;
mod worker;
mod ws;

use clap::{Parser, Subcommand};

use crate::scenario::{RunArgs, Scenario};

#[derive(Parser)]
#[command(
    name = "throng-bench",
    version,
    about = "Load generator for Discord-API servers: real gateway sessions, REST messages, HDR latencies."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a fixture (users, guilds, memberships) through the REST API.
    Setup(setup::SetupArgs),
    /// Ramp to N identified idle sessions; connect/READY latency, server memory per session.
    Connect(RunArgs),
    /// Every user sends one message per --interval; e2e latency, loss, duplicates.
    Chat(RunArgs),
    /// Messages into one huge guild; time until the last member has each.
    Broadcast(RunArgs),
    /// Drop every session at once; time until all are RESUMED/READY again.
    Storm(RunArgs),
    /// Add users at the chat rate until failures or p99 exceed thresholds (top speed).
    Capacity(RunArgs),
    /// Slow consumers: K of N sessions in one guild stop reading while M messages
    /// are posted; readers' order and latency, stalled sessions' close and RESUME, server memory.
    Slow(RunArgs),
    /// The write path at full speed: users post as fast as the server accepts;
    /// reader sessions check every accepted message arrives once.
    Ingest(ingest::IngestArgs),
    /// Slash commands at full speed: people invoke, a trivial bot answers
    /// (type 4), readers receive; interactions/s and the latencies of both legs.
    Interactions(interactions::InteractionsArgs),
    /// Message search latency per query kind (a word, a rare word, a phrase,
    /// filtered queries) over the messages of a `throng seed --messages` fixture.
    Search(search::SearchArgs),
    /// Repeated kill -9 of cluster nodes under chat load through the
    /// balancer: write gaps of the dead node's guilds and time until its
    /// sessions are READY elsewhere (scripts/cluster.sh kills and restarts).
    Failover(failover::FailoverArgs),
    /// After an `ingest --kill-after` run and a restart: every acknowledged
    /// message is in history.
    HistoryCheck(ingest::HistoryCheckArgs),
    /// Draw the plots of report directories from their report.json (an older
    /// run's too) and link them from report.md (written if missing).
    Plot(PlotArgs),
    /// The floor under IDENTIFY: a bare gateway answering the fixture's
    /// users with a READY and GUILD_CREATEs of throng's sizes, nothing
    /// else (run `connect` against it).
    IdentifyFloor(identify_floor::FloorArgs),
    /// Internal: a worker process driven by the coordinator over stdin/stdout.
    #[command(hide = true)]
    Worker,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Worker => worker::main().map(|()| 0),
        Cmd::Setup(a) => runtime().and_then(|rt| rt.block_on(setup::run(a))).map(|()| 0),
        Cmd::Ingest(a) => runtime().and_then(|rt| rt.block_on(ingest::run(a))).map(|()| 0),
        Cmd::Interactions(a) => runtime().and_then(|rt| rt.block_on(interactions::run(a))).map(|()| 0),
        Cmd::Search(a) => runtime().and_then(|rt| rt.block_on(search::run(a))).map(|()| 0),
        Cmd::Failover(a) => runtime().and_then(|rt| rt.block_on(failover::run(a))).map(|()| 0),
        Cmd::HistoryCheck(a) => runtime().and_then(|rt| rt.block_on(ingest::history_check(a))).map(|()| 0),
        Cmd::Connect(a) => run(Scenario::Connect, a),
        Cmd::Chat(a) => run(Scenario::Chat, a),
        Cmd::Broadcast(a) => run(Scenario::Broadcast, a),
        Cmd::Storm(a) => run(Scenario::Storm, a),
        Cmd::Capacity(a) => run(Scenario::Capacity, a),
        Cmd::Slow(a) => run(Scenario::Slow, a),
        Cmd::Plot(a) => plot(a).map(|()| 0),
        Cmd::IdentifyFloor(a) => identify_floor::run(a).map(|()| 0),
    };
    match result {
        Ok(code) => std::process::ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("throng-bench: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

#[derive(clap::Args)]
struct PlotArgs {
    /// Report directories holding a report.json written by throng-bench (or
    /// the report.json files themselves).
    #[arg(required = true)]
    reports: Vec<std::path::PathBuf>,
    /// Where report.md and the PNGs go (default: the report's directory); one report only.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Write report.md anew from report.json instead of keeping its text and
    /// replacing only its plots section (an older report's text then takes
    /// today's form, with zeros for what that run did not measure).
    #[arg(long)]
    rewrite_md: bool,
}

fn plot(a: PlotArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    anyhow::ensure!(a.out.is_none() || a.reports.len() == 1, "--out takes one report");
    for given in &a.reports {
        let (json, dir) = if given.is_dir() {
            (given.join("report.json"), given.clone())
        } else {
            (given.clone(), given.parent().map(|p| p.to_path_buf()).unwrap_or_default())
        };
        let text = std::fs::read(&json).with_context(|| format!("reading {}", json.display()))?;
        let r: report::Results = serde_json::from_slice(&text).with_context(|| format!("parsing {}", json.display()))?;
        let out = a.out.clone().unwrap_or_else(|| dir.clone());
        if a.rewrite_md {
            report::redraw(&out, &r)?;
        } else {
            let keep = [out.join("report.md"), dir.join("report.md")].into_iter().find(|p| p.is_file());
            report::replot(&out, &r, keep.as_deref())?;
        }
        eprintln!("throng-bench: report.md and plots in {}", out.display());
    }
    Ok(())
}

fn run(kind: Scenario, a: RunArgs) -> anyhow::Result<i32> {
    worker::raise_nofile_limit();
    runtime()?.block_on(scenario::run(kind, a))
}
