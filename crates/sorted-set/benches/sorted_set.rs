//! Criterion benches: insert at front/back/random position, remove, rank,
//! at 5k/50k/250k/1M keys, for our `SortedSet` and for `indexset`.
//!
//! Every op reports an index (for indexset: insert+rank, rank+remove).
//! Ops are timed in batches of `BATCH` with `iter_custom`; after each
//! timed batch the set is restored untimed (inserted keys removed, removed
//! keys re-inserted), so the size stays within `BATCH` of the nominal size.
//! Per-op latency percentiles are in the `latency` bench.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

mod common;
use common::{build, keys, rng, BenchKey, IndexedSet, SIZES};
use rand::Rng;

const BATCH: usize = 100;

fn bench_impl<S: IndexedSet<u64>>(c: &mut Criterion) {
    let mut group = c.benchmark_group(S::NAME);
    group.sample_size(30).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for &n in &SIZES {
        let mut rng = rng();
        let present = keys::<u64>(n, &mut rng);
        let mut set: S = build(&present);
        let fresh: Vec<u64> = (0..100_000).map(|_| u64::random(&mut rng, true)).collect();
        let front: Vec<u64> = (1..=BATCH as u64).rev().collect();
        let back: Vec<u64> = (0..BATCH as u64).map(|j| u64::MAX - BATCH as u64 + j).collect();

        let timed_inserts = |set: &mut S, keys: &[u64], iters: u64| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let take = BATCH.min((iters - done) as usize);
                let batch = &keys[..take];
                let t = Instant::now();
                for &k in batch {
                    black_box(set.insert_idx(k));
                }
                total += t.elapsed();
                for k in batch {
                    set.remove_idx(k);
                }
                done += take as u64;
            }
            total
        };
        group.bench_function(BenchId::new("insert_front", n), |b| b.iter_custom(|iters| timed_inserts(&mut set, &front, iters)));
        group.bench_function(BenchId::new("insert_back", n), |b| b.iter_custom(|iters| timed_inserts(&mut set, &back, iters)));
        let mut cursor = 0;
        group.bench_function(BenchId::new("insert_random", n), |b| {
            b.iter_custom(|iters| {
                cursor = (cursor + BATCH) % (fresh.len() - BATCH);
                timed_inserts(&mut set, &fresh[cursor..cursor + BATCH], iters)
            })
        });
        group.bench_function(BenchId::new("remove", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let take = BATCH.min((iters - done) as usize);
                    let start = rng.gen_range(0..present.len() - take);
                    let batch = &present[start..start + take];
                    let t = Instant::now();
                    for k in batch {
                        black_box(set.remove_idx(k));
                    }
                    total += t.elapsed();
                    for &k in batch {
                        set.insert_idx(k);
                    }
                    done += take as u64;
                }
                total
            })
        });
        group.bench_function(BenchId::new("rank", n), |b| {
            let mut i = 0;
            b.iter(|| {
                // `present` is in random order: a random key each time.
                i = (i + 1) % present.len();
                black_box(set.rank_of(&present[i]))
            })
        });
    }
    group.finish();
}

type BenchId = BenchmarkId;

fn benches(c: &mut Criterion) {
    bench_impl::<sorted_set::SortedSet<u64>>(c);
    bench_impl::<indexset::BTreeSet<u64>>(c);
}

criterion_group!(sorted_set_benches, benches);
criterion_main!(sorted_set_benches);
