//! Node-local presence: which users have live sessions here and what status
//! they set. A user is online while any of their sessions lives (including
//! during its resume window); their status is the one set last.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use protocol::gateway::Status;
use protocol::UserId;
use serde_json::Value;

/// 16 bytes: every guild actor keeps one per online member (issue #31's
/// memory diet), so the activities are one shared pointer, none when empty.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Presence {
    pub status: Status,
    pub activities: Activities,
}

impl Presence {
    pub fn offline() -> Self {
        Presence { status: Status::Offline, activities: Activities::default() }
    }

    pub fn new(status: Status) -> Self {
        Presence { status, activities: Activities::default() }
    }
}

/// A presence's activities: shared by every copy of the presence (a user's
/// report goes to each of their guilds), unallocated when there are none
/// (most users). Serialized as the plain list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Activities(Option<Arc<Vec<Value>>>);

impl Activities {
    pub fn new(list: Vec<Value>) -> Self {
        Activities((!list.is_empty()).then(|| Arc::new(list)))
    }

    pub fn as_slice(&self) -> &[Value] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl From<Vec<Value>> for Activities {
    fn from(list: Vec<Value>) -> Self {
        Activities::new(list)
    }
}

impl serde::Serialize for Activities {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Activities {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Value>::deserialize(d).map(Activities::new)
    }
}

struct Entry {
    sessions: u32,
    presence: Presence,
}

#[derive(Default)]
pub struct Presences {
    /// Guards the map only; never held across an await.
    map: Mutex<HashMap<UserId, Entry>>,
}

impl Presences {
    /// A session of `user` started with `presence`. Returns the presence
    /// others should now see if it changed.
    pub fn session_started(&self, user: UserId, presence: Presence) -> Option<Presence> {
        let mut m = self.map.lock().expect("presence map poisoned");
        let e = m.entry(user).or_insert(Entry { sessions: 0, presence: Presence::offline() });
        e.sessions += 1;
        let before = e.presence.status.visible();
        e.presence = presence;
        (e.presence.status.visible() != before || e.sessions == 1).then(|| visible(&e.presence))
    }

    /// A session of `user` ended. Returns `Some(offline)` if it was the last.
    pub fn session_ended(&self, user: UserId) -> Option<Presence> {
        let mut m = self.map.lock().expect("presence map poisoned");
        let e = m.get_mut(&user)?;
        e.sessions = e.sessions.saturating_sub(1);
        if e.sessions == 0 {
            let was = e.presence.status.visible();
            m.remove(&user);
            return (was != Status::Offline).then(Presence::offline);
        }
        None
    }

    /// The user set a new presence (op 3). Returns what others should see if it changed.
    pub fn update(&self, user: UserId, presence: Presence) -> Option<Presence> {
        let mut m = self.map.lock().expect("presence map poisoned");
        let e = m.get_mut(&user)?;
        let before = visible(&e.presence);
        e.presence = presence;
        let after = visible(&e.presence);
        (after != before).then_some(after)
    }

    /// What others see now of the users among `members` (`count` of them,
    /// `is_member` telling) that have a session here and are not offline,
    /// under one lock: by the smaller of the two sides (a guild of a million
    /// loading on a node of a few thousand sessions reads a few thousand).
    pub fn online_among(
        &self,
        count: usize,
        members: impl Iterator<Item = UserId>,
        is_member: impl Fn(UserId) -> bool,
    ) -> Vec<(UserId, Presence)> {
        let m = self.map.lock().expect("presence map poisoned");
        let shown = |u: UserId, e: &Entry| Some((u, visible(&e.presence))).filter(|(_, p)| p.status != Status::Offline);
        if m.len() <= count {
            m.iter().filter(|(u, _)| is_member(**u)).filter_map(|(u, e)| shown(*u, e)).collect()
        } else {
            members.filter_map(|u| m.get(&u).and_then(|e| shown(u, e))).collect()
        }
    }

    /// What others see of `user` right now.
    pub fn get(&self, user: UserId) -> Presence {
        self.map.lock().expect("presence map poisoned").get(&user).map(|e| visible(&e.presence)).unwrap_or_else(Presence::offline)
    }
}

/// Invisible users are shown as offline, without activities.
fn visible(p: &Presence) -> Presence {
    match p.status.visible() {
        Status::Offline => Presence::offline(),
        s => Presence { status: s, activities: p.activities.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: Status) -> Presence {
        Presence::new(s)
    }

    #[test]
    fn activities_are_shared_and_serialize_as_a_list() {
        assert_eq!(std::mem::size_of::<Presence>(), 16);
        let a = Activities::new(vec![serde_json::json!({"name": "x", "type": 0})]);
        let p = Presence { status: Status::Online, activities: a.clone() };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(text, r#"{"status":"online","activities":[{"name":"x","type":0}]}"#);
        assert_eq!(serde_json::from_str::<Presence>(&text).unwrap(), p);
        assert_eq!(serde_json::to_string(&Presence::offline()).unwrap(), r#"{"status":"offline","activities":[]}"#);
        assert!(Activities::new(Vec::new()).0.is_none(), "no allocation for none");
    }

    #[test]
    fn online_while_any_session_lives() {
        let ps = Presences::default();
        let u = UserId(1);
        assert_eq!(ps.session_started(u, p(Status::Online)), Some(p(Status::Online)));
        assert_eq!(ps.session_started(u, p(Status::Online)), None, "second session changes nothing");
        assert_eq!(ps.session_ended(u), None);
        assert_eq!(ps.get(u).status, Status::Online);
        assert_eq!(ps.session_ended(u), Some(Presence::offline()));
        assert_eq!(ps.get(u).status, Status::Offline);
    }

    #[test]
    fn invisible_shows_offline() {
        let ps = Presences::default();
        let u = UserId(2);
        assert_eq!(ps.session_started(u, p(Status::Invisible)), Some(Presence::offline()));
        assert_eq!(ps.update(u, p(Status::Dnd)), Some(p(Status::Dnd)));
        assert_eq!(ps.update(u, p(Status::Dnd)), None);
        assert_eq!(ps.update(u, p(Status::Invisible)), Some(Presence::offline()));
        assert_eq!(ps.session_ended(u), None, "already offline to others");
    }

    #[test]
    fn online_among_reads_either_side_alike() {
        let ps = Presences::default();
        ps.session_started(UserId(1), p(Status::Online));
        ps.session_started(UserId(2), p(Status::Idle));
        ps.session_started(UserId(3), p(Status::Invisible));
        ps.session_started(UserId(9), p(Status::Online));
        let sorted = |mut v: Vec<(UserId, Presence)>| {
            v.sort_by_key(|(u, _)| *u);
            v
        };
        let want = vec![(UserId(1), p(Status::Online)), (UserId(2), p(Status::Idle))];
        // Few members (read by member), many members (read by session).
        let few = [UserId(1), UserId(2), UserId(3)];
        assert_eq!(sorted(ps.online_among(3, few.iter().copied(), |u| few.contains(&u))), want);
        let many: Vec<UserId> = (1..=8).map(UserId).collect();
        assert_eq!(sorted(ps.online_among(8, many.iter().copied(), |u| many.contains(&u))), want);
    }
}
