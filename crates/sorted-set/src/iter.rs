//! In-order iteration over an index range of the tree.

use std::iter::FusedIterator;

use crate::node::{Internal, Node};

/// Iterator over the keys of a [`SortedSet`](crate::SortedSet) in an index
/// range, in ascending order. Created by `range` and `iter`.
pub struct Iter<'a, K> {
    /// The internal nodes on the path to the current leaf, each with the
    /// index of the child we are in. Depth is O(log n), a dozen at most.
    stack: Vec<(&'a Internal<K>, usize)>,
    leaf: std::slice::Iter<'a, K>,
    remaining: usize,
}

impl<'a, K> Iter<'a, K> {
    /// Positions the iterator on the `start`-th key; yields `count` keys.
    /// The caller guarantees `start + count <= root.len()`.
    pub(crate) fn new(root: &'a Node<K>, mut start: usize, count: usize) -> Self {
        let mut stack = Vec::new();
        let mut node = root;
        if count == 0 {
            return Self { stack, leaf: [].iter(), remaining: 0 };
        }
        loop {
            match node {
                Node::Leaf(keys) => return Self { stack, leaf: keys[start..].iter(), remaining: count },
                Node::Internal(inner) => {
                    let (i, rest) = inner.child_at(start).expect("start < len is checked by the caller");
                    stack.push((&**inner, i));
                    start = rest;
                    node = &inner.children[i];
                }
            }
        }
    }

    /// Moves to the first key of the next leaf.
    fn next_leaf(&mut self) -> Option<()> {
        // Climb to the nearest ancestor with a child to the right...
        let mut node = loop {
            let (inner, i) = self.stack.last_mut()?;
            if *i + 1 < inner.children.len() {
                *i += 1;
                break &inner.children[*i];
            }
            self.stack.pop();
        };
        // ...then down its leftmost path.
        loop {
            match node {
                Node::Leaf(keys) => {
                    self.leaf = keys.iter();
                    return Some(());
                }
                Node::Internal(inner) => {
                    self.stack.push((&**inner, 0));
                    node = &inner.children[0];
                }
            }
        }
    }
}

impl<'a, K> Iterator for Iter<'a, K> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(key) = self.leaf.next() {
                self.remaining -= 1;
                return Some(key);
            }
            self.next_leaf()?;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<K> ExactSizeIterator for Iter<'_, K> {}

impl<K> FusedIterator for Iter<'_, K> {}
