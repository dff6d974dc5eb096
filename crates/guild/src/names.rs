//! Members by name prefix, for op 8's `query` and REST's member search:
//! every member under the lowercase forms of their username, global name
//! and nickname, in one ordered set, so a prefix is one range scan however
//! large the guild. Built the first time a guild is searched (most never
//! are), then kept in step with the members.

use std::collections::{BTreeSet, HashSet};
use std::ops::Bound;

use protocol::UserId;
use store::{MemberRecord, UserRecord};

use crate::members::MemberRef;

/// A member as the index reads them: their id and the names they are
/// found by (username, global name, nickname).
pub trait Named {
    fn id(&self) -> UserId;
    fn names(&self) -> [Option<&str>; 3];
}

impl Named for (&MemberRecord, &UserRecord) {
    fn id(&self) -> UserId {
        self.1.id
    }
    fn names(&self) -> [Option<&str>; 3] {
        [Some(self.1.username.as_str()), self.1.global_name.as_deref(), self.0.nick.as_deref()]
    }
}

impl Named for MemberRef<'_> {
    fn id(&self) -> UserId {
        MemberRef::id(self)
    }
    fn names(&self) -> [Option<&str>; 3] {
        [Some(self.username()), self.global_name(), self.nick()]
    }
}

#[derive(Default)]
pub struct Names {
    set: BTreeSet<(Box<str>, UserId)>,
}

/// The names a member is found by, lowercased, without repeats.
fn keys(m: &impl Named) -> impl Iterator<Item = Box<str>> {
    let mut out: Vec<Box<str>> = Vec::with_capacity(3);
    for n in m.names().into_iter().flatten() {
        let k: Box<str> = n.to_lowercase().into();
        if !k.is_empty() && !out.contains(&k) {
            out.push(k);
        }
    }
    out.into_iter()
}

impl Names {
    pub fn build(members: impl Iterator<Item = impl Named>) -> Names {
        // Collected, then built in one go (sorted, then laid out), which is
        // several times faster than one insert at a time.
        let keys: Vec<(Box<str>, UserId)> = members
            .flat_map(|m| {
                let id = m.id();
                keys(&m).map(move |k| (k, id))
            })
            .collect();
        Names { set: keys.into_iter().collect() }
    }

    /// A member changed: `before` as the index has them (`None`: new),
    /// `after` as they are now (`None`: gone).
    pub fn replace(&mut self, before: Option<impl Named>, after: Option<impl Named>) {
        if let Some(m) = before {
            for k in keys(&m) {
                self.set.remove(&(k, m.id()));
            }
        }
        if let Some(m) = after {
            for k in keys(&m) {
                self.set.insert((k, m.id()));
            }
        }
    }

    /// Up to `limit` members with a name starting with `query` (any case),
    /// in the order of the names they matched by.
    pub fn search(&self, query: &str, limit: usize) -> Vec<UserId> {
        let q = query.to_lowercase();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let from = (Box::<str>::from(q.as_str()), UserId(0));
        for (k, id) in self.set.range((Bound::Included(from), Bound::Unbounded)) {
            if out.len() >= limit || !k.starts_with(q.as_str()) {
                break;
            }
            if seen.insert(*id) {
                out.push(*id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::GuildId;

    fn member(id: u64, username: &str, global: Option<&str>, nick: Option<&str>) -> (MemberRecord, UserRecord) {
        let u = UserRecord {
            id: UserId(id),
            username: username.into(),
            global_name: global.map(Into::into),
            avatar: None,
            bot: false,
            flags: 0,
            created_at: 0,
        };
        let m = MemberRecord { nick: nick.map(Into::into), ..MemberRecord::joined(GuildId(1), UserId(id), 0) };
        (m, u)
    }

    #[test]
    fn finds_by_any_name_prefix_once_each_and_follows_changes() {
        let people = [
            member(1, "alice", Some("Alice A"), None),
            member(2, "alfred", None, Some("Al")),
            member(3, "bob", Some("Albert"), Some("bobby")),
            member(4, "carol", None, None),
        ];
        let mut n = Names::build(people.iter().map(|(m, u)| (m, u)));
        let mut found = n.search("AL", 10);
        found.sort();
        assert_eq!(found, vec![UserId(1), UserId(2), UserId(3)], "username, nickname and global name, any case");
        assert_eq!(n.search("alice", 10), vec![UserId(1)], "two names, one result");
        assert_eq!(n.search("al", 2).len(), 2, "limit");
        assert!(n.search("z", 10).is_empty());
        assert_eq!(n.search("", 10).len(), 4, "the empty prefix matches everyone");
        // Bob's nickname changes: found by the new one only.
        let (m3, u3) = &people[2];
        let renamed = MemberRecord { nick: Some("Zed".into()), ..m3.clone() };
        n.replace(Some((m3, u3)), Some((&renamed, u3)));
        assert_eq!(n.search("zed", 10), vec![UserId(3)]);
        assert!(n.search("bobb", 10).is_empty());
        n.replace(Some((&renamed, u3)), None::<(&MemberRecord, &UserRecord)>);
        assert!(!n.search("al", 10).contains(&UserId(3)), "gone with the member");
    }
}
