//! Ordering rules, group headers and the full-list changes of single
//! mutations.

use member_list::{Change, GroupId, Item, Member, MemberItem, MemberList, Status};

fn member(id: u64, username: &str, status: Status, roles: &[u64]) -> Member {
    Member { user_id: id, username: username.into(), global_name: None, nick: None, status, roles: roles.to_vec() }
}

/// A compact rendering of a list: "#group:count" for headers, names for
/// members.
fn render(list: &MemberList) -> Vec<String> {
    list.items(0..=usize::MAX)
        .into_iter()
        .map(|item| match item {
            Item::Group { id, count } => format!("#{id}:{count}"),
            Item::Member(m) => m.display_name.to_string(),
        })
        .collect()
}

/// Roles 10 (position 5) and 20 (position 9) are hoisted; 30 is not.
fn sample() -> MemberList {
    let mut list = MemberList::new([(10, 5), (20, 9)]);
    list.upsert(member(1, "alice", Status::Online, &[10, 30]));
    list.upsert(member(2, "Bob", Status::Dnd, &[10, 20]));
    list.upsert(member(3, "carol", Status::Online, &[30]));
    list.upsert(member(4, "dave", Status::Offline, &[20]));
    list.upsert(member(5, "Eve", Status::Idle, &[]));
    list
}

#[test]
fn groups_follow_role_position_then_online_then_offline() {
    let list = sample();
    assert_eq!(render(&list), ["#20:1", "Bob", "#10:1", "alice", "#online:2", "carol", "Eve", "#offline:1", "dave"]);
    assert_eq!(list.groups(), [(GroupId::Role(20), 1), (GroupId::Role(10), 1), (GroupId::Online, 2), (GroupId::Offline, 1)]);
    assert_eq!(list.len(), 9);
    assert_eq!(list.member_count(), 5);
    assert_eq!(list.online_count(), 4);
    // Header items count toward indices.
    assert_eq!(list.index_of(2), Some(1));
    assert_eq!(list.index_of(1), Some(3));
    assert_eq!(list.index_of(5), Some(6));
    assert_eq!(list.index_of(4), Some(8));
    assert_eq!(list.index_of(99), None);
    assert_eq!(list.item(4), Some(Item::Group { id: GroupId::Online, count: 2 }));
    assert_eq!(list.item(9), None);
}

#[test]
fn names_compare_case_insensitively_then_by_id_with_nick_first() {
    let mut list = MemberList::new([]);
    list.upsert(member(7, "zoe", Status::Online, &[]));
    list.upsert(member(3, "ALAN", Status::Online, &[]));
    list.upsert(member(2, "alan", Status::Online, &[]));
    let mut m = member(1, "aaron", Status::Online, &[]);
    m.global_name = Some("Bert".into());
    list.upsert(m);
    let mut m = member(9, "aaron", Status::Online, &[]);
    m.global_name = Some("Zed".into());
    m.nick = Some("Adam".into());
    list.upsert(m);
    assert_eq!(render(&list), ["#online:5", "Adam", "alan", "ALAN", "Bert", "zoe"]);
    // Ties on the folded name go by id: 2 before 3.
    assert_eq!(list.index_of(2), Some(2));
    assert_eq!(list.index_of(3), Some(3));
}

#[test]
fn empty_groups_are_omitted_and_a_lone_offline_member_has_a_header() {
    let mut list = MemberList::new([(10, 1)]);
    assert!(list.is_empty());
    assert!(list.items(0..=99).is_empty());
    assert!(list.groups().is_empty());
    list.upsert(member(1, "a", Status::Offline, &[10]));
    assert_eq!(render(&list), ["#offline:1", "a"]);
    assert_eq!(list.online_count(), 0);
}

#[test]
fn going_offline_is_delete_plus_insert_with_header_changes() {
    let mut list = sample();
    // Bob (alone in role 20, index 1) goes offline.
    let changes = list.set_status(2, Status::Offline);
    let g = |id, count| Item::Group { id, count };
    let bob_item = list.member(2).unwrap();
    let bob = |status| Item::Member(MemberItem { status, ..bob_item.clone() });
    assert_eq!(
        changes,
        [
            Change::Delete { index: 1, old: bob(Status::Dnd) },
            // Role 20 is now empty: its header goes.
            Change::Delete { index: 0, old: g(GroupId::Role(20), 1) },
            // Offline header (after "#10:1 alice #online:2 carol Eve").
            Change::Update { index: 5, item: g(GroupId::Offline, 2), old: g(GroupId::Offline, 1) },
            // "bob" sorts before "dave".
            Change::Insert { index: 6, item: bob(Status::Offline) },
        ]
    );
    assert_eq!(render(&list), ["#10:1", "alice", "#online:2", "carol", "Eve", "#offline:2", "Bob", "dave"]);
    // And back online: the role-20 group reappears at the top.
    let changes = list.set_status(2, Status::Online);
    assert_eq!(changes[0], Change::Delete { index: 6, old: bob(Status::Offline) });
    assert_eq!(changes[2], Change::Insert { index: 0, item: g(GroupId::Role(20), 1) });
    assert_eq!(changes[3], Change::Insert { index: 1, item: bob(Status::Online) });
}

#[test]
fn in_place_edits_are_updates_and_moves_inside_a_group_are_delete_insert() {
    let mut list = sample();
    // Online -> idle: same group, same place.
    let changes = list.set_status(3, Status::Idle);
    assert!(matches!(changes[..], [Change::Update { index: 5, .. }]));
    // Same status again: nothing to send.
    assert!(list.set_status(3, Status::Idle).is_empty());
    // A nickname that sorts after Eve moves carol within "online".
    let changes = list.set_nick(3, Some("Zara".into()));
    assert!(matches!(changes[..], [Change::Delete { index: 5, .. }, Change::Insert { index: 6, .. }]));
    // Role change without a group change still updates the item.
    let changes = list.set_roles(3, vec![30, 31]);
    assert!(matches!(changes[..], [Change::Update { index: 6, .. }]));
    assert!(matches!(list.touch(3)[..], [Change::Update { index: 6, .. }]));
    // Unknown users are ignored.
    assert!(list.set_status(42, Status::Online).is_empty());
    assert!(list.remove(42).is_empty());
}

#[test]
fn hoisted_role_changes_regroup_everyone_and_reset() {
    let mut list = sample();
    // Role 10 now above 20, role 30 hoisted too.
    assert_eq!(list.set_hoisted_roles([(10, 50), (20, 9), (30, 1)]), [Change::Reset]);
    assert_eq!(render(&list), ["#10:2", "alice", "Bob", "#30:1", "carol", "#online:1", "Eve", "#offline:1", "dave"]);
}
