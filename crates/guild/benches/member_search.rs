//! Member search by name prefix in a 1,000,000-member guild
//! (`guild::names::Names`, what op 8's `query` and
//! `GET /guilds/{g}/members/search` use): the index's build time and heap,
//! and the latency of single searches.
//!
//! Members have random 4-11 letter usernames; 30% a global name, 10% a
//! nickname. Each search is a random 1-4 letter prefix, timed on its own
//! with `Instant` (the timer's own cost is printed and included), at
//! limit 100 (op 8's largest) and limit 1 (REST's default).
//!
//! Run: `cargo bench -p guild --bench member_search` (`--n=100000` for
//! another size).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use guild::names::Names;
use protocol::{GuildId, UserId};
use store::{MemberRecord, UserRecord};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `System`, only adding bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// xorshift64*: reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn word(&mut self, min: u64, max: u64) -> String {
        let len = min + self.below(max - min + 1);
        (0..len).map(|_| (b'a' + self.below(26) as u8) as char).collect()
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let n: u64 = std::env::args().find_map(|a| a.strip_prefix("--n=").and_then(|v| v.parse().ok())).unwrap_or(1_000_000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let members: Vec<(MemberRecord, UserRecord)> = (1..=n)
        .map(|id| {
            let user = UserRecord {
                id: UserId(id),
                username: rng.word(4, 11),
                global_name: (rng.below(10) < 3).then(|| rng.word(3, 10)),
                avatar: None,
                bot: false,
                flags: 0,
                created_at: 0,
            };
            let nick = (rng.below(10) == 0).then(|| rng.word(3, 10));
            (MemberRecord { nick, ..MemberRecord::joined(GuildId(1), UserId(id), 0) }, user)
        })
        .collect();
    let before = LIVE.load(Ordering::Relaxed);
    let t = Instant::now();
    let names = Names::build(members.iter().map(|(m, u)| (m, u)));
    let build = t.elapsed();
    let heap = LIVE.load(Ordering::Relaxed) - before;
    println!(
        "members: {n}; index built in {:.0} ms; heap {:.1} MB ({:.0} B per member)",
        build.as_secs_f64() * 1e3,
        heap as f64 / 1e6,
        heap as f64 / n as f64
    );

    let mut timer = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let t = Instant::now();
        timer.push(t.elapsed().as_nanos() as u64);
    }
    timer.sort_unstable();
    println!("timer overhead: p50 {} ns", percentile(&timer, 0.5));
    for limit in [100usize, 1] {
        let mut ns = Vec::with_capacity(20_000);
        let mut found = 0usize;
        for _ in 0..20_000 {
            let q = rng.word(1, 4);
            let t = Instant::now();
            let hits = black_box(names.search(black_box(&q), limit));
            ns.push(t.elapsed().as_nanos() as u64);
            found += hits.len();
        }
        ns.sort_unstable();
        println!(
            "search, limit {limit}: p50 {:.1} us, p99 {:.1} us, max {:.1} us ({:.1} hits on average)",
            percentile(&ns, 0.5) as f64 / 1e3,
            percentile(&ns, 0.99) as f64 / 1e3,
            *ns.last().unwrap() as f64 / 1e3,
            found as f64 / 20_000.0
        );
    }
}
