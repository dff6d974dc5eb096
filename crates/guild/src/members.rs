//! A guild's members as its actor holds them: one packed slot each, so a
//! guild of a million members fits in tens of megabytes (issue #31's
//! memory diet; figures in docs/benchmarks.md).
//!
//! - The slots are one dense vector; the index by user id is a hash table
//!   of 4-byte positions into it (`hashbrown::HashTable`), not a map of
//!   whole entries: a table is sized in powers of two, so at a million
//!   members most of its buckets are empty, and an empty bucket here costs
//!   5 bytes, not an entry's 100.
//! - Role lists are interned per guild ([`RoleSets`]): members share a
//!   handful of distinct lists, each slot names one by number.
//! - What the guild shows of the member's user (username, global name,
//!   avatar) is packed into one string per slot; a user's changes reach
//!   every guild they are in as `GuildEvent::UserUpdate`, as before.
//! - What most members lack (a nickname, flags, a timeout, names too long to
//!   pack) lives out of line, in a map holding only those who have it.
//!
//! Records ([`MemberRecord`], [`UserRecord`]) are made on demand by
//! [`MemberRef::record`] and [`MemberRef::user`]; permission checks read
//! the slot directly ([`node::perm::MemberFacts`]).

use std::collections::HashMap;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};
use protocol::{GuildId, RoleId, UserId};
use store::{MemberRecord, UserRecord};

const BOT: u8 = 1;
const HAS_GLOBAL: u8 = 2;
const HAS_AVATAR: u8 = 4;
const HAS_EXTRA: u8 = 8;

/// One member: 48 bytes.
struct Slot {
    id: UserId,
    joined_at: u64,
    /// The user's creation time (ms).
    created_at: u64,
    /// username, global name, avatar hash, end to end (lengths below).
    names: Box<str>,
    /// Index into the guild's [`RoleSets`].
    roles: u32,
    bits: u8,
    user_len: u8,
    global_len: u8,
}

/// A user's names kept whole: username, global name, avatar.
type Names = (String, Option<String>, Option<String>);

/// What few members have, out of line.
#[derive(Default, Clone, PartialEq, Eq, Debug)]
struct Extra {
    nick: Option<Box<str>>,
    flags: u64,
    user_flags: u64,
    timeout: Option<u64>,
    /// The user's names when one is longer than a slot's lengths hold.
    names: Option<Box<Names>>,
}

impl Extra {
    fn is_empty(&self) -> bool {
        *self == Extra::default()
    }
}

/// Interned role lists: index 0 is the empty list and is never freed.
#[derive(Default)]
struct RoleSets {
    /// (list, members using it).
    sets: Vec<(Box<[RoleId]>, u32)>,
    index: HashMap<Box<[RoleId]>, u32>,
    free: Vec<u32>,
}

impl RoleSets {
    fn new() -> Self {
        RoleSets { sets: vec![(Box::new([]), 0)], index: HashMap::new(), free: Vec::new() }
    }

    fn intern(&mut self, roles: &[RoleId]) -> u32 {
        if roles.is_empty() {
            return 0;
        }
        if let Some(&i) = self.index.get(roles) {
            self.sets[i as usize].1 += 1;
            return i;
        }
        let list: Box<[RoleId]> = roles.into();
        let i = match self.free.pop() {
            Some(i) => {
                self.sets[i as usize] = (list.clone(), 1);
                i
            }
            None => {
                self.sets.push((list.clone(), 1));
                u32::try_from(self.sets.len() - 1).expect("fewer than 2^32 role lists")
            }
        };
        self.index.insert(list, i);
        i
    }

    fn release(&mut self, i: u32) {
        if i == 0 {
            return;
        }
        let (list, refs) = &mut self.sets[i as usize];
        *refs -= 1;
        if *refs == 0 {
            let list = std::mem::take(list);
            if self.index.get(&list) == Some(&i) {
                self.index.remove(&list);
            }
            self.free.push(i);
        }
    }

