//! The counted B+-tree behind [`SortedSet`](crate::SortedSet).
//!
//! Keys live only in leaves (sorted `Vec`s of at most [`leaf_cap`] keys).
//! An internal node keeps, per child, the number of keys in that child's
//! subtree, so the index of a key is the sum of the counts to the left of
//! the path plus its position in the leaf: every operation is one
//! root-to-leaf walk.
//!
//! Separators: `seps[j]` sits between `children[j]` and `children[j + 1]`
//! with `keys(children[j]) < seps[j] <= keys(children[j + 1])`. A separator
//! is a clone of the first key of the right child at the time it was made;
//! it may go stale after that key is removed, which keeps routing correct.

use std::cmp::Ordering;

/// Most keys in a leaf: as many as fit in about 1.5 KiB, clamped to
/// 16..=128 (128 for u64, 64 for 24-byte keys). Measured at 1M keys, 128
/// u64 keys per leaf beat 64 (fewer leaves, so smaller internal nodes and
/// fewer cache misses on the path; 12.2 vs 12.9 B/entry), while for
/// 24-byte keys 64 beat 128 (the leaf's prefetch and the shift on insert
/// grow with its bytes).
pub(crate) const fn leaf_cap<K>() -> usize {
    let size = if std::mem::size_of::<K>() == 0 { 1 } else { std::mem::size_of::<K>() };
    let cap = 1536 / size;
    if cap < 16 {
        16
    } else if cap > 128 {
        128
    } else {
        cap
    }
}
/// A leaf with fewer keys (after a removal) is merged with or refilled from
/// a sibling. A quarter rather than a half leaves hysteresis between
/// splitting and merging, so alternating insert/remove at a boundary does
/// not thrash.
pub(crate) const fn leaf_min<K>() -> usize {
    leaf_cap::<K>() / 4
}
/// Most children of an internal node.
pub(crate) const INTERNAL_CAP: usize = 64;
/// See [`leaf_min`].
pub(crate) const INTERNAL_MIN: usize = INTERNAL_CAP / 4;

pub(crate) enum Node<K> {
    Leaf(Vec<K>),
    Internal(Box<Internal<K>>),
}

pub(crate) struct Internal<K> {
    /// `children.len() - 1` separators; see the module docs.
    pub(crate) seps: Vec<K>,
    pub(crate) children: Vec<Node<K>>,
    /// `counts[i]` = number of keys under `children[i]`.
    pub(crate) counts: Vec<usize>,
}

/// Whether a node lies on the left or right spine of the tree. Splitting a
/// full node on a spine at the very edge where the new key goes keeps the
/// old node full, so sequential appends (or prepends) fill nodes to 100%
/// instead of 50%.
#[derive(Clone, Copy)]
pub(crate) struct Spine {
    pub(crate) left: bool,
    pub(crate) right: bool,
}

/// A node split off during an insert: the separator to put in the parent and
/// the new right sibling.
pub(crate) type Split<K> = Option<(K, Node<K>)>;

