//! The guild's lazy member list (ops 14 / 37 -> GUILD_MEMBER_LIST_UPDATE).
//!
//! Built on the first subscription and kept up to date from then on; every
//! list change is translated per subscriber into ops inside the chunks that
//! subscriber watches (see `crates/member-list/README.md`). Subscribers with
//! the same chunks share one encoded body.
//!
//! Channels that show the same members share one list: id `everyone` when
//! `@everyone` may view the channel and no overwrite denies it, otherwise the
//! unsigned murmurhash3 (x86, 32-bit, seed 0) of the sorted `allow:<id>` /
//! `deny:<id>` entries of the overwrites that touch VIEW_CHANNEL, joined
//! with `,`, in decimal. Such a list holds only the members who can view the
//! channel.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use member_list::{normalize, Change, Item, ListRange, Member, MemberList, Op, Status as LStatus};
use protocol::gateway::Status;
use protocol::model::permission;
use protocol::{ChannelId, GuildId, UserId};
use serde::Serialize;
use serde_json::Value;
use store::{ChannelRecord, RoleRecord};

use crate::members::{MemberRef, Members};

use fanout::{Dispatch, Sink};

/// Chunks one session may watch in one guild (Discord: 5 channels x 3 ranges).
pub const MAX_CHUNKS: usize = 15;
/// Discord's bound on one requested range: `end - start <= 300`.
pub const MAX_RANGE_SPAN: u64 = 300;

/// The chunks a session watches for the `[start, end]` pairs it sent in
/// op 14/37: pairs wider than [`MAX_RANGE_SPAN`] are dropped, the rest are
/// rounded to whole chunks, at most [`MAX_CHUNKS`] of them.
pub fn requested_chunks(requested: &[(u64, u64)]) -> Vec<ListRange> {
    let pairs: Vec<(usize, usize)> = requested
        .iter()
        .filter(|(a, b)| a.abs_diff(*b) <= MAX_RANGE_SPAN)
        .filter_map(|&(a, b)| Some((usize::try_from(a).ok()?, usize::try_from(b).ok()?)))
        .collect();
    normalize(&pairs, MAX_CHUNKS)
}

/// Every member list of one guild, by list id. Built lazily per list.
#[derive(Default)]
pub struct Lists {
    lists: HashMap<Arc<str>, OneList>,
    /// What each session asked for last (channels and ranges, as bounded
    /// by op 14/37): when overwrites or roles change which list a channel
    /// shows, or who is on it, the session is moved without asking again.
    requests: HashMap<Arc<str>, (Sink, Request)>,
}

/// What one op 14/37 asked for in a guild: channels and their ranges.
type Request = Vec<(ChannelId, Vec<(u64, u64)>)>;

/// Channels one session watches, at most 5.
const MAX_CHANNELS: usize = 5;
/// Ranges per watched channel, at most 3.
const MAX_RANGES: usize = 3;

struct OneList {
    id: Arc<str>,
    list: MemberList,
    /// The hoisted roles the list groups by, as `hoisted` gave them.
    hoisted: Vec<(u64, i64)>,
    /// A channel shown with this list; its overwrites decide who is listed.
    channel: ChannelRecord,
    /// Session id -> (session, watched chunks).
    subs: HashMap<Arc<str>, (Sink, Vec<ListRange>)>,
}

/// What the lists need from the actor: its members, presences and roles.
pub struct View<'a> {
    pub guild: GuildId,
    pub owner: UserId,
    pub roles: &'a [RoleRecord],
    pub members: &'a Members,
    pub online: &'a crate::online::Online,
}

impl View<'_> {
    fn status(&self, u: UserId) -> Status {
        self.online.status(u)
    }

    fn can_view(&self, m: &impl node::perm::MemberFacts, c: &ChannelRecord) -> bool {
        node::perm::can_view(self.guild, self.owner, self.roles, m, c)
    }
}