    fn get(&self, i: u32) -> &[RoleId] {
        &self.sets[i as usize].0
    }

    /// A role was deleted: no list holds it any more. Lists that become
    /// equal stay apart (both still right); new members share the first.
    fn remove_role(&mut self, role: RoleId) {
        self.index.clear();
        for (n, (list, refs)) in self.sets.iter_mut().enumerate().skip(1) {
            if *refs == 0 {
                continue;
            }
            if list.contains(&role) {
                *list = list.iter().copied().filter(|r| *r != role).collect();
            }
            let n = u32::try_from(n).expect("fewer than 2^32 role lists");
            if !list.is_empty() {
                self.index.entry(list.clone()).or_insert(n);
            }
        }
    }
}

/// Every member of one guild.
pub struct Members {
    guild: GuildId,
    slots: Vec<Slot>,
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
    roles: RoleSets,
    extra: HashMap<UserId, Extra>,
}

/// One member, borrowed from [`Members`].
#[derive(Clone, Copy)]
pub struct MemberRef<'a> {
    members: &'a Members,
    slot: &'a Slot,
}

impl Members {
    pub fn new(guild: GuildId) -> Members {
        Members {
            guild,
            slots: Vec::new(),
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            roles: RoleSets::new(),
            extra: HashMap::new(),
        }
    }

    /// The members of a snapshot.
    pub fn load(guild: GuildId, members: Vec<(MemberRecord, UserRecord)>) -> Members {
        let mut out = Members::new(guild);
        out.slots.reserve_exact(members.len());
        out.table.reserve(members.len(), |_| 0);
        for (m, u) in members {
            out.insert(&m, &u);
        }
        out
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn hash(&self, id: UserId) -> u64 {
        self.hasher.hash_one(id.0)
    }

    fn position(&self, id: UserId) -> Option<usize> {
        let slots = &self.slots;
        self.table.find(self.hash(id), |&i| slots[i as usize].id == id).map(|&i| i as usize)
    }

    pub fn contains_key(&self, id: &UserId) -> bool {
        self.position(*id).is_some()
    }

    pub fn get(&self, id: &UserId) -> Option<MemberRef<'_>> {
        self.position(*id).map(|i| MemberRef { members: self, slot: &self.slots[i] })
    }

    pub fn iter(&self) -> impl Iterator<Item = MemberRef<'_>> + '_ {
        self.slots.iter().map(move |slot| MemberRef { members: self, slot })
    }

