//! The actor's side of [`Op`]s: each action is checked against the actor's
//! own state and becomes a [`Plan`]: the store changes to commit (fenced by
//! the actor's epoch, through the node's writer) and what to do once they
//! are committed (apply them to the state, fan the events out, answer).
//! Plans run in commit order, so every session sees the guild's changes in
//! one order, and a check never reads a permission older than the last
//! committed change.
//!
//! One file per resource; each exports `plan(actor, state, user, action)`.

mod bans;
mod channels;
mod emojis;
mod guild;
pub(crate) mod interactions;
mod members;
mod messages;
mod pins;
mod reactions;
mod roles;
pub(crate) mod threads;
mod webhooks;

use axum::http::StatusCode;
use protocol::model::permission;
use protocol::{ChannelId, ErrorCode, UserId};
use store::{ChannelRecord, MemberRecord, UserRecord};

use super::actor::{GuildActor, State};
use node::perm;
use node::route::{Action, OpReply};

/// What an accepted action does (see [`crate::fenced::Plan`]).
pub(super) type Plan = crate::fenced::Plan<GuildActor, State>;

/// Runs on the actor after the commit: applies, fans out, answers.
pub(super) type Then = crate::fenced::Then<GuildActor, State>;

/// An action refused: the answer says why.
pub(super) type Decided = Result<Plan, OpReply>;

/// Turns `action` by `user` into a plan, or the reason it is refused.
pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: Action) -> Decided {
    match action {
        Action::Message(m) => messages::plan(a, st, user, m),
        Action::Channel(c) => channels::plan(a, st, user, c),
        Action::Member(m) => members::plan(a, st, user, m),
        Action::Guild(g) => guild::plan(a, st, user, g),
        // Roles, overwrites, bans:
        Action::Role(r) => roles::plan(a, st, user, r),
        Action::Overwrite(o) => roles::plan_overwrite(a, st, user, o),
        Action::Ban(b) => bans::plan(a, st, user, b),
        // Reactions, emojis, pins, bulk delete:
        Action::Reaction(r) => reactions::plan(a, st, user, r),
        Action::Pin(p) => pins::plan(a, st, user, p),
        Action::Emoji(e) => emojis::plan(a, st, user, e),
        // Attachments, webhooks:
        Action::Webhook(w) => webhooks::plan(a, st, user, w),
        // DMs, threads, application commands:
        Action::Thread(t) => threads::plan(a, st, user, t),
        Action::Interaction(i) => interactions::plan(a, st, user, i),
        // A DM's actions go to DM actors; a guild has none.
        Action::Dm(_) => Err(OpReply::not_found(ErrorCode::UnknownChannel)),
    }
}

/// A member asking for something, with their guild-level permissions.
pub(super) struct Caller<'a> {
    pub member: MemberRecord,
    pub user: std::sync::Arc<UserRecord>,
    /// Borrowed from the state the caller was found in.
    pub _state: std::marker::PhantomData<&'a ()>,
    /// Guild-level bits (everything for the owner).
    pub base: u64,
    pub owner: bool,
}

impl State {
    /// `user` as a member: 403 50001 if they are not one.
    pub(super) fn caller(&self, user: UserId) -> Result<Caller<'_>, OpReply> {
        let m = self.members.get(&user).ok_or_else(|| OpReply::forbidden(ErrorCode::MissingAccess))?;
        Ok(Caller {
            member: m.record(),
            user: std::sync::Arc::new(m.user()),
            _state: std::marker::PhantomData,
            base: perm::base(self.guild.id, self.guild.owner_id, &self.roles, &m),
            owner: self.guild.owner_id == user,
        })
    }

    /// A channel of this guild: 404 10003 if there is none. For a thread,
    /// its parent: a thread's messages follow the parent's permissions.
    pub(super) fn channel(&self, id: ChannelId) -> Result<&ChannelRecord, OpReply> {
        self.channels
            .iter()
            .find(|c| c.id == id)
            .or_else(|| self.thread_parent(id))
            .ok_or_else(|| OpReply::not_found(ErrorCode::UnknownChannel))
    }
}

impl Caller<'_> {
    /// Guild-level `bits` (all of them), or ADMINISTRATOR: else 403 50013.
    pub fn require(&self, bits: u64) -> Result<(), OpReply> {
        if self.base & permission::ADMINISTRATOR != 0 || self.base & bits == bits {
            Ok(())
        } else {
            Err(missing_permissions())
        }
    }

    /// At least one of `bits` (or ADMINISTRATOR): else 403 50013.
    pub fn require_any(&self, bits: u64) -> Result<(), OpReply> {
        if self.base & (bits | permission::ADMINISTRATOR) != 0 {
            Ok(())
        } else {
            Err(missing_permissions())
        }
    }

    /// The caller's bits in channel `c`: 403 50001 if they may not see it.
    pub fn view(&self, st: &State, c: &ChannelRecord) -> Result<u64, OpReply> {
        let bits = perm::in_channel(self.base, st.guild.id, &self.member, c);
        if bits & permission::VIEW_CHANNEL == 0 {
            return Err(OpReply::forbidden(ErrorCode::MissingAccess));
        }
        Ok(bits)
    }

    /// `view`, then every one of `bits` in the channel: else 403 50013.
    pub fn require_in(&self, st: &State, c: &ChannelRecord, bits: u64) -> Result<u64, OpReply> {
        let have = self.view(st, c)?;
        if have & bits != bits {
            return Err(missing_permissions());
        }
        Ok(have)
    }
}

pub(super) fn missing_permissions() -> OpReply {
    OpReply::forbidden(ErrorCode::MissingPermissions)
}

/// The first change touched nothing: the row was gone by the commit.
pub(super) fn gone(rows: &[u64]) -> bool {
    rows.first().copied().unwrap_or(0) == 0
}

pub(super) fn ok<T: serde::Serialize>(body: &T) -> OpReply {
    OpReply::ok(StatusCode::OK, body)
}
