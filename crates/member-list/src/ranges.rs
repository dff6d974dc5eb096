//! Range subscriptions: turning a batch of full-list [`Change`]s into the
//! ops one subscriber must receive for the ranges it watches.
//!
//! The client model (see the README): per subscribed range the client keeps
//! a plain list of the items at those indices and applies ops literally;
//! `INSERT` shifts later items of that range copy and the copy is kept
//! truncated to the range length. Every op we emit has its index inside one
//! of the subscriber's ranges, and after applying them each copy equals a
//! fresh SYNC of its range.

use crate::list::MemberList;
use crate::model::{Change, Item};

/// Ranges are handed out in whole chunks of this many items.
pub const CHUNK: usize = 100;

/// An inclusive index range `[start, end]` of the list, as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListRange {
    pub start: usize,
    pub end: usize,
}

impl ListRange {
    /// The `k`-th chunk, `[k*100, k*100+99]`.
    pub fn chunk(k: usize) -> Self {
        ListRange { start: k * CHUNK, end: k * CHUNK + CHUNK - 1 }
    }

    /// Whether `index` lies in the range.
    pub fn contains(&self, index: usize) -> bool {
        (self.start..=self.end).contains(&index)
    }
}

/// The last chunk whose end index fits in a `usize`. Indices beyond it
/// (a client may send any `u64`) are no list's, and `ListRange::chunk` of a
/// later chunk would overflow.
const LAST_CHUNK: usize = (usize::MAX - (CHUNK - 1)) / CHUNK;

/// Normalises requested `[start, end]` pairs to the sorted, deduplicated
/// 100-item chunks that cover them, at most `max_chunks` of them (the first
/// ones). Inverted pairs are swapped; indices past [`LAST_CHUNK`] are
/// dropped. The caller enforces protocol limits (Discord: at most 3 ranges
/// spanning at most 300 each) before this.
pub fn normalize(requested: &[(usize, usize)], max_chunks: usize) -> Vec<ListRange> {
    let mut chunks: Vec<usize> = Vec::new();
    for &(a, b) in requested {
        // `lo > hi` (the whole pair past the last chunk) yields nothing.
        let (lo, hi) = (a.min(b) / CHUNK, (a.max(b) / CHUNK).min(LAST_CHUNK));
        // Bounded by max_chunks so a huge request cannot allocate much.
        chunks.extend((lo..=hi).take(max_chunks));
    }
    chunks.sort_unstable();
    chunks.dedup();
    chunks.truncate(max_chunks);
    chunks.into_iter().map(ListRange::chunk).collect()
}

/// An op for one subscriber.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The full contents of a range (as many items as exist, up to its
    /// length).
    Sync {
        range: ListRange,
        items: Vec<Item>,
    },
    Insert {
        index: usize,
        item: Item,
    },
    Update {
        index: usize,
        item: Item,
    },
    Delete {
        index: usize,
    },
    /// The client must forget this range.
    Invalidate {
        range: ListRange,
    },
}

impl MemberList {
    /// SYNC ops for `ranges` in the current state.
    pub fn sync_ops(&self, ranges: &[ListRange]) -> Vec<Op> {
        ranges.iter().map(|&range| Op::Sync { range, items: self.items(range.start..=range.end) }).collect()
    }

