//! The actor's side of roles, overwrites and bans once committed: state,
//! events and who receives them.
//!
//! Who may see a channel can change without the channel changing (a role's
//! permissions, a member's roles, a deleted role): those who gain a channel
//! get CHANNEL_CREATE, those who lose it CHANNEL_DELETE, per user and only
//! them, as Discord sends them. Each such body is encoded once per channel
//! and shared by everyone it goes to.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::model::permission;
use protocol::{ChannelId, MessageId, RoleId, UserId};
use serde_json::json;
use store::{ChannelRecord, RoleRecord, UserRecord};

use super::{GuildActor, State};
use crate::GuildEvent;
use fanout::{encode, FanEvent, Filter, SubInfo};
use node::{convert, perm};

/// Who may see each channel that not every member may: `None` for a
/// channel everyone sees, else the subscribed users who can.
pub(crate) type Sight = HashMap<ChannelId, Option<HashSet<UserId>>>;

/// Permissions that make a member receive GUILD_BAN_ADD / REMOVE (Discord:
/// BAN_MEMBERS or VIEW_AUDIT_LOG).
const SEES_BANS: u64 = permission::BAN_MEMBERS | permission::VIEW_AUDIT_LOG | permission::ADMINISTRATOR;

fn sees(sight: &Sight, channel: ChannelId, user: &UserId) -> bool {
    match sight.get(&channel) {
        Some(None) => true,
        Some(Some(users)) => users.contains(user),
        None => false,
    }
}

impl State {
    fn can_view(&self, user: &UserId, c: &ChannelRecord) -> bool {
        self.members.get(user).is_some_and(|m| perm::can_view(self.guild.id, self.guild.owner_id, &self.roles, &m, c))
    }

    /// Roles in Discord's order: by position, ties by id.
    fn sort_roles(&mut self) {
        self.roles.sort_by_key(|r| (r.position, r.id));
    }
}

impl GuildActor {
    /// The users with a session subscribed to this guild, here or on other nodes.
    fn subscribed_users(&self) -> HashSet<UserId> {
        self.subs.values().map(|s| s.user_id()).chain(self.remote.values().map(|s| s.info.user_id)).collect()
    }

    /// Who of `users` may see each channel (see [`Sight`]).
    fn sight(&self, st: &State, users: &HashSet<UserId>) -> Sight {
        st.channels
            .iter()
            .map(|c| {
                let who = (!perm::everyone_can_view(self.id, &st.roles, c))
                    .then(|| users.iter().filter(|u| st.can_view(u, c)).copied().collect());
                (c.id, who)
            })
            .collect()
    }

    /// CHANNEL_CREATE to each of `users` who sees a channel now but did not
    /// in `before`, CHANNEL_DELETE to each who did and does not now.
    fn announce_sight(&mut self, st: &State, users: &HashSet<UserId>, before: &Sight, after: &Sight) {
        for c in &st.channels {
            if matches!((before.get(&c.id), after.get(&c.id)), (Some(None), Some(None))) {
                continue;
            }
            let gained: HashSet<UserId> = users.iter().filter(|u| !sees(before, c.id, u) && sees(after, c.id, u)).copied().collect();
            let lost: HashSet<UserId> = users.iter().filter(|u| sees(before, c.id, u) && !sees(after, c.id, u)).copied().collect();
            self.channel_shown(c, &gained, &lost);
        }
    }

    /// CHANNEL_CREATE of `c` to `gained`, CHANNEL_DELETE to `lost`.
    fn channel_shown(&mut self, c: &ChannelRecord, gained: &HashSet<UserId>, lost: &HashSet<UserId>) {
        if gained.is_empty() && lost.is_empty() {
            return;
        }
        let body = encode(&convert::channel(c));
        if !gained.is_empty() {
            self.publish_to(FanEvent::new("CHANNEL_CREATE", body.clone(), Filter::Intent(Intents::GUILDS)), &|u| gained.contains(&u));
        }
        if !lost.is_empty() {
            self.publish_to(FanEvent::new("CHANNEL_DELETE", body, Filter::Intent(Intents::GUILDS)), &|u| lost.contains(&u));
        }
    }

