//! Sessions by id as a table of the pointers themselves (each knows its
//! id): a bucket is the pointer alone, not a map entry with the id's `Arc`
//! again as its key (issue #31's memory diet: every session has one in the
//! node's [`Registry`](crate::Registry) and in each of its guilds'
//! [`Subscribers`](crate::Subscribers)).

use std::hash::BuildHasher;
use std::ops::Deref;

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};

use crate::Recipient;

pub(crate) struct ById<P> {
    table: HashTable<P>,
    hasher: DefaultHashBuilder,
}

impl<P> Default for ById<P> {
    fn default() -> Self {
        ById { table: HashTable::new(), hasher: DefaultHashBuilder::default() }
    }
}

impl<P: Deref> ById<P>
where
    P::Target: Recipient,
{
    pub(crate) fn get(&self, id: &str) -> Option<&P> {
        self.table.find(self.hasher.hash_one(id), |p| p.id().as_ref() == id)
    }

    /// Adds `p`; returns the one with the same id it replaces.
    pub(crate) fn insert(&mut self, p: P) -> Option<P> {
        let hasher = &self.hasher;
        match self.table.entry(hasher.hash_one(p.id().as_ref()), |x| x.id() == p.id(), |x| hasher.hash_one(x.id().as_ref())) {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), p)),
            Entry::Vacant(e) => {
                e.insert(p);
                None
            }
        }
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<P> {
        let hash = self.hasher.hash_one(id);
        self.table.find_entry(hash, |p| p.id().as_ref() == id).ok().map(|e| e.remove().0)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &P> {
        self.table.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }
}
