//! The guild's lazy member list (ops 14 / 37 -> GUILD_MEMBER_LIST_UPDATE).
//!
//! Built on the first subscription and kept up to date from then on; every
//! list change is translated per subscriber into ops inside the chunks that
//! subscriber watches (see `crates/member-list/README.md`). Subscribers with
//! the same chunks share one encoded body.
//!
//! One list, id `everyone`, covers channels whose overwrites do not touch
//! VIEW_CHANNEL; subscriptions to channels that restrict visibility are not
//! served yet.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use member_list::{normalize, Change, Item, ListRange, Member, MemberList, Op, Status as LStatus};
use protocol::gateway::Status;
use protocol::model::permission;
use protocol::{ChannelId, GuildId, UserId};
use serde_json::{json, Value};
use store::{ChannelRecord, MemberRecord, RoleRecord, UserRecord};

use crate::convert;
use crate::gateway::{Dispatch, SessionHandle};
use crate::presence::Presence;

/// Chunks one session may watch in one guild (Discord: 5 channels x 3 ranges).
pub const MAX_CHUNKS: usize = 15;
/// Discord's bound on one requested range: `end - start <= 300`.
pub const MAX_RANGE_SPAN: u64 = 300;

pub struct Lists {
    list: MemberList,
    /// Session id -> (session, watched chunks).
    subs: HashMap<Arc<str>, (Arc<SessionHandle>, Vec<ListRange>)>,
}

/// What the list needs to render items: the actor's members and presences.
pub struct View<'a> {
    pub guild: GuildId,
    pub members: &'a HashMap<UserId, (MemberRecord, Arc<UserRecord>)>,
    pub online: &'a HashMap<UserId, Presence>,
}

pub fn lstatus(s: Status) -> LStatus {
    match s.visible() {
        Status::Online => LStatus::Online,
        Status::Idle => LStatus::Idle,
        Status::Dnd => LStatus::Dnd,
        Status::Invisible | Status::Offline => LStatus::Offline,
    }
}

pub fn list_member(m: &MemberRecord, u: &UserRecord, status: Status) -> Member {
    Member {
        user_id: u.id.0,
        username: u.username.clone(),
        global_name: u.global_name.clone(),
        nick: m.nick.clone(),
        status: lstatus(status),
        roles: m.roles.iter().map(|r| r.0).collect(),
    }
}

fn hoisted(roles: &[RoleRecord]) -> Vec<(u64, i64)> {
    roles.iter().filter(|r| r.hoist).map(|r| (r.id.0, i64::from(r.position))).collect()
}

/// Whether a channel is shown with the `everyone` list.
pub fn uses_everyone_list(c: &ChannelRecord) -> bool {
    !c.overwrites.iter().any(|o| (o.allow | o.deny) & permission::VIEW_CHANNEL != 0)
}

impl Lists {
    pub fn build(view: &View, roles: &[RoleRecord]) -> Lists {
        let mut list = MemberList::new(hoisted(roles));
        for (uid, (m, u)) in view.members {
            let status = view.online.get(uid).map(|p| p.status).unwrap_or(Status::Offline);
            list.upsert(list_member(m, u, status));
        }
        Lists { list, subs: HashMap::new() }
    }

    pub fn list_mut(&mut self) -> &mut MemberList {
        &mut self.list
    }

