//! The node's sessions, by session id and by user. Only sessions whose
//! sockets (or resume windows) live on this node are here: there is no
//! global session table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use protocol::UserId;

use super::Sink;

#[derive(Default)]
pub struct Registry {
    /// Guards both maps together; never held across an await.
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<Arc<str>, Sink>,
    by_user: HashMap<UserId, Vec<Sink>>,
}

impl Registry {
    pub fn insert(&self, s: Sink) {
        let mut g = self.inner.lock().expect("session registry poisoned");
        g.by_user.entry(s.user_id()).or_default().push(s.clone());
        g.by_id.insert(s.id().clone(), s);
    }

    pub fn remove(&self, id: &str) {
        let mut g = self.inner.lock().expect("session registry poisoned");
        if let Some(s) = g.by_id.remove(id) {
            if let Some(v) = g.by_user.get_mut(&s.user_id()) {
                v.retain(|x| x.id().as_ref() != id);
                if v.is_empty() {
                    g.by_user.remove(&s.user_id());
                }
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<Sink> {
        self.inner.lock().expect("session registry poisoned").by_id.get(id).cloned()
    }

    pub fn of_user(&self, user: UserId) -> Vec<Sink> {
        self.inner.lock().expect("session registry poisoned").by_user.get(&user).cloned().unwrap_or_default()
    }

    /// A snapshot of every session (the sweeper and shutdown walk it without holding the lock).
    pub fn all(&self) -> Vec<Sink> {
        self.inner.lock().expect("session registry poisoned").by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("session registry poisoned").by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
