//! One shared copy of each user record per node.
//!
//! Every guild a user belongs to keeps that user's record for its member
//! list, GUILD_CREATE and chunks. Loaded separately, a user in five guilds
//! cost five copies (about 150 B each with the username). Guild actors
//! intern the records they load or receive here, so equal records share one
//! allocation. The cache holds weak references: a record lives as long as
//! some guild holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use protocol::UserId;
use store::UserRecord;

#[derive(Default)]
pub struct UserCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<UserId, Weak<UserRecord>>,
    /// Live entries after the last sweep; the next sweep runs when the map
    /// has doubled since, so sweeping costs O(1) per insert on average.
    swept_len: usize,
}

impl UserCache {
    /// The shared copy of `user`: the cached one if it is equal, otherwise
    /// `user` itself, which replaces the cached one (a newer record).
    pub fn intern(&self, user: UserRecord) -> Arc<UserRecord> {
        let mut inner = self.inner.lock().expect("user cache poisoned");
        if let Some(live) = inner.map.get(&user.id).and_then(Weak::upgrade) {
            if *live == user {
                return live;
            }
        }
        let rec = Arc::new(user);
        inner.map.insert(rec.id, Arc::downgrade(&rec));
        if inner.map.len() > 2 * inner.swept_len.max(1024) {
            inner.map.retain(|_, w| w.strong_count() > 0);
            inner.swept_len = inner.map.len();
        }
        rec
    }

    /// Entries in the cache, live or not yet swept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().expect("user cache poisoned").map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: u64, name: &str) -> UserRecord {
        UserRecord { id: UserId(id), username: name.into(), global_name: None, avatar: None, bot: false, flags: 0, created_at: 0 }
    }

    #[test]
    fn equal_records_share_one_allocation_and_changed_ones_replace_it() {
        let cache = UserCache::default();
        let a = cache.intern(user(1, "ann"));
        let b = cache.intern(user(1, "ann"));
        assert!(Arc::ptr_eq(&a, &b));
        let renamed = cache.intern(user(1, "anne"));
        assert!(!Arc::ptr_eq(&a, &renamed));
        assert_eq!(renamed.username, "anne");
        // The newer record is the one shared from now on.
        assert!(Arc::ptr_eq(&renamed, &cache.intern(user(1, "anne"))));
        // The old copy stays valid for whoever still holds it.
        assert_eq!(a.username, "ann");
    }

    #[test]
    fn dropped_records_are_swept() {
        let cache = UserCache::default();
        for i in 0..5000 {
            drop(cache.intern(user(i, "x")));
        }
        assert!(cache.len() < 5000, "dead entries are swept, {} left", cache.len());
        let kept = cache.intern(user(7, "x"));
        assert!(Arc::ptr_eq(&kept, &cache.intern(user(7, "x"))));
    }
}
