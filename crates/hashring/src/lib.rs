//! A consistent-hash ring that places guilds (u64 snowflake ids) on cluster
//! nodes (u64 node ids).
//!
//! - [`Ring`] is an immutable snapshot: built once from a set of node ids and
//!   a number of virtual nodes per node, then only read. A lookup is one hash,
//!   one read of a bucket index and a search of the ~1 point in that bucket
//!   of a sorted `Vec<u64>`; nothing is copied.
//! - [`SharedRing`] publishes the current snapshot to every thread through an
//!   [`ArcSwap`]: readers never lock and never copy the ring, a membership
//!   change builds a new `Ring` and swaps it in, and every swap bumps an
//!   epoch.
//!
//! Placement depends only on the *set* of node ids and the vnode count: the
//! same inputs give the same ring on every build, on every process, in any
//! insertion order.
//!
//! ```
//! use hashring::{Ring, SharedRing};
//!
//! let ring = Ring::new([10, 20, 30]);
//! let node = ring.lookup(81_384_788_765_712_384).unwrap();
//! assert!([10, 20, 30].contains(&node));
//! // Hand-off order: the owner first, then its distinct successors.
//! let order = ring.lookup_n(81_384_788_765_712_384, 2);
//! assert_eq!(order[0], node);
//!
//! let shared = SharedRing::new(ring);
//! assert_eq!(shared.load().lookup(81_384_788_765_712_384), Some(node));
//! shared.store(Ring::new([10, 20, 30, 40]));
//! assert_eq!(shared.epoch(), 1);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};

/// Virtual nodes per node unless told otherwise.
pub const DEFAULT_VNODES: u32 = 128;

/// The SplitMix64 increment (2^64 / golden ratio, odd).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// Separates the node-id seed domain from the key domain.
const NODE_SEED: u64 = 0xD6E8_FEB8_6659_FD93;

/// The SplitMix64 / Stafford "mix13" finaliser: a bijection on u64 in which
/// every input bit flips every output bit with probability ~1/2.
#[inline(always)]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Where a key (a guild id) lands on the ring: the first output of a
/// SplitMix64 generator seeded with the key.
#[inline(always)]
pub fn key_hash(key: u64) -> u64 {
    mix64(key.wrapping_add(GAMMA))
}

/// The ring point of virtual node `vnode` of node `node`: output `vnode + 1`
/// of a SplitMix64 generator whose seed is the (mixed) node id.
#[inline]
pub fn point_hash(node: u64, vnode: u32) -> u64 {
    let seed = mix64(node ^ NODE_SEED);
    mix64(seed.wrapping_add((u64::from(vnode) + 1).wrapping_mul(GAMMA)))
}

/// The bucket index has at most 2^20 + 1 entries (4 MiB).
const MAX_INDEX_BITS: u32 = 20;

/// An immutable consistent-hash ring.
///
/// Points are kept as two parallel vectors, `points` (sorted ascending) and
/// `owners` (index into `nodes`). A lookup finds the first point at or after
/// the key's hash; instead of a binary search over all points (13 dependent
/// loads at 64 x 128 points) it first reads a bucket index: the top bits of
/// the hash select a bucket, `index[b]..index[b + 1]` are the points in it
/// (about one, since there are as many buckets as points rounded up to a
/// power of two), and a search of that short range finishes the job.
#[derive(Clone)]
pub struct Ring {
    /// Sorted, deduplicated node ids.
    nodes: Vec<u64>,
    /// Sorted ring points.
    points: Vec<u64>,
    /// `owners[i]` is the index in `nodes` of the node that owns `points[i]`.
    owners: Vec<u32>,
    /// `index[b]` is the position of the first point at or above
    /// `b << shift`; `index[2^bits]` is `points.len()`. Empty for an empty
    /// ring.
    index: Vec<u32>,
    /// 64 minus the number of index bits (1..=MAX_INDEX_BITS).
    shift: u32,
    vnodes: u32,
    /// Set by [`SharedRing::store`]; 0 for a ring never published.
    epoch: u64,
}

impl Ring {
    /// A ring with no nodes: every lookup returns `None`.
    pub fn empty() -> Ring {
        Ring { nodes: Vec::new(), points: Vec::new(), owners: Vec::new(), index: Vec::new(), shift: 63, vnodes: DEFAULT_VNODES, epoch: 0 }
    }

    /// A ring of `nodes` with [`DEFAULT_VNODES`] virtual nodes each.
    /// Duplicate ids count once; the order of the ids does not matter.
    pub fn new(nodes: impl IntoIterator<Item = u64>) -> Ring {
        Ring::with_vnodes(nodes, DEFAULT_VNODES)
    }

