//! The lazy member list of a guild (Discord's `GUILD_MEMBER_LIST_UPDATE`,
//! see this crate's README): members sorted
//! into groups with header items, and, for every mutation, the full-list
//! changes plus the per-subscriber range ops that keep clients' visible
//! windows exact. Pure logic: no I/O, no async, no serde.
//!
//! - `model.rs`: members in, items and changes out, the sort key.
//! - `list.rs`: [`MemberList`], built on the order-statistic
//!   [`sorted_set::SortedSet`], which reports every member's index.
//! - `ranges.rs`: 100-item chunk ranges and [`MemberList::range_ops`], which
//!   translates changes into INSERT/UPDATE/DELETE ops that never fall
//!   outside a subscriber's ranges.
//!
//! Order: online members by hoisted role (highest position first), then
//! online members without one, then every offline member; inside a group,
//! by display name (nick, else global name, else username) compared
//! case-insensitively, then by user id. A header item precedes each
//! non-empty group and counts toward indices.

mod list;
mod model;
mod ranges;

pub use list::MemberList;
pub use model::{Change, GroupId, Item, Member, MemberItem, RoleId, Status, UserId};
pub use ranges::{normalize, ListRange, Op, CHUNK};
