//! Per-operation latency distribution (median, p99) and memory per entry,
//! for our `SortedSet` and for `indexset`, with u64 and 24-byte keys.
//!
//! Method: each operation is timed on its own with `std::time::Instant`
//! (`clock_gettime(CLOCK_MONOTONIC)` through the vDSO). The cost of an empty
//! `Instant::now()` / `elapsed()` pair is measured the same way and printed
//! as "timer overhead"; it is *included* in every figure below (not
//! subtracted), so the figures are upper bounds. Mutating ops are undone
//! untimed right after (insert -> remove the key, remove -> re-insert), so
//! the set stays at its nominal size; each timed op hits a new random
//! position except front/back inserts, which by nature hit the same path.
//!
//! Memory: a counting global allocator; "bytes/entry" is the live heap
//! growth while building the set, divided by the number of keys (the key
//! itself included).
//!
//! Run: `cargo bench -p sorted-set --bench latency` (add `-- --quick` for
//! fewer samples, `--ours` to skip indexset, `--n=1000000` for one size).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

mod common;
use common::{build, keys, rng, BenchKey, IndexedSet, Key24, SIZES};

/// Counts live heap bytes.
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
static GLOBAL: Counting = Counting;

fn percentiles(samples: &mut [u32]) -> (f64, f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| f64::from(samples[((samples.len() - 1) as f64 * q) as usize]) / 1000.0;
    (at(0.5), at(0.99), at(0.999))
}

fn timer_overhead_ns() -> f64 {
    let mut s: Vec<u32> = (0..200_000)
        .map(|_| {
            let t = Instant::now();
            t.elapsed().as_nanos() as u32
        })
        .collect();
    percentiles(&mut s).0 * 1000.0
}

fn run<K: BenchKey, S: IndexedSet<K>>(samples: usize, sizes: &[usize]) {
    for &n in sizes {
        let mut rng = rng();
        let present = keys::<K>(n, &mut rng);
        let before = LIVE.load(Ordering::Relaxed);
        let mut set: S = build(&present);
        let bytes = LIVE.load(Ordering::Relaxed) - before;
        // Bytes/entry when built in ascending order (e.g. initial load from a
        // sorted query).
        let mut sorted = present.clone();
        sorted.sort_unstable();
        let before_seq = LIVE.load(Ordering::Relaxed);
        let seq: S = build(&sorted);
        let bytes_seq = LIVE.load(Ordering::Relaxed) - before_seq;
        drop(seq);
        drop(sorted);
        let fresh: Vec<K> = (0..samples).map(|_| K::random(&mut rng, true)).collect();
        let mut t = vec![0u32; samples];
        let report = |op: &str, t: &mut [u32]| {
            let (p50, p99, p999) = percentiles(t);
            println!(
                "| {} | {} | {n} | {op} | {p50:.3} | {p99:.3} | {p999:.3} | {:.1} | {:.1} |",
                S::NAME,
                K::NAME,
                bytes as f64 / n as f64,
                bytes_seq as f64 / n as f64
            );
        };
        for (op, key) in [("insert_front", K::below_all()), ("insert_back", K::above_all())] {
            for slot in t.iter_mut() {
                let start = Instant::now();
                black_box(set.insert_idx(key));
                *slot = start.elapsed().as_nanos() as u32;
                set.remove_idx(&key);
            }
            report(op, &mut t);
        }
        for (slot, &k) in t.iter_mut().zip(&fresh) {
            let start = Instant::now();
            black_box(set.insert_idx(k));
            *slot = start.elapsed().as_nanos() as u32;
            set.remove_idx(&k);
        }
        report("insert_random", &mut t);
        for (i, slot) in t.iter_mut().enumerate() {
            let k = present[i % n];
            let start = Instant::now();
            black_box(set.remove_idx(&k));
            *slot = start.elapsed().as_nanos() as u32;
            set.insert_idx(k);
        }
        report("remove", &mut t);
        for (i, slot) in t.iter_mut().enumerate() {
            let k = &present[(i * 7919) % n];
            let start = Instant::now();
            black_box(set.rank_of(k));
            *slot = start.elapsed().as_nanos() as u32;
        }
        report("rank", &mut t);
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let samples = if quick { 20_000 } else { 200_000 };
    let ours_only = std::env::args().any(|a| a == "--ours");
    let sizes: Vec<usize> = match std::env::args().find_map(|a| a.strip_prefix("--n=").map(str::to_owned)) {
        Some(n) => vec![n.parse().expect("--n=<keys>")],
        None => SIZES.to_vec(),
    };
    println!("timer overhead (median of an empty Instant::now/elapsed pair): {:.0} ns", timer_overhead_ns());
    println!("samples per row: {samples}; times in µs per op, timer overhead included");
    println!();
    println!("| impl | key | n | op | median | p99 | p99.9 | bytes/entry (random build) | bytes/entry (sorted build) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    run::<u64, sorted_set::SortedSet<u64>>(samples, &sizes);
    if !ours_only {
        run::<u64, indexset::BTreeSet<u64>>(samples, &sizes);
    }
    run::<Key24, sorted_set::SortedSet<Key24>>(samples, &sizes);
    if !ours_only {
        run::<Key24, indexset::BTreeSet<Key24>>(samples, &sizes);
    }
}
