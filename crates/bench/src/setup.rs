//! `throng-bench setup`: builds a fixture through the public REST API, so it
//! works against any server that speaks it (and times the slow parts).
//!
//! Users register (argon2 on the server: slow and bounded, so concurrency is
//! small and 429/503 are retried), guild `g` is owned by user `g % N`, and
//! user `u` joins guilds `(u*K + j) % G` for `j < K` through invites. An
//! optional huge guild holds the first H users (for `broadcast`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::fixture::{Fixture, FixtureGuild, FixtureUser};
use crate::rest::Rest;

#[derive(Clone, Debug, clap::Args)]
pub struct SetupArgs {
    /// Server HTTP base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    #[arg(long)]
    pub users: usize,
    #[arg(long, default_value_t = 10)]
    pub guilds: usize,
    /// Guilds each user joins (besides the ones it owns).
    #[arg(long, default_value_t = 1)]
    pub memberships_per_user: usize,
    /// Also create one guild holding the first H users.
    #[arg(long, default_value_t = 0)]
    pub huge_guild_members: usize,
    /// Concurrent registrations (each costs the server an argon2 hash; throng
    /// hashes 2 at a time and answers 503 beyond).
    #[arg(long, default_value_t = 2)]
    pub register_concurrency: usize,
    /// Concurrent joins and guild creations.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Username prefix; a random suffix keeps reruns on one server apart.
    #[arg(long, default_value = "tb")]
    pub prefix: String,
    #[arg(long)]
    pub out: std::path::PathBuf,
}

pub async fn run(a: SetupArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.users > 0, "--users must be at least 1");
    anyhow::ensure!(a.memberships_per_user <= a.guilds, "--memberships-per-user must not exceed --guilds");
    let rest = Rest::new(&a.server, a.concurrency.max(a.register_concurrency))?;
    let run_tag: u32 = rand::random::<u32>() % 1_000_000;
    let t0 = Instant::now();

    // 1. Users.
    let sem = Arc::new(Semaphore::new(a.register_concurrency.max(1)));
    let mut set = JoinSet::new();
    for i in 0..a.users {
        let (rest, sem) = (rest.clone(), sem.clone());
        let name = format!("{}{run_tag}_{i}", a.prefix);
        set.spawn(async move {
            let _permit = sem.acquire().await.expect("semaphore never closed");
            rest.register(&name, "benchmark-password-1").await.map(|(id, token)| (i, FixtureUser { id, token }))
        });
    }
    let mut users: Vec<Option<FixtureUser>> = vec![None; a.users];
    let mut done = 0;
    while let Some(r) = set.join_next().await {
        let (i, u) = r.context("register task")??;
        users[i] = Some(u);
        done += 1;
        if done % 500 == 0 {
            eprintln!("setup: {done}/{} users registered ({:.1} s)", a.users, t0.elapsed().as_secs_f64());
        }
    }
    let users: Vec<FixtureUser> = users.into_iter().map(|u| u.expect("every index filled")).collect();
    let t_users = t0.elapsed();
    eprintln!("setup: {} users in {:.1} s", users.len(), t_users.as_secs_f64());

    // 2. Guilds and invites (owner g % N). The huge guild, if any, is last.
    let n_guilds = a.guilds + usize::from(a.huge_guild_members > 0);
    let sem = Arc::new(Semaphore::new(a.concurrency.max(1)));
    let mut set = JoinSet::new();
    for g in 0..n_guilds {
        let (rest, sem) = (rest.clone(), sem.clone());
        let owner = users[g % users.len()].clone();
        set.spawn(async move {
            let _permit = sem.acquire().await.expect("semaphore never closed");
            let (id, channels) = rest.create_guild(&owner.token, &format!("bench guild {g}")).await?;
            let code = rest.create_invite(&owner.token, &channels[0]).await?;
            anyhow::Ok((g, id, channels, code))
        });
    }
    let mut guilds: Vec<Option<(FixtureGuild, String)>> = vec![None; n_guilds];
    while let Some(r) = set.join_next().await {
        let (g, id, channel_ids, code) = r.context("guild task")??;
        let owner = users[g % users.len()].id.clone();
        guilds[g] = Some((FixtureGuild { id, channel_ids, member_ids: vec![owner] }, code));
    }
    let mut guilds: Vec<(FixtureGuild, String)> = guilds.into_iter().map(|g| g.expect("every index filled")).collect();

    // 3. Memberships.
    let mut joins: Vec<(usize, usize)> = Vec::new();
    for u in 0..users.len() {
        for j in 0..a.memberships_per_user {
            let g = (u * a.memberships_per_user + j) % a.guilds;
            if g % users.len() != u {
                joins.push((u, g));
            }
        }
    }
    if a.huge_guild_members > 0 {
        let g = n_guilds - 1;
        for u in 0..a.huge_guild_members.min(users.len()) {
            if g % users.len() != u {
                joins.push((u, g));
            }
        }
    }
    let mut set = JoinSet::new();
    for &(u, g) in &joins {
        let (rest, sem) = (rest.clone(), sem.clone());
        let token = users[u].token.clone();
        let code = guilds[g].1.clone();
        set.spawn(async move {
            let _permit = sem.acquire().await.expect("semaphore never closed");
            rest.join(&token, &code).await.map(|()| (u, g))
        });
    }
    let mut done = 0;
    while let Some(r) = set.join_next().await {
        let (u, g) = r.context("join task")??;
        guilds[g].0.member_ids.push(users[u].id.clone());
        done += 1;
        if done % 2000 == 0 {
            eprintln!("setup: {done}/{} joins ({:.1} s)", joins.len(), t0.elapsed().as_secs_f64());
        }
    }
    let fixture = Fixture { users, guilds: guilds.into_iter().map(|(g, _)| g).collect() };
    fixture.save(&a.out)?;
    eprintln!(
        "setup: wrote {} ({} users, {} guilds, {} joins) in {:.1} s (registration {:.1} s, {:.1} ms/user)",
        a.out.display(),
        fixture.users.len(),
        fixture.guilds.len(),
        joins.len(),
        t0.elapsed().as_secs_f64(),
        t_users.as_secs_f64(),
        t_users.as_secs_f64() * 1000.0 / fixture.users.len() as f64
    );
    Ok(())
}
