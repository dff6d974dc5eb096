//! Threads as a guild's actor holds them: each thread's channel, metadata
//! and members, beside the guild's channels (threads are not in
//! `State::channels`: GUILD_CREATE lists them apart, and their permissions
//! come from their parent). Who may see a thread, its JSON shapes, and the
//! archive sweep. Changes are planned in `ops::threads`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use protocol::model::{iso8601, permission};
use protocol::{ActorKey, ChannelId, UserId};
use serde_json::{json, Value};
use store::{is_thread, ChannelRecord, ThreadMemberRecord, ThreadRecord, ThreadSnapshot, PRIVATE_THREAD};

use super::actor::{GuildActor, State};
use fanout::{FanEvent, Filter};
use node::perm;
use node::route::threads::ThreadAction;
use node::route::{Action, GuildMsg, Op, ReplyTo};

/// Thread members counted in `member_count`, as Discord caps it.
const MEMBER_COUNT_CAP: usize = 50;

pub struct Thread {
    pub channel: ChannelRecord,
    pub meta: ThreadRecord,
    pub members: BTreeMap<UserId, ThreadMemberRecord>,
    pub message_count: u64,
    /// Newest message or unarchive (ms): the archive clock starts here.
    pub last_activity: u64,
}

#[derive(Default)]
pub(crate) struct Threads {
    pub map: HashMap<ChannelId, Thread>,
    /// A sweep is queued (the actor's timer is running).
    sweep_armed: bool,
}

impl Threads {
    /// The threads of a loaded guild (the guild's channels lose them).
    pub fn load(snaps: Vec<ThreadSnapshot>, channels: &mut Vec<ChannelRecord>) -> Threads {
        channels.retain(|c| !is_thread(c.kind));
        let map = snaps
            .into_iter()
            .map(|s| {
                let last = s.channel.last_message_id.map_or(0, |m| m.timestamp_ms());
                let thread = Thread {
                    last_activity: last.max(s.thread.archive_timestamp),
                    members: s.members.into_iter().map(|m| (m.user_id, m)).collect(),
                    message_count: s.message_count,
                    channel: s.channel,
                    meta: s.thread,
                };
                (thread.channel.id, thread)
            })
            .collect();
        Threads { map, sweep_armed: false }
    }

    pub fn get(&self, id: ChannelId) -> Option<&Thread> {
        self.map.get(&id)
    }

    /// The threads of parent channel `parent`.
    pub fn children(&self, parent: ChannelId) -> impl Iterator<Item = ChannelId> + '_ {
        self.map.values().filter(move |t| t.channel.parent_id == Some(parent)).map(|t| t.channel.id)
    }
}

impl Thread {
    pub fn is_private(&self) -> bool {
        self.channel.kind == PRIVATE_THREAD
    }

    /// The thread channel object (`thread_metadata`, counts, owner, parent).
    pub fn json(&self) -> Value {
        let c = &self.channel;
        let m = &self.meta;
        let mut meta = json!({
            "archived": m.archived,
            "auto_archive_duration": m.auto_archive_duration,
            "archive_timestamp": iso8601(m.archive_timestamp),
            "locked": m.locked,
            "create_timestamp": iso8601(m.created_at),
        });
        if self.is_private() {
            meta["invitable"] = json!(m.invitable);
        }
        json!({
            "id": c.id,
            "type": c.kind,
            "guild_id": c.guild_id,
            "parent_id": c.parent_id,
            "owner_id": m.owner_id,
            "name": c.name,
            "last_message_id": c.last_message_id,
            "rate_limit_per_user": c.rate_limit_per_user,
            "flags": 0,
            "message_count": self.message_count,
            "total_message_sent": self.message_count,
            "member_count": self.members.len().min(MEMBER_COUNT_CAP),
            "thread_metadata": meta,
            "applied_tags": [],
        })
    }

    /// `json()` with the caller's own thread member (`member`), if any.
    pub fn json_for(&self, user: UserId) -> Value {
        let mut v = self.json();
        if let Some(m) = self.members.get(&user) {
            v["member"] = member_json(m);
        }
        v
    }
}

/// A thread member object.
pub fn member_json(m: &ThreadMemberRecord) -> Value {
    json!({ "id": m.thread_id, "user_id": m.user_id, "join_timestamp": iso8601(m.join_timestamp), "flags": m.flags })
}

impl State {
    /// `user`'s bits in thread `t`: the parent's (after its overwrites);
    /// 0 if they may not see the thread (not a member of the guild, may not
    /// view the parent, or a private thread they are not in without
    /// MANAGE_THREADS).
    pub(crate) fn thread_bits(&self, t: &Thread, user: UserId) -> u64 {
        let Some(parent) = t.channel.parent_id.and_then(|p| self.channels.iter().find(|c| c.id == p)) else { return 0 };
        let Some(m) = self.members.get(&user) else { return 0 };
        let bits = perm::in_channel(perm::base(self.guild.id, self.guild.owner_id, &self.roles, &m), self.guild.id, &m, parent);
        if bits & permission::VIEW_CHANNEL == 0 {
            return 0;
        }
        if t.is_private() && !t.members.contains_key(&user) && bits & permission::MANAGE_THREADS == 0 {
            return 0;
        }
        bits
    }

