//! Properties of the ring: membership, determinism, minimal movement on
//! membership change, spread, hand-off order, and the shared snapshot.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hashring::{Ring, SharedRing};
use proptest::prelude::*;

/// A Discord-style snowflake: ms since the Discord epoch << 22, worker << 17,
/// process << 12, increment.
fn snowflake(ms: u64, worker: u64, process: u64, increment: u64) -> u64 {
    (ms << 22) | (worker << 17) | (process << 12) | increment
}

/// `count` sequential snowflake-like ids: ~1,000 ids per millisecond from a
/// handful of workers, as a busy cluster would mint guild ids.
fn sequential_snowflakes(count: u64) -> impl Iterator<Item = u64> {
    // 2023-01-01 in ms since the Discord epoch (2015-01-01).
    const START_MS: u64 = 1_672_531_200_000 - 1_420_070_400_000;
    (0..count).map(|i| snowflake(START_MS + i / 1000, i % 4, 0, (i / 4) % 250))
}

/// Node ids: 1..=64 distinct values anywhere in u64.
fn node_set(max: usize) -> impl Strategy<Value = BTreeSet<u64>> {
    prop::collection::btree_set(any::<u64>(), 1..=max)
}

fn counts(ring: &Ring, keys: impl Iterator<Item = u64>) -> HashMap<u64, u64> {
    let mut counts: HashMap<u64, u64> = ring.nodes().iter().map(|&n| (n, 0)).collect();
    for k in keys {
        *counts.get_mut(&ring.lookup(k).unwrap()).unwrap() += 1;
    }
    counts
}

/// 100k keys spread over the whole u64 range (a multiplicative sequence),
/// the same every run.
fn keys_100k() -> impl Iterator<Item = u64> {
    (0..100_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_key_maps_to_a_member(nodes in node_set(64), vnodes in 1u32..=256, keys in prop::collection::vec(any::<u64>(), 1..200)) {
        let ring = Ring::with_vnodes(nodes.iter().copied(), vnodes);
        prop_assert_eq!(ring.len(), nodes.len());
        prop_assert_eq!(ring.points().len(), nodes.len() * vnodes as usize);
        for k in keys {
            let n = ring.lookup(k).unwrap();
            prop_assert!(nodes.contains(&n));
        }
    }

    #[test]
    fn same_set_same_ring_in_any_order(nodes in prop::collection::vec(any::<u64>(), 0..40), seed in any::<u64>(), key in any::<u64>()) {
        let a = Ring::new(nodes.iter().copied());
        // Shuffled, and with duplicates.
        let mut shuffled = nodes.clone();
        shuffled.extend(nodes.iter().take(5));
        let mut s = seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let b = Ring::new(shuffled);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.lookup(key), b.lookup(key));
        prop_assert_eq!(a.lookup_n(key, 3), b.lookup_n(key, 3));
    }

    #[test]
    fn lookup_n_is_distinct_successors(nodes in node_set(40), key in any::<u64>(), n in 0usize..50) {
        let ring = Ring::new(nodes.iter().copied());
        let order = ring.lookup_n(key, n);
        prop_assert_eq!(order.len(), n.min(nodes.len()));
        let distinct: BTreeSet<u64> = order.iter().copied().collect();
        prop_assert_eq!(distinct.len(), order.len());
        prop_assert!(distinct.is_subset(&nodes));
        if n > 0 {
            prop_assert_eq!(Some(order[0]), ring.lookup(key));
        }
        // Hand-off: without the owner, the key goes to the second node.
        if order.len() >= 2 {
            let without = Ring::new(nodes.iter().copied().filter(|&x| x != order[0]));
            prop_assert_eq!(without.lookup(key), Some(order[1]));
            prop_assert_eq!(&without.lookup_n(key, n - 1)[..], &order[1..]);
        }
    }
}

