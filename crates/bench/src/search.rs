//! `search`: message search latency. Reads the queries `throng seed
//! --messages N` wrote into the fixture (`"search": {"guild_id",
//! "messages", "queries": [{"kind", "params", "expected"}]}`) and sends
//! them as the guild's members in turn (no one user's rate limit binds) to
//! `GET /guilds/{id}/messages/search`,
//! kind after kind: each kind's variants in turn, `--concurrency` requests
//! in flight (1: pure latency, one after another).
//!
//! Per kind: the first answer of each variant (cold: nothing of it cached
//! yet, unless an earlier kind read the same pages), then `--warmup`
//! unmeasured requests, then `--requests` measured ones: p50/p99/max, requests/s,
//! server CPU per request (with `--server-pid`). Every answer's
//! `total_results` must be what the seeder counted for that query, or
//! `--count-max` when it counted more (the server's `search.count_max`;
//! the queries ask for the first page), and more than 0: otherwise the run
//! fails. A floor first: `GET /users/@me`
//! through the same client, the cost of a request that reads nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::procfs;

#[derive(clap::Args, Clone, Debug)]
pub struct SearchArgs {
    /// Server HTTP base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Fixture JSON from `throng seed --messages N`.
    #[arg(long)]
    pub fixture: PathBuf,
    /// Measured requests per query kind.
    #[arg(long, default_value_t = 200)]
    pub requests: u64,
    /// Unmeasured requests per kind first (after the cold pass).
    #[arg(long, default_value_t = 40)]
    pub warmup: u64,
    /// Requests in flight at once (1: one after another).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// A kind's warm-up stops after this long even if short of --warmup.
    #[arg(long, default_value = "20s", value_parser = crate::scenario::parse_duration)]
    pub max_warmup: Duration,
    /// A kind's measured phase stops after this long even if short of --requests.
    #[arg(long, default_value = "60s", value_parser = crate::scenario::parse_duration)]
    pub max_per_kind: Duration,
    /// The server's `search.count_max`: `total_results` stops there.
    #[arg(long, default_value_t = 1_000)]
    pub count_max: u64,
    /// Only these kinds (repeat; default: all the fixture has).
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    /// Server process ids, for CPU per request.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// Report directory (report.json and report.md).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Fixture {
    users: Vec<User>,
    search: Option<SearchFixture>,
    guilds: Vec<Guild>,
}

#[derive(Deserialize)]
struct User {
    id: String,
    token: String,
}

#[derive(Deserialize)]
struct Guild {
    id: String,
    member_ids: Vec<String>,
}

#[derive(Deserialize)]
struct SearchFixture {
    guild_id: String,
    messages: u64,
    queries: Vec<Query>,
}

#[derive(Deserialize, Clone)]
struct Query {
    kind: String,
    params: BTreeMap<String, String>,
    expected: u64,
}

#[derive(Serialize, Debug)]
pub struct KindRes {
    pub kind: String,
    /// One variant's parameters, as an example.
    pub example: BTreeMap<String, String>,
    pub variants: usize,
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub requests_per_s: f64,
    /// The first answer of each variant: median and max.
    pub cold_p50_ms: f64,
    pub cold_max_ms: f64,
    /// total_results of the variants' answers (search kinds).
    pub total_results_min: u64,
    pub total_results_max: u64,
    pub server_cpu_ms_per_request: Option<f64>,
    /// p50 and p99 over the floor's.
    pub p50_over_floor: f64,
    pub p99_over_floor: f64,
}

#[derive(Serialize, Debug)]
pub struct SearchRes {
    pub server: String,
    pub guild_id: String,
    pub messages: u64,
    pub concurrency: usize,
    pub requests_per_kind: u64,
    pub warmup_per_kind: u64,
    pub kinds: Vec<KindRes>,
    /// total_results that differed from the seeder's count: "kind: params → got, expected".
    pub mismatches: Vec<String>,
}

/// One request's outcome: latency in µs, total_results (search), or an error.
type Answer = Result<(u64, Option<u64>), String>;

/// One request; a 429 (a user's rate limit) waits its `retry_after` and
/// tries again, unmeasured.
async fn send(http: &reqwest::Client, url: &str, token: &str, params: &BTreeMap<String, String>) -> Answer {
    let (started, status, body) = loop {
        let started = Instant::now();
        let resp = http.get(url).header("Authorization", token).query(params).send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| e.to_string())?;
        if status != reqwest::StatusCode::TOO_MANY_REQUESTS {
            break (started, status, body);
        }
        let wait = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["retry_after"].as_f64()).unwrap_or(1.0);
        tokio::time::sleep(Duration::from_secs_f64(wait.min(10.0))).await;
    };
    let us = started.elapsed().as_micros() as u64;
    if !status.is_success() {
        return Err(format!("{status} {}", String::from_utf8_lossy(&body[..body.len().min(300)])));
    }
    let total = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["total_results"].as_u64());
    Ok((us.max(1), total))
}

