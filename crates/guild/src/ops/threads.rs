//! Threads: create (from a message or standalone), modify (archive, lock,
//! rename), delete, join and leave, member and active lists, the archive
//! sweep, and what a message in a thread does first (unarchive, join).
//! Permissions come from the parent channel (`State::thread_bits`).

use axum::http::StatusCode;
use protocol::gateway::Intents;
use protocol::model::{channel_type, permission};
use protocol::{ChannelId, ErrorCode, UserId};
use serde_json::{json, Value};
use store::{Change, ThreadMemberRecord, ThreadRecord, PRIVATE_THREAD};

use super::{gone, missing_permissions, ok, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::threads::{member_json, Thread};
use node::auth::now_ms;
use node::route::threads::{ThreadAction, ThreadPatch};
use node::route::{OpReply, PostReply, ReplyTo};

pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: ThreadAction) -> Decided {
    match action {
        ThreadAction::Create { parent, from_message, channel, auto_archive_duration, invitable } => {
            let caller = st.caller(user)?;
            let p = st.channel(parent)?;
            if ![channel_type::GUILD_TEXT, channel_type::GUILD_ANNOUNCEMENT].contains(&p.kind) {
                return Err(OpReply::field("type", "CHANNEL_TYPE_INVALID", "Threads cannot be created in this channel."));
            }
            let need = if channel.kind == PRIVATE_THREAD { permission::CREATE_PRIVATE_THREADS } else { permission::CREATE_PUBLIC_THREADS };
            caller.require_in(st, p, need)?;
            if from_message && st.threads.get(channel.id).is_some() {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::ThreadAlreadyCreated));
            }
            let now = now_ms();
            let mut c = *channel;
            // A message's thread in an announcement channel is an announcement thread.
            if from_message && p.kind == channel_type::GUILD_ANNOUNCEMENT {
                c.kind = channel_type::ANNOUNCEMENT_THREAD;
            }
            c.guild_id = Some(st.guild.id);
            c.parent_id = Some(parent);
            let meta = ThreadRecord {
                channel_id: c.id,
                guild_id: st.guild.id,
                owner_id: user,
                archived: false,
                archive_timestamp: now,
                auto_archive_duration,
                locked: false,
                invitable,
                created_at: now,
            };
            let owner = ThreadMemberRecord { thread_id: c.id, user_id: user, join_timestamp: now, flags: 0 };
            let change = Change::CreateThread { channel: c.clone(), thread: meta.clone(), members: vec![owner.clone()] };
            Ok(Plan::new(vec![change], move |a, st, _| {
                let id = c.id;
                let t = Thread { channel: c, meta, members: [(user, owner)].into(), message_count: 0, last_activity: now };
                st.threads.map.insert(id, t);
                let t = &st.threads.map[&id];
                let mut body = t.json();
                body["newly_created"] = json!(true);
                a.fan_out_thread(st, id, "THREAD_CREATE", body, Intents::GUILDS);
                let answer = OpReply::ok(StatusCode::CREATED, &st.threads.map[&id].json_for(user));
                a.arm_sweep(st);
                answer
            }))
        }
        ThreadAction::Modify { thread, patch } => modify(st, user, thread, *patch),
        ThreadAction::Get { thread } => {
            let body = visible(st, thread, user)?.json_for(user);
            Ok(Plan::now(move |_, _| ok(&body)))
        }
        ThreadAction::Delete { thread } => {
            let t = visible(st, thread, user)?;
            if st.thread_bits(t, user) & permission::MANAGE_THREADS == 0 {
                return Err(missing_permissions());
            }
            Ok(Plan::new(vec![Change::DeleteChannel(thread)], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownChannel);
                }
                let Some(t) = st.threads.get(thread) else { return OpReply::not_found(ErrorCode::UnknownChannel) };
                let body = t.json();
                let gone = json!({"id": thread, "guild_id": st.guild.id, "parent_id": t.channel.parent_id, "type": t.channel.kind});
                a.fan_out_thread(st, thread, "THREAD_DELETE", gone, Intents::GUILDS);
                st.threads.map.remove(&thread);
                ok(&body)
            }))
        }
        ThreadAction::AddMember { thread, user: target } => add_member(st, user, thread, target),
        ThreadAction::RemoveMember { thread, user: target } => {
            let t = visible(st, thread, user)?;
            if t.meta.archived {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::ThreadArchived));
            }
            let bits = st.thread_bits(t, user);
            let owner_of_private = t.is_private() && t.meta.owner_id == user;
            if target != user && bits & permission::MANAGE_THREADS == 0 && !owner_of_private {
                return Err(missing_permissions());
            }
            if !t.members.contains_key(&target) {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            Ok(Plan::new(vec![Change::RemoveThreadMember { thread, user: target }], move |a, st, _| {
                members_update(a, st, thread, None, Some(target));
                if let Some(t) = st.threads.map.get_mut(&thread) {
                    t.members.remove(&target);
                }
                OpReply::no_content()
            }))
        }
        ThreadAction::Members { thread, user: one, with_member } => {
            let t = visible(st, thread, user)?;
            let render = |m: &ThreadMemberRecord| {
                let mut v = member_json(m);
                if with_member {
                    if let Some(gm) = st.members.get(&m.user_id) {
                        v["member"] = json!(gm.model(true));
                    }
                }
                v
            };
            let body = match one {
                Some(u) => match t.members.get(&u) {
                    Some(m) => render(m),
                    None => return Err(OpReply::not_found(ErrorCode::UnknownMember)),
                },
                None => Value::Array(t.members.values().map(render).collect()),
            };
            Ok(Plan::now(move |_, _| ok(&body)))
        }
        ThreadAction::Active => {
            st.caller(user)?;
            let threads = st.threads_for(user);
            let members: Vec<Value> =
                st.threads.map.values().filter(|t| !t.meta.archived).filter_map(|t| t.members.get(&user)).map(member_json).collect();
            let body = json!({ "threads": threads, "members": members });
            Ok(Plan::now(move |_, _| ok(&body)))
        }
        ThreadAction::Sweep => Ok(sweep(a, st)),
    }
}