pub fn lstatus(s: Status) -> LStatus {
    match s.visible() {
        Status::Online => LStatus::Online,
        Status::Idle => LStatus::Idle,
        Status::Dnd => LStatus::Dnd,
        Status::Invisible | Status::Offline => LStatus::Offline,
    }
}

pub fn list_member(m: MemberRef<'_>, status: Status) -> Member {
    Member {
        user_id: m.id().0,
        username: m.username().to_owned(),
        global_name: m.global_name().map(str::to_owned),
        nick: m.nick().map(str::to_owned),
        status: lstatus(status),
        roles: m.roles().iter().map(|r| r.0).collect(),
    }
}

fn hoisted(roles: &[RoleRecord]) -> Vec<(u64, i64)> {
    roles.iter().filter(|r| r.hoist).map(|r| (r.id.0, i64::from(r.position))).collect()
}

/// Hoisted role ids in the order the list shows their groups: highest
/// position first, ties by role id (as `MemberList` orders them).
fn group_order(hoisted: &[(u64, i64)]) -> Vec<u64> {
    let mut v = hoisted.to_vec();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(id, _)| id).collect()
}

/// MurmurHash3, x86 32-bit variant.
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]).wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h = (h ^ k).rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, b) in tail.iter().enumerate() {
            k |= u32::from(*b) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The member-list id of a channel (see the module docs).
pub fn list_id(guild: GuildId, roles: &[RoleRecord], c: &ChannelRecord) -> String {
    let view = permission::VIEW_CHANNEL;
    let everyone_base = roles.iter().find(|r| r.id.0 == guild.0).map(|r| r.permissions).unwrap_or(0);
    let ow = c.overwrites.iter().find(|o| o.kind == 0 && o.id == guild.0);
    let everyone_can = (everyone_base & !ow.map(|o| o.deny).unwrap_or(0)) | ow.map(|o| o.allow).unwrap_or(0);
    if everyone_can & view != 0 && !c.overwrites.iter().any(|o| o.deny & view != 0) {
        return "everyone".into();
    }
    let mut parts: Vec<String> = Vec::new();
    for o in &c.overwrites {
        if o.allow & view != 0 {
            parts.push(format!("allow:{}", o.id));
        }
        if o.deny & view != 0 {
            parts.push(format!("deny:{}", o.id));
        }
    }
    parts.sort();
    murmur3_32(parts.join(",").as_bytes(), 0).to_string()
}

impl Lists {
    /// Replaces a session's subscriptions in this guild with `channels`
    /// (at most 5 channels, 3 ranges each): SYNC for newly watched chunks,
    /// INVALIDATE for dropped ones, per list.
    pub fn subscribe(&mut self, view: &View, session: Sink, channels: &[(ChannelId, Vec<(u64, u64)>)], known: &[ChannelRecord]) {
        let request: Request =
            channels.iter().take(MAX_CHANNELS).map(|(c, r)| (*c, r.iter().take(MAX_RANGES).copied().collect())).collect();
        let wanted = wanted_lists(view, &request, known);
        if request.is_empty() {
            self.requests.remove(session.id());
        } else {
            self.requests.insert(session.id().clone(), (session.clone(), request));
        }
        // Lists this session watched but no longer asks for: drop its chunks there.
        for one in self.lists.values_mut() {
            if one.subs.contains_key(session.id()) && !wanted.contains_key(one.id.as_ref()) {
                one.subscribe(view, session.clone(), &[]);
            }
        }
        for (id, (channel, ranges)) in wanted {
            let id: Arc<str> = id.into();
            let one = self.lists.entry(id.clone()).or_insert_with(|| OneList::build(view, id, channel));
            one.subscribe(view, session.clone(), &ranges);
        }
    }

    /// A session moved to another node (same id): its chunks stay, its
    /// updates go to `to` from now on.
    pub fn moved(&mut self, session_id: &str, to: &Sink) {
        for one in self.lists.values_mut() {
            if let Some(e) = one.subs.get_mut(session_id) {
                e.0 = to.clone();
            }
        }
    }

    pub fn unsubscribe(&mut self, session_id: &str) {
        self.requests.remove(session_id);
        for one in self.lists.values_mut() {
            one.subs.remove(session_id);
        }
    }

    /// Roles changed. `visibility`: permissions changed, so lists may now
    /// hold other members, or channels show other lists: every list is
    /// rebuilt ([`Lists::rebuild`]). Otherwise only the grouping may have
    /// changed (a role hoisted or not, moved, created, deleted): lists whose
    /// hoisted roles differ regroup and their subscribers get a SYNC of
    /// every chunk they watch.
    pub fn roles_changed(&mut self, view: &View, known: &[ChannelRecord], visibility: bool) {
        if visibility {
            return self.rebuild(view, known);
        }
        let now = hoisted(view.roles);
        for one in self.lists.values_mut() {
            // Only the order of hoisted roles groups members: positions
            // that all moved up together (a role created below) change nothing.
            let regroup = group_order(&one.hoisted) != group_order(&now);
            one.hoisted = now.clone();
            if regroup {
                let changes = one.list.set_hoisted_roles(now.iter().copied());
                one.publish(view, &changes);
            }
        }
    }

    /// Who may see channels changed (overwrites, roles' permissions, a
    /// channel deleted): every list is rebuilt from the current state and
    /// each session is moved to the lists its request names now. It gets
    /// INVALIDATE for chunks of a list it no longer watches (a channel whose
    /// overwrites now show another list), then a SYNC of every chunk it
    /// watches; sessions watching the same chunks of a list share one body.
    pub fn rebuild(&mut self, view: &View, known: &[ChannelRecord]) {
        let old = std::mem::take(&mut self.lists);
        for (sid, (sink, request)) in &self.requests {
            for (id, (channel, ranges)) in wanted_lists(view, request, known) {
                let id: Arc<str> = id.into();
                let one = self.lists.entry(id.clone()).or_insert_with(|| OneList::build(view, id, channel));
                let chunks = requested_chunks(&ranges);
                if !chunks.is_empty() {
                    one.subs.insert(sid.clone(), (sink.clone(), chunks));
                }
            }
        }
        for one in old.values() {
            let now = self.lists.get(&one.id);
            let mut bodies: HashMap<Vec<ListRange>, Bytes> = HashMap::new();
            for (sid, (s, ranges)) in &one.subs {
                let kept = now.and_then(|n| n.subs.get(sid)).map(|(_, r)| r.as_slice()).unwrap_or(&[]);
                let dropped: Vec<ListRange> = ranges.iter().filter(|r| !kept.contains(r)).copied().collect();
                if dropped.is_empty() {
                    continue;
                }
                let body = bodies
                    .entry(dropped.clone())
                    .or_insert_with(|| one.encode(view, &dropped.iter().map(|&range| Op::Invalidate { range }).collect::<Vec<_>>()));
                s.clone().push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body: body.clone() });
            }
        }
        for one in self.lists.values() {
            one.sync_all(view);
        }
    }

    /// A member joined or changed (nick, roles): listed where it can view, removed elsewhere.
    pub fn member_changed(&mut self, view: &View, uid: UserId) {
        let Some(m) = view.members.get(&uid) else { return self.member_removed(view, uid) };
        for one in self.lists.values_mut() {
            let changes =
                if view.can_view(&m, &one.channel) { one.list.upsert(list_member(m, view.status(uid))) } else { one.list.remove(uid.0) };
            one.publish(view, &changes);
        }
    }

    pub fn member_removed(&mut self, view: &View, uid: UserId) {
        for one in self.lists.values_mut() {
            let changes = one.list.remove(uid.0);
            one.publish(view, &changes);
        }
    }

    pub fn status_changed(&mut self, view: &View, uid: UserId, status: Status) {
        for one in self.lists.values_mut() {
            let changes = one.list.set_status(uid.0, lstatus(status));
            one.publish(view, &changes);
        }
    }

    /// One list's sorted set (benchmarks and tests).
    pub fn list_mut(&mut self, id: &str) -> Option<&mut MemberList> {
        self.lists.get_mut(id).map(|o| &mut o.list)
    }

    /// Sends one list's subscribers the ops for `changes` (benchmarks and tests).
    pub fn publish(&self, view: &View, id: &str, changes: &[Change]) {
        if let Some(one) = self.lists.get(id) {
            one.publish(view, changes);
        }
    }
}

