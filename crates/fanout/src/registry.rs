//! The node's sessions, by session id and by user. Only sessions whose
//! sockets (or resume windows) live on this node are here: there is no
//! global session table.
//!
//! The table is typed by the layer that owns the sessions (the gateway
//! holds a `Registry<SessionHandle>`); the layers below it see the same
//! table through [`SessionTable`], as [`Sink`]s. Nothing is downcast.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use hashbrown::{DefaultHashBuilder, HashTable};

use protocol::UserId;

use super::by_id::ById;
use super::{Recipient, Sink};

/// The node's sessions as fan-out and the actors see them: recipients,
/// looked up and removed, never added (only their owner makes them).
pub trait SessionTable: Send + Sync {
    fn get(&self, id: &str) -> Option<Sink>;
    fn of_user(&self, user: UserId) -> Vec<Sink>;
    fn remove(&self, id: &str);
    fn len(&self) -> usize;
    /// Closes every session opened with one of these (revoked) tokens;
    /// how many.
    fn revoke(&self, _token_hashes: &[[u8; 32]]) -> usize {
        0
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A node that serves no sockets (tools that seed a store, tests of the
/// actors alone).
pub struct NoSessions;

impl SessionTable for NoSessions {
    fn get(&self, _: &str) -> Option<Sink> {
        None
    }
    fn of_user(&self, _: UserId) -> Vec<Sink> {
        Vec::new()
    }
    fn remove(&self, _: &str) {}
    fn len(&self) -> usize {
        0
    }
}

/// Sessions of type `S`, by id and by user.
pub struct Registry<S> {
    /// Guards both maps together; never held across an await.
    inner: Mutex<Inner<S>>,
}

/// The sessions by id, and by user in a table of the sessions themselves
/// hashed by their user (8 bytes a bucket, not a list per user: issue #31's
/// memory diet): a user's sessions are the entries with the user's hash
/// and id.
struct Inner<S> {
    by_id: ById<Arc<S>>,
    by_user: HashTable<Arc<S>>,
    hasher: DefaultHashBuilder,
}

impl<S> Default for Registry<S> {
    fn default() -> Self {
        Registry { inner: Mutex::new(Inner { by_id: ById::default(), by_user: HashTable::new(), hasher: DefaultHashBuilder::default() }) }
    }
}

impl<S: Recipient> Inner<S> {
    fn unlink_user(&mut self, s: &Arc<S>) {
        let hash = self.hasher.hash_one(s.user_id());
        if let Ok(e) = self.by_user.find_entry(hash, |x| Arc::ptr_eq(x, s)) {
            e.remove();
        }
    }
}

impl<S: Recipient> Registry<S> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<S>> {
        self.inner.lock().expect("session registry poisoned")
    }

    pub fn insert(&self, s: Arc<S>) {
        let mut g = self.lock();
        let g = &mut *g;
        // The same id again replaces the session (as a map insert would).
        if let Some(old) = g.by_id.insert(s.clone()) {
            g.unlink_user(&old);
        }
        let hasher = &g.hasher;
        g.by_user.insert_unique(hasher.hash_one(s.user_id()), s, |x| hasher.hash_one(x.user_id()));
    }

    pub fn remove(&self, id: &str) {
        let mut g = self.lock();
        if let Some(s) = g.by_id.remove(id) {
            g.unlink_user(&s);
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<S>> {
        self.lock().by_id.get(id).cloned()
    }

    pub fn of_user(&self, user: UserId) -> Vec<Arc<S>> {
        let g = self.lock();
        g.by_user.iter_hash(g.hasher.hash_one(user)).filter(|s| s.user_id() == user).cloned().collect()
    }

    /// A snapshot of every session (the sweeper and shutdown walk it without holding the lock).
    pub fn all(&self) -> Vec<Arc<S>> {
        self.lock().by_id.iter().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<S: Recipient> SessionTable for Registry<S> {
    fn get(&self, id: &str) -> Option<Sink> {
        Registry::get(self, id).map(|s| s as Sink)
    }
    fn of_user(&self, user: UserId) -> Vec<Sink> {
        Registry::of_user(self, user).into_iter().map(|s| s as Sink).collect()
    }
    fn remove(&self, id: &str) {
        Registry::remove(self, id)
    }
    fn len(&self) -> usize {
        Registry::len(self)
    }
    fn revoke(&self, token_hashes: &[[u8; 32]]) -> usize {
        // Rare (a logout elsewhere, a password change): a pass over the
        // node's sessions, outside the table's lock.
        let all: Vec<Arc<S>> = self.lock().by_id.iter().cloned().collect();
        all.iter().filter(|s| s.revoke(token_hashes)).count()
    }
}