    /// Replaces a session's watched chunks: SYNC for new ones, INVALIDATE for dropped ones.
    pub fn subscribe(&mut self, view: &View, session: Arc<SessionHandle>, requested: &[(u64, u64)]) {
        let pairs: Vec<(usize, usize)> =
            requested.iter().filter(|(a, b)| a.abs_diff(*b) <= MAX_RANGE_SPAN).map(|&(a, b)| (a as usize, b as usize)).collect();
        let chunks = normalize(&pairs, MAX_CHUNKS);
        let old = self.subs.get(&session.id).map(|(_, r)| r.clone()).unwrap_or_default();
        let added: Vec<ListRange> = chunks.iter().filter(|c| !old.contains(c)).copied().collect();
        let mut ops: Vec<Op> = old.iter().filter(|c| !chunks.contains(c)).map(|&range| Op::Invalidate { range }).collect();
        ops.extend(self.list.sync_ops(&added));
        if !ops.is_empty() {
            session.push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body: self.encode(view, &ops) });
        }
        if chunks.is_empty() {
            self.subs.remove(&session.id);
        } else {
            self.subs.insert(session.id.clone(), (session, chunks));
        }
    }

    pub fn unsubscribe(&mut self, session_id: &str) {
        self.subs.remove(session_id);
    }

    /// Sends every subscriber the ops `changes` cause in its chunks.
    /// Call right after the mutation that produced `changes`.
    pub fn publish(&self, view: &View, changes: &[Change]) {
        if changes.is_empty() || self.subs.is_empty() {
            return;
        }
        let mut by_ranges: HashMap<&[ListRange], Option<Bytes>> = HashMap::new();
        for (s, ranges) in self.subs.values() {
            let body = by_ranges
                .entry(ranges.as_slice())
                .or_insert_with(|| {
                    let ops = self.list.range_ops(changes, ranges);
                    (!ops.is_empty()).then(|| self.encode(view, &ops))
                })
                .clone();
            if let Some(body) = body {
                s.push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body });
            }
        }
    }

    fn encode(&self, view: &View, ops: &[Op]) -> Bytes {
        let groups: Vec<Value> = self.list.groups().iter().map(|(id, count)| json!({"id": id.to_string(), "count": count})).collect();
        let ops: Vec<Value> = ops.iter().map(|op| op_json(view, op)).collect();
        let body = json!({
            "guild_id": view.guild,
            "id": "everyone",
            "member_count": self.list.member_count(),
            "online_count": self.list.online_count(),
            "groups": groups,
            "ops": ops,
        });
        super::actor::encode(&body)
    }
}

fn item_json(view: &View, item: &Item) -> Value {
    match item {
        Item::Group { id, count } => json!({"group": {"id": id.to_string(), "count": count}}),
        Item::Member(mi) => {
            let uid = UserId(mi.user_id);
            let mut m = match view.members.get(&uid) {
                Some((m, u)) => serde_json::to_value(convert::member(m, Some(u))).unwrap_or(Value::Null),
                None => json!({"user": {"id": uid}}),
            };
            let (status, activities) = match view.online.get(&uid) {
                Some(p) => (p.status.visible().as_str(), p.activities.clone()),
                None => ("offline", Vec::new()),
            };
            let client_status = if status == "offline" { json!({}) } else { json!({"desktop": status}) };
            m["presence"] = json!({"user": {"id": uid}, "status": status, "activities": activities, "client_status": client_status});
            json!({"member": m})
        }
    }
}

fn op_json(view: &View, op: &Op) -> Value {
    match op {
        Op::Sync { range, items } => json!({
            "op": "SYNC",
            "range": [range.start, range.end],
            "items": items.iter().map(|i| item_json(view, i)).collect::<Vec<_>>(),
        }),
        Op::Insert { index, item } => json!({"op": "INSERT", "index": index, "item": item_json(view, item)}),
        Op::Update { index, item } => json!({"op": "UPDATE", "index": index, "item": item_json(view, item)}),
        Op::Delete { index } => json!({"op": "DELETE", "index": index}),
        Op::Invalidate { range } => json!({"op": "INVALIDATE", "range": [range.start, range.end]}),
    }
}

/// Requested ranges of one session for one guild: every channel that uses
/// the `everyone` list contributes its ranges (at most 5 channels, 3 ranges each).
pub fn requested_ranges(channels: &[(ChannelId, Vec<(u64, u64)>)], known: &[ChannelRecord]) -> Vec<(u64, u64)> {
    channels
        .iter()
        .take(5)
        .filter(|(cid, _)| known.iter().any(|c| c.id == *cid && uses_everyone_list(c)))
        .flat_map(|(_, r)| r.iter().take(3).copied())
        .collect()
}