/// The lists a session's request names, by list id: the first channel
/// showing each list, and the ranges asked for through any of them.
fn wanted_lists(
    view: &View,
    request: &[(ChannelId, Vec<(u64, u64)>)],
    known: &[ChannelRecord],
) -> HashMap<String, (ChannelRecord, Vec<(u64, u64)>)> {
    let mut wanted: HashMap<String, (ChannelRecord, Vec<(u64, u64)>)> = HashMap::new();
    for (cid, ranges) in request {
        let Some(c) = known.iter().find(|c| c.id == *cid) else { continue };
        let e = wanted.entry(list_id(view.guild, view.roles, c)).or_insert_with(|| (c.clone(), Vec::new()));
        e.1.extend(ranges.iter().copied());
    }
    wanted
}

impl OneList {
    fn build(view: &View, id: Arc<str>, channel: ChannelRecord) -> OneList {
        let hoisted = hoisted(view.roles);
        let mut list = MemberList::new(hoisted.iter().copied());
        for m in view.members.iter() {
            if view.can_view(&m, &channel) {
                list.upsert(list_member(m, view.status(m.id())));
            }
        }
        OneList { id, list, hoisted, channel, subs: HashMap::new() }
    }

    /// A SYNC of every watched chunk to every subscriber; one body per set of chunks.
    fn sync_all(&self, view: &View) {
        let mut bodies: HashMap<&[ListRange], Bytes> = HashMap::new();
        for (s, ranges) in self.subs.values() {
            let body = bodies.entry(ranges.as_slice()).or_insert_with(|| self.encode(view, &self.list.sync_ops(ranges)));
            s.clone().push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body: body.clone() });
        }
    }

    /// Replaces a session's watched chunks: SYNC for new ones, INVALIDATE for dropped ones.
    fn subscribe(&mut self, view: &View, session: Sink, requested: &[(u64, u64)]) {
        let chunks = requested_chunks(requested);
        let old = self.subs.get(session.id()).map(|(_, r)| r.clone()).unwrap_or_default();
        // The same chunks asked for again: the client dropped what it held
        // (it opened another server and came back), so they are sent again.
        let again = !chunks.is_empty() && old == chunks;
        let added: Vec<ListRange> = chunks.iter().filter(|c| again || !old.contains(c)).copied().collect();
        let mut ops: Vec<Op> = old.iter().filter(|c| !chunks.contains(c)).map(|&range| Op::Invalidate { range }).collect();
        ops.extend(self.list.sync_ops(&added));
        if !ops.is_empty() {
            session.clone().push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body: self.encode(view, &ops) });
        }
        if chunks.is_empty() {
            self.subs.remove(session.id());
        } else {
            self.subs.insert(session.id().clone(), (session, chunks));
        }
    }

    /// Sends every subscriber the ops `changes` cause in its chunks. Call
    /// right after the mutation that produced `changes`; subscribers with the
    /// same chunks share one encoded body.
    fn publish(&self, view: &View, changes: &[Change]) {
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
                s.clone().push(Dispatch { name: "GUILD_MEMBER_LIST_UPDATE", body });
            }
        }
    }

    fn encode(&self, view: &View, ops: &[Op]) -> Bytes {
        let groups: Vec<GroupJson> = self.list.groups().iter().map(|(id, count)| GroupJson { id: id.to_string(), count: *count }).collect();
        let ops: Vec<OpJson> = ops.iter().map(|op| op_json(view, op)).collect();
        let body = UpdateJson {
            guild_id: view.guild,
            id: &self.id,
            member_count: self.list.member_count(),
            online_count: self.list.online_count(),
            groups,
            ops,
        };
        fanout::encode(&body)
    }
}

