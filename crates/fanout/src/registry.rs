//! The node's sessions, by session id and by user. Only sessions whose
//! sockets (or resume windows) live on this node are here: there is no
//! global session table.
//!
//! The table is typed by the layer that owns the sessions (the gateway
//! holds a `Registry<SessionHandle>`); the layers below it see the same
//! table through [`SessionTable`], as [`Sink`]s. Nothing is downcast.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use protocol::UserId;

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

struct Inner<S> {
    by_id: HashMap<Arc<str>, Arc<S>>,
    by_user: HashMap<UserId, Vec<Arc<S>>>,
}

impl<S> Default for Registry<S> {
    fn default() -> Self {
        Registry { inner: Mutex::new(Inner { by_id: HashMap::new(), by_user: HashMap::new() }) }
    }
}

impl<S: Recipient> Registry<S> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<S>> {
        self.inner.lock().expect("session registry poisoned")
    }

    pub fn insert(&self, s: Arc<S>) {
        let mut g = self.lock();
        g.by_user.entry(s.user_id()).or_default().push(s.clone());
        g.by_id.insert(s.id().clone(), s);
    }

    pub fn remove(&self, id: &str) {
        let mut g = self.lock();
        if let Some(s) = g.by_id.remove(id) {
            if let Some(v) = g.by_user.get_mut(&s.user_id()) {
                v.retain(|x| x.id().as_ref() != id);
                if v.is_empty() {
                    g.by_user.remove(&s.user_id());
                }
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<S>> {
        self.lock().by_id.get(id).cloned()
    }

    pub fn of_user(&self, user: UserId) -> Vec<Arc<S>> {
        self.lock().by_user.get(&user).cloned().unwrap_or_default()
    }

    /// A snapshot of every session (the sweeper and shutdown walk it without holding the lock).
    pub fn all(&self) -> Vec<Arc<S>> {
        self.lock().by_id.values().cloned().collect()
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
        let all: Vec<Arc<S>> = self.lock().by_id.values().cloned().collect();
        all.iter().filter(|s| s.revoke(token_hashes)).count()
    }
}
