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
use serde::Serialize;
use serde_json::Value;
use store::{ChannelRecord, MemberRecord, RoleRecord, UserRecord};

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
        let groups: Vec<GroupJson> = self.list.groups().iter().map(|(id, count)| GroupJson { id: id.to_string(), count: *count }).collect();
        let ops: Vec<OpJson> = ops.iter().map(|op| op_json(view, op)).collect();
        let body = UpdateJson {
            guild_id: view.guild,
            id: "everyone",
            member_count: self.list.member_count(),
            online_count: self.list.online_count(),
            groups,
            ops,
        };
        super::actor::encode(&body)
    }
}

// Typed, borrowing JSON shapes: encoding writes straight from the actor's
// state without building `serde_json::Value` trees.

#[derive(Serialize)]
struct UpdateJson<'a> {
    guild_id: GuildId,
    id: &'static str,
    member_count: usize,
    online_count: usize,
    groups: Vec<GroupJson>,
    ops: Vec<OpJson<'a>>,
}

#[derive(Serialize)]
struct GroupJson {
    id: String,
    count: usize,
}

#[derive(Serialize)]
#[serde(tag = "op", rename_all = "UPPERCASE")]
enum OpJson<'a> {
    Sync { range: [usize; 2], items: Vec<ItemJson<'a>> },
    Insert { index: usize, item: ItemJson<'a> },
    Update { index: usize, item: ItemJson<'a> },
    Delete { index: usize },
    Invalidate { range: [usize; 2] },
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum ItemJson<'a> {
    Group(GroupJson),
    Member(MemberJson<'a>),
}

#[derive(Serialize)]
struct IdJson {
    id: UserId,
}

#[derive(Serialize)]
struct MemberJson<'a> {
    user: UserJson<'a>,
    nick: Option<&'a str>,
    avatar: Option<()>,
    roles: &'a [protocol::RoleId],
    joined_at: String,
    premium_since: Option<()>,
    deaf: bool,
    mute: bool,
    flags: u64,
    pending: bool,
    communication_disabled_until: Option<()>,
    presence: PresenceJson<'a>,
}

#[derive(Serialize)]
struct UserJson<'a> {
    id: UserId,
    username: &'a str,
    global_name: Option<&'a str>,
    discriminator: &'static str,
    avatar: Option<&'a str>,
    bot: bool,
    flags: u64,
    public_flags: u64,
}

#[derive(Serialize)]
struct PresenceJson<'a> {
    user: IdJson,
    status: &'static str,
    activities: &'a [Value],
    client_status: ClientStatusJson,
}

#[derive(Serialize)]
struct ClientStatusJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    desktop: Option<&'static str>,
}

const NO_ACTIVITIES: &[Value] = &[];

fn item_json<'a>(view: &View<'a>, item: &Item) -> ItemJson<'a> {
    match item {
        Item::Group { id, count } => ItemJson::Group(GroupJson { id: id.to_string(), count: *count }),
        Item::Member(mi) => {
            let uid = UserId(mi.user_id);
            let (status, activities) = match view.online.get(&uid) {
                Some(p) => (p.status.visible().as_str(), p.activities.as_slice()),
                None => ("offline", NO_ACTIVITIES),
            };
            let presence = PresenceJson {
                user: IdJson { id: uid },
                status,
                activities,
                client_status: ClientStatusJson { desktop: (status != "offline").then_some(status) },
            };
            let Some((m, u)) = view.members.get(&uid) else {
                // Not reachable while the list mirrors the members map; render a stub.
                return ItemJson::Group(GroupJson { id: format!("missing:{uid}"), count: 0 });
            };
            ItemJson::Member(MemberJson {
                user: UserJson {
                    id: u.id,
                    username: &u.username,
                    global_name: u.global_name.as_deref(),
                    discriminator: "0",
                    avatar: u.avatar.as_deref(),
                    bot: u.bot,
                    flags: u.flags,
                    public_flags: u.flags,
                },
                nick: m.nick.as_deref(),
                avatar: None,
                roles: &m.roles,
                joined_at: protocol::model::iso8601(m.joined_at),
                premium_since: None,
                deaf: false,
                mute: false,
                flags: m.flags,
                pending: false,
                communication_disabled_until: None,
                presence,
            })
        }
    }
}

fn op_json<'a>(view: &View<'a>, op: &Op) -> OpJson<'a> {
    match op {
        Op::Sync { range, items } => {
            OpJson::Sync { range: [range.start, range.end], items: items.iter().map(|i| item_json(view, i)).collect() }
        }
        Op::Insert { index, item } => OpJson::Insert { index: *index, item: item_json(view, item) },
        Op::Update { index, item } => OpJson::Update { index: *index, item: item_json(view, item) },
        Op::Delete { index } => OpJson::Delete { index: *index },
        Op::Invalidate { range } => OpJson::Invalidate { range: [range.start, range.end] },
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

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::gateway::Intents;

    #[test]
    fn update_json_has_discords_shape() {
        let g = GuildId(1);
        let mk = |id: u64, name: &str| {
            let u =
                UserRecord { id: UserId(id), username: name.into(), global_name: None, avatar: None, bot: false, flags: 0, created_at: 0 };
            (
                UserId(id),
                (MemberRecord { guild_id: g, user_id: UserId(id), nick: None, roles: vec![], joined_at: 0, flags: 0 }, Arc::new(u)),
            )
        };
        let members: HashMap<_, _> = [mk(5, "bob"), mk(6, "amy")].into_iter().collect();
        let online: HashMap<_, _> = [(UserId(6), Presence { status: Status::Idle, activities: vec![] })].into_iter().collect();
        let view = View { guild: g, members: &members, online: &online };
        let mut lists = Lists::build(&view, &[]);
        let s = SessionHandle::new("s".into(), UserId(9), false, Intents::ALL, 50, vec![g], 8);
        lists.subscribe(&view, s.clone(), &[(0, 99)]);
        let sync: Value = serde_json::from_slice(&s.take().1.pop_front().unwrap().body).unwrap();
        assert_eq!(sync["id"], "everyone");
        assert_eq!((sync["member_count"].as_u64(), sync["online_count"].as_u64()), (Some(2), Some(1)));
        assert_eq!(sync["groups"], serde_json::json!([{"id": "online", "count": 1}, {"id": "offline", "count": 1}]));
        let op = &sync["ops"][0];
        assert_eq!((op["op"].as_str(), &op["range"]), (Some("SYNC"), &serde_json::json!([0, 99])));
        let items = op["items"].as_array().unwrap();
        assert_eq!(items[0], serde_json::json!({"group": {"id": "online", "count": 1}}));
        assert_eq!(items[1]["member"]["user"]["username"], "amy");
        assert_eq!(items[1]["member"]["presence"]["status"], "idle");
        assert_eq!(items[3]["member"]["presence"]["status"], "offline");
        let changes = lists.list_mut().remove(5);
        lists.publish(&view, &changes);
        let upd: Value = serde_json::from_slice(&s.take().1.pop_front().unwrap().body).unwrap();
        let kinds: Vec<_> = upd["ops"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap().to_string()).collect();
        assert!(kinds.iter().all(|k| k == "DELETE" || k == "UPDATE" || k == "INSERT"), "{kinds:?}");
    }
}
