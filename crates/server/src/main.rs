//! `throng`: the server binary. Thin glue over the `server` library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use server::{Config, Server};

#[derive(Parser)]
#[command(name = "throng", version, about = "A Discord-compatible real-time chat server")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Flags shared by every command that opens the data directory.
#[derive(clap::Args, Clone)]
struct Common {
    /// TOML configuration file (layered under THRONG_* env and these flags).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory holding the SQLite database.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// PostgreSQL instead of SQLite: postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long)]
    database: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the effective configuration (defaults, --config file, THRONG_*
    /// environment, --data-dir/--database) as TOML, secrets hidden.
    Config {
        #[command(flatten)]
        common: Common,
    },
    /// Run the server (REST + gateway on one port).
    Serve {
        #[command(flatten)]
        common: Common,
        /// Address to listen on, HOST:PORT.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Gateway URL handed to clients (default ws://<listen>).
        #[arg(long)]
        public_url: Option<String>,
        /// Enables /api/v10/_throng/admin/* hooks guarded by this token.
        #[arg(long)]
        admin_token: Option<String>,
        /// HELLO heartbeat interval in milliseconds.
        #[arg(long)]
        heartbeat_interval_ms: Option<u64>,
        /// How long a dropped session stays resumable, in milliseconds.
        #[arg(long)]
        resume_window_ms: Option<u64>,
        /// Share the port with other throng processes (SO_REUSEPORT).
        #[arg(long)]
        reuse_port: bool,
        /// Snowflake process id (0-31); give each process sharing a data dir its own.
        #[arg(long)]
        process_id: Option<u8>,
        /// Join a cluster that meets through this NATS server (nats://HOST:PORT).
        #[arg(long)]
        nats: Option<String>,
        /// This node's id in the cluster (unique per node).
        #[arg(long)]
        node_id: Option<u64>,
    },
    /// Bulk-create users, guilds and memberships in the store and write a
    /// fixture JSON with every token and id (for large guilds and load tests).
    Seed {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        users: usize,
        #[arg(long)]
        guilds: usize,
        #[arg(long, default_value_t = 5)]
        memberships_per_user: usize,
        /// Add one guild holding the first H users.
        #[arg(long, default_value_t = 0)]
        huge_guild_members: usize,
        #[arg(long, default_value_t = 1)]
        channels_per_guild: usize,
        /// Seed of the random membership assignment (reproducible fixtures).
        #[arg(long, default_value_t = 1)]
        rng_seed: u64,
        /// One-to-one guilds: users 1+2, 3+4, … share one guild of two each
        /// (then --guilds and --memberships-per-user are ignored).
        #[arg(long)]
        pairs: bool,
        /// Also a bot of this name (and its application), a member of every
        /// guild, in the fixture as `bot` (for `throng-bench interactions`).
        #[arg(long)]
        bot: Option<String>,
        /// Also N messages, all in one guild (the huge one with
        /// --huge-guild-members, else the first), spread over its channels
        /// and members, with the search benchmark's queries in the fixture
        /// (`throng-bench search`; see server::seed::messages).
        #[arg(long, default_value_t = 0)]
        messages: u64,
        /// Where to write the fixture JSON.
        #[arg(long)]
        out: PathBuf,
    },
    /// Manage bot accounts.
    Bot {
        #[command(subcommand)]
        cmd: BotCmd,
    },
}

#[derive(Subcommand)]
enum BotCmd {
    /// Create a bot user and application; prints its token as the last line.
    Create {
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

fn load(common: &Common) -> anyhow::Result<Config> {
    let mut c = Config::load(common.config.as_deref(), std::env::vars())?;
    if let Some(d) = &common.data_dir {
        c.data_dir = d.clone();
    }
    if common.database.is_some() {
        c.database = common.database.clone();
    }
    Ok(c)
}

/// Logs on stderr, in the configured format (`log_format`, or
/// `THRONG_LOG_FORMAT=json`); a configuration that does not load is
/// reported by the command itself, with text logs.
fn init_logs(cmd: &Cmd) {
    let common = match cmd {
        Cmd::Config { common } | Cmd::Serve { common, .. } | Cmd::Seed { common, .. } => common,
        Cmd::Bot { cmd: BotCmd::Create { common, .. } } => common,
    };
    let format = load(common).map(|c| c.log_format).unwrap_or_default();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr);
    match format {
        server::config::LogFormat::Json => logs.json().with_current_span(false).init(),
        server::config::LogFormat::Text => logs.init(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logs(&cli.cmd);
    match cli.cmd {
        Cmd::Config { common } => {
            let c = load(&common)?;
            c.validate()?;
            print!("{}", c.to_toml());
        }
        Cmd::Serve {
            common,
            listen,
            public_url,
            admin_token,
            heartbeat_interval_ms,
            resume_window_ms,
            reuse_port,
            process_id,
            nats,
            node_id,
        } => {
            let mut c = load(&common)?;
            if nats.is_some() {
                c.nats = nats;
            }
            if let Some(n) = node_id {
                c.node_id = n;
            }
            if let Some(l) = listen {
                c.listen = l;
            }
            if public_url.is_some() {
                c.public_url = public_url;
            }
            if admin_token.is_some() {
                c.admin_token = admin_token;
            }
            if let Some(h) = heartbeat_interval_ms {
                c.gateway.heartbeat_interval_ms = h;
            }
            if let Some(r) = resume_window_ms {
                c.gateway.resume_window_ms = r;
            }
            if let Some(p) = process_id {
                c.process_id = p;
            }
            c.reuse_port |= reuse_port;
            let server = Server::start(c).await?;
            tracing::info!(addr = %server.addr, gateway = %server.node.config.gateway_url(), "throng listening");
            shutdown_signal().await;
            tracing::info!("shutting down: sending RECONNECT to sessions");
            server.shutdown().await;
        }
        Cmd::Seed {
            common,
            users,
            guilds,
            memberships_per_user,
            huge_guild_members,
            channels_per_guild,
            rng_seed,
            pairs,
            bot,
            messages,
            out,
        } => {
            if guilds == 0 && huge_guild_members == 0 && !pairs {
                anyhow::bail!("--guilds must be at least 1 (or give --huge-guild-members)");
            }
            let c = load(&common)?;
            let started = std::time::Instant::now();
            let spec =
                server::seed::SeedSpec { users, guilds, memberships_per_user, huge_guild_members, channels_per_guild, rng_seed, pairs };
            let ids = protocol::SnowflakeGen::new(c.worker_id, 30);
            let (rows, mut fixture) = server::seed::build(&spec, &ids);
            let memberships: usize = rows.guilds.iter().map(|g| g.members.len()).sum();
            c.validate()?;
            let store = server::open_store(&c).await.context("opening the store")?;
            store.bulk_load(&rows).await.context("bulk insert")?;
            if let Some(name) = bot {
                let (user, token) = server::auth::create_bot(&store, &ids, &name).await.context("creating the bot")?;
                for g in &rows.guilds {
                    let m = store::MemberRecord::joined(g.guild.id, user.id, node::auth::now_ms());
                    store.add_member(&m).await.context("adding the bot")?;
                }
                fixture.bot = Some(server::seed::FixtureBot { id: user.id, token, application_id: user.id });
            }
            if messages > 0 {
                let g = fixture.guilds.iter().find(|g| g.huge).or(fixture.guilds.first()).context("no guild for the messages")?;
                anyhow::ensure!(!g.member_ids.is_empty(), "the messages' guild {} has no members", g.id);
                let mut gen = server::seed::messages::MessageGen::new(
                    g.id,
                    g.channel_ids.clone(),
                    g.member_ids.clone(),
                    messages,
                    node::auth::now_ms(),
                    c.worker_id,
                    rng_seed,
                );
                let began = std::time::Instant::now();
                let mut shown = 0;
                let search = server::seed::messages::load(&*store, &mut gen, |n| {
                    if n >= shown + 1_000_000 || n == messages {
                        shown = n;
                        let s = began.elapsed().as_secs_f64();
                        eprintln!("{n} messages in {s:.0} s ({:.0}/s)", n as f64 / s);
                    }
                })
                .await
                .context("inserting messages")?;
                println!("seeded {messages} messages in {:.1} s", began.elapsed().as_secs_f64());
                if c.database.is_none() {
                    // As a server's idle merging would leave the index.
                    let began = std::time::Instant::now();
                    let dir = c.data_dir.clone();
                    tokio::task::spawn_blocking(move || store::sqlite::merge_search_index(&dir)).await??;
                    println!("search index merged and checkpointed in {:.1} s", began.elapsed().as_secs_f64());
                }
                fixture.search = Some(search);
            }
            let file = std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
            serde_json::to_writer(std::io::BufWriter::new(file), &fixture).context("writing the fixture")?;
            println!(
                "seeded {} users, {} guilds, {memberships} memberships in {:.1} s; fixture: {}",
                rows.users.len(),
                rows.guilds.len(),
                started.elapsed().as_secs_f64(),
                out.display()
            );
        }
        Cmd::Bot { cmd: BotCmd::Create { name, common } } => {
            let c = load(&common)?;
            c.validate()?;
            let store = server::open_store(&c).await.context("opening the store")?;
            // Offline tools use process id 31 so their ids never collide with a running node's.
            let ids = protocol::SnowflakeGen::new(c.worker_id, 31);
            let (user, token) = server::auth::create_bot(&store, &ids, &name).await?;
            println!("bot user id: {}", user.id);
            println!("{token}");
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "no SIGTERM handler; Ctrl-C only");
                if let Err(e) = ctrl_c.await {
                    tracing::error!(error = %e, "waiting for Ctrl-C failed");
                }
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    if let Err(e) = ctrl_c.await {
        tracing::error!(error = %e, "waiting for Ctrl-C failed");
    }
}

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc options, read once at start (`_RJEM_MALLOC_CONF` in the
/// environment still overrides them). Without a background thread jemalloc
/// returns freed pages only while the program allocates, so an idle server
/// kept the identify ramp's transient buffers resident: 152 MB resident for
/// 89 MB allocated at 19,000 idle sessions. The background thread purges
/// dirty pages after `dirty_decay_ms` even when nothing allocates. 250 ms
/// rather than 2 s: in a reconnect storm of 100,000 sessions over 6 nodes
/// the freed handshake and resume buffers stayed resident long enough to
/// put the peak at 1.65-1.66x the steady RSS; with 250 ms it was
/// 1.45-1.49x (docs/benchmarks.md), at about the same CPU.
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8; 42] = b"background_thread:true,dirty_decay_ms:250\0";
