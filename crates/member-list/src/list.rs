//! [`MemberList`]: the ordered list of one guild (or one list id), with
//! group headers, emitting a [`Change`] batch for every mutation.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use sorted_set::SortedSet;

use crate::model::{Change, GroupId, Item, Member, MemberItem, RoleId, SortKey, Status, UserId};

/// What the list remembers of a member.
struct Entry {
    username: Box<str>,
    global_name: Option<Box<str>>,
    nick: Option<Box<str>>,
    display_name: Arc<str>,
    status: Status,
    roles: Box<[RoleId]>,
    /// The key under which the member sits in `MemberList::set`.
    key: SortKey,
}

impl Entry {
    fn item(&self, user_id: UserId) -> MemberItem {
        MemberItem { user_id, status: self.status, display_name: Arc::clone(&self.display_name) }
    }

    fn refresh_display_name(&mut self) {
        let name = self.nick.as_deref().or(self.global_name.as_deref()).unwrap_or(&self.username);
        if *self.display_name != *name {
            self.display_name = name.into();
        }
    }
}

/// The lazy member list of one guild: members sorted into groups, with a
/// header item before each non-empty group. See the crate docs for the
/// rules.
///
/// Group "slots" number the groups in list order: hoisted roles by
/// position (highest first), then `online`, then `offline`.
pub struct MemberList {
    /// Hoisted roles in list order; a role's slot is its index here.
    hoisted: Vec<RoleId>,
    role_slot: HashMap<RoleId, u16>,
    /// Members per slot (`hoisted.len() + 2` slots).
    counts: Vec<usize>,
    set: SortedSet<SortKey>,
    members: HashMap<UserId, Entry>,
}

impl MemberList {
    /// An empty list. `hoisted_roles` are `(role id, position)` of the
    /// guild's hoisted roles; higher positions come first, ties by role id.
    pub fn new(hoisted_roles: impl IntoIterator<Item = (RoleId, i64)>) -> Self {
        let mut list = MemberList {
            hoisted: Vec::new(),
            role_slot: HashMap::new(),
            counts: Vec::new(),
            set: SortedSet::new(),
            members: HashMap::new(),
        };
        list.install_roles(hoisted_roles);
        list
    }

    fn install_roles(&mut self, hoisted_roles: impl IntoIterator<Item = (RoleId, i64)>) {
        let mut roles: Vec<(RoleId, i64)> = hoisted_roles.into_iter().collect();
        roles.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        roles.dedup_by_key(|r| r.0);
        // Slots are u16; a guild has at most 250 roles.
        roles.truncate(usize::from(u16::MAX) - 2);
        self.hoisted = roles.iter().map(|r| r.0).collect();
        self.role_slot = roles.iter().enumerate().map(|(slot, r)| (r.0, slot as u16)).collect();
        self.counts = vec![0; self.hoisted.len() + 2];
    }

    /// Replaces the hoisted roles (created, deleted, moved, (un)hoisted).
    /// Regroups every member; returns `[Change::Reset]`: subscribers must
    /// re-sync.
    pub fn set_hoisted_roles(&mut self, hoisted_roles: impl IntoIterator<Item = (RoleId, i64)>) -> Vec<Change> {
        self.install_roles(hoisted_roles);
        self.set.clear();
        let ids: Vec<UserId> = self.members.keys().copied().collect();
        for id in ids {
            let entry = &self.members[&id];
            let group = self.group_slot(entry.status, &entry.roles);
            let key = entry.key.with_group(group);
            self.counts[usize::from(group)] += 1;
            let inserted = self.set.insert(key.clone());
            debug_assert!(inserted.is_ok(), "user ids are unique");
            self.members.get_mut(&id).expect("listed above").key = key;
        }
        vec![Change::Reset]
    }

    fn online_slot(&self) -> u16 {
        self.hoisted.len() as u16
    }

    fn offline_slot(&self) -> u16 {
        self.hoisted.len() as u16 + 1
    }

    fn group_slot(&self, status: Status, roles: &[RoleId]) -> u16 {
        if !status.is_online() {
            return self.offline_slot();
        }
        roles.iter().filter_map(|r| self.role_slot.get(r)).min().copied().unwrap_or_else(|| self.online_slot())
    }

    fn group_id(&self, slot: u16) -> GroupId {
        match self.hoisted.get(usize::from(slot)) {
            Some(&role) => GroupId::Role(role),
            None if slot == self.online_slot() => GroupId::Online,
            None => GroupId::Offline,
        }
    }

    fn header(&self, slot: u16) -> Item {
        Item::Group { id: self.group_id(slot), count: self.counts[usize::from(slot)] }
    }

    /// Number of non-empty groups before `slot`.
    fn headers_before(&self, slot: u16) -> usize {
        self.counts[..usize::from(slot)].iter().filter(|&&c| c > 0).count()
    }

