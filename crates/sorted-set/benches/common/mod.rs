//! Shared by both benches: one trait over our set and `indexset`, and key
//! generators. Every operation returns the index, as the member list needs:
//! for `indexset` that costs an extra `rank` call (its `insert`/`remove`
//! return `bool`).

#![allow(dead_code)] // each bench uses a subset

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub trait IndexedSet<K> {
    const NAME: &'static str;
    fn new() -> Self;
    fn insert_idx(&mut self, k: K) -> usize;
    fn remove_idx(&mut self, k: &K) -> usize;
    fn rank_of(&self, k: &K) -> usize;
}

impl<K: Ord + Clone> IndexedSet<K> for sorted_set::SortedSet<K> {
    const NAME: &'static str = "sorted-set";
    fn new() -> Self {
        sorted_set::SortedSet::new()
    }
    fn insert_idx(&mut self, k: K) -> usize {
        self.insert(k).expect("bench keys are fresh")
    }
    fn remove_idx(&mut self, k: &K) -> usize {
        self.remove(k).expect("bench keys are present")
    }
    fn rank_of(&self, k: &K) -> usize {
        self.rank(k).expect("bench keys are present")
    }
}

impl<K: Ord + Clone> IndexedSet<K> for indexset::BTreeSet<K> {
    const NAME: &'static str = "indexset";
    fn new() -> Self {
        indexset::BTreeSet::new()
    }
    fn insert_idx(&mut self, k: K) -> usize {
        let fresh = self.insert(k.clone());
        assert!(fresh, "bench keys are fresh");
        self.rank(&k)
    }
    fn remove_idx(&mut self, k: &K) -> usize {
        let idx = self.rank(k);
        assert!(self.remove(k), "bench keys are present");
        idx
    }
    fn rank_of(&self, k: &K) -> usize {
        self.rank(k)
    }
}

/// Keys for the benches. Keys in the set are "even", fresh keys "odd", so a
/// fresh key is never present; `below_all`/`above_all` sort before/after
/// every even or odd key.
pub trait BenchKey: Ord + Clone + Copy + std::hash::Hash {
    const NAME: &'static str;
    fn random(rng: &mut SmallRng, fresh: bool) -> Self;
    fn below_all() -> Self;
    fn above_all() -> Self;
}

impl BenchKey for u64 {
    const NAME: &'static str = "u64";
    fn random(rng: &mut SmallRng, fresh: bool) -> Self {
        let k = rng.gen_range(1u64 << 40..1u64 << 63);
        if fresh {
            k | 1
        } else {
            k & !1
        }
    }
    fn below_all() -> Self {
        0
    }
    fn above_all() -> Self {
        u64::MAX
    }
}

/// A 24-byte member-list-like key: group byte + 15 bytes of folded name,
/// then the user id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Key24 {
    pub name: [u8; 16],
    pub id: u64,
}

impl BenchKey for Key24 {
    const NAME: &'static str = "24-byte";
    fn random(rng: &mut SmallRng, fresh: bool) -> Self {
        let mut name = [0u8; 16];
        name[0] = rng.gen_range(1..=4); // group
        let len = rng.gen_range(3..=15);
        for b in &mut name[1..=len] {
            *b = rng.gen_range(b'a'..=b'z');
        }
        let id = u64::random(rng, fresh);
        Key24 { name, id }
    }
    fn below_all() -> Self {
        Key24 { name: [0; 16], id: 0 }
    }
    fn above_all() -> Self {
        Key24 { name: [255; 16], id: u64::MAX }
    }
}

pub fn rng() -> SmallRng {
    SmallRng::seed_from_u64(0x7410_6e67)
}

/// `n` distinct present ("even") keys in random order.
pub fn keys<K: BenchKey>(n: usize, rng: &mut SmallRng) -> Vec<K> {
    let mut keys = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::with_capacity(n);
    while keys.len() < n {
        let k = K::random(rng, false);
        if seen.insert(k) {
            keys.push(k);
        }
    }
    keys
}

/// A set holding `keys`, inserted in the given order.
pub fn build<K: BenchKey, S: IndexedSet<K>>(keys: &[K]) -> S {
    let mut set = S::new();
    for &k in keys {
        set.insert_idx(k);
    }
    set
}

pub const SIZES: [usize; 4] = [5_000, 50_000, 250_000, 1_000_000];