/// Asks the CPU to fetch all cache lines of `slice` now. A binary search
/// over a node touches ~5 of its lines one after another, each a dependent
/// cache miss on a large tree; fetching them all up front overlaps those
/// misses (measured: ~0.7 -> ~0.5 µs per random op at 1M keys).
#[inline(always)]
fn prefetch<T>(slice: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = slice.as_ptr().cast::<i8>();
        let bytes = std::mem::size_of_val(slice);
        let mut offset = 0;
        while offset < bytes {
            // SAFETY: a prefetch is only a hint and never faults; the
            // address is inside `slice` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
            offset += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slice;
}

fn new_leaf<K>() -> Vec<K> {
    Vec::with_capacity(leaf_cap::<K>())
}

fn new_internal<K>() -> Internal<K> {
    Internal {
        seps: Vec::with_capacity(INTERNAL_CAP),
        // One spare slot: a child split is inserted first, then the node
        // itself splits if it is over capacity.
        children: Vec::with_capacity(INTERNAL_CAP + 1),
        counts: Vec::with_capacity(INTERNAL_CAP + 1),
    }
}

impl<K> Node<K> {
    pub(crate) fn empty() -> Self {
        Node::Leaf(Vec::new())
    }

    /// Number of keys in this subtree. O(fanout) for internal nodes; only
    /// used on split/merge paths.
    pub(crate) fn len(&self) -> usize {
        match self {
            Node::Leaf(keys) => keys.len(),
            Node::Internal(node) => node.counts.iter().sum(),
        }
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(keys) => keys.len() < leaf_min::<K>(),
            Node::Internal(node) => node.children.len() < INTERNAL_MIN,
        }
    }

    pub(crate) fn get(&self, mut index: usize) -> Option<&K> {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(keys) => return keys.get(index),
                Node::Internal(inner) => {
                    let (i, rest) = inner.child_at(index)?;
                    index = rest;
                    node = &inner.children[i];
                }
            }
        }
    }

    pub(crate) fn first(&self) -> Option<&K> {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(keys) => return keys.first(),
                Node::Internal(inner) => node = inner.children.first()?,
            }
        }
    }

    pub(crate) fn last(&self) -> Option<&K> {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(keys) => return keys.last(),
                Node::Internal(inner) => node = inner.children.last()?,
            }
        }
    }
}

impl<K> Internal<K> {
    /// The child holding the `index`-th key of this subtree and the index
    /// within that child.
    pub(crate) fn child_at(&self, mut index: usize) -> Option<(usize, usize)> {
        for (i, &count) in self.counts.iter().enumerate() {
            if index < count {
                return Some((i, index));
            }
            index -= count;
        }
        None
    }

    fn base(&self, child: usize) -> usize {
        self.counts[..child].iter().sum()
    }
}

impl<K: Ord> Internal<K> {
    /// The child whose key range contains `key`.
    fn route(&self, key: &K) -> usize {
        prefetch(&self.seps);
        prefetch(&self.counts);
        self.seps.partition_point(|sep| sep <= key)
    }
}

impl<K: Ord> Node<K> {
    /// `Ok(index)` if present, else `Err(insertion index)`.
    pub(crate) fn search(&self, key: &K) -> Result<usize, usize> {
        let mut node = self;
        let mut base = 0;
        loop {
            match node {
                Node::Leaf(keys) => {
                    prefetch(keys);
                    return keys.binary_search(key).map(|p| base + p).map_err(|p| base + p);
                }
                Node::Internal(inner) => {
                    let i = inner.route(key);
                    base += inner.base(i);
                    node = &inner.children[i];
                }
            }
        }
    }
}

