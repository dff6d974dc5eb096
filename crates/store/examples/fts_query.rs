//! Times one SQLite search query, as the store runs it, on a data
//! directory (issue #29's measurements).
//!
//! `cargo run --release -p store --example fts_query -- DB 'MATCH' [RUNS]`
//! prints the p50 and p99 of the capped count and of the newest 25.
//! `... -- DB --optimize` merges the index into one segment first.

use std::time::Instant;

use rusqlite::{Connection, OpenFlags};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let db = &args[0];
    if args[1] == "--optimize" || args[1].starts_with("--merge") {
        let conn = Connection::open(db).expect("open");
        let t = Instant::now();
        if args[1] == "--optimize" {
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')", []).expect("optimize");
        } else {
            let n: i64 = args[2].parse().expect("pages");
            conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('merge', ?1)", [n]).expect("merge");
        }
        println!("{} in {:.1} ms", args[1], t.elapsed().as_secs_f64() * 1e3);
        let segs: i64 = conn.query_row("SELECT count(DISTINCT segid) FROM messages_fts_idx", [], |r| r.get(0)).expect("segments");
        println!("{segs} segments");
        return;
    }
    let expr = &args[1];
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    // A 4 MB page cache (the server's IDENTIFY lookups'; its readers have
    // 16 MB) and no mapping unless told (`FTS_CACHE_KIB`, `FTS_MMAP`).
    let cache = std::env::var("FTS_CACHE_KIB").unwrap_or_else(|_| "4000".into());
    conn.pragma_update(None, "cache_size", format!("-{cache}")).expect("cache");
    if let Ok(mmap) = std::env::var("FTS_MMAP") {
        conn.pragma_update(None, "mmap_size", mmap).expect("mmap");
    }
    let count_sql = "SELECT COUNT(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?1 LIMIT 1001)";
    let page_sql = "SELECT m.id, m.content FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE f.messages_fts MATCH ?1 ORDER BY f.rowid DESC LIMIT 25";
    for (name, sql) in [("count", count_sql), ("page", page_sql)] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..runs + 5 {
            let t = Instant::now();
            rows = stmt.query_map([expr], |r| r.get::<_, i64>(0)).expect("query").count();
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut times = times.split_off(5);
        times.sort_by(f64::total_cmp);
        let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!("{name:5} p50 {:7.2} ms  p99 {:7.2} ms  ({rows} rows)", p(0.5), p(0.99));
    }
}