    /// A ring of `nodes` with `vnodes` virtual nodes each.
    ///
    /// # Panics
    /// If `vnodes` is 0, or if there are more than `u32::MAX` nodes or the
    /// total number of points does not fit in memory.
    pub fn with_vnodes(nodes: impl IntoIterator<Item = u64>, vnodes: u32) -> Ring {
        assert!(vnodes > 0, "a ring needs at least one virtual node per node");
        let mut nodes: Vec<u64> = nodes.into_iter().collect();
        nodes.sort_unstable();
        nodes.dedup();
        assert!(nodes.len() <= u32::MAX as usize, "too many nodes");
        let total = nodes.len().checked_mul(vnodes as usize).filter(|&t| t < u32::MAX as usize).expect("too many points");
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(total);
        for (idx, &node) in nodes.iter().enumerate() {
            let seed = mix64(node ^ NODE_SEED);
            let mut state = seed;
            for _ in 0..vnodes {
                // Same as point_hash(node, k), without re-mixing the seed.
                state = state.wrapping_add(GAMMA);
                pairs.push((mix64(state), idx as u32));
            }
        }
        // Ties (two points with equal hashes, ~never) are broken by node
        // index, i.e. by node id, so the ring is still fully deterministic.
        pairs.sort_unstable();
        let (points, owners): (Vec<u64>, Vec<u32>) = pairs.into_iter().unzip();
        let (index, shift) = build_index(&points);
        Ring { nodes, points, owners, index, shift, vnodes, epoch: 0 }
    }

    /// The position in `points` of the first point at or after the key's
    /// hash, wrapping to 0 past the last point. Only for non-empty rings.
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        let h = key_hash(key);
        let b = (h >> self.shift) as usize;
        let (lo, hi) = (self.index[b] as usize, self.index[b + 1] as usize);
        // Points before `lo` are < b << shift <= h; points from `hi` on are
        // >= (b + 1) << shift > h. So the answer is in lo..=hi.
        let i = lo + self.points[lo..hi].partition_point(|&p| p < h);
        if i == self.points.len() {
            0
        } else {
            i
        }
    }

    /// The node that owns `key`, or `None` if the ring is empty.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<u64> {
        if self.points.is_empty() {
            return None;
        }
        let owner = self.owners[self.slot(key)];
        Some(self.nodes[owner as usize])
    }

    /// The first `n` distinct nodes met walking clockwise from `key`: the
    /// owner, then the nodes that would take the key over, in order. Fewer
    /// than `n` if the ring has fewer nodes; empty for an empty ring.
    pub fn lookup_n(&self, key: u64, n: usize) -> Vec<u64> {
        let want = n.min(self.nodes.len());
        let mut out = Vec::with_capacity(want);
        if want == 0 {
            return out;
        }
        let start = self.slot(key);
        let len = self.points.len();
        // Linear `contains` on `out` is fine for the small n of hand-off;
        // for large n, track seen nodes in a bitmap instead.
        let mut seen = if want > 16 { vec![false; self.nodes.len()] } else { Vec::new() };
        for i in (start..len).chain(0..start) {
            let owner = self.owners[i] as usize;
            let new = if seen.is_empty() { !out.contains(&self.nodes[owner]) } else { !std::mem::replace(&mut seen[owner], true) };
            if new {
                out.push(self.nodes[owner]);
                if out.len() == want {
                    break;
                }
            }
        }
        out
    }

    /// The node ids, sorted ascending, without duplicates.
    pub fn nodes(&self) -> &[u64] {
        &self.nodes
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if the ring has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Virtual nodes per node.
    pub fn vnodes(&self) -> u32 {
        self.vnodes
    }

    /// Whether `node` is on the ring.
    pub fn contains(&self, node: u64) -> bool {
        self.nodes.binary_search(&node).is_ok()
    }

    /// The [`SharedRing`] epoch at which this snapshot was stored; 0 if it
    /// was never stored in one.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The ring's points in order, with the node id that owns each.
    pub fn points(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + '_ {
        self.points.iter().zip(&self.owners).map(|(&p, &o)| (p, self.nodes[o as usize]))
    }
}

/// The bucket index over sorted `points`: as many buckets as points, rounded
/// up to a power of two (at least 2, at most 2^MAX_INDEX_BITS).
fn build_index(points: &[u64]) -> (Vec<u32>, u32) {
    if points.is_empty() {
        return (Vec::new(), 63);
    }
    let bits = points.len().next_power_of_two().trailing_zeros().clamp(1, MAX_INDEX_BITS);
    let shift = 64 - bits;
    let buckets = 1usize << bits;
    let mut index = Vec::with_capacity(buckets + 1);
    let mut i = 0;
    for b in 0..buckets as u64 {
        let lower = b << shift;
        while i < points.len() && points[i] < lower {
            i += 1;
        }
        index.push(i as u32);
    }
    index.push(points.len() as u32);
    (index, shift)
}

impl Default for Ring {
    fn default() -> Ring {
        Ring::empty()
    }
}

/// Two rings are equal when they place every key the same way: same nodes,
/// same vnode count, same points. The epoch is not compared.
impl PartialEq for Ring {
    fn eq(&self, other: &Ring) -> bool {
        self.vnodes == other.vnodes && self.nodes == other.nodes && self.points == other.points && self.owners == other.owners
    }
}

impl Eq for Ring {}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("nodes", &self.nodes)
            .field("vnodes", &self.vnodes)
            .field("points", &self.points.len())
            .field("epoch", &self.epoch)
            .finish()
    }
}