    /// Index of the header of `slot` (meaningful while the group is
    /// non-empty, and as the insertion point of its header).
    fn header_index(&self, slot: u16) -> usize {
        self.counts[..usize::from(slot)].iter().filter(|&&c| c > 0).map(|&c| c + 1).sum()
    }

    /// Full-list index of a member with set rank `rank` in group `slot`.
    fn member_index(&self, slot: u16, rank: usize) -> usize {
        rank + self.headers_before(slot) + 1
    }

    fn member_item(&self, key: &SortKey) -> Item {
        let entry = &self.members[&key.id];
        Item::Member(entry.item(key.id))
    }

    /// Adds `key` (its entry already in `members`) and reports the change.
    fn insert_key(&mut self, key: SortKey, out: &mut Vec<Change>) {
        let slot = key.group;
        let item = self.member_item(&key);
        self.counts[usize::from(slot)] += 1;
        let count = self.counts[usize::from(slot)];
        let index = self.header_index(slot);
        if count == 1 {
            out.push(Change::Insert { index, item: self.header(slot) });
        } else {
            out.push(Change::Update { index, item: self.header(slot), old: Item::Group { id: self.group_id(slot), count: count - 1 } });
        }
        let rank = self.set.insert(key).expect("user ids are unique");
        out.push(Change::Insert { index: self.member_index(slot, rank), item });
    }

    /// Removes `key`, whose item was `old`, and reports the change.
    fn remove_key(&mut self, key: &SortKey, old: Item, out: &mut Vec<Change>) {
        let slot = key.group;
        let rank = self.set.remove(key).expect("entry keys are in the set");
        out.push(Change::Delete { index: self.member_index(slot, rank), old });
        self.counts[usize::from(slot)] -= 1;
        let index = self.header_index(slot);
        let count = self.counts[usize::from(slot)];
        let old_header = Item::Group { id: self.group_id(slot), count: count + 1 };
        if count == 0 {
            out.push(Change::Delete { index, old: old_header });
        } else {
            out.push(Change::Update { index, item: self.header(slot), old: old_header });
        }
    }

    /// Applies `edit` to a member's entry, then moves or updates its item.
    /// Emits an `Update` when the member stays in place and either its item
    /// changed or `always_update` (fields the list does not see changed).
    fn edit(&mut self, user_id: UserId, always_update: bool, edit: impl FnOnce(&mut Entry)) -> Vec<Change> {
        let mut out = Vec::new();
        let Some(entry) = self.members.get_mut(&user_id) else {
            return out;
        };
        let old_key = entry.key.clone();
        let old_item = Item::Member(entry.item(user_id));
        let old_name = Arc::clone(&entry.display_name);
        edit(entry);
        entry.refresh_display_name();
        let (status, roles) = (entry.status, std::mem::take(&mut entry.roles));
        let slot = self.group_slot(status, &roles);
        let entry = self.members.get_mut(&user_id).expect("looked up above");
        entry.roles = roles;
        // `refresh_display_name` keeps the same `Arc` when the name did
        // not change: then the folded name can be reused too.
        let new_key = if Arc::ptr_eq(&entry.display_name, &old_name) {
            old_key.with_group(slot)
        } else {
            SortKey::new(slot, &entry.display_name, user_id)
        };
        entry.key = new_key.clone();
        let new_item = Item::Member(entry.item(user_id));

        if new_key.group != old_key.group {
            self.remove_key(&old_key, old_item, &mut out);
            self.insert_key(new_key, &mut out);
            return out;
        }
        let (old_rank, new_rank) = if new_key == old_key {
            // Same position: the set's key is still right.
            let rank = self.set.rank(&old_key).expect("entry keys are in the set");
            (rank, rank)
        } else {
            self.set.replace(&old_key, new_key).expect("user ids are unique")
        };
        let old_index = self.member_index(slot, old_rank);
        if old_rank == new_rank {
            if always_update || new_item != old_item {
                out.push(Change::Update { index: old_index, item: new_item, old: old_item });
            }
        } else {
            out.push(Change::Delete { index: old_index, old: old_item });
            out.push(Change::Insert { index: self.member_index(slot, new_rank), item: new_item });
        }
        out
    }

    /// Adds a member, or replaces everything the list knows about it.
    pub fn upsert(&mut self, member: Member) -> Vec<Change> {
        let Member { user_id, username, global_name, nick, status, roles } = member;
        if self.members.contains_key(&user_id) {
            return self.edit(user_id, true, |e| {
                e.username = username.into();
                e.global_name = global_name.map(Into::into);
                e.nick = nick.map(Into::into);
                e.status = status;
                e.roles = roles.into();
            });
        }
        let slot = self.group_slot(status, &roles);
        let mut entry = Entry {
            username: username.into(),
            global_name: global_name.map(Into::into),
            nick: nick.map(Into::into),
            display_name: Arc::from(""),
            status,
            roles: roles.into(),
            key: SortKey::new(slot, "", user_id),
        };
        entry.refresh_display_name();
        entry.key = SortKey::new(slot, &entry.display_name, user_id);
        let key = entry.key.clone();
        self.members.insert(user_id, entry);
        let mut out = Vec::with_capacity(2);
        self.insert_key(key, &mut out);
        out
    }