    pub fn ids(&self) -> impl Iterator<Item = UserId> + '_ {
        self.slots.iter().map(|s| s.id)
    }

    /// Adds the member, or replaces what is held of them.
    pub fn insert(&mut self, m: &MemberRecord, u: &UserRecord) {
        debug_assert_eq!(m.user_id, u.id);
        let roles = self.roles.intern(&m.roles);
        let mut extra = Extra {
            nick: m.nick.as_deref().map(Into::into),
            flags: m.flags,
            user_flags: u.flags,
            timeout: m.communication_disabled_until,
            names: None,
        };
        let (names, user_len, global_len, mut bits) = pack(u, &mut extra);
        let at = self.position(u.id);
        if !extra.is_empty() {
            bits |= HAS_EXTRA;
            self.extra.insert(u.id, extra);
        } else if at.is_some_and(|i| self.slots[i].bits & HAS_EXTRA != 0) {
            self.extra.remove(&u.id);
        }
        let slot = Slot { id: u.id, joined_at: m.joined_at, created_at: u.created_at, names, roles, bits, user_len, global_len };
        match at {
            Some(i) => {
                let old = std::mem::replace(&mut self.slots[i], slot);
                self.roles.release(old.roles);
            }
            None => {
                let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 members");
                let h = self.hash(u.id);
                self.slots.push(slot);
                let (slots, hasher) = (&self.slots, &self.hasher);
                self.table.insert_unique(h, i, |&j| hasher.hash_one(slots[j as usize].id.0));
            }
        }
    }

    /// The member's own fields changed (roles, nickname, flags, timeout).
    /// False if they are not a member.
    pub fn set_member(&mut self, m: &MemberRecord) -> bool {
        let Some(r) = self.get(&m.user_id) else { return false };
        let user = r.user();
        self.insert(m, &user);
        true
    }

    /// The user changed (names, avatar, flags). False if not a member.
    pub fn set_user(&mut self, u: &UserRecord) -> bool {
        let Some(r) = self.get(&u.id) else { return false };
        let member = r.record();
        self.insert(&member, u);
        true
    }

    /// Removes the member: what was held of them.
    pub fn remove(&mut self, id: &UserId) -> Option<(MemberRecord, UserRecord)> {
        let r = self.get(id)?;
        let held = (r.record(), r.user());
        let h = self.hash(*id);
        let slots = &self.slots;
        let Ok(entry) = self.table.find_entry(h, |&i| slots[i as usize].id == *id) else { return None };
        let (i, _) = entry.remove();
        let i = i as usize;
        let last = self.slots.len() - 1;
        if i != last {
            // The last slot moves into the hole: its index entry follows.
            let moved = self.slots[last].id;
            let h = self.hash(moved);
            let slots = &self.slots;
            if let Some(at) = self.table.find_mut(h, |&j| slots[j as usize].id == moved) {
                *at = u32::try_from(i).expect("fewer than 2^32 members");
            }
        }
        let old = self.slots.swap_remove(i);
        self.roles.release(old.roles);
        self.extra.remove(id);
        Some(held)
    }

    /// A role was deleted: nobody has it any more.
    pub fn remove_role(&mut self, role: RoleId) {
        self.roles.remove_role(role);
    }

    /// Distinct role lists in use (tests).
    #[cfg(test)]
    fn role_lists(&self) -> usize {
        self.roles.sets.iter().skip(1).filter(|(_, refs)| *refs > 0).count()
    }
}

/// The user's names packed into one string, with the slot's lengths and
/// bits; names too long for the lengths go to `extra` instead.
fn pack(u: &UserRecord, extra: &mut Extra) -> (Box<str>, u8, u8, u8) {
    let mut bits = if u.bot { BOT } else { 0 };
    let global = u.global_name.as_deref();
    let avatar = u.avatar.as_deref();
    let (Ok(user_len), Ok(global_len)) = (u8::try_from(u.username.len()), u8::try_from(global.map_or(0, str::len))) else {
        extra.names = Some(Box::new((u.username.clone(), u.global_name.clone(), u.avatar.clone())));
        return (Box::from(""), 0, 0, bits);
    };
    let mut s = String::with_capacity(u.username.len() + global.map_or(0, str::len) + avatar.map_or(0, str::len));
    s.push_str(&u.username);
    if let Some(g) = global {
        bits |= HAS_GLOBAL;
        s.push_str(g);
    }
    if let Some(a) = avatar {
        bits |= HAS_AVATAR;
        s.push_str(a);
    }
    (s.into_boxed_str(), user_len, global_len, bits)
}