impl<K: Ord + Clone> Node<K> {
    /// Inserts `key` into this subtree. `Ok((index, split))` when inserted
    /// (the index is within this subtree, counted as if no split happened);
    /// `Err(index of the equal key)` when already present.
    pub(crate) fn insert(&mut self, key: K, spine: Spine) -> Result<(usize, Split<K>), usize> {
        match self {
            Node::Leaf(keys) => {
                prefetch(keys);
                let pos = match keys.binary_search(&key) {
                    Ok(p) => return Err(p),
                    Err(p) => p,
                };
                if keys.len() < leaf_cap::<K>() {
                    keys.insert(pos, key);
                    return Ok((pos, None));
                }
                let right = if spine.right && pos == keys.len() {
                    let mut right = new_leaf();
                    right.push(key);
                    right
                } else if spine.left && pos == 0 {
                    let right = std::mem::replace(keys, new_leaf());
                    keys.push(key);
                    right
                } else {
                    let mid = leaf_cap::<K>() / 2;
                    let mut right = new_leaf();
                    right.extend(keys.drain(mid..));
                    if pos <= mid {
                        keys.insert(pos, key);
                    } else {
                        right.insert(pos - mid, key);
                    }
                    right
                };
                let sep = right[0].clone();
                Ok((pos, Some((sep, Node::Leaf(right)))))
            }
            Node::Internal(inner) => {
                let i = inner.route(&key);
                let base = inner.base(i);
                let last = inner.children.len() - 1;
                let child_spine = Spine { left: spine.left && i == 0, right: spine.right && i == last };
                let (pos, split) = inner.children[i].insert(key, child_spine).map_err(|p| base + p)?;
                inner.counts[i] += 1;
                let Some((sep, right)) = split else {
                    return Ok((base + pos, None));
                };
                let right_len = right.len();
                inner.counts[i] -= right_len;
                inner.seps.insert(i, sep);
                inner.children.insert(i + 1, right);
                inner.counts.insert(i + 1, right_len);
                if inner.children.len() <= INTERNAL_CAP {
                    return Ok((base + pos, None));
                }
                let n = inner.children.len();
                let at = if spine.right && i + 1 == n - 1 {
                    n - 1
                } else if spine.left && i == 0 {
                    1
                } else {
                    n / 2
                };
                let mut right = new_internal();
                right.children.extend(inner.children.drain(at..));
                right.counts.extend(inner.counts.drain(at..));
                right.seps.extend(inner.seps.drain(at..));
                // `seps[at - 1]` separated the two halves: it moves up.
                let up = inner.seps.pop().expect("a full node has separators");
                Ok((base + pos, Some((up, Node::Internal(Box::new(right))))))
            }
        }
    }

    /// Removes `key` from this subtree, returning the index it had. The
    /// caller fixes this node if it became underfull.
    pub(crate) fn remove(&mut self, key: &K) -> Option<usize> {
        match self {
            Node::Leaf(keys) => {
                prefetch(keys);
                let pos = keys.binary_search(key).ok()?;
                keys.remove(pos);
                Some(pos)
            }
            Node::Internal(inner) => {
                let i = inner.route(key);
                let pos = inner.children[i].remove(key)?;
                let base = inner.base(i);
                inner.counts[i] -= 1;
                if inner.counts[i] == 0 {
                    // The child's subtree is now empty. This happens below
                    // a node with a single child (a spine split leaves one
                    // child in the new right node), where there is no
                    // sibling to merge with: drop the child here, and if
                    // that leaves this node empty, our parent drops it in
                    // turn. No empty subtree survives, so `first`, `last`
                    // and `get` never land on an empty leaf.
                    inner.remove_child(i);
                } else if inner.children.len() > 1 && inner.children[i].underfull() {
                    inner.rebalance(i);
                }
                Some(base + pos)
            }
        }
    }
}