proptest! {
    // 100k keys per case: fewer cases.
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_node_moves_about_one_share_to_it(nodes in node_set(32), new in any::<u64>()) {
        prop_assume!(!nodes.contains(&new));
        let before = Ring::new(nodes.iter().copied());
        let after = Ring::new(nodes.iter().copied().chain([new]));
        let mut moved = 0u64;
        for k in keys_100k() {
            let (a, b) = (before.lookup(k).unwrap(), after.lookup(k).unwrap());
            if a != b {
                prop_assert_eq!(b, new, "key {} moved between two old nodes", k);
                moved += 1;
            }
        }
        let share = 1.0 / (nodes.len() + 1) as f64;
        let frac = moved as f64 / 100_000.0;
        prop_assert!(frac >= 0.5 * share && frac <= 1.6 * share, "{} nodes: moved {:.4}, share {:.4}", nodes.len(), frac, share);
    }

    #[test]
    fn removing_a_node_moves_only_its_keys(nodes in node_set(32), pick in any::<prop::sample::Index>()) {
        prop_assume!(nodes.len() >= 2);
        let gone = *pick.get(&nodes.iter().copied().collect::<Vec<u64>>());
        let before = Ring::new(nodes.iter().copied());
        let after = Ring::new(nodes.iter().copied().filter(|&n| n != gone));
        for k in keys_100k() {
            let (a, b) = (before.lookup(k).unwrap(), after.lookup(k).unwrap());
            if a == gone {
                prop_assert_ne!(b, gone);
            } else {
                prop_assert_eq!(a, b, "key {} moved off a node that stayed", k);
            }
        }
    }
}

/// Movement measured over many node counts at once (not just the random
/// ones proptest draws): every fraction stays well inside 0.5x..1.6x.
#[test]
fn add_one_node_fraction_by_size() {
    for n in [1u64, 2, 3, 4, 7, 8, 16, 31, 63] {
        let nodes: Vec<u64> = (1..=n).map(|i| 1000 + i).collect();
        let before = Ring::new(nodes.iter().copied());
        let after = Ring::new(nodes.iter().copied().chain([1000 + n + 1]));
        let moved = keys_100k().filter(|&k| before.lookup(k) != after.lookup(k)).count();
        let ratio = moved as f64 / 100_000.0 * (n + 1) as f64;
        eprintln!("{n} -> {} nodes: moved {ratio:.3}x of 1/(N+1)", n + 1);
        assert!((0.5..=1.6).contains(&ratio), "{n} -> {} nodes: moved {ratio:.3}x of 1/(N+1)", n + 1);
    }
}

fn max_min(counts: &HashMap<u64, u64>) -> f64 {
    let max = *counts.values().max().unwrap() as f64;
    let min = *counts.values().min().unwrap() as f64;
    max / min
}

/// 8 nodes x 128 vnodes, 1M sequential snowflake-like guild ids: keys per
/// node follow each node's exact share of the hash space (so sequential ids
/// do not cluster), and max/min stays under what was measured plus margin.
/// Measured (README): 1.269 for nodes 1..=8, 1.371 for 101..=108, 1.206 for
/// snowflake node ids. The 1.3 target holds for about half of all node sets
/// at 128 vnodes (see `spread_distribution`).
#[test]
fn spread_8_nodes_128_vnodes_1m_snowflakes() {
    let sets: [(&str, Vec<u64>); 3] = [
        ("1..=8", (1..=8).collect()),
        ("101..=108", (101..=108).collect()),
        ("snowflakes", (0..8).map(|i| snowflake(1_000_000 + i * 77, i % 4, 1, i)).collect()),
    ];
    for (name, nodes) in sets {
        let ring = Ring::new(nodes);
        let c = counts(&ring, sequential_snowflakes(1_000_000));
        assert_eq!(c.values().sum::<u64>(), 1_000_000);
        let shares = exact_shares(&ring);
        for (node, &count) in &c {
            let expected = shares[node] * 1e6;
            assert!(
                (count as f64 - expected).abs() < 0.02 * expected,
                "nodes {name}: node {node} got {count} keys for a share of {expected:.0}"
            );
        }
        let ratio = max_min(&c);
        eprintln!("spread {name}: max/min {ratio:.3}");
        assert!(ratio < 1.45, "nodes {name}: max/min {ratio:.3}");
    }
}