    /// The ops a subscriber of `ranges` must receive for `changes`.
    ///
    /// `self` must be in the state right after `changes` (call this before
    /// the next mutation); `changes` must be one or more whole batches as
    /// returned by the mutating methods, in order. `ranges` must not
    /// overlap (as [`normalize`] guarantees).
    pub fn range_ops(&self, changes: &[Change], ranges: &[ListRange]) -> Vec<Op> {
        let mut ops = Vec::new();
        if ranges.is_empty() || changes.is_empty() {
            return ops;
        }
        if changes.contains(&Change::Reset) {
            return self.sync_ops(ranges);
        }
        // Walk the batch backwards to know the list length after each
        // change.
        let mut len_after = vec![0; changes.len()];
        let mut len = self.len();
        for (k, change) in changes.iter().enumerate().rev() {
            len_after[k] = len;
            match change {
                Change::Insert { .. } => len -= 1,
                Change::Delete { .. } => len += 1,
                Change::Update { .. } | Change::Reset => {}
            }
        }
        let later = |k: usize| &changes[k + 1..];
        for (k, change) in changes.iter().enumerate() {
            let n_after = len_after[k];
            for r in ranges {
                match change {
                    Change::Insert { index: i, item } => {
                        let i = *i;
                        let n_before = n_after - 1;
                        if i > r.end || (i < r.start && n_after <= r.start) {
                            continue;
                        }
                        if n_before > r.end {
                            // The range was full: its last item falls out.
                            ops.push(Op::Delete { index: r.end });
                        }
                        if i < r.start {
                            // Everything shifted by one: the item before
                            // the range is now its first.
                            let item = self.item_after(later(k), r.start);
                            ops.push(Op::Insert { index: r.start, item });
                        } else {
                            ops.push(Op::Insert { index: i, item: item.clone() });
                        }
                    }
                    Change::Delete { index: i, .. } => {
                        let i = *i;
                        let n_before = n_after + 1;
                        if i > r.end || (i < r.start && n_before <= r.start) {
                            continue;
                        }
                        // Before the range, the range's first item shifts
                        // out; inside, the deleted one goes.
                        ops.push(Op::Delete { index: i.max(r.start) });
                        if n_after > r.end {
                            // The item after the range shifts in at its end.
                            let item = self.item_after(later(k), r.end);
                            ops.push(Op::Insert { index: r.end, item });
                        }
                    }
                    Change::Update { index: i, item, .. } => {
                        if r.contains(*i) {
                            ops.push(Op::Update { index: *i, item: item.clone() });
                        }
                    }
                    Change::Reset => unreachable!("handled above"),
                }
            }
        }
        ops
    }

    /// The item at `index` in the state before `later` was applied, given
    /// that `self` is the state after it: follow the index forward through
    /// `later`; a `Delete` or `Update` that hits it carries the item.
    fn item_after(&self, later: &[Change], mut index: usize) -> Item {
        for change in later {
            match change {
                Change::Insert { index: i, .. } => {
                    if index >= *i {
                        index += 1;
                    }
                }
                Change::Delete { index: i, old } => {
                    if index == *i {
                        return old.clone();
                    }
                    if index > *i {
                        index -= 1;
                    }
                }
                Change::Update { index: i, old, .. } => {
                    if index == *i {
                        return old.clone();
                    }
                }
                Change::Reset => unreachable!("batches with Reset are synced whole"),
            }
        }
        self.item(index).expect("index was checked against the list length")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_rounds_to_chunks_sorts_and_dedups() {
        let r = normalize(&[(150, 250), (0, 99), (99, 0)], 10);
        assert_eq!(r, vec![ListRange::chunk(0), ListRange::chunk(1), ListRange::chunk(2)]);
        assert_eq!(r[2], ListRange { start: 200, end: 299 });
        assert_eq!(normalize(&[(0, usize::MAX)], 3).len(), 3);
        assert!(normalize(&[], 3).is_empty());
    }

    #[test]
    fn normalize_drops_indices_whose_chunk_end_overflows() {
        // Found by fuzzing (fuzz/ member_list_ranges): a pair near
        // usize::MAX made `ListRange::chunk` overflow.
        // The partial chunk at the very end (usize::MAX - 15 ..) is dropped.
        assert!(normalize(&[(usize::MAX - 15, usize::MAX)], 15).is_empty());
        let last = normalize(&[(usize::MAX - 33, usize::MAX)], 15);
        assert_eq!(last, vec![ListRange::chunk(LAST_CHUNK)]);
        assert_eq!(last[0].end, usize::MAX - 16);
        assert_eq!(normalize(&[(usize::MAX - 300, usize::MAX)], 15).len(), 3);
        assert_eq!(normalize(&[(0, 5), (usize::MAX, usize::MAX)], 15), vec![ListRange::chunk(0)]);
    }
}
