//! The plain data types of the member list: what goes in (members), what
//! comes out (items, full-list changes). No serde: the server maps these to
//! JSON.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// A user id (snowflake).
pub type UserId = u64;
/// A role id (snowflake).
pub type RoleId = u64;

/// Presence status as shown in the list. The caller maps "invisible" to
/// [`Status::Offline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Online,
    Idle,
    Dnd,
    Offline,
}

impl Status {
    /// Whether the member counts as online (every status but offline).
    pub fn is_online(self) -> bool {
        self != Status::Offline
    }
}

/// A group of the list. `Display` gives the wire id: the role id in
/// decimal, `online` or `offline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupId {
    /// Online members whose highest hoisted role is this one.
    Role(RoleId),
    /// Online members without a hoisted role.
    Online,
    /// All offline members, whatever their roles.
    Offline,
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupId::Role(id) => write!(f, "{id}"),
            GroupId::Online => f.write_str("online"),
            GroupId::Offline => f.write_str("offline"),
        }
    }
}

/// A member as the list needs it. Only these fields affect position or
/// group; everything else about a member is the server's business.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub user_id: UserId,
    pub username: String,
    pub global_name: Option<String>,
    /// Guild nickname.
    pub nick: Option<String>,
    pub status: Status,
    /// All role ids of the member; non-hoisted ones are ignored for
    /// grouping.
    pub roles: Vec<RoleId>,
}

/// A member entry of the list, as handed to the server for serialisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberItem {
    pub user_id: UserId,
    pub status: Status,
    /// nick, else global name, else username.
    pub display_name: Arc<str>,
}

/// One entry of the flat list: a group header or a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Group { id: GroupId, count: usize },
    Member(MemberItem),
}

/// One edit of the whole list. A batch of changes is sequential: each index
/// refers to the list as left by the previous change of the batch.
///
/// `Delete` and `Update` carry the item that was there before; that lets
/// [`MemberList::range_ops`](crate::MemberList::range_ops) reconstruct any
/// intermediate state of the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Insert {
        index: usize,
        item: Item,
    },
    Delete {
        index: usize,
        old: Item,
    },
    Update {
        index: usize,
        item: Item,
        old: Item,
    },
    /// The order itself changed (hoisted roles changed): subscribers must
    /// re-sync every range.
    Reset,
}

/// The sort key of a member in the set: group slot, then the case-folded
/// display name, then the user id.
///
/// The first 14 bytes of the folded name are kept inline, zero-padded, so
/// most comparisons never touch the heap; comparing the padded prefixes
/// agrees with comparing the full strings whenever the prefixes differ.
#[derive(Clone, Debug)]
pub(crate) struct SortKey {
    pub(crate) group: u16,
    prefix: [u8; PREFIX],
    pub(crate) id: UserId,
    folded: Arc<str>,
}

const PREFIX: usize = 14;

impl SortKey {
    pub(crate) fn new(group: u16, display_name: &str, id: UserId) -> Self {
        let folded: Arc<str> = display_name.to_lowercase().into();
        let mut prefix = [0; PREFIX];
        let n = folded.len().min(PREFIX);
        prefix[..n].copy_from_slice(&folded.as_bytes()[..n]);
        SortKey { group, prefix, id, folded }
    }

    /// The same member and name, in another group.
    pub(crate) fn with_group(&self, group: u16) -> Self {
        SortKey { group, ..self.clone() }
    }
}

impl Ord for SortKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.group
            .cmp(&other.group)
            .then_with(|| self.prefix.cmp(&other.prefix))
            .then_with(|| self.folded.cmp(&other.folded))
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for SortKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SortKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SortKey {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_group_then_case_insensitive_name_then_id() {
        let k = |g, n: &str, id| SortKey::new(g, n, id);
        assert!(k(0, "zed", 1) < k(1, "abc", 1));
        assert!(k(1, "Alice", 9) < k(1, "bob", 1));
        assert!(k(1, "alice", 2) > k(1, "ALICE", 1));
        assert!(k(1, "ab", 5) < k(1, "abc", 1));
        // Past the inline prefix, the heap string decides.
        assert!(k(1, "abcdefghijklmnopqrstuvwxyz", 1) < k(1, "abcdefghijklmnopqrstuvwxzz", 0));
        assert!(k(1, "abcdefghijklmn", 1) < k(1, "abcdefghijklmn\u{0}", 0));
        assert_eq!(k(2, "Same", 7), k(2, "sAME", 7));
    }

    #[test]
    fn group_ids_render_as_on_the_wire() {
        assert_eq!(GroupId::Role(123).to_string(), "123");
        assert_eq!(GroupId::Online.to_string(), "online");
        assert_eq!(GroupId::Offline.to_string(), "offline");
    }
}