/// max/min over 200 pseudo-random 8-node sets. Measured over 1,000 sets
/// (`spread_survey`): 128 vnodes median 1.287, p95 1.464; 512 vnodes median
/// 1.133, p95 1.219.
#[test]
fn spread_distribution() {
    let r = survey(8, 128, 200);
    let (median, p95) = (percentile(&r, 0.5), percentile(&r, 0.95));
    assert!(median < 1.35 && p95 < 1.55, "8 x 128: median {median:.3} p95 {p95:.3}");
    let r = survey(8, 512, 200);
    let (median, p95) = (percentile(&r, 0.5), percentile(&r, 0.95));
    assert!(median < 1.2 && p95 < 1.3, "8 x 512: median {median:.3} p95 {p95:.3}");
}

/// The same inputs give the same placement on every build and machine: these
/// values are pinned, so a change of hash or of tie-breaking shows up here.
#[test]
fn placement_is_pinned() {
    let ring = Ring::new([11, 22, 33, 44]);
    let keys = [0u64, 1, 2, 81_384_788_765_712_384, 1_100_000_000_000_000_000, u64::MAX];
    let got: Vec<u64> = keys.iter().map(|&k| ring.lookup(k).unwrap()).collect();
    assert_eq!(got, PINNED, "placement changed: every deployed node would disagree with this build");
    assert_eq!(hashring::key_hash(0), 0xE220_A839_7B1D_CDAF);
}
const PINNED: [u64; 6] = [22, 44, 33, 33, 22, 22];

#[test]
fn shared_ring_readers_see_monotonic_epochs() {
    let shared = Arc::new(SharedRing::new(Ring::new([1])));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                let mut loads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let seen = shared.epoch();
                    let ring = shared.load();
                    // Published after the ring: the ring is at least as new.
                    assert!(ring.epoch() >= seen && ring.epoch() >= last);
                    // Store e holds nodes 1..=e+1.
                    assert_eq!(ring.len() as u64, ring.epoch() + 1);
                    assert!(ring.lookup(loads).is_some());
                    last = ring.epoch();
                    loads += 1;
                }
                loads
            })
        })
        .collect();
    for e in 1..=200u64 {
        assert_eq!(shared.store(Ring::with_vnodes(1..=e + 1, 8)), e);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(shared.epoch(), 200);
    assert_eq!(shared.load().len(), 201);
}

/// Each node's exact share of the hash space: the arc (previous point,
/// point] belongs to the point's owner.
fn exact_shares(ring: &Ring) -> HashMap<u64, f64> {
    let pts: Vec<(u64, u64)> = ring.points().collect();
    let mut shares: HashMap<u64, f64> = HashMap::new();
    let mut prev = pts.last().unwrap().0;
    for &(p, owner) in &pts {
        *shares.entry(owner).or_default() += p.wrapping_sub(prev) as f64 / 2f64.powi(64);
        prev = p;
    }
    shares
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// max/min of exact shares over `sets` pseudo-random sets of `n` node ids.
fn survey(n: usize, vnodes: u32, sets: usize) -> Vec<f64> {
    let mut s = 0x243F_6A88_85A3_08D3u64;
    let mut ratios: Vec<f64> = (0..sets)
        .map(|_| {
            let nodes: Vec<u64> = (0..n)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s
                })
                .collect();
            let shares = exact_shares(&Ring::with_vnodes(nodes, vnodes));
            let max = shares.values().copied().fold(0.0, f64::max);
            let min = shares.values().copied().fold(1.0, f64::min);
            max / min
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

#[test]
#[ignore = "survey: prints the max/min distribution; run with --ignored --nocapture"]
fn spread_survey() {
    for vnodes in [128u32, 256, 512, 1024] {
        for n in [8usize, 64] {
            let r = survey(n, vnodes, 1000);
            eprintln!(
                "{n} nodes x {vnodes} vnodes: max/min p5 {:.3} median {:.3} p95 {:.3} max {:.3}; share of sets >= 1.3: {:.1}%",
                percentile(&r, 0.05),
                percentile(&r, 0.5),
                percentile(&r, 0.95),
                r[r.len() - 1],
                100.0 * r.iter().filter(|&&x| x >= 1.3).count() as f64 / r.len() as f64
            );
        }
    }
}
