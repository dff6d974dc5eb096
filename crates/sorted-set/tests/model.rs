//! Model-based tests: every operation on `SortedSet` must agree with the
//! same operation on a sorted, deduplicated `Vec`.

use proptest::prelude::*;
use sorted_set::SortedSet;

#[derive(Debug, Clone)]
enum Op {
    Insert(u16),
    Remove(u16),
    Rank(u16),
    Get(usize),
    Range(usize, usize),
    Replace(u16, u16),
    /// Insert a run of consecutive keys (exercises the spine splits).
    InsertRun(u16, u8, bool),
    /// Remove every key in a key range (exercises merges and rotations).
    RemoveRun(u16, u16),
}

fn op() -> impl Strategy<Value = Op> {
    // Keys from a small domain so duplicates and hits on removal are common.
    prop_oneof![
        6 => any::<u16>().prop_map(Op::Insert),
        3 => any::<u16>().prop_map(Op::Remove),
        2 => any::<u16>().prop_map(Op::Rank),
        2 => (0usize..6000).prop_map(Op::Get),
        1 => (0usize..6000, 0usize..6000).prop_map(|(a, b)| Op::Range(a, b)),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Replace(a, b)),
        1 => (any::<u16>(), any::<u8>(), any::<bool>()).prop_map(|(a, n, d)| Op::InsertRun(a, n, d)),
        1 => (any::<u16>(), 0u16..3000).prop_map(|(a, n)| Op::RemoveRun(a, n)),
    ]
}

/// The model: a sorted Vec without duplicates.
#[derive(Default)]
struct Model(Vec<u16>);

impl Model {
    fn insert(&mut self, k: u16) -> Result<usize, usize> {
        match self.0.binary_search(&k) {
            Ok(i) => Err(i),
            Err(i) => {
                self.0.insert(i, k);
                Ok(i)
            }
        }
    }
    fn remove(&mut self, k: u16) -> Option<usize> {
        let i = self.0.binary_search(&k).ok()?;
        self.0.remove(i);
        Some(i)
    }
    fn replace(&mut self, old: u16, new: u16) -> Option<(usize, usize)> {
        let i = self.0.binary_search(&old).ok()?;
        if new != old && self.0.binary_search(&new).is_ok() {
            return None;
        }
        self.0.remove(i);
        let j = self.insert(new).expect("checked absent");
        Some((i, j))
    }
}

fn apply(set: &mut SortedSet<u16>, model: &mut Model, op: &Op) {
    match *op {
        Op::Insert(k) => assert_eq!(set.insert(k), model.insert(k), "insert {k}"),
        Op::Remove(k) => assert_eq!(set.remove(&k), model.remove(k), "remove {k}"),
        Op::Rank(k) => {
            assert_eq!(set.rank(&k), model.0.binary_search(&k).ok(), "rank {k}");
            assert_eq!(set.search(&k), model.0.binary_search(&k), "search {k}");
        }
        Op::Get(i) => assert_eq!(set.get(i), model.0.get(i), "get {i}"),
        Op::Range(a, b) => {
            let got: Vec<u16> = set.range(a..b).copied().collect();
            let end = b.min(model.0.len());
            let want = model.0.get(a.min(end)..end).unwrap_or(&[]);
            assert_eq!(got, want, "range {a}..{b}");
            assert_eq!(set.range(a..b).len(), want.len());
        }
        Op::Replace(a, b) => assert_eq!(set.replace(&a, b), model.replace(a, b), "replace {a} -> {b}"),
        Op::InsertRun(start, n, descending) => {
            for j in 0..u16::from(n) * 8 {
                let k = if descending { start.wrapping_sub(j) } else { start.wrapping_add(j) };
                assert_eq!(set.insert(k), model.insert(k), "run insert {k}");
            }
        }
        Op::RemoveRun(start, n) => {
            for k in start..start.saturating_add(n) {
                assert_eq!(set.remove(&k), model.remove(k), "run remove {k}");
            }
        }
    }
    assert_eq!(set.len(), model.0.len());
    assert_eq!(set.is_empty(), model.0.is_empty());
    assert_eq!(set.first(), model.0.first());
    assert_eq!(set.last(), model.0.last());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn agrees_with_sorted_vec(ops in proptest::collection::vec(op(), 1..400)) {
        let mut set = SortedSet::new();
        let mut model = Model::default();
        for op in &ops {
            apply(&mut set, &mut model, op);
            set.assert_invariants();
        }
        prop_assert!(set.iter().copied().eq(model.0.iter().copied()));
    }
}

#[test]
fn empty_set_edge_cases() {
    let mut set: SortedSet<u64> = SortedSet::new();
    assert!(set.is_empty());
    assert_eq!(set.get(0), None);
    assert_eq!(set.get(usize::MAX), None);
    assert_eq!(set.first(), None);
    assert_eq!(set.last(), None);
    assert_eq!(set.rank(&1), None);
    assert_eq!(set.search(&1), Err(0));
    assert_eq!(set.remove(&1), None);
    assert_eq!(set.replace(&1, 2), None);
    assert_eq!(set.range(0..10).count(), 0);
    assert_eq!(set.range(usize::MAX..usize::MAX).count(), 0);
    #[allow(clippy::reversed_empty_ranges)]
    let inverted = set.range(5..1).count();
    assert_eq!(inverted, 0);
    set.assert_invariants();
}

