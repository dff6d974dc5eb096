//! Permission arithmetic shared by REST checks and guild actors: a member's
//! guild-level bits, and the bits in a channel after its overwrites.

use protocol::model::permission;
use protocol::{GuildId, UserId};
use store::{ChannelRecord, MemberRecord, OverwriteRecord, RoleRecord};

/// Guild-level bits: everything for the owner, else `@everyone` OR the member's roles.
pub fn base(guild: GuildId, owner: UserId, roles: &[RoleRecord], member: &MemberRecord) -> u64 {
    if owner == member.user_id {
        return permission::ALL;
    }
    roles.iter().filter(|r| r.id.0 == guild.0 || member.roles.contains(&r.id)).fold(0, |acc, r| acc | r.permissions)
}

/// Bits in channel `c` for a member with guild-level `base`: Discord's order,
/// `@everyone` overwrite, then the member's roles' overwrites together, then
/// the member's own overwrite.
pub fn in_channel(base: u64, guild: GuildId, member: &MemberRecord, c: &ChannelRecord) -> u64 {
    if base & permission::ADMINISTRATOR != 0 {
        return permission::ALL;
    }
    let apply = |p: u64, o: &OverwriteRecord| (p & !o.deny) | o.allow;
    let mut p = base;
    if let Some(o) = c.overwrites.iter().find(|o| o.kind == 0 && o.id == guild.0) {
        p = apply(p, o);
    }
    let (mut allow, mut deny) = (0, 0);
    for o in c.overwrites.iter().filter(|o| o.kind == 0 && member.roles.iter().any(|r| r.0 == o.id)) {
        allow |= o.allow;
        deny |= o.deny;
    }
    p = (p & !deny) | allow;
    if let Some(o) = c.overwrites.iter().find(|o| o.kind == 1 && o.id == member.user_id.0) {
        p = apply(p, o);
    }
    p
}

/// Whether a member may see channel `c`.
pub fn can_view(guild: GuildId, owner: UserId, roles: &[RoleRecord], member: &MemberRecord, c: &ChannelRecord) -> bool {
    in_channel(base(guild, owner, roles, member), guild, member, c) & permission::VIEW_CHANNEL != 0
}