struct Phase {
    hist: Histogram<u64>,
    errors: u64,
    answers: Vec<(usize, Option<u64>)>,
    elapsed: f64,
    first_error: Option<String>,
}

/// `n` requests (stopping at `deadline`), request k with variant k % len
/// as member k % members,
/// `concurrency` at once.
async fn phase(
    http: &reqwest::Client,
    url: &str,
    tokens: &[String],
    variants: &[BTreeMap<String, String>],
    n: u64,
    concurrency: usize,
    deadline: Duration,
) -> anyhow::Result<Phase> {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (http, url, tokens, variants, next) = (http.clone(), url.to_owned(), tokens.to_vec(), variants.to_vec(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut got: Vec<(usize, Answer)> = Vec::new();
            loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if k >= n || started.elapsed() > deadline {
                    return got;
                }
                let v = k as usize % variants.len();
                // Each request as the next member: no user's rate limit binds.
                let token = &tokens[k as usize % tokens.len()];
                got.push((v, send(&http, &url, token, &variants[v]).await));
            }
        }));
    }
    let mut p =
        Phase { hist: Histogram::new_with_bounds(1, 120_000_000, 3)?, errors: 0, answers: Vec::new(), elapsed: 0.0, first_error: None };
    for t in tasks {
        for (v, a) in t.await? {
            match a {
                Ok((us, total)) => {
                    p.hist.record(us.min(120_000_000))?;
                    p.answers.push((v, total));
                }
                Err(e) => {
                    p.errors += 1;
                    p.first_error.get_or_insert(e);
                }
            }
        }
    }
    p.elapsed = started.elapsed().as_secs_f64();
    Ok(p)
}

