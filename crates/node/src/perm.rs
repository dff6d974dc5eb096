//! Permission arithmetic shared by REST checks and guild actors: a member's
//! guild-level bits, and the bits in a channel after its overwrites.

use protocol::model::permission;
use protocol::RoleId;
use protocol::{GuildId, UserId};
use store::{ChannelRecord, MemberRecord, OverwriteRecord, RoleRecord};

/// What permission arithmetic reads of a member: a store record, or a
/// guild actor's packed slot.
pub trait MemberFacts {
    fn user_id(&self) -> UserId;
    fn roles(&self) -> &[RoleId];
    /// Until when (ms) a timeout was set, if ever.
    fn timeout_until(&self) -> Option<u64>;
}

impl MemberFacts for MemberRecord {
    fn user_id(&self) -> UserId {
        self.user_id
    }
    fn roles(&self) -> &[RoleId] {
        &self.roles
    }
    fn timeout_until(&self) -> Option<u64> {
        self.communication_disabled_until
    }
}

/// What a timed-out member keeps, in the guild and in every channel
/// whatever its overwrites: reading (Discord's rule).
pub const TIMED_OUT_KEEPS: u64 = permission::VIEW_CHANNEL | permission::READ_MESSAGE_HISTORY;

/// Whether `member` is in a timeout now.
pub fn timed_out(member: &(impl MemberFacts + ?Sized)) -> bool {
    member.timeout_until().is_some_and(|t| t > crate::auth::now_ms())
}

/// Guild-level bits: everything for the owner, else `@everyone` OR the
/// member's roles; only reading during a timeout, unless ADMINISTRATOR.
pub fn base(guild: GuildId, owner: UserId, roles: &[RoleRecord], member: &(impl MemberFacts + ?Sized)) -> u64 {
    if owner == member.user_id() {
        return permission::ALL;
    }
    let bits = roles.iter().filter(|r| r.id.0 == guild.0 || member.roles().contains(&r.id)).fold(0, |acc, r| acc | r.permissions);
    if bits & permission::ADMINISTRATOR == 0 && timed_out(member) {
        return bits & TIMED_OUT_KEEPS;
    }
    bits
}

/// Bits in channel `c` for a member with guild-level `base`: Discord's order,
/// `@everyone` overwrite, then the member's roles' overwrites together, then
/// the member's own overwrite.
pub fn in_channel(base: u64, guild: GuildId, member: &(impl MemberFacts + ?Sized), c: &ChannelRecord) -> u64 {
    if base & permission::ADMINISTRATOR != 0 {
        return permission::ALL;
    }
    let apply = |p: u64, o: &OverwriteRecord| (p & !o.deny) | o.allow;
    let mut p = base;
    if let Some(o) = c.overwrites.iter().find(|o| o.kind == 0 && o.id == guild.0) {
        p = apply(p, o);
    }
    let (mut allow, mut deny) = (0, 0);
    for o in c.overwrites.iter().filter(|o| o.kind == 0 && member.roles().iter().any(|r| r.0 == o.id)) {
        allow |= o.allow;
        deny |= o.deny;
    }
    p = (p & !deny) | allow;
    if let Some(o) = c.overwrites.iter().find(|o| o.kind == 1 && o.id == member.user_id().0) {
        p = apply(p, o);
    }
    if timed_out(member) {
        p &= TIMED_OUT_KEEPS;
    }
    p
}

/// Whether a member may see channel `c`.
pub fn can_view(guild: GuildId, owner: UserId, roles: &[RoleRecord], member: &(impl MemberFacts + ?Sized), c: &ChannelRecord) -> bool {
    in_channel(base(guild, owner, roles, member), guild, member, c) & permission::VIEW_CHANNEL != 0
}

