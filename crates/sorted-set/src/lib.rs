//! An order-statistic sorted set: a counted B+-tree whose every operation
//! also reports the element's index in sorted order.
//!
//! The lazy member list needs exactly this (see `crates/member-list/README.md`):
//! hundreds of thousands of members in one sort order, many mutations
//! per second, and for each mutation the index at which it happened, so that
//! index-based ops can go to the clients watching that part of the list.
//! Every operation here is one root-to-leaf walk, O(log n) with a fanout of
//! up to 64.
//!
//! - `node.rs`: the tree (nodes, split, merge, invariant checks).
//! - `iter.rs`: in-order iteration over an index range.
//!
//! ```
//! use sorted_set::SortedSet;
//!
//! let mut set = SortedSet::new();
//! assert_eq!(set.insert(20), Ok(0));
//! assert_eq!(set.insert(10), Ok(0));
//! assert_eq!(set.insert(20), Err(1)); // already there, at index 1
//! assert_eq!(set.rank(&20), Some(1));
//! assert_eq!(set.replace(&10, 30), Some((0, 1)));
//! assert_eq!(set.range(0..5).copied().collect::<Vec<_>>(), [20, 30]);
//! ```

mod iter;
mod node;

use std::fmt;
use std::ops::Range;

pub use iter::Iter;
use node::{Node, Spine};

/// An ordered set of unique keys with O(log n) access by key and by index.
///
/// Keys must not change their order while in the set (as with
/// `BTreeSet`); use [`SortedSet::replace`] to move a key.
pub struct SortedSet<K> {
    root: Node<K>,
    len: usize,
}

impl<K> SortedSet<K> {
    /// An empty set. Does not allocate.
    pub fn new() -> Self {
        Self { root: Node::empty(), len: 0 }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key at `index` in sorted order, or `None` if `index >= len()`.
    pub fn get(&self, index: usize) -> Option<&K> {
        if index >= self.len {
            return None;
        }
        self.root.get(index)
    }

    /// The smallest key.
    pub fn first(&self) -> Option<&K> {
        self.root.first()
    }

    /// The largest key.
    pub fn last(&self) -> Option<&K> {
        self.root.last()
    }

    /// The keys at indices `range`, in order. The range is clamped to
    /// `0..len()`; an empty or inverted range yields nothing. Never panics.
    pub fn range(&self, range: Range<usize>) -> Iter<'_, K> {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        Iter::new(&self.root, start, end - start)
    }

    /// All keys, in order.
    pub fn iter(&self) -> Iter<'_, K> {
        self.range(0..self.len)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.root = Node::empty();
        self.len = 0;
    }
}

impl<K: Ord> SortedSet<K> {
    /// `Ok(index)` of `key` if present, else `Err(index it would be
    /// inserted at)`, like `slice::binary_search`.
    pub fn search(&self, key: &K) -> Result<usize, usize> {
        self.root.search(key)
    }

    /// The index of `key`, if present.
    pub fn rank(&self, key: &K) -> Option<usize> {
        self.search(key).ok()
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &K) -> bool {
        self.search(key).is_ok()
    }

    /// Debug aid for tests: panics if any structural invariant is broken
    /// (ordering, separators, subtree counts, capacities, equal leaf depth).
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        let (count, _height) = self.root.check(None, None);
        assert_eq!(count, self.len, "len out of sync");
    }
}

impl<K: Ord + Clone> SortedSet<K> {
    /// Inserts `key`. `Ok(index)` where it now is, or `Err(index)` of the
    /// equal key already present (the set is then unchanged).
    pub fn insert(&mut self, key: K) -> Result<usize, usize> {
        let spine = Spine { left: true, right: true };
        let (index, split) = self.root.insert(key, spine)?;
        self.len += 1;
        if let Some((sep, right)) = split {
            let left = std::mem::replace(&mut self.root, Node::empty());
            self.root = Node::Internal(Box::new(node::Internal {
                counts: vec![left.len(), right.len()],
                seps: vec![sep],
                children: vec![left, right],
            }));
        }
        Ok(index)
    }

    /// Removes `key`, returning the index it had.
    pub fn remove(&mut self, key: &K) -> Option<usize> {
        let index = self.root.remove(key)?;
        self.len -= 1;
        // Shrink the tree while the root has a single child.
        while let Node::Internal(inner) = &mut self.root {
            if inner.children.is_empty() {
                self.root = Node::empty();
                break;
            }
            if inner.children.len() != 1 {
                break;
            }
            let only = inner.children.pop().expect("checked: one child");
            self.root = only;
        }
        Some(index)
    }

    /// Replaces `old` by `new` (typically the same item with a changed sort
    /// field), returning `(index old had, index new has)`.
    ///
    /// Returns `None` and leaves the set unchanged if `old` is absent, or
    /// if `new` is already present as a key other than `old`. If `new ==
    /// old` the stored key is overwritten in place and both indices are
    /// equal.
    pub fn replace(&mut self, old: &K, new: K) -> Option<(usize, usize)> {
        let old_index = self.remove(old)?;
        match self.insert(new) {
            Ok(new_index) => Some((old_index, new_index)),
            Err(_) => {
                // `new` collides with another key: put `old` back.
                let back = self.insert(old.clone());
                debug_assert_eq!(back, Ok(old_index));
                None
            }
        }
    }
}

impl<K> Default for SortedSet<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: fmt::Debug> fmt::Debug for SortedSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<'a, K> IntoIterator for &'a SortedSet<K> {
    type Item = &'a K;
    type IntoIter = Iter<'a, K>;

    fn into_iter(self) -> Iter<'a, K> {
        self.iter()
    }
}

impl<K: Ord + Clone> FromIterator<K> for SortedSet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let mut set = Self::new();
        set.extend(iter);
        set
    }
}

impl<K: Ord + Clone> Extend<K> for SortedSet<K> {
    /// Inserts each key; duplicates are ignored.
    fn extend<I: IntoIterator<Item = K>>(&mut self, iter: I) {
        for key in iter {
            // A duplicate leaves the set unchanged, as for `BTreeSet`.
            let _already_present = self.insert(key);
        }
    }
}