impl<'a> MemberRef<'a> {
    fn extra(&self) -> Option<&'a Extra> {
        if self.slot.bits & HAS_EXTRA == 0 {
            return None;
        }
        self.members.extra.get(&self.slot.id)
    }

    pub fn id(&self) -> UserId {
        self.slot.id
    }

    pub fn guild_id(&self) -> GuildId {
        self.members.guild
    }

    pub fn roles(&self) -> &'a [RoleId] {
        self.members.roles.get(self.slot.roles)
    }

    pub fn nick(&self) -> Option<&'a str> {
        self.extra().and_then(|e| e.nick.as_deref())
    }

    pub fn joined_at(&self) -> u64 {
        self.slot.joined_at
    }

    pub fn flags(&self) -> u64 {
        self.extra().map_or(0, |e| e.flags)
    }

    /// Until when the member is timed out (ms), if they ever were.
    pub fn timeout(&self) -> Option<u64> {
        self.extra().and_then(|e| e.timeout)
    }

    pub fn username(&self) -> &'a str {
        match self.extra().and_then(|e| e.names.as_deref()) {
            Some((u, _, _)) => u,
            None => &self.slot.names[..self.slot.user_len as usize],
        }
    }

    pub fn global_name(&self) -> Option<&'a str> {
        if let Some((_, g, _)) = self.extra().and_then(|e| e.names.as_deref()) {
            return g.as_deref();
        }
        let from = self.slot.user_len as usize;
        (self.slot.bits & HAS_GLOBAL != 0).then(|| &self.slot.names[from..from + self.slot.global_len as usize])
    }

    pub fn avatar(&self) -> Option<&'a str> {
        if let Some((_, _, a)) = self.extra().and_then(|e| e.names.as_deref()) {
            return a.as_deref();
        }
        let from = self.slot.user_len as usize + self.slot.global_len as usize;
        (self.slot.bits & HAS_AVATAR != 0).then(|| &self.slot.names[from..])
    }

    pub fn bot(&self) -> bool {
        self.slot.bits & BOT != 0
    }

    /// The user's flags (public flags too).
    pub fn user_flags(&self) -> u64 {
        self.extra().map_or(0, |e| e.user_flags)
    }

    /// The member as the store has them.
    pub fn record(&self) -> MemberRecord {
        MemberRecord {
            guild_id: self.members.guild,
            user_id: self.slot.id,
            nick: self.nick().map(str::to_owned),
            roles: self.roles().to_vec(),
            joined_at: self.slot.joined_at,
            flags: self.flags(),
            communication_disabled_until: self.timeout(),
        }
    }

    /// The member as the API shows them (with their user: `with_user`).
    pub fn model(&self, with_user: bool) -> protocol::model::Member {
        let guild = self.members.guild;
        protocol::model::Member {
            user: with_user.then(|| node::convert::user(&self.user())),
            nick: self.nick().map(str::to_owned),
            avatar: None,
            roles: self.roles().iter().copied().filter(|r| r.0 != guild.0).collect(),
            joined_at: protocol::model::iso8601(self.slot.joined_at),
            premium_since: None,
            deaf: false,
            mute: false,
            flags: self.flags(),
            pending: false,
            communication_disabled_until: self.timeout().filter(|_| node::perm::timed_out(self)).map(protocol::model::iso8601),
            banner: None,
            guild_id: None,
        }
    }

    /// Their user as the store has it.
    pub fn user(&self) -> UserRecord {
        UserRecord {
            id: self.slot.id,
            username: self.username().to_owned(),
            global_name: self.global_name().map(str::to_owned),
            avatar: self.avatar().map(str::to_owned),
            bot: self.bot(),
            flags: self.user_flags(),
            created_at: self.slot.created_at,
        }
    }
}

