//! Criterion benches for the ring:
//! - `lookup/N`: one lookup on a ring of N nodes x 128 vnodes (keys vary, so
//!   the branch predictor cannot learn one path);
//! - `lookup_512_vnodes/N`: the same with 512 vnodes per node;
//! - `shared_lookup/N`: the same through `SharedRing::load()`;
//! - `layout/*`: `Ring`'s bucket index over parallel vecs against the same
//!   over a `Vec<(u64, u32)>` and plain binary searches over either, to back
//!   the choice;
//! - `reconnect_burst/64`: 500k sessions x 5 guilds = 2.5M lookups in one
//!   iteration, one `load()` per session;
//! - `rebuild/64`: building a ring of 64 nodes x 128 vnodes;
//! - `hash/*`: the key hash against SipHash-1-3 on one u64.

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

    // More vnodes even out the spread (see README); what they cost a lookup.
    let mut group = c.benchmark_group("lookup_512_vnodes");
    for n in [8u64, 64] {
        let ring = Ring::with_vnodes(node_ids(n), 512);
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

/// The layouts the design considered, built from a `Ring`'s points:
/// - `binary_search`: parallel `Vec<u64>` / `Vec<u32>`, binary search over
///   all points;
/// - `tuple_vec`: one `Vec<(u64, u32)>`, binary search over all points;
/// - `bucketed_tuple`: `Vec<(u64, u32)>` behind the same bucket index as
///   `Ring` (which is bucketed over parallel vecs).
struct Alt {
    nodes: Vec<u64>,
    points: Vec<u64>,
    owners: Vec<u32>,
    tuples: Vec<(u64, u32)>,
    index: Vec<u32>,
    shift: u32,
}

impl Alt {
    fn from_ring(ring: &Ring) -> Alt {
        let nodes = ring.nodes().to_vec();
        let tuples: Vec<(u64, u32)> = ring.points().map(|(p, n)| (p, nodes.binary_search(&n).unwrap() as u32)).collect();
        let (points, owners) = tuples.iter().copied().unzip();
        let bits = tuples.len().next_power_of_two().trailing_zeros().max(1);
        let shift = 64 - bits;
        let mut index: Vec<u32> = (0..1u64 << bits).map(|b| tuples.partition_point(|&(p, _)| p < b << shift) as u32).collect();
        index.push(tuples.len() as u32);
        Alt { nodes, points, owners, tuples, index, shift }
    }

    #[inline]
    fn binary_search(&self, key: u64) -> u64 {
        let h = key_hash(key);
        let mut i = self.points.partition_point(|&p| p < h);
        if i == self.points.len() {
            i = 0;
        }
        self.nodes[self.owners[i] as usize]
    }

    #[inline]
    fn tuple_vec(&self, key: u64) -> u64 {
        let h = key_hash(key);
        let mut i = self.tuples.partition_point(|&(p, _)| p < h);
        if i == self.tuples.len() {
            i = 0;
        }
        self.nodes[self.tuples[i].1 as usize]
    }

    #[inline]
    fn bucketed_tuple(&self, key: u64) -> u64 {
        let h = key_hash(key);
        let b = (h >> self.shift) as usize;
        let (lo, hi) = (self.index[b] as usize, self.index[b + 1] as usize);
        let mut i = lo + self.tuples[lo..hi].partition_point(|&(p, _)| p < h);
        if i == self.tuples.len() {
            i = 0;
        }
        self.nodes[self.tuples[i].1 as usize]
    }
}

fn layout(c: &mut Criterion) {
    let keys = guild_ids(1 << 16);
    let mask = keys.len() - 1;
    let mut group = c.benchmark_group("layout");
    for n in [8u64, 64] {
        let ring = Ring::new(node_ids(n));
        let alt = Alt::from_ring(&ring);
        for &k in &keys {
            let want = ring.lookup(k).unwrap();
            assert_eq!((alt.binary_search(k), alt.tuple_vec(k), alt.bucketed_tuple(k)), (want, want, want));
        }
        let variants: [(&str, &dyn Fn(u64) -> u64); 4] = [
            ("bucketed", &|k| ring.lookup(k).unwrap()),
            ("bucketed_tuple", &|k| alt.bucketed_tuple(k)),
            ("binary_search", &|k| alt.binary_search(k)),
            ("tuple_vec", &|k| alt.tuple_vec(k)),
        ];
        for (name, f) in variants {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                let mut i = 0usize;
                b.iter(|| {
                    i = (i + 1) & mask;
                    f(black_box(keys[i]))
                })
            });
        }
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

/// The key hash against SipHash-1-3 (std's `DefaultHasher`) on one u64.
fn hashes(c: &mut Criterion) {
    use std::hash::{DefaultHasher, Hasher};
    let mut group = c.benchmark_group("hash");
    let mut k = 0u64;
    group.bench_function("splitmix64", |b| {
        b.iter(|| {
            k = k.wrapping_add(1);
            key_hash(black_box(k))
        })
    });
    group.bench_function("siphash13", |b| {
        b.iter(|| {
            k = k.wrapping_add(1);
            let mut h = DefaultHasher::new();
            h.write_u64(black_box(k));
            h.finish()
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
    targets = lookups, layout, burst, rebuild, hashes
}
criterion_main!(benches);