    /// `user`'s bits in `channel`, a channel or a thread of this guild
    /// (`None`: no such channel; 0: they may not see it).
    pub(crate) fn bits_in(&self, channel: ChannelId, user: UserId) -> Option<u64> {
        if let Some(t) = self.threads.get(channel) {
            return Some(self.thread_bits(t, user));
        }
        let c = self.channels.iter().find(|c| c.id == channel)?;
        let Some(m) = self.members.get(&user) else { return Some(0) };
        let bits = perm::in_channel(perm::base(self.guild.id, self.guild.owner_id, &self.roles, &m), self.guild.id, &m, c);
        Some(if bits & permission::VIEW_CHANNEL == 0 { 0 } else { bits })
    }

    /// The parent channel of thread `id` (for a message's permission check).
    pub(crate) fn thread_parent(&self, id: ChannelId) -> Option<&ChannelRecord> {
        let p = self.threads.get(id)?.channel.parent_id?;
        self.channels.iter().find(|c| c.id == p)
    }

    /// GUILD_CREATE's `threads`: active threads `user` may see, with their
    /// own thread member if they joined.
    pub(crate) fn threads_for(&self, user: UserId) -> Vec<Value> {
        self.threads.map.values().filter(|t| !t.meta.archived && self.thread_bits(t, user) != 0).map(|t| t.json_for(user)).collect()
    }
}

impl GuildActor {
    /// Publishes an event of thread `id` to the subscribers who may see it:
    /// a public thread's audience is its parent's (cached split), a
    /// private thread's is checked per subscriber.
    pub(crate) fn publish_in_thread(&mut self, st: &State, id: ChannelId, event: Arc<FanEvent>) {
        let Some(t) = st.threads.get(id) else { return self.publish_to(event, &|_| false) };
        if !t.is_private() {
            if let Some(parent) = st.thread_parent(id) {
                return self.publish_in(st, parent, event);
            }
        }
        self.publish_to(event, &|u| st.thread_bits(t, u) != 0);
    }

    /// A thread event body to those who may see thread `id`, with `intent`.
    pub(crate) fn fan_out_thread(&mut self, st: &State, id: ChannelId, name: &'static str, body: Value, intent: u64) {
        let event = FanEvent::new(name, fanout::encode(&body), Filter::Intent(intent));
        self.publish_in_thread(st, id, event);
    }

    /// Queues the archive sweep unless one is queued: `threads.archive_sweep_ms`
    /// from now, the actor gets `ThreadAction::Sweep` through its own mailbox.
    pub(crate) fn arm_sweep(&mut self, st: &mut State) {
        if st.threads.sweep_armed || !st.threads.map.values().any(|t| !t.meta.archived) {
            return;
        }
        st.threads.sweep_armed = true;
        let node = self.node().clone();
        let guild = self.id();
        let wait = Duration::from_millis(node.config.threads.archive_sweep_ms.max(1));
        node.clone().tasks.spawn(async move {
            tokio::select! {
                _ = node.shutdown.cancelled() => {}
                _ = tokio::time::sleep(wait) => {
                    // Nobody waits for the answer: request id 0 is never registered.
                    let op = Op { user: UserId(0), action: Action::Thread(ThreadAction::Sweep), reply: ReplyTo { node: node.id, id: 0 }, reason: None };
                    if let Err(e) = node.guilds.send(ActorKey::guild(guild), GuildMsg::Op(Box::new(op))) {
                        tracing::debug!(guild = %guild, error = %e, "thread sweep not queued");
                    }
                }
            }
        });
    }

    /// THREAD_LIST_SYNC to those who may see channel `after` but could not
    /// see `before`: its active public threads (one shared body; their own
    /// thread members are not listed).
    pub(crate) fn thread_list_sync(&mut self, st: &State, before: &ChannelRecord, after: &ChannelRecord) {
        let threads: Vec<Value> = st
            .threads
            .map
            .values()
            .filter(|t| t.channel.parent_id == Some(after.id) && !t.meta.archived && !t.is_private())
            .map(Thread::json)
            .collect();
        if threads.is_empty() {
            return;
        }
        let body = json!({ "guild_id": st.guild.id, "channel_ids": [after.id], "threads": threads, "members": [] });
        let (g, owner) = (st.guild.id, st.guild.owner_id);
        let gained = |u: UserId| {
            st.members
                .get(&u)
                .is_some_and(|m| !perm::can_view(g, owner, &st.roles, &m, before) && perm::can_view(g, owner, &st.roles, &m, after))
        };
        let event = FanEvent::new("THREAD_LIST_SYNC", fanout::encode(&body), Filter::Intent(protocol::gateway::Intents::GUILDS));
        self.publish_to(event, &gained);
    }

    /// The sweep arrived: the timer may be armed again.
    pub(crate) fn sweep_fired(st: &mut State) {
        st.threads.sweep_armed = false;
    }
}