impl node::perm::MemberFacts for MemberRef<'_> {
    fn user_id(&self) -> UserId {
        self.slot.id
    }
    fn roles(&self) -> &[RoleId] {
        MemberRef::roles(self)
    }
    fn timeout_until(&self) -> Option<u64> {
        self.timeout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: GuildId = GuildId(1);

    fn user(id: u64, name: &str, global: Option<&str>, avatar: Option<&str>) -> UserRecord {
        UserRecord {
            id: UserId(id),
            username: name.into(),
            global_name: global.map(Into::into),
            avatar: avatar.map(Into::into),
            bot: id.is_multiple_of(2),
            flags: 0,
            created_at: id * 10,
        }
    }

    fn member(id: u64, roles: &[u64]) -> MemberRecord {
        MemberRecord { roles: roles.iter().map(|&r| RoleId(r)).collect(), ..MemberRecord::joined(G, UserId(id), id * 100) }
    }

    #[test]
    fn what_goes_in_comes_out() {
        let mut ms = Members::new(G);
        let long = "é".repeat(200);
        let cases = [
            (member(3, &[]), user(3, "ann", None, None)),
            (member(4, &[7, 8]), user(4, "bob", Some("Bob B"), Some("a_0123456789abcdef"))),
            (
                MemberRecord { nick: Some("nick".into()), flags: 2, communication_disabled_until: Some(99), ..member(5, &[8, 7]) },
                UserRecord { flags: 64, ..user(5, "cat", None, Some("ff")) },
            ),
            (member(6, &[7, 8]), user(6, &long, Some(&long), None)),
        ];
        for (m, u) in &cases {
            ms.insert(m, u);
        }
        assert_eq!(ms.len(), 4);
        for (m, u) in &cases {
            let r = ms.get(&m.user_id).unwrap();
            assert_eq!((&r.record(), &r.user()), (m, u));
        }
        assert!(ms.get(&UserId(9)).is_none());
        // [7, 8] is shared; [8, 7] is its own list (order kept).
        assert_eq!(ms.role_lists(), 2);
    }

    #[test]
    fn removal_keeps_every_other_member_findable() {
        let mut ms = Members::new(G);
        for id in 1..=1000 {
            ms.insert(&member(id, &[id % 3]), &user(id, &format!("u{id}"), None, None));
        }
        for id in (1..=1000).step_by(3) {
            let (m, u) = ms.remove(&UserId(id)).unwrap();
            assert_eq!((m.user_id, u.username), (UserId(id), format!("u{id}")));
        }
        assert!(ms.remove(&UserId(1)).is_none());
        assert_eq!(ms.len(), 666);
        for id in 1..=1000 {
            let found = ms.get(&UserId(id));
            assert_eq!(found.is_some(), id % 3 != 1, "{id}");
            if let Some(r) = found {
                assert_eq!((r.id(), r.username(), r.roles()), (UserId(id), format!("u{id}").as_str(), &[RoleId(id % 3)][..]));
            }
        }
        assert_eq!(ms.ids().count(), 666);
    }

    #[test]
    fn changes_replace_what_is_held() {
        let mut ms = Members::new(G);
        ms.insert(&member(3, &[7]), &user(3, "ann", None, None));
        let changed = MemberRecord { nick: Some("A".into()), ..member(3, &[7, 9]) };
        assert!(ms.set_member(&changed));
        assert_eq!(ms.get(&UserId(3)).unwrap().record(), changed);
        let renamed = user(3, "anne", Some("Anne"), None);
        assert!(ms.set_user(&renamed));
        let r = ms.get(&UserId(3)).unwrap();
        assert_eq!((r.record(), r.user()), (changed.clone(), renamed.clone()));
        // Back to nothing out of line.
        assert!(ms.set_member(&member(3, &[7, 9])));
        assert!(ms.extra.is_empty());
        assert!(!ms.set_member(&member(4, &[])));
        assert!(!ms.set_user(&user(4, "x", None, None)));
        // [7] was released when the member moved to [7, 9].
        assert_eq!(ms.role_lists(), 1);
    }

    #[test]
    fn a_deleted_role_leaves_every_list() {
        let mut ms = Members::new(G);
        ms.insert(&member(3, &[7, 8]), &user(3, "a", None, None));
        ms.insert(&member(4, &[8]), &user(4, "b", None, None));
        ms.remove_role(RoleId(7));
        assert_eq!(ms.get(&UserId(3)).unwrap().roles(), &[RoleId(8)]);
        assert_eq!(ms.get(&UserId(4)).unwrap().roles(), &[RoleId(8)]);
        ms.insert(&member(5, &[8]), &user(5, "c", None, None));
        assert_eq!(ms.get(&UserId(5)).unwrap().roles(), &[RoleId(8)]);
        ms.remove_role(RoleId(8));
        assert!(ms.iter().all(|r| r.roles().is_empty()));
    }
}
