//! Criterion benches for the ring:
//! - `lookup/N`: one lookup on a ring of N nodes x 128 vnodes (keys vary, so
//!   the branch predictor cannot learn one path);
//! - `shared_lookup/N`: the same through `SharedRing::load()`;
//! - `layout/*`: the binary search over parallel vecs (what `Ring` uses)
//!   against a `Vec<(u64, u32)>`, to back the choice;
//! - `reconnect_burst/64`: 500k sessions x 5 guilds = 2.5M lookups in one
//!   iteration, one `load()` per session;
//! - `rebuild/64`: building a ring of 64 nodes x 128 vnodes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hashring::{key_hash, Ring, SharedRing};

/// Guild ids: snowflakes over ~3 years, pseudo-randomly spaced.
fn guild_ids(count: usize) -> Vec<u64> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..count)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let ms = 200_000_000_000 + s % 100_000_000_000;
            (ms << 22) | (s >> 52)
        })
        .collect()
}

fn node_ids(n: u64) -> Vec<u64> {
    (0..n).map(|i| 0x1000_0000 + i * 7919).collect()
}

fn lookups(c: &mut Criterion) {
    let keys = guild_ids(1 << 16);
    let mask = keys.len() - 1;
    let mut group = c.benchmark_group("lookup");
    for n in [8u64, 64] {
        let ring = Ring::new(node_ids(n));
        group.bench_with_input(BenchmarkId::from_parameter(n), &ring, |b, ring| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & mask;
                ring.lookup(black_box(keys[i]))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("shared_lookup");
    for n in [8u64, 64] {
        let shared = SharedRing::new(Ring::new(node_ids(n)));
        group.bench_with_input(BenchmarkId::from_parameter(n), &shared, |b, shared| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & mask;
                shared.load().lookup(black_box(keys[i]))
            })
        });
    }
    group.finish();
}

/// The other layout the design considered: one sorted `Vec<(point, owner)>`.
struct TupleRing {
    nodes: Vec<u64>,
    points: Vec<(u64, u32)>,
}

impl TupleRing {
    fn from_ring(ring: &Ring) -> TupleRing {
        let nodes = ring.nodes().to_vec();
        let points = ring.points().map(|(p, n)| (p, nodes.binary_search(&n).unwrap() as u32)).collect();
        TupleRing { nodes, points }
    }

    #[inline]
    fn lookup(&self, key: u64) -> Option<u64> {
        if self.points.is_empty() {
            return None;
        }
        let h = key_hash(key);
        let mut i = self.points.partition_point(|&(p, _)| p < h);
        if i == self.points.len() {
            i = 0;
        }
        Some(self.nodes[self.points[i].1 as usize])
    }
}

fn layout(c: &mut Criterion) {
    let keys = guild_ids(1 << 16);
    let mask = keys.len() - 1;
    let mut group = c.benchmark_group("layout");
    for n in [8u64, 64] {
        let ring = Ring::new(node_ids(n));
        let tuples = TupleRing::from_ring(&ring);
        for k in &keys[..1000] {
            assert_eq!(ring.lookup(*k), tuples.lookup(*k));
        }
        group.bench_function(BenchmarkId::new("parallel_vecs", n), |b| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & mask;
                ring.lookup(black_box(keys[i]))
            })
        });
        group.bench_function(BenchmarkId::new("tuple_vec", n), |b| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & mask;
                tuples.lookup(black_box(keys[i]))
            })
        });
    }
    group.finish();
}

const SESSIONS: usize = 500_000;
const GUILDS_PER_SESSION: usize = 5;

fn burst(c: &mut Criterion) {
    // 500k sessions, each in 5 guilds drawn from 200k guilds.
    let pool = guild_ids(200_000);
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let sessions: Vec<[u64; GUILDS_PER_SESSION]> = (0..SESSIONS)
        .map(|_| {
            std::array::from_fn(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                pool[(s % pool.len() as u64) as usize]
            })
        })
        .collect();
    let shared = SharedRing::new(Ring::new(node_ids(64)));
    let mut group = c.benchmark_group("reconnect_burst");
    group.sample_size(10);
    group.bench_function(BenchmarkId::from_parameter(64), |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for guilds in &sessions {
                let ring = shared.load();
                for &g in guilds {
                    acc = acc.wrapping_add(ring.lookup(black_box(g)).unwrap());
                }
            }
            acc
        })
    });
    group.finish();
}

fn rebuild(c: &mut Criterion) {
    let nodes = node_ids(64);
    c.bench_function("rebuild/64", |b| b.iter(|| Ring::new(black_box(nodes.iter().copied()))));
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = lookups, layout, burst, rebuild
}
criterion_main!(benches);