    /// Removes a member (left, kicked, or no longer sees the channel).
    pub fn remove(&mut self, user_id: UserId) -> Vec<Change> {
        let mut out = Vec::new();
        let Some(entry) = self.members.get(&user_id) else {
            return out;
        };
        let key = entry.key.clone();
        let old = Item::Member(entry.item(user_id));
        self.remove_key(&key, old, &mut out);
        self.members.remove(&user_id);
        out
    }

    /// Presence change.
    pub fn set_status(&mut self, user_id: UserId, status: Status) -> Vec<Change> {
        self.edit(user_id, false, |e| e.status = status)
    }

    /// Guild nickname change (`None` clears it).
    pub fn set_nick(&mut self, user_id: UserId, nick: Option<String>) -> Vec<Change> {
        self.edit(user_id, false, |e| e.nick = nick.map(Into::into))
    }

    /// User-level name change.
    pub fn set_user_names(&mut self, user_id: UserId, username: String, global_name: Option<String>) -> Vec<Change> {
        self.edit(user_id, false, |e| {
            e.username = username.into();
            e.global_name = global_name.map(Into::into);
        })
    }

    /// Role change. Always emits at least an `Update` (the member's roles
    /// are part of the item the server sends).
    pub fn set_roles(&mut self, user_id: UserId, roles: Vec<RoleId>) -> Vec<Change> {
        self.edit(user_id, true, |e| e.roles = roles.into())
    }

    /// Something the list does not track changed (avatar, activities...):
    /// an `Update` at the member's index.
    pub fn touch(&mut self, user_id: UserId) -> Vec<Change> {
        self.edit(user_id, true, |_| {})
    }

    /// Number of items, headers included.
    pub fn len(&self) -> usize {
        self.set.len() + self.counts.iter().filter(|&&c| c > 0).count()
    }

    /// Whether the list has no members (hence no items).
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Total number of members.
    pub fn member_count(&self) -> usize {
        self.set.len()
    }

    /// Members that are not offline.
    pub fn online_count(&self) -> usize {
        self.set.len() - self.counts[usize::from(self.offline_slot())]
    }

    /// Non-empty groups in list order, with their member counts.
    pub fn groups(&self) -> Vec<(GroupId, usize)> {
        (0..self.counts.len() as u16)
            .filter(|&s| self.counts[usize::from(s)] > 0)
            .map(|s| (self.group_id(s), self.counts[usize::from(s)]))
            .collect()
    }

    /// The item at `index`, if any.
    pub fn item(&self, index: usize) -> Option<Item> {
        let mut pos = 0;
        let mut members_before = 0;
        for (slot, &count) in self.counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            if index == pos {
                return Some(self.header(slot as u16));
            }
            if index <= pos + count {
                let key = self.set.get(members_before + index - pos - 1)?;
                return Some(self.member_item(key));
            }
            pos += count + 1;
            members_before += count;
        }
        None
    }

    /// The items at indices `range` (clamped to the list), for SYNC.
    pub fn items(&self, range: RangeInclusive<usize>) -> Vec<Item> {
        let (start, end) = (*range.start(), range.end().saturating_add(1));
        let mut out = Vec::with_capacity(end.saturating_sub(start).min(self.len()));
        let mut pos = 0;
        let mut members_before = 0;
        for (slot, &count) in self.counts.iter().enumerate() {
            if pos >= end {
                break;
            }
            if count == 0 {
                continue;
            }
            let block_end = pos + 1 + count;
            if block_end > start {
                if (start..end).contains(&pos) {
                    out.push(self.header(slot as u16));
                }
                // Members of this block are at pos+1 ..= pos+count.
                let from = start.max(pos + 1) - (pos + 1);
                let to = end.min(block_end) - (pos + 1);
                if from < to {
                    let ranks = members_before + from..members_before + to;
                    out.extend(self.set.range(ranks).map(|k| self.member_item(k)));
                }
            }
            pos = block_end;
            members_before += count;
        }
        out
    }

    /// Index of a member's item.
    pub fn index_of(&self, user_id: UserId) -> Option<usize> {
        let key = &self.members.get(&user_id)?.key;
        let rank = self.set.rank(key)?;
        Some(self.member_index(key.group, rank))
    }

    /// A member's current item.
    pub fn member(&self, user_id: UserId) -> Option<MemberItem> {
        self.members.get(&user_id).map(|e| e.item(user_id))
    }
}
