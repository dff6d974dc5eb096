//! Times a cold start's guild loads against a seeded data directory: every
//! guild at once, one `load_guilds` call per BATCH guilds (BATCH 1 is the
//! one-by-one path).
//!
//!   throng seed --data-dir /tmp/d --users 19000 --guilds 1000 --memberships-per-user 5 --out /tmp/d/f.json
//!   cargo run --release -p store --example load_guilds -- /tmp/d 64

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use protocol::GuildId;
use store::sqlite::{SqliteOptions, SqliteStore};
use store::Store;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: load_guilds DATA_DIR [BATCH]");
    let batch: usize = args.next().map_or(64, |b| b.parse().expect("BATCH is a number")).max(1);
    let s = SqliteStore::open(Path::new(&dir), &SqliteOptions::default()).await.expect("open the data directory");
    let ids: Vec<(i64,)> = sqlx::query_as("SELECT id FROM guilds").fetch_all(s.writer()).await.expect("list guilds");
    let ids: Vec<GuildId> = ids.into_iter().map(|(id,)| GuildId(id as u64)).collect();
    let s: Arc<dyn Store> = Arc::new(s);
    for round in 1..=3 {
        let t = Instant::now();
        let mut loads = tokio::task::JoinSet::new();
        for chunk in ids.chunks(batch) {
            let (s, chunk) = (s.clone(), chunk.to_vec());
            loads.spawn(async move { s.load_guilds(&chunk).await.expect("load").iter().map(|g| g.members.len()).sum::<usize>() });
        }
        let mut members = 0;
        while let Some(n) = loads.join_next().await {
            members += n.expect("load task");
        }
        println!("round {round}: {} guilds, {members} members, batch {batch}: {:?}", ids.len(), t.elapsed());
    }
}
