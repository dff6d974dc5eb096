//! What the search index costs the write path, per message, for variants
//! of the FTS5 table (issue #29's ingest target).
//!
//! `cargo run --release -p store --example fts_insert -- [MESSAGES] [BATCH] [VARIANT...]`
//!
//! Each variant gets a fresh database in a temporary directory with the
//! writer's settings (WAL, `synchronous=NORMAL`, 16 MB cache) and
//! `MESSAGES` rows of 5-20 Zipf-distributed made-up words (as
//! `throng seed --messages` makes), inserted `BATCH` to a transaction into
//! a `messages` table like the store's and, but for `none`, the index. It
//! prints the microseconds of one thread per message, the index's share
//! being the difference from `none`, measured in the same run.
//! `FTS_KEEP=DIR` keeps each variant's database as `DIR/VARIANT.db`.

use std::time::Instant;

use rusqlite::{params, Connection};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn word(mut r: usize) -> String {
    const C: &[u8] = b"bdfgklmnprstvz";
    const V: &[u8] = b"aeiou";
    let n = C.len() * V.len();
    let mut len = 1;
    while r >= n.pow(len) {
        r -= n.pow(len);
        len += 1;
    }
    let mut w = String::new();
    for _ in 0..len {
        let s = r % n;
        w.push(C[s / V.len()] as char);
        w.push(V[s % V.len()] as char);
        r /= n;
    }
    w
}

const SCHEMA: &str = "CREATE TABLE messages (id INTEGER PRIMARY KEY, channel_id INTEGER NOT NULL, guild_id INTEGER, \
    author_id INTEGER NOT NULL, content TEXT NOT NULL, extra TEXT NOT NULL); \
    CREATE INDEX messages_channel ON messages (channel_id, id); \
    CREATE INDEX messages_guild ON messages (guild_id, id);";

fn variant(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    const BASE: &str = "CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2')";
    Some(match name {
        "none" => ("", &[]),
        "current" => (BASE, &[]),
        "no-delete" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', tokenize = 'unicode61 remove_diacritics 2')", &[]),
        "columnsize0" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', columnsize = 0, tokenize = 'unicode61 remove_diacritics 2')", &[]),
        "ascii" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', contentless_delete = 1, tokenize = 'ascii')", &[]),
        "automerge8" => (BASE, &["INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 8)"]),
        "automerge16" => (BASE, &["INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16)"]),
        "automerge16-crisis64" => (
            BASE,
            &[
                "INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16)",
                "INSERT INTO messages_fts (messages_fts, rank) VALUES ('crisismerge', 64)",
            ],
        ),
        "pgsz16k" => (BASE, &["INSERT INTO messages_fts (messages_fts, rank) VALUES ('pgsz', 16000)"]),
        "automerge0" => (BASE, &["INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 0)"]),
        "words-only" | "no-pairs" => (BASE, &[]),
        "detail-column" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', contentless_delete = 1, detail = column, tokenize = 'unicode61 remove_diacritics 2')", &[]),
        "detail-column-am8" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', contentless_delete = 1, detail = column, tokenize = 'unicode61 remove_diacritics 2')", &["INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 8)"]),
        "detail-none" => ("CREATE VIRTUAL TABLE messages_fts USING fts5(content, scope, content = '', contentless_delete = 1, detail = none, tokenize = 'unicode61 remove_diacritics 2')", &[]),
        _ => return None,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let total: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let batch: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(80);
    let names: Vec<&str> = if args.len() > 2 { args[2..].iter().map(String::as_str).collect() } else { vec!["none", "current"] };
    let words: Vec<String> = (0..5000).map(word).collect();
    let weights: Vec<f64> = (0..words.len()).map(|r| 1.0 / (r + 1) as f64).collect();
    let sum: f64 = weights.iter().sum();
    let mut acc = 0.0;
    let cdf: Vec<f64> = weights
        .iter()
        .map(|w| {
            acc += w / sum;
            acc
        })
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let guild = 1_000_000u64;
    let rows: Vec<(u64, u64, u64, String)> = (0..total)
        .map(|i| {
            let n = 5 + (rng.next() % 16) as usize;
            let text: Vec<&str> = (0..n)
                .map(|_| {
                    let u = rng.unit();
                    &words[cdf.partition_point(|c| *c < u).min(words.len() - 1)]
                })
                .map(String::as_str)
                .collect();
            let mut content = text.join(" ");
            if rng.next().is_multiple_of(20) {
                content.push_str(" https://example.com/x");
            }
            (10_000_000 + i as u64, guild + 1 + rng.next() % 10, 2_000_000 + rng.next() % 1000, content)
        })
        .collect();
    for name in names {
        let Some((ddl, setup)) = variant(name) else {
            eprintln!("unknown variant {name}");
            continue;
        };
        // `FTS_KEEP=DIR` keeps each variant's database as DIR/VARIANT.db
        // (for `fts_query`); otherwise a temporary directory's.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = match std::env::var("FTS_KEEP") {
            Ok(keep) => std::path::Path::new(&keep).join(format!("{name}.db")),
            Err(_) => dir.path().join("db"),
        };
        let conn = Connection::open(path).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.pragma_update(None, "cache_size", "-16000").unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        if !ddl.is_empty() {
            conn.execute_batch(ddl).unwrap();
        }
        for s in setup {
            conn.execute_batch(s).unwrap();
        }
        let start = Instant::now();
        let mut conn = conn;
        let mut slowest = 0f64;
        for chunk in rows.chunks(batch) {
            let t = Instant::now();
            let tx = conn.transaction().unwrap();
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO messages (id, channel_id, guild_id, author_id, content, extra) VALUES (?1, ?2, ?3, ?4, ?5, '{}')",
                    )
                    .unwrap();
                for (id, ch, author, content) in chunk {
                    insert.execute(params![*id as i64, *ch as i64, guild as i64, *author as i64, content]).unwrap();
                }
                if !ddl.is_empty() {
                    let mut index = tx.prepare_cached("INSERT INTO messages_fts (rowid, content, scope) VALUES (?1, ?2, ?3)").unwrap();
                    for (id, ch, author, content) in chunk {
                        let scope = match name {
                            "words-only" => String::new(),
                            "no-pairs" => format!("g{guild} c{ch} a{author}p{guild}"),
                            _ => store::scope_tokens(Some(guild), *ch, *author, content),
                        };
                        index.execute(params![*id as i64, content, scope]).unwrap();
                    }
                }
            }
            tx.commit().unwrap();
            slowest = slowest.max(t.elapsed().as_secs_f64() * 1e3);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / total as f64;
        println!("{name:12} {us:7.2} µs per message ({total} messages, {batch} a transaction; slowest transaction {slowest:.1} ms)");
    }
}