/// The current ring, shared by every thread of a process.
///
/// Readers call [`load`](SharedRing::load): lock-free, no copy of the ring,
/// just a reference count (or a thread-local debt slot) on the current
/// `Arc<Ring>`. Writers build a whole new [`Ring`] and
/// [`store`](SharedRing::store) it; readers holding the old snapshot keep
/// using it until they drop it.
pub struct SharedRing {
    current: ArcSwap<Ring>,
    /// The epoch of the last store, published after the ring itself.
    epoch: AtomicU64,
    /// Serialises writers so that epochs and snapshots pair up exactly.
    writer: Mutex<()>,
}

impl SharedRing {
    /// Starts at epoch 0 with `ring`.
    pub fn new(mut ring: Ring) -> SharedRing {
        ring.epoch = 0;
        SharedRing { current: ArcSwap::from_pointee(ring), epoch: AtomicU64::new(0), writer: Mutex::new(()) }
    }

    /// The current snapshot, lock-free. Keep the guard short-lived (a few
    /// lookups); use [`load_full`](SharedRing::load_full) to hold a snapshot
    /// across an await point or for long.
    #[inline]
    pub fn load(&self) -> Guard<Arc<Ring>> {
        self.current.load()
    }

    /// The current snapshot as an owned `Arc` (one reference-count
    /// increment).
    pub fn load_full(&self) -> Arc<Ring> {
        self.current.load_full()
    }

    /// Publishes `ring` as the current snapshot and returns its epoch, one
    /// more than the previous store's. Once `epoch()` returns `e`, every
    /// later `load()` returns the snapshot of store `e` or a newer one.
    pub fn store(&self, mut ring: Ring) -> u64 {
        let _writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let epoch = self.epoch.load(Ordering::Relaxed) + 1;
        ring.epoch = epoch;
        self.current.store(Arc::new(ring));
        self.epoch.store(epoch, Ordering::Release);
        epoch
    }

    /// The number of stores so far.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

impl Default for SharedRing {
    fn default() -> SharedRing {
        SharedRing::new(Ring::empty())
    }
}

impl fmt::Debug for SharedRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedRing").field("epoch", &self.epoch()).field("ring", &**self.load()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_matches_point_hash() {
        let ring = Ring::with_vnodes([7, 3], 4);
        let mut expected: Vec<(u64, u64)> = [3u64, 7].iter().flat_map(|&n| (0..4).map(move |k| (point_hash(n, k), n))).collect();
        expected.sort_unstable();
        assert_eq!(ring.points().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn lookup_is_first_point_at_or_after_hash() {
        let ring = Ring::with_vnodes([1, 2, 3], 16);
        let pts: Vec<(u64, u64)> = ring.points().collect();
        for key in 0..2000u64 {
            let h = key_hash(key);
            let want = pts.iter().find(|&&(p, _)| p >= h).unwrap_or(&pts[0]).1;
            assert_eq!(ring.lookup(key), Some(want));
        }
        // A key whose hash is exactly a point belongs to that point's node.
        let (p, owner) = pts[5];
        let i = ring.points.partition_point(|&x| x < p);
        assert_eq!(ring.nodes[ring.owners[i] as usize], owner);
    }

    #[test]
    fn bucket_index_agrees_with_binary_search() {
        for (n, v) in [(1u64, 1u32), (1, 2), (1, 3), (2, 1), (3, 5), (8, 128), (64, 128), (5, 1000)] {
            let ring = Ring::with_vnodes(0..n, v);
            assert!(ring.index.len() >= 3 && ring.index.len() > ring.points.len());
            let check = |h: u64| {
                let b = (h >> ring.shift) as usize;
                let (lo, hi) = (ring.index[b] as usize, ring.index[b + 1] as usize);
                let i = lo + ring.points[lo..hi].partition_point(|&p| p < h);
                assert_eq!(i, ring.points.partition_point(|&p| p < h), "{n}x{v} hash {h:#x}");
            };
            for &p in &ring.points {
                for h in [p.wrapping_sub(1), p, p.wrapping_add(1)] {
                    check(h);
                }
            }
            for h in [0, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
                check(h);
            }
            for k in 0..5000 {
                check(key_hash(k));
            }
        }
    }

    #[test]
    fn empty_ring() {
        let ring = Ring::new([]);
        assert!(ring.is_empty());
        assert_eq!(ring.len(), 0);
        assert_eq!(ring.lookup(42), None);
        assert!(ring.lookup_n(42, 3).is_empty());
        assert_eq!(SharedRing::default().load().lookup(1), None);
    }

    #[test]
    fn epochs() {
        let shared = SharedRing::new(Ring::new([1]));
        assert_eq!((shared.epoch(), shared.load().epoch()), (0, 0));
        let old = shared.load_full();
        assert_eq!(shared.store(Ring::new([1, 2])), 1);
        assert_eq!(shared.store(Ring::new([1, 2, 3])), 2);
        assert_eq!((shared.epoch(), shared.load().epoch(), shared.load().len()), (2, 2, 3));
        // The old snapshot is untouched.
        assert_eq!((old.epoch(), old.len()), (0, 1));
    }
}