impl<K: Clone> Internal<K> {
    /// Merges underfull `children[i]` with a sibling, or evens out the two
    /// if together they would not fit in one node.
    fn rebalance(&mut self, i: usize) {
        let l = if i + 1 < self.children.len() { i } else { i - 1 };
        let r = l + 1;
        let (left, right) = self.children.split_at_mut(r);
        match (&mut left[l], &mut right[0]) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                let total = a.len() + b.len();
                if total <= leaf_cap::<K>() {
                    a.append(b);
                    self.remove_right(l, total);
                    return;
                }
                let target = total / 2;
                if a.len() < target {
                    let n = target - a.len();
                    a.extend(b.drain(..n));
                } else {
                    b.splice(0..0, a.drain(target..));
                }
                self.seps[l] = b[0].clone();
                self.counts[l] = a.len();
                self.counts[r] = b.len();
            }
            (Node::Internal(a), Node::Internal(b)) => {
                let total = a.children.len() + b.children.len();
                if total <= INTERNAL_CAP {
                    let sep = self.seps[l].clone();
                    a.seps.push(sep);
                    a.seps.append(&mut b.seps);
                    a.children.append(&mut b.children);
                    a.counts.append(&mut b.counts);
                    let merged = self.counts[l] + self.counts[r];
                    self.remove_right(l, merged);
                    return;
                }
                let target = total / 2;
                let moved: usize;
                if a.children.len() < target {
                    // Rotate the first `n` children of `b` into `a`.
                    let n = target - a.children.len();
                    let down = std::mem::replace(&mut self.seps[l], b.seps[n - 1].clone());
                    a.seps.push(down);
                    a.seps.extend(b.seps.drain(..n));
                    a.seps.pop(); // b.seps[n - 1] went up instead
                    a.children.extend(b.children.drain(..n));
                    moved = b.counts[..n].iter().sum();
                    a.counts.extend(b.counts.drain(..n));
                    self.counts[l] += moved;
                    self.counts[r] -= moved;
                } else {
                    // Rotate the children of `a` from `target` on into `b`.
                    let k = target;
                    let down = std::mem::replace(&mut self.seps[l], a.seps[k - 1].clone());
                    b.seps.splice(0..0, a.seps.drain(k..).chain(std::iter::once(down)));
                    a.seps.truncate(k - 1);
                    b.children.splice(0..0, a.children.drain(k..));
                    moved = a.counts[k..].iter().sum();
                    b.counts.splice(0..0, a.counts.drain(k..));
                    self.counts[l] -= moved;
                    self.counts[r] += moved;
                }
            }
            _ => unreachable!("siblings always have the same height"),
        }
    }

    /// Drops the empty `children[i]` with the separator on one side of it.
    fn remove_child(&mut self, i: usize) {
        self.children.remove(i);
        self.counts.remove(i);
        if !self.seps.is_empty() {
            // With `seps[i - 1]` gone, `children[i - 1]` and `children[i + 1]`
            // are still split by `seps[i]`; with `seps[0]` gone the new first
            // child keeps its keys, all >= the old `seps[0]`.
            self.seps.remove(i.saturating_sub(1));
        }
    }

    /// Drops `children[l + 1]` (already emptied into `children[l]`).
    fn remove_right(&mut self, l: usize, merged_count: usize) {
        self.seps.remove(l);
        self.children.remove(l + 1);
        self.counts.remove(l + 1);
        self.counts[l] = merged_count;
    }
}

impl<K: Ord> Node<K> {
    /// Checks every structural invariant; returns (key count, height).
    /// Panics with a description on the first violation.
    pub(crate) fn check(&self, lower: Option<&K>, upper: Option<&K>) -> (usize, usize) {
        let in_bounds = |k: &K| lower.is_none_or(|lo| lo.cmp(k) != Ordering::Greater) && upper.is_none_or(|hi| k.cmp(hi) == Ordering::Less);
        match self {
            Node::Leaf(keys) => {
                assert!(keys.len() <= leaf_cap::<K>(), "leaf over capacity");
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "leaf not strictly sorted");
                assert!(keys.iter().all(in_bounds), "leaf key outside separators");
                (keys.len(), 0)
            }
            Node::Internal(inner) => {
                let n = inner.children.len();
                assert!((1..=INTERNAL_CAP).contains(&n), "bad fanout {n}");
                assert_eq!(inner.seps.len(), n - 1, "separator count");
                assert_eq!(inner.counts.len(), n, "count slots");
                assert!(inner.seps.windows(2).all(|w| w[0] < w[1]), "separators not sorted");
                let mut total = 0;
                let mut height = None;
                for (i, child) in inner.children.iter().enumerate() {
                    let lo = if i == 0 { lower } else { Some(&inner.seps[i - 1]) };
                    let hi = if i == n - 1 { upper } else { Some(&inner.seps[i]) };
                    let (count, h) = child.check(lo, hi);
                    assert!(count > 0, "empty child");
                    assert_eq!(count, inner.counts[i], "stale subtree count");
                    assert!(height.is_none_or(|x| x == h), "uneven height");
                    height = Some(h);
                    total += count;
                }
                (total, height.unwrap_or(0) + 1)
            }
        }
    }
}