/// A thread `user` may see: 404 10003 if there is none, 403 50001 if hidden.
fn visible(st: &State, thread: ChannelId, user: UserId) -> Result<&Thread, OpReply> {
    let t = st.threads.get(thread).ok_or_else(|| OpReply::not_found(ErrorCode::UnknownChannel))?;
    if st.thread_bits(t, user) == 0 {
        return Err(OpReply::forbidden(ErrorCode::MissingAccess));
    }
    Ok(t)
}

fn modify(st: &State, user: UserId, thread: ChannelId, patch: ThreadPatch) -> Decided {
    let t = visible(st, thread, user)?;
    let bits = st.thread_bits(t, user);
    let manager = bits & permission::MANAGE_THREADS != 0;
    let owner = t.meta.owner_id == user;
    // The creator may rename, archive and set the archive delay; locking,
    // slowmode and invitable need MANAGE_THREADS, as does anything else.
    let needs_manager = patch.locked.is_some() || patch.rate_limit_per_user.is_some() || patch.invitable.is_some();
    if !manager && (needs_manager || !owner) {
        return Err(missing_permissions());
    }
    let unarchives = patch.archived == Some(false);
    if t.meta.archived && !unarchives {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::ThreadArchived));
    }
    if t.meta.archived && t.meta.locked && !manager {
        return Err(missing_permissions());
    }
    let now = now_ms();
    let mut c = t.channel.clone();
    let mut meta = t.meta.clone();
    if let Some(n) = patch.name {
        c.name = n;
    }
    if let Some(r) = patch.rate_limit_per_user {
        c.rate_limit_per_user = r;
    }
    if let Some(archived) = patch.archived {
        if archived != meta.archived {
            meta.archived = archived;
            meta.archive_timestamp = now;
        }
    }
    if let Some(l) = patch.locked {
        meta.locked = l;
    }
    if let Some(d) = patch.auto_archive_duration {
        meta.auto_archive_duration = d;
    }
    if let Some(i) = patch.invitable {
        meta.invitable = i;
    }
    let change = Change::UpdateThread { channel: c.clone(), thread: meta.clone() };
    Ok(Plan::new(vec![change], move |a, st, rows| {
        if gone(rows) {
            return OpReply::not_found(ErrorCode::UnknownChannel);
        }
        let body = updated(a, st, c, meta, unarchives.then_some(now));
        ok(&body)
    }))
}