    /// The channels `user` may see now.
    pub(super) fn seen_by(&self, st: &State, user: UserId) -> HashSet<ChannelId> {
        st.channels.iter().filter(|c| st.can_view(&user, c)).map(|c| c.id).collect()
    }

    /// After `user`'s roles changed: CHANNEL_CREATE / CHANNEL_DELETE to
    /// their sessions for each channel they gained or lost since `before`.
    pub(super) fn announce_seen_by(&mut self, st: &State, user: UserId, before: &HashSet<ChannelId>) {
        let only = HashSet::from([user]);
        let none = HashSet::new();
        for c in &st.channels {
            match (before.contains(&c.id), st.can_view(&user, c)) {
                (false, true) => self.channel_shown(c, &only, &none),
                (true, false) => self.channel_shown(c, &none, &only),
                _ => {}
            }
        }
    }

    /// A channel changed from `before` to `after`: CHANNEL_UPDATE to those
    /// who see it in both, CHANNEL_CREATE to those who only see `after`,
    /// CHANNEL_DELETE to those who only saw `before`.
    pub(super) fn publish_channel_update(&mut self, st: &State, before: &ChannelRecord, after: &ChannelRecord) {
        let event = FanEvent::new("CHANNEL_UPDATE", encode(&convert::channel(after)), Filter::Intent(Intents::GUILDS));
        if perm::everyone_can_view(self.id, &st.roles, before) && perm::everyone_can_view(self.id, &st.roles, after) {
            return self.publish(event);
        }
        let (mut both, mut gained, mut lost) = (HashSet::new(), HashSet::new(), HashSet::new());
        for u in self.subscribed_users() {
            match (st.can_view(&u, before), st.can_view(&u, after)) {
                (true, true) => both.insert(u),
                (false, true) => gained.insert(u),
                (true, false) => lost.insert(u),
                (false, false) => false,
            };
        }
        self.publish_to(event, &|u| both.contains(&u));
        self.channel_shown(after, &gained, &lost);
    }

    /// `publish` to the subscribers (of this node and others) whose user
    /// `keep` accepts; not cached (gained or lost channels, private threads).
    pub(crate) fn publish_to(&mut self, event: Arc<FanEvent>, keep: &dyn Fn(UserId) -> bool) {
        let reach = Self::reach_of(event.name);
        self.publish_to_reach(event, keep, reach);
    }

    /// `publish_to` the subscribers `reach` names.
    pub(crate) fn publish_to_reach(&mut self, event: Arc<FanEvent>, keep: &dyn Fn(UserId) -> bool, reach: fanout::Reach) {
        self.seq += 1;
        if !self.remote.is_empty() && self.remote_wanted(&event) {
            let keep_remote = |i: &SubInfo| keep(i.user_id);
            self.remote.fan(&self.core.node, self.key(), self.core.epoch, &event, Some(&keep_remote), reach);
        }
        if self.wanted(&event) {
            let parts = self.subs.partitions_of_where(reach, |s| keep(s.user_id()));
            self.core.node.delivery.fan_out(&event, &parts);
        }
    }

    fn role_event(&mut self, name: &'static str, role: &RoleRecord) {
        let body = encode(&json!({ "guild_id": self.id, "role": convert::role(role) }));
        self.fan_out(name, &body, Intents::GUILDS);
    }

    /// A role was created at the bottom (`shifted`: the others, one place up).
    pub(crate) fn role_created(&mut self, st: &mut State, role: RoleRecord, shifted: Vec<RoleRecord>) {
        for r in &shifted {
            if let Some(old) = st.roles.iter_mut().find(|x| x.id == r.id) {
                *old = r.clone();
            }
        }
        st.roles.retain(|r| r.id != role.id);
        st.roles.push(role.clone());
        st.sort_roles();
        self.hidden.clear();
        self.role_event("GUILD_ROLE_CREATE", &role);
        for r in &shifted {
            self.role_event("GUILD_ROLE_UPDATE", r);
        }
        self.lists.roles_changed(&st.view(), &st.channels, false);
    }