pub async fn run(a: SearchArgs) -> anyhow::Result<()> {
    let text = std::fs::read(&a.fixture).with_context(|| format!("reading {}", a.fixture.display()))?;
    let f: Fixture = serde_json::from_slice(&text).with_context(|| format!("parsing {}", a.fixture.display()))?;
    let Some(search) = f.search else { bail!("the fixture has no \"search\" (seed it with `throng seed --messages N`)") };
    let guild = f.guilds.iter().find(|g| g.id == search.guild_id).context("the search guild is not in the fixture")?;
    let members: std::collections::HashSet<&String> = guild.member_ids.iter().collect();
    let tokens: Vec<String> = f.users.iter().filter(|u| members.contains(&u.id)).map(|u| u.token.clone()).collect();
    if tokens.is_empty() {
        bail!("no fixture user is a member of the search guild");
    }
    let mut kinds: Vec<String> = Vec::new();
    for q in &search.queries {
        if !kinds.contains(&q.kind) && (a.kinds.is_empty() || a.kinds.contains(&q.kind)) {
            kinds.push(q.kind.clone());
        }
    }
    if kinds.is_empty() {
        bail!("no query of the kinds asked for in the fixture");
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(a.concurrency.max(1))
        .pool_idle_timeout(Duration::from_secs(20))
        .timeout(Duration::from_secs(120))
        .tcp_nodelay(true)
        .build()?;
    let base = format!("{}/api/v10", a.server.trim_end_matches('/'));
    let search_url = format!("{base}/guilds/{}/messages/search", search.guild_id);
    let me_url = format!("{base}/users/@me");
    let mut runs: Vec<(String, String, Vec<Query>)> =
        vec![("floor".into(), me_url, vec![Query { kind: "floor".into(), params: BTreeMap::new(), expected: 0 }])];
    for k in &kinds {
        runs.push((k.clone(), search_url.clone(), search.queries.iter().filter(|q| &q.kind == k).cloned().collect()));
    }
    let mut res = SearchRes {
        server: a.server.clone(),
        guild_id: search.guild_id.clone(),
        messages: search.messages,
        concurrency: a.concurrency,
        requests_per_kind: a.requests,
        warmup_per_kind: a.warmup,
        kinds: Vec::new(),
        mismatches: Vec::new(),
    };
    let mut failures = Vec::new();
    for (kind, url, queries) in runs {
        let variants: Vec<BTreeMap<String, String>> = queries.iter().map(|q| q.params.clone()).collect();
        let is_search = kind != "floor";
        // Cold: each variant once, one at a time.
        let cold = phase(&http, &url, &tokens, &variants, variants.len() as u64, 1, Duration::from_secs(600)).await?;
        let warm = phase(&http, &url, &tokens, &variants, a.warmup, a.concurrency, a.max_warmup).await?;
        let cpu_before = (!a.server_pids.is_empty()).then(|| procfs::sample_sum(&a.server_pids).1);
        let p = phase(&http, &url, &tokens, &variants, a.requests, a.concurrency, a.max_per_kind).await?;
        let cpu = cpu_before.map(|b| procfs::sample_sum(&a.server_pids).1 - b);
        let errors = cold.errors + warm.errors + p.errors;
        if let Some(e) = cold.first_error.or(warm.first_error).or(p.first_error) {
            failures.push(format!("{kind}: {errors} errors, first: {e}"));
        }
        let mut totals: Vec<u64> = Vec::new();
        if is_search {
            for (v, total) in cold.answers.iter().chain(&warm.answers).chain(&p.answers) {
                let q = &queries[*v];
                let got = total.unwrap_or(0);
                totals.push(got);
                if got != q.expected.min(a.count_max) {
                    let line = format!("{kind}: {:?} → total_results {got}, seeded {} (count max {})", q.params, q.expected, a.count_max);
                    if !res.mismatches.contains(&line) {
                        res.mismatches.push(line);
                    }
                }
                if got == 0 {
                    failures.push(format!("{kind}: {:?} found nothing", q.params));
                }
            }
        }
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let n = p.hist.len();
        let (floor50, floor99) = res.kinds.first().map_or((0.0, 0.0), |f: &KindRes| (f.p50_ms, f.p99_ms));
        let r = KindRes {
            kind: kind.clone(),
            example: variants[0].clone(),
            variants: variants.len(),
            requests: n,
            errors,
            p50_ms: ms(&p.hist, 0.5),
            p90_ms: ms(&p.hist, 0.9),
            p99_ms: ms(&p.hist, 0.99),
            max_ms: p.hist.max() as f64 / 1000.0,
            mean_ms: p.hist.mean() / 1000.0,
            requests_per_s: n as f64 / p.elapsed.max(1e-9),
            cold_p50_ms: ms(&cold.hist, 0.5),
            cold_max_ms: cold.hist.max() as f64 / 1000.0,
            total_results_min: totals.iter().copied().min().unwrap_or(0),
            total_results_max: totals.iter().copied().max().unwrap_or(0),
            server_cpu_ms_per_request: cpu.filter(|_| n > 0).map(|c| c * 1e3 / n as f64),
            p50_over_floor: if floor50 > 0.0 { ms(&p.hist, 0.5) / floor50 } else { 1.0 },
            p99_over_floor: if floor99 > 0.0 { ms(&p.hist, 0.99) / floor99 } else { 1.0 },
        };
        eprintln!(
            "{kind}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, {:.1} req/s, cold p50 {:.1} ms max {:.1} ms, total_results {}..{} ({} requests, {} errors)",
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.requests_per_s,
            r.cold_p50_ms,
            r.cold_max_ms,
            r.total_results_min,
            r.total_results_max,
            r.requests,
            r.errors
        );
        res.kinds.push(r);
    }
    let md = markdown(&res, &a);
    println!("{md}");
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&res)?)?;
        std::fs::write(dir.join("report.md"), &md)?;
    }
    if !res.mismatches.is_empty() {
        failures.push(format!("{} queries' total_results differ from the seeded counts", res.mismatches.len()));
    }
    if !failures.is_empty() {
        failures.dedup();
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

fn markdown(r: &SearchRes, a: &SearchArgs) -> String {
    let mut s = format!(
        "# search\n\n{} messages in guild {} on {}; {} measured requests per kind after {} of warm-up, {} in flight.\n\n\
         | kind | example | p50 ms | p90 ms | p99 ms | max ms | req/s | p50 / floor | p99 / floor | cold p50 ms | cold max ms | total_results | server CPU ms/req |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        r.messages, r.guild_id, r.server, r.requests_per_kind, r.warmup_per_kind, r.concurrency
    );
    for k in &r.kinds {
        let example: Vec<String> = k.example.iter().map(|(p, v)| format!("{p}={v}")).collect();
        let totals = if k.kind == "floor" {
            "—".to_string()
        } else if k.total_results_min == k.total_results_max {
            k.total_results_min.to_string()
        } else {
            format!("{}–{}", k.total_results_min, k.total_results_max)
        };
        s += &format!(
            "| {} | `{}` | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |\n",
            k.kind,
            example.join("&"),
            k.p50_ms,
            k.p90_ms,
            k.p99_ms,
            k.max_ms,
            k.requests_per_s,
            k.p50_over_floor,
            k.p99_over_floor,
            k.cold_p50_ms,
            k.cold_max_ms,
            totals,
            k.server_cpu_ms_per_request.map_or("n/a".into(), |c| format!("{c:.2}")),
        );
    }
    s += "\nEach kind cycles through its variants (the same shape, other words or ids); total_results is the range over them, \
          each checked against the seeder's own count.\n";
    if !r.mismatches.is_empty() {
        s += "\nMismatches:\n\n";
        for m in &r.mismatches {
            s += &format!("- {m}\n");
        }
    }
    s += &format!("\nArguments: `{a:?}`\n");
    s
}