#[test]
fn duplicates_and_replace_collisions() {
    let mut set: SortedSet<u64> = (0..10).map(|k| k * 10).collect();
    assert_eq!(set.insert(50), Err(5));
    assert_eq!(set.len(), 10);
    // new collides with a different key: unchanged.
    assert_eq!(set.replace(&10, 50), None);
    assert!(set.iter().copied().eq((0..10).map(|k| k * 10)));
    // new == old: same index.
    assert_eq!(set.replace(&30, 30), Some((3, 3)));
    // absent old.
    assert_eq!(set.replace(&31, 32), None);
    assert_eq!(set.replace(&0, 95), Some((0, 9)));
    assert_eq!(set.replace(&95, 1), Some((9, 0)));
    set.assert_invariants();
}

#[test]
fn large_sequential_and_random_workloads_keep_invariants() {
    // Ascending, descending and interleaved inserts, then removals from
    // both ends and the middle: many splits, merges and rotations.
    let mut set = SortedSet::new();
    for k in 0..100_000u64 {
        assert_eq!(set.insert(k * 2), Ok(k as usize));
    }
    for k in (0..50_000u64).rev() {
        assert_eq!(set.insert(k * 2 + 1), Ok(k as usize + 1));
    }
    set.assert_invariants();
    assert_eq!(set.len(), 150_000);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut present: Vec<u64> = set.iter().copied().collect();
    while present.len() > 1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % present.len() as u64) as usize;
        let k = present.swap_remove(i);
        assert!(set.remove(&k).is_some());
    }
    set.assert_invariants();
    present.sort_unstable();
    assert!(set.iter().copied().eq(present.iter().copied()));
    for (i, k) in present.iter().enumerate() {
        assert_eq!(set.rank(k), Some(i));
        assert_eq!(set.get(i), Some(k));
    }
    for k in present {
        assert!(set.remove(&k).is_some());
    }
    assert!(set.is_empty());
    set.assert_invariants();
}

#[test]
fn wide_keys_use_smaller_leaves_and_stay_consistent() {
    // 24-byte keys get 64-key leaves (u64/u16 keys get 128): run a mixed
    // workload on them against a sorted Vec, checking invariants as we go.
    let mut set: SortedSet<[u64; 3]> = SortedSet::new();
    let mut model: Vec<[u64; 3]> = Vec::new();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for step in 0..60_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = [x % 4, (x >> 8) % 5000, 7];
        let want = match model.binary_search(&key) {
            Ok(i) if step.is_multiple_of(3) => {
                model.remove(i);
                assert_eq!(set.remove(&key), Some(i));
                continue;
            }
            Ok(i) => Err(i),
            Err(i) => {
                model.insert(i, key);
                Ok(i)
            }
        };
        assert_eq!(set.insert(key), want);
        if step.is_multiple_of(5000) {
            set.assert_invariants();
        }
    }
    set.assert_invariants();
    assert!(set.iter().eq(model.iter()));
    for (i, k) in model.iter().enumerate().step_by(7) {
        assert_eq!(set.rank(k), Some(i));
    }
    for k in &model {
        assert!(set.remove(k).is_some());
        if set.len().is_multiple_of(997) {
            set.assert_invariants();
        }
    }
    assert!(set.is_empty());
}

/// Found by `agrees_with_sorted_vec` in CI: a descending run makes the tree
/// two levels deep, the ascending runs split the right spine so that its
/// last internal node holds a single leaf, and removing that leaf's only
/// key left an empty leaf at the right edge (`last()` was `None`).
#[test]
fn emptying_the_only_leaf_of_a_spine_node() {
    let ops = [
        Op::InsertRun(38377, 187, true),
        Op::InsertRun(0, 219, false),
        Op::Insert(1752),
        Op::InsertRun(3304, 194, false),
        Op::Insert(62287),
        Op::RemoveRun(60747, 1541),
    ];
    let mut set = SortedSet::new();
    let mut model = Model::default();
    for op in &ops {
        apply(&mut set, &mut model, op);
        set.assert_invariants();
    }
    assert_eq!(set.last(), Some(&38377));
    // Emptying the set through the same path leaves a usable empty set.
    for k in model.0.clone() {
        assert_eq!(set.remove(&k), model.remove(k));
        set.assert_invariants();
    }
    assert!(set.is_empty());
    assert_eq!(set.last(), None);
    assert_eq!(set.insert(7), Ok(0));
    set.assert_invariants();
}

/// Appending fills leaves of 128 `u16` keys and splits the right spine so
/// that a new internal node starts with one leaf (64 leaves + 1 key =
/// 8,193 keys). Removing from the right edge then empties that lone leaf,
/// which has no sibling to merge with; every key must stay reachable.
#[test]
fn removing_from_the_right_edge_after_spine_splits() {
    for n in [8_193u16, 8_320, 16_385, 20_000] {
        let mut set = SortedSet::new();
        let mut model = Model::default();
        for k in 0..n {
            assert_eq!(set.insert(k), model.insert(k));
        }
        set.assert_invariants();
        for k in (0..n).rev() {
            assert_eq!(set.remove(&k), model.remove(k));
            assert_eq!(set.last(), model.0.last(), "after removing {k} of {n}");
            assert_eq!(set.get(set.len().wrapping_sub(1)), model.0.last());
        }
        set.assert_invariants();
        assert!(set.is_empty());
    }
}
