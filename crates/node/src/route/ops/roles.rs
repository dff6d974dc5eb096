//! Roles, member roles, channel overwrites and bans, as plain data (see
//! [`super::Action`]). The actor checks MANAGE_ROLES / BAN_MEMBERS and the
//! role hierarchy from its own state.

use protocol::{ChannelId, MessageId, RoleId, UserId};
use serde::{Deserialize, Serialize};
use store::{OverwriteRecord, RoleRecord, UserRecord};

use super::Set;

/// Discord's limit on roles per guild (30005 beyond it).
pub const MAX_ROLES: usize = 250;

#[derive(Serialize, Deserialize)]
pub enum RoleAction {
    /// A new role (id and fields from REST); the actor places it at
    /// position 1, above `@everyone` and below every other role.
    /// `permissions: None`: `@everyone`'s, as on Discord.
    Create {
        role: Box<RoleRecord>,
        permissions: Option<u64>,
    },
    Modify {
        role: RoleId,
        patch: RolePatch,
    },
    Delete {
        role: RoleId,
    },
    /// `PATCH /guilds/{g}/roles`: new positions for some roles.
    Reorder {
        positions: Vec<(RoleId, i32)>,
    },
    /// `PUT /guilds/{g}/members/{u}/roles/{r}`.
    Grant {
        user: UserId,
        role: RoleId,
    },
    /// `DELETE /guilds/{g}/members/{u}/roles/{r}`.
    Revoke {
        user: UserId,
        role: RoleId,
    },
}

#[derive(Default, Serialize, Deserialize)]
pub struct RolePatch {
    pub name: Set<String>,
    pub color: Set<u32>,
    pub hoist: Set<bool>,
    pub permissions: Set<u64>,
    pub mentionable: Set<bool>,
}

#[derive(Serialize, Deserialize)]
pub enum OverwriteAction {
    /// `PUT /channels/{c}/permissions/{id}`: creates or replaces the overwrite.
    Put { channel: ChannelId, overwrite: OverwriteRecord },
    /// `DELETE /channels/{c}/permissions/{id}`.
    Delete { channel: ChannelId, id: u64 },
}

#[derive(Serialize, Deserialize)]
pub enum BanAction {
    /// Bans `user` (a member or not) and deletes `purge`, their recent
    /// messages in the guild as REST read them.
    Add {
        user: Box<UserRecord>,
        reason: Option<String>,
        purge: Vec<(ChannelId, MessageId)>,
    },
    Remove {
        user: Box<UserRecord>,
    },
}