// Typed, borrowing JSON shapes: encoding writes straight from the actor's
// state without building `serde_json::Value` trees.

#[derive(Serialize)]
struct UpdateJson<'a> {
    guild_id: GuildId,
    id: &'a str,
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

// Items live only while one list update is written out, and nearly all
// are members: boxing the larger variant would add an allocation to each.
#[allow(clippy::large_enum_variant)]
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
    communication_disabled_until: Option<String>,
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
            let (status, activities) = match view.online.shown(uid) {
                Some((status, activities)) => (status.visible().as_str(), activities.as_slice()),
                None => ("offline", NO_ACTIVITIES),
            };
            let presence = PresenceJson {
                user: IdJson { id: uid },
                status,
                activities,
                client_status: ClientStatusJson { desktop: (status != "offline").then_some(status) },
            };
            let Some(m) = view.members.get(&uid) else {
                // Not reachable while the list mirrors the members map; render a stub.
                return ItemJson::Group(GroupJson { id: format!("missing:{uid}"), count: 0 });
            };
            ItemJson::Member(MemberJson {
                user: UserJson {
                    id: uid,
                    username: m.username(),
                    global_name: m.global_name(),
                    discriminator: "0",
                    avatar: m.avatar(),
                    bot: m.bot(),
                    flags: m.user_flags(),
                    public_flags: m.user_flags(),
                },
                nick: m.nick(),
                avatar: None,
                roles: m.roles(),
                joined_at: protocol::model::iso8601(m.joined_at()),
                premium_since: None,
                deaf: false,
                mute: false,
                flags: m.flags(),
                pending: false,
                communication_disabled_until: m.timeout().filter(|_| node::perm::timed_out(&m)).map(protocol::model::iso8601),
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

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::gateway::Intents;
    use store::{MemberRecord, OverwriteRecord, UserRecord};

    fn user(id: u64, name: &str) -> (MemberRecord, UserRecord) {
        let u = UserRecord { id: UserId(id), username: name.into(), global_name: None, avatar: None, bot: false, flags: 0, created_at: 0 };
        (MemberRecord::joined(GuildId(1), UserId(id), 0), u)
    }

    fn roles() -> Vec<RoleRecord> {
        vec![crate::everyone_role(GuildId(1))]
    }

    #[test]
    fn requested_chunks_bound_extreme_op14_ranges() {
        // u64::MAX-33..=u64::MAX once overflowed the chunk end (found by fuzzing).
        let last = requested_chunks(&[(u64::MAX - 33, u64::MAX)]);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].end, usize::MAX - 16);
        assert!(requested_chunks(&[(u64::MAX - 15, u64::MAX)]).is_empty());
        // Wider than 300: dropped; inverted: swapped; many: at most MAX_CHUNKS.
        assert!(requested_chunks(&[(0, 301)]).is_empty());
        assert_eq!(requested_chunks(&[(99, 0)]), vec![ListRange::chunk(0)]);
        let many: Vec<(u64, u64)> = (0..40).map(|k| (k * 100, k * 100 + 99)).collect();
        assert_eq!(requested_chunks(&many).len(), MAX_CHUNKS);
    }

    #[test]
    fn murmur3_matches_reference_vectors() {
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"hello", 0), 0x248b_fa47);
        assert_eq!(murmur3_32(b"The quick brown fox jumps over the lazy dog", 0), 0x2e4f_f723);
    }

    #[test]
    fn list_ids_follow_view_overwrites() {
        let g = GuildId(1);
        let mut c = crate::text_channel(protocol::ChannelId(2), g, "c".into(), 0);
        assert_eq!(list_id(g, &roles(), &c), "everyone");
        let view = permission::VIEW_CHANNEL;
        c.overwrites =
            vec![OverwriteRecord { id: 1, kind: 0, allow: 0, deny: view }, OverwriteRecord { id: 7, kind: 1, allow: view, deny: 0 }];
        assert_eq!(list_id(g, &roles(), &c), murmur3_32(b"allow:7,deny:1", 0).to_string());
        // Overwrites that do not touch VIEW_CHANNEL keep the shared list.
        c.overwrites = vec![OverwriteRecord { id: 1, kind: 0, allow: 0, deny: permission::SEND_MESSAGES }];
        assert_eq!(list_id(g, &roles(), &c), "everyone");
    }

    #[test]
    fn update_json_has_discords_shape_and_restricted_lists_filter() {
        let g = GuildId(1);
        let members = Members::load(g, vec![user(5, "bob"), user(6, "amy")]);
        let mut online = crate::online::Online::default();
        online.report(UserId(6), 1, node::presence::Presence::new(Status::Idle));
        let roles = roles();
        let view = View { guild: g, owner: UserId(99), roles: &roles, members: &members, online: &online };
        let open = crate::text_channel(protocol::ChannelId(2), g, "open".into(), 0);
        let mut secret = crate::text_channel(protocol::ChannelId(3), g, "secret".into(), 1);
        secret.overwrites = vec![
            OverwriteRecord { id: 1, kind: 0, allow: 0, deny: permission::VIEW_CHANNEL },
            OverwriteRecord { id: 6, kind: 1, allow: permission::VIEW_CHANNEL, deny: 0 },
        ];
        let known = vec![open.clone(), secret.clone()];
        let mut lists = Lists::default();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let delivery = fanout::Delivery::standalone(1, rt.handle().clone());
        let s = gateway::SessionHandle::new("s".into(), UserId(9), false, Intents::ALL, 50, vec![protocol::ActorKey::guild(g)], &delivery);
        // What the session was sent: everything queued, once the worker has taken it.
        let take = || {
            delivery.barrier();
            s.take_replay()
        };
        lists.subscribe(&view, s.clone() as Sink, &[(open.id, vec![(0, 99)])], &known);
        let sync: Value = serde_json::from_slice(&take().remove(0).body).unwrap();
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

        // Switching to the restricted channel: INVALIDATE on `everyone`, SYNC on its own list with amy only.
        lists.subscribe(&view, s.clone() as Sink, &[(secret.id, vec![(0, 99)])], &known);
        let q = take();
        let bodies: Vec<Value> = q.iter().map(|d| serde_json::from_slice(&d.body).unwrap()).collect();
        let inv = bodies.iter().find(|b| b["id"] == "everyone").expect("invalidate of the old list");
        assert_eq!(inv["ops"][0]["op"], "INVALIDATE");
        let own = bodies.iter().find(|b| b["id"] != "everyone").expect("sync of the channel's list");
        assert_eq!(own["id"], list_id(g, &roles, &secret));
        assert_eq!(own["member_count"], 1);
        let names: Vec<_> =
            own["ops"][0]["items"].as_array().unwrap().iter().filter_map(|i| i["member"]["user"]["username"].as_str()).collect();
        assert_eq!(names, ["amy"]);
        // A change to a member who cannot see the channel sends nothing.
        lists.member_removed(&view, UserId(5));
        assert!(take().is_empty());
        lists.status_changed(&view, UserId(6), Status::Offline);
        let upd: Value = serde_json::from_slice(&take().remove(0).body).unwrap();
        let kinds: Vec<_> = upd["ops"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap().to_string()).collect();
        assert!(kinds.iter().all(|k| k == "DELETE" || k == "UPDATE" || k == "INSERT") && !kinds.is_empty(), "{kinds:?}");
    }
}