/// Applies a committed thread update and sends THREAD_UPDATE (to those
/// who may see it after the change); `active` restarts its archive clock.
fn updated(a: &mut GuildActor, st: &mut State, c: store::ChannelRecord, meta: ThreadRecord, active: Option<u64>) -> Value {
    let id = c.id;
    let Some(t) = st.threads.map.get_mut(&id) else { return Value::Null };
    t.channel.name = c.name;
    t.channel.rate_limit_per_user = c.rate_limit_per_user;
    t.meta = meta;
    if let Some(at) = active {
        t.last_activity = t.last_activity.max(at);
    }
    let body = t.json();
    a.fan_out_thread(st, id, "THREAD_UPDATE", body.clone(), Intents::GUILDS);
    a.arm_sweep(st);
    body
}

fn add_member(st: &State, user: UserId, thread: ChannelId, target: UserId) -> Decided {
    let t = visible(st, thread, user)?;
    if t.meta.archived {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::ThreadArchived));
    }
    if target != user {
        let bits = st.thread_bits(t, user);
        if bits & permission::SEND_MESSAGES_IN_THREADS == 0 {
            return Err(missing_permissions());
        }
        if t.is_private() && !t.meta.invitable && bits & permission::MANAGE_THREADS == 0 {
            return Err(missing_permissions());
        }
        if !st.members.contains_key(&target) {
            return Err(OpReply::not_found(ErrorCode::UnknownMember));
        }
    }
    if t.members.contains_key(&target) {
        return Ok(Plan::now(|_, _| OpReply::no_content()));
    }
    let m = ThreadMemberRecord { thread_id: thread, user_id: target, join_timestamp: now_ms(), flags: 0 };
    Ok(Plan::new(vec![Change::AddThreadMember(m.clone())], move |a, st, rows| {
        if !gone(rows) {
            joined(a, st, m);
        }
        OpReply::no_content()
    }))
}

/// A committed join: the member is added, and told (THREAD_CREATE, as
/// Discord tells a user added to a thread, and their own thread member in
/// THREAD_MEMBER_UPDATE), then THREAD_MEMBERS_UPDATE.
fn joined(a: &mut GuildActor, st: &mut State, m: ThreadMemberRecord) {
    let (thread, user) = (m.thread_id, m.user_id);
    let Some(t) = st.threads.map.get_mut(&thread) else { return };
    t.members.insert(user, m.clone());
    let body = fanout::encode(&st.threads.map[&thread].json_for(user));
    a.publish_to(fanout::FanEvent::new("THREAD_CREATE", body, fanout::Filter::Intent(Intents::GUILDS)), &|u| u == user);
    // Their own thread member: THREAD_MEMBER_UPDATE (with `guild_id`).
    let mut own = member_json(&m);
    own["guild_id"] = json!(st.guild.id);
    let own = fanout::encode(&own);
    a.publish_to(fanout::FanEvent::new("THREAD_MEMBER_UPDATE", own, fanout::Filter::Intent(Intents::GUILDS)), &|u| u == user);
    members_update(a, st, thread, Some(&m), None);
}

/// THREAD_MEMBERS_UPDATE: to those who may see the thread and have
/// GUILD_MEMBERS, and to the member added or removed whatever their intents.
fn members_update(a: &mut GuildActor, st: &State, thread: ChannelId, added: Option<&ThreadMemberRecord>, removed: Option<UserId>) {
    let Some(t) = st.threads.get(thread) else { return };
    let mut body = json!({ "id": thread, "guild_id": st.guild.id, "member_count": t.members.len().min(50) });
    let who = match (added, removed) {
        (Some(m), _) => {
            let mut v = member_json(m);
            if let Some(gm) = st.members.get(&m.user_id) {
                v["member"] = json!(gm.model(true));
            }
            body["added_members"] = json!([v]);
            m.user_id
        }
        (None, Some(u)) => {
            body["member_count"] = json!(t.members.len().saturating_sub(1).min(50));
            body["removed_member_ids"] = json!([u]);
            u
        }
        (None, None) => return,
    };
    let enc = fanout::encode(&body);
    let others = fanout::FanEvent::new("THREAD_MEMBERS_UPDATE", enc.clone(), fanout::Filter::Intent(Intents::GUILD_MEMBERS));
    a.publish_to(others, &|u| u != who && st.thread_bits(t, u) != 0);
    let own = fanout::FanEvent::new("THREAD_MEMBERS_UPDATE", enc, fanout::Filter::Intent(Intents::GUILDS));
    a.publish_to(own, &|u| u == who);
}