    /// Roles changed (fields or positions). A change of permissions may
    /// show or hide channels: those users get CHANNEL_CREATE / DELETE.
    pub(crate) fn roles_updated(&mut self, st: &mut State, updated: Vec<RoleRecord>) {
        let perms_changed = updated.iter().any(|r| st.roles.iter().any(|x| x.id == r.id && x.permissions != r.permissions));
        let users = if perms_changed { self.subscribed_users() } else { HashSet::new() };
        let before = perms_changed.then(|| self.sight(st, &users));
        for r in &updated {
            if let Some(old) = st.roles.iter_mut().find(|x| x.id == r.id) {
                *old = r.clone();
            }
        }
        st.sort_roles();
        self.hidden.clear();
        for r in &updated {
            self.role_event("GUILD_ROLE_UPDATE", r);
        }
        if let Some(before) = before {
            let after = self.sight(st, &users);
            self.announce_sight(st, &users, &before, &after);
        }
        self.lists.roles_changed(&st.view(), &st.channels, perms_changed);
    }

    /// A role is gone: from every member that had it, and from the
    /// overwrites of `channels` (their new versions, committed with it).
    pub(crate) fn role_deleted(&mut self, st: &mut State, role: RoleId, channels: Vec<ChannelRecord>) {
        let users = self.subscribed_users();
        let before = self.sight(st, &users);
        st.roles.retain(|r| r.id != role);
        st.members.remove_role(role);
        for c in &channels {
            if let Some(old) = st.channels.iter_mut().find(|x| x.id == c.id) {
                *old = c.clone();
            }
        }
        self.hidden.clear();
        let body = encode(&json!({ "guild_id": self.id, "role_id": role }));
        self.fan_out("GUILD_ROLE_DELETE", &body, Intents::GUILDS);
        let after = self.sight(st, &users);
        for c in &channels {
            let event = FanEvent::new("CHANNEL_UPDATE", encode(&convert::channel(c)), Filter::Intent(Intents::GUILDS));
            let both: HashSet<UserId> = users.iter().filter(|u| sees(&before, c.id, u) && sees(&after, c.id, u)).copied().collect();
            if matches!((before.get(&c.id), after.get(&c.id)), (Some(None), Some(None))) {
                self.publish(event);
            } else {
                self.publish_to(event, &|u| both.contains(&u));
            }
        }
        self.announce_sight(st, &users, &before, &after);
        self.lists.rebuild(&st.view(), &st.channels);
    }

    /// GUILD_BAN_ADD / REMOVE: to members who may ban or read the audit log.
    fn ban_event(&mut self, st: &State, name: &'static str, user: &UserRecord) {
        let body = encode(&json!({ "guild_id": self.id, "user": convert::user(user) }));
        let (gid, owner) = (self.id, st.guild.owner_id);
        let moderator = |u: UserId| st.members.get(&u).is_some_and(|m| perm::base(gid, owner, &st.roles, &m) & SEES_BANS != 0);
        self.publish_to(FanEvent::new(name, body, Filter::Intent(Intents::GUILD_MODERATION)), &moderator);
    }

    /// `user` is banned: GUILD_BAN_ADD, then (a member) GUILD_MEMBER_REMOVE,
    /// then MESSAGE_DELETE_BULK per channel for the messages purged.
    pub(crate) fn banned(&mut self, st: &mut State, user: &UserRecord, purged: &[(ChannelId, MessageId)]) {
        st.bans.insert(user.id);
        self.ban_event(st, "GUILD_BAN_ADD", user);
        if st.members.contains_key(&user.id) {
            self.apply(st, GuildEvent::MemberRemove(user.id));
        }
        let mut by_channel: HashMap<ChannelId, Vec<MessageId>> = HashMap::new();
        for &(c, m) in purged {
            by_channel.entry(c).or_default().push(m);
        }
        for (channel, ids) in by_channel {
            let body: Bytes = encode(&json!({ "ids": ids, "channel_id": channel, "guild_id": self.id }));
            self.fan_out_in(st, channel, "MESSAGE_DELETE_BULK", &body, Intents::GUILD_MESSAGES);
        }
    }

    pub(crate) fn unbanned(&mut self, st: &mut State, user: &UserRecord) {
        st.bans.remove(&user.id);
        self.ban_event(st, "GUILD_BAN_REMOVE", user);
    }
}