/// Whether every member may see `c`, whatever their roles: `@everyone` may
/// after the channel's `@everyone` overwrite, and no other overwrite denies
/// VIEW_CHANNEL (roles and overwrites can then only add it). The common
/// case, checked per event so that fan-out to a public channel needs no
/// per-member work.
pub fn everyone_can_view(guild: GuildId, roles: &[RoleRecord], c: &ChannelRecord) -> bool {
    let everyone = roles.iter().find(|r| r.id.0 == guild.0).map_or(0, |r| r.permissions);
    if everyone & permission::ADMINISTRATOR != 0 {
        return true;
    }
    let mut p = everyone;
    if let Some(o) = c.overwrites.iter().find(|o| o.kind == 0 && o.id == guild.0) {
        p = (p & !o.deny) | o.allow;
    }
    p & permission::VIEW_CHANNEL != 0
        && !c.overwrites.iter().any(|o| o.deny & permission::VIEW_CHANNEL != 0 && !(o.kind == 0 && o.id == guild.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::{ChannelId, RoleId};

    const G: GuildId = GuildId(10);
    const VIEW: u64 = permission::VIEW_CHANNEL;

    fn role(id: u64, permissions: u64) -> RoleRecord {
        RoleRecord {
            id: RoleId(id),
            guild_id: G,
            name: "r".into(),
            color: 0,
            hoist: false,
            position: 0,
            permissions,
            mentionable: false,
            bot_id: None,
        }
    }

    fn channel(overwrites: Vec<OverwriteRecord>) -> ChannelRecord {
        ChannelRecord {
            id: ChannelId(11),
            guild_id: Some(G),
            kind: 0,
            name: "c".into(),
            position: 0,
            topic: None,
            nsfw: false,
            parent_id: None,
            rate_limit_per_user: 0,
            overwrites,
            last_message_id: None,
        }
    }

    fn member(user: u64, roles: &[u64]) -> MemberRecord {
        MemberRecord { roles: roles.iter().map(|&r| RoleId(r)).collect(), ..MemberRecord::joined(G, UserId(user), 0) }
    }

    fn ow(id: u64, kind: u8, allow: u64, deny: u64) -> OverwriteRecord {
        OverwriteRecord { id, kind, allow, deny }
    }

    /// `everyone_can_view` never says yes where some member cannot see the
    /// channel, over every mix of these overwrites and members.
    #[test]
    fn everyone_can_view_is_never_wrong_about_a_member() {
        let roles = [role(10, VIEW | 2048), role(20, 0), role(30, VIEW)];
        let members = [member(1, &[]), member(2, &[20]), member(3, &[30]), member(4, &[20, 30]), member(99, &[])];
        let pool = [
            ow(10, 0, 0, VIEW),
            ow(10, 0, VIEW, 0),
            ow(10, 0, 0, 2048),
            ow(20, 0, 0, VIEW),
            ow(30, 0, VIEW, 0),
            ow(2, 1, 0, VIEW),
            ow(3, 1, VIEW, 0),
        ];
        let mut public = 0;
        for mask in 0u32..(1 << pool.len()) {
            let ows: Vec<_> = pool.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, o)| o.clone()).collect();
            // One overwrite per target, as Discord stores them.
            if ows.iter().enumerate().any(|(i, a)| ows[..i].iter().any(|b| (b.id, b.kind) == (a.id, a.kind))) {
                continue;
            }
            let c = channel(ows);
            let all = members.iter().all(|m| can_view(G, UserId(99), &roles, m, &c));
            if everyone_can_view(G, &roles, &c) {
                public += 1;
                assert!(all, "said public, but a member cannot see it: {:?}", c.overwrites);
            }
        }
        assert!(public > 0, "the plain cases are recognised");
        // A channel without overwrites in a guild whose @everyone can view is public,
        // one that denies @everyone is not, even if a role may see it.
        assert!(everyone_can_view(G, &roles, &channel(vec![])));
        assert!(!everyone_can_view(G, &roles, &channel(vec![ow(10, 0, 0, VIEW), ow(30, 0, VIEW, 0)])));
    }
}