/// Archives every active thread idle past its `auto_archive_duration`.
fn sweep(a: &GuildActor, st: &State) -> Plan {
    let now = now_ms();
    let minute = a.node().config.threads.archive_minute_ms;
    let expired: Vec<(store::ChannelRecord, ThreadRecord)> = st
        .threads
        .map
        .values()
        .filter(|t| !t.meta.archived && now >= t.last_activity.saturating_add(u64::from(t.meta.auto_archive_duration) * minute))
        .map(|t| {
            let mut meta = t.meta.clone();
            meta.archived = true;
            meta.archive_timestamp = now;
            (t.channel.clone(), meta)
        })
        .collect();
    let changes = expired.iter().map(|(c, t)| Change::UpdateThread { channel: c.clone(), thread: t.clone() }).collect();
    Plan::new(changes, move |a, st, _| {
        GuildActor::sweep_fired(st);
        for (c, meta) in expired {
            updated(a, st, c, meta, None);
        }
        a.arm_sweep(st);
        OpReply::no_content()
    })
}

impl GuildActor {
    /// Before a message in thread `id` (the author may see the parent and
    /// send in threads: `bits`): private threads only for their members
    /// and managers; a locked archived thread only for managers; an
    /// archived one is unarchived, and an author not in the thread joins
    /// it (committed ahead of the message, so their events come first).
    pub(crate) fn before_thread_post(&mut self, st: &mut State, author: UserId, id: ChannelId, bits: u64) -> Result<(), PostReply> {
        let Some(t) = st.threads.get(id) else { return Err(PostReply::UnknownChannel) };
        let manager = bits & permission::MANAGE_THREADS != 0;
        if t.is_private() && !t.members.contains_key(&author) && !manager {
            return Err(PostReply::MissingAccess);
        }
        if t.meta.archived && t.meta.locked && !manager {
            return Err(PostReply::MissingPermissions);
        }
        let now = now_ms();
        let mut changes = Vec::new();
        let mut unarchived = None;
        if t.meta.archived {
            let mut meta = t.meta.clone();
            meta.archived = false;
            meta.archive_timestamp = now;
            changes.push(Change::UpdateThread { channel: t.channel.clone(), thread: meta.clone() });
            unarchived = Some((t.channel.clone(), meta));
        }
        let join = (!t.members.contains_key(&author)).then_some(ThreadMemberRecord {
            thread_id: id,
            user_id: author,
            join_timestamp: now,
            flags: 0,
        });
        if let Some(m) = &join {
            changes.push(Change::AddThreadMember(m.clone()));
        }
        if let Some(t) = st.threads.map.get_mut(&id) {
            // Counted now (informational); a second message before the
            // commit must not unarchive or join again.
            t.message_count += 1;
            t.last_activity = now;
            t.meta.archived = false;
        }
        if !changes.is_empty() {
            let plan = Plan::new(changes, move |a, st, _| {
                if let Some((c, meta)) = unarchived {
                    updated(a, st, c, meta, Some(now));
                }
                if let Some(m) = join {
                    joined(a, st, m);
                }
                OpReply::no_content()
            });
            // Nobody waits for this answer: request id 0 is never registered.
            let me = ReplyTo { node: self.node().id, id: 0 };
            self.submit_plan(st, plan, me);
        }
        Ok(())
    }

    /// A message was queued in channel or thread `id`: its
    /// `last_message_id`, as GUILD_CREATE and the channel routes show it
    /// (clients compare it with their read state for the unread mark).
    pub(crate) fn posted(st: &mut State, id: ChannelId, message: protocol::MessageId) {
        if let Some(t) = st.threads.map.get_mut(&id) {
            t.channel.last_message_id = Some(message);
        } else if let Some(c) = st.channels.iter_mut().find(|c| c.id == id) {
            if c.last_message_id.is_none_or(|m| m < message) {
                c.last_message_id = Some(message);
            }
        }
    }
}
