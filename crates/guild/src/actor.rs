//! The guild actor: owns one guild's state, applies committed events in
//! order, and fans each dispatch out to its subscribed sessions. It never
//! awaits a session: pushes are `try_send` into bounded session queues.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use protocol::gateway::{Intents, RequestGuildMembers, Status};
use protocol::model::{self, iso8601, permission};
use protocol::{ActorKey, ChannelId, GuildId, UserId};
use serde::Serialize;
use serde_json::{json, Value};
use store::{Change, ChannelRecord, GuildRecord, GuildSnapshot, MessageRecord, RoleRecord, UserRecord};
use tokio::sync::mpsc;

use super::audit;
use super::fenced::{self, Core, Done, Fenced, Job};
use super::list::{Lists, View};
use super::members::MemberRef;
use super::names::Names;
use super::remote::RemoteSubs;
use super::{GuildEvent, GuildMsg};
use fanout::Recipient;
use fanout::{encode, Dispatch, FanEvent, Filter, Partitions, Reach, SessionRef, Sink, SubInfo, Subscribers};
use node::presence::Presence;
use node::route::{Op, OpReply, Post, PostReply, ReplyTo, Subscription};
use node::Node;
use node::{convert, perm};

mod presence;
mod roles;

/// Members per GUILD_MEMBERS_CHUNK, as Discord sends them.
const CHUNK_SIZE: usize = 1000;
/// The most members op 8 sends for a name prefix (Discord's bound).
const QUERY_MAX: usize = 100;

pub struct GuildActor {
    /// Key, mailbox, epoch and the writer's answers (see `fenced`).
    core: Core<super::ops::Then>,
    id: GuildId,
    /// Sessions of this node receiving this guild's events, by id and split by delivery worker.
    subs: Subscribers,
    /// Sessions of other nodes receiving them (a cluster).
    remote: RemoteSubs,
    /// Events applied so far: the guild's own order.
    seq: u64,
    /// The lazy member lists (ops 14/37), each built on its first subscription.
    lists: Lists,
    /// Channels not every member may see: the subscribers (of a reach) who
    /// can, split by worker. Built on a channel's first event, dropped
    /// whenever subscribers, members or channels change.
    hidden: HashMap<(ChannelId, Reach), Partitions>,
    /// Channels with new messages since passive sessions last heard
    /// (PASSIVE_UPDATE_V1), with the newest message of each.
    unread: BTreeMap<ChannelId, protocol::MessageId>,
    /// A `PassiveFlush` is on its way to this actor's mailbox.
    flush_armed: bool,
    /// The channels each person was told have new messages (in a passive
    /// update) since they last read them there: told once, not at every
    /// message, until an ack (which this actor checks) reads them.
    told: HashMap<UserId, Vec<ChannelId>>,
    /// Acks that came while their channel's update was pending, with the
    /// message each read up to: that update tells them nothing they have
    /// not read (and so does not count as told, which would hide the next
    /// message). Emptied at every flush.
    read_pending: HashMap<UserId, Vec<(ChannelId, protocol::MessageId)>>,
    /// The guild was deleted: the actor ends.
    stopped: bool,
}

impl Fenced for GuildActor {
    type State = State;
    type Then = super::ops::Then;

    fn core(&mut self) -> &mut Core<Self::Then> {
        &mut self.core
    }

    fn handle(&mut self, st: &mut State, msg: GuildMsg) -> bool {
        // What leaves the guild, its roles, emojis and channels as they are.
        // Every other message, and every commit, drops GUILD_CREATE's kept
        // head when done, so it is current when the next one starts.
        let reads = matches!(
            msg,
            GuildMsg::Subscribe(_)
                | GuildMsg::Unsubscribe { .. }
                | GuildMsg::Move(_)
                | GuildMsg::ListSubscribe(_)
                | GuildMsg::Opened { .. }
                | GuildMsg::PassiveFlush
                | GuildMsg::RequestMembers { .. }
                | GuildMsg::Presence { .. }
                | GuildMsg::Counts { .. }
        );
        let go_on = GuildActor::handle(self, st, msg);
        if !reads {
            st.changed();
        }
        go_on
    }

    /// Fanned out and answered in commit order.
    fn committed(&mut self, st: &mut State, done: Done<Self::Then>) -> bool {
        match done {
            Done::Message { message, body, reply } => {
                let pinged = st.pinged(&message);
                self.fan_out_message(st, "MESSAGE_CREATE", message.clone(), &body);
                self.passive_message(st, &message, &body, &pinged);
                self.core.node.read_states.mentioned(message.channel_id, message.id, pinged);
                self.core.node.guilds.reply(reply, PostReply::ok_bytes(&body));
            }
            Done::Op { rows, then, reply } => {
                let answer = then(self, st, &rows);
                self.core.node.guilds.reply(reply, encode(&answer));
            }
        }
        st.changed();
        !self.stopped
    }
}

/// The guild as its actor holds it: everything permission checks and
/// fan-out need, kept current by the changes the actor commits.
pub(crate) struct State {
    pub(crate) guild: GuildRecord,
    pub(crate) roles: Vec<RoleRecord>,
    pub(crate) channels: Vec<ChannelRecord>,
    pub(crate) members: super::members::Members,
    /// Members whose visible status is not offline, from each node's
    /// reports of the members it has sessions of.
    pub(crate) online: crate::online::Online,
    /// Custom emojis, by id.
    pub(crate) emojis: Vec<store::EmojiRecord>,
    /// Users banned from the guild: their joins are refused here, where
    /// every ban and join is committed in one order.
    pub(crate) bans: HashSet<UserId>,
    /// Threads (not in `channels`), with their members.
    pub(crate) threads: super::threads::Threads,
    /// Interactions in this guild while their tokens live.
    pub(crate) interactions: super::interact::Interactions,
    /// Members by name prefix, built at the first search.
    pub(crate) names: std::cell::OnceCell<Names>,
    /// GUILD_CREATE's part alike for every session, encoded at the first
    /// IDENTIFY after a change ([`State::changed`]).
    gc_head: std::cell::OnceCell<String>,
}

impl GuildActor {
    /// This actor's key on the router, the ring and the ownership table.
    pub(crate) fn key(&self) -> ActorKey {
        self.core.key
    }

    pub fn new(node: Arc<Node>, id: GuildId, rx: mpsc::Receiver<GuildMsg>) -> Self {
        let subs = Subscribers::new(node.delivery.workers());
        Self {
            core: Core::new(node, ActorKey::guild(id), rx),
            id,
            subs,
            remote: RemoteSubs::default(),
            seq: 0,
            lists: Lists::default(),
            hidden: HashMap::new(),
            unread: BTreeMap::new(),
            flush_armed: false,
            told: HashMap::new(),
            read_pending: HashMap::new(),
            stopped: false,
        }
    }

    pub(crate) fn id(&self) -> GuildId {
        self.id
    }

    pub(crate) fn node(&self) -> &Arc<Node> {
        &self.core.node
    }

    pub async fn run(mut self) {
        let node = self.core.node.clone();
        let id = self.id;
        if self.core.claim().await {
            // Batched with other actors' loads (see `batch`); boxed, so the
            // future does not stay part of this task's allocation for the
            // guild's lifetime.
            match Box::pin(node.guild_loads.get(id)).await {
                Ok(Some(snap)) => {
                    let mut state = State::from_snapshot(snap);
                    let channels: Vec<ChannelId> = state.channels.iter().map(|c| c.id).chain(state.threads.map.keys().copied()).collect();
                    if !self.core.load_keys(&channels).await {
                        let key = self.key();
                        drop(self);
                        node.guilds.actor_stopped(key);
                        return;
                    }
                    // This node's sessions; other nodes' come with their
                    // sessions' subscriptions and presence updates.
                    let here = node.presences.online_among(state.members.len(), state.members.ids(), |u| state.members.contains_key(&u));
                    for (uid, p) in here {
                        state.online.report(uid, node.id.0, p);
                    }
                    fenced::serve(&mut self, &mut state).await;
                }
                Ok(None) => {
                    tracing::debug!(guild = %id, "no such guild; actor stops");
                    let unknown = OpReply::not_found(protocol::ErrorCode::UnknownGuild);
                    self.core.refuse_all(PostReply::UnknownChannel, unknown).await;
                }
                Err(e) => tracing::error!(guild = %id, error = %e, "guild load failed"),
            }
        }
        let key = self.key();
        drop(self);
        node.guilds.actor_stopped(key);
    }

    /// Applies one message. Returns false when the actor must stop.
    fn handle(&mut self, st: &mut State, msg: GuildMsg) -> bool {
        match msg {
            GuildMsg::Subscribe(sub) => {
                let Subscription { session, info, presence } = *sub;
                let (user, from) = (info.user_id, session.node.0);
                if session.node != self.core.node.id {
                    self.subscribe_remote(st, session, info);
                } else if let Some(s) = self.core.node.sessions.get(&session.id) {
                    self.subscribe(st, s, &info);
                }
                if let Some(p) = presence {
                    self.presence_reported(st, user, from, p);
                }
            }
            GuildMsg::Unsubscribe { session, presence } => {
                let from = session.node.0;
                if session.node != self.core.node.id {
                    if self.remote.remove(&session).is_some() {
                        if let Some(c) = self.core.node.cluster() {
                            c.subscribed(&session, self.key(), self.core.epoch, false)
                        };
                    }
                } else {
                    self.subs.remove(&session.id);
                }
                self.hidden.clear();
                self.lists.unsubscribe(&session.id);
                if let Some(up) = presence {
                    let (user, p) = *up;
                    self.presence_reported(st, user, from, p);
                }
            }
            GuildMsg::Move(m) => self.move_session(*m),
            GuildMsg::ListSubscribe(sub) => {
                let Some(s) = self.subscriber(&sub.session) else { return true };
                self.set_open(st, &sub.session, true);
                self.lists.subscribe(&st.view(), s, &sub.channels, &st.channels);
            }
            GuildMsg::Opened { session, open } => self.set_open(st, &session, open),
            GuildMsg::PassiveFlush => {
                self.flush_armed = false;
                self.flush_passive(st);
            }
            GuildMsg::RequestMembers { session, req } => {
                if let Some(s) = self.subscriber(&session) {
                    self.request_members(st, &s, *req);
                }
            }
            GuildMsg::Presence { user, node, presence } => self.presence_reported(st, user, node, presence),
            GuildMsg::NodesLive(live) => self.nodes_live(st, &live),
            GuildMsg::Counts { reply } => {
                self.core.node.guilds.reply(reply, encode(&(st.members.len(), st.online.len())));
            }
            GuildMsg::Post(p) => self.post(st, *p),
            GuildMsg::Op(op) => self.op(st, *op),
            GuildMsg::Event(ev) => return self.apply(st, *ev),
        }
        true
    }

    /// A new message: checked against this actor's own state (membership,
    /// roles, the channel and its overwrites: no store read), then handed to
    /// the writer. Fanned out and answered once committed, in commit order.
    fn post(&mut self, st: &mut State, p: Post) {
        let reply = p.reply;
        // A thread's messages follow its parent's permissions.
        let in_thread = st.threads.get(p.channel).is_some();
        let Some(c) = st.channels.iter().find(|c| c.id == p.channel).or_else(|| st.thread_parent(p.channel)) else {
            return self.refuse(reply, PostReply::UnknownChannel);
        };
        let Some(member) = st.members.get(&p.author) else { return self.refuse(reply, PostReply::MissingAccess) };
        let bits = perm::in_channel(perm::base(self.id, st.guild.owner_id, &st.roles, &member), self.id, &member, c);
        if bits & permission::VIEW_CHANNEL == 0 {
            return self.refuse(reply, PostReply::MissingAccess);
        }
        let send = if in_thread { permission::SEND_MESSAGES_IN_THREADS } else { permission::SEND_MESSAGES };
        if bits & send == 0 {
            return self.refuse(reply, PostReply::MissingPermissions);
        }
        if bits & permission::ATTACH_FILES == 0 && node::attachments::has_files(&p.extra) {
            return self.refuse(reply, PostReply::MissingPermissions);
        }
        if in_thread {
            if let Err(r) = self.before_thread_post(st, p.author, p.channel, bits) {
                return self.refuse(reply, r);
            }
        }
        if !self.core.first_post(p.author, p.key.as_deref(), reply) {
            return;
        }
        let Some(member) = st.members.get(&p.author) else { return self.refuse(reply, PostReply::MissingAccess) };
        let author = member.user();
        let (mentions, mention_members) = st.mentioned(&p.mentions);
        let may_ping_all = bits & permission::MENTION_EVERYONE != 0;
        let mut extra = p.extra;
        let roles = role_mentions(&p.content, &st.roles, may_ping_all);
        if !roles.is_empty() {
            if extra.is_null() {
                extra = json!({});
            }
            if let Some(o) = extra.as_object_mut() {
                o.insert("mention_roles".into(), json!(roles));
            }
        }
        fenced::keep_key(&mut extra, p.key.as_deref());
        let rec = MessageRecord {
            id: self.core.node.ids.next().into(),
            channel_id: p.channel,
            guild_id: Some(self.id),
            author_id: p.author,
            edited_at: None,
            kind: if p.reference.is_some() { 19 } else { 0 },
            flags: p.flags,
            tts: p.tts,
            mention_everyone: may_ping_all && (p.content.contains("@everyone") || p.content.contains("@here")),
            mentions: mentions.iter().map(|u| u.id).collect(),
            reference: p.reference.as_ref().and_then(|r| serde_json::to_value(r).ok()),
            extra,
            content: p.content,
        };
        let mut message = convert::message(&rec, &author, &mentions, Some(member.model(false)));
        convert::attach_mention_members(&mut message, mention_members);
        if rec.kind == 19 {
            message.referenced_message = Some(p.referenced);
        }
        let message = Arc::new(message);
        let body = encode(&*message);
        Self::posted(st, p.channel, rec.id);
        let key = p.key.map(|k| (p.author, k));
        self.core.submit_message(rec, Job::Message { message, body, reply, key });
    }

    fn refuse(&self, reply: ReplyTo, r: PostReply) {
        self.core.node.guilds.reply(reply, encode(&r));
    }

    /// A change a user asked for: checked against this actor's state, then
    /// committed through the writer (fenced by the epoch) and applied in
    /// commit order; answered in either case.
    fn op(&mut self, st: &mut State, op: Op) {
        let Op { user, action, reply, reason } = op;
        let hint = audit::Hint::of(&action);
        let plan = match super::ops::plan(self, st, user, action) {
            Ok(p) => p,
            Err(refused) => return self.core.node.guilds.reply(reply, encode(&refused)),
        };
        let plan = self.audited(st, user, hint, reason, plan);
        self.submit_plan(st, plan, reply);
    }

    /// `plan` with the audit log entries its changes make (written in the
    /// same transaction), announced once they are committed.
    fn audited(&self, st: &State, user: UserId, hint: audit::Hint, reason: Option<String>, mut plan: super::ops::Plan) -> super::ops::Plan {
        let entries = audit::entries(st, user, hint, &plan.changes);
        if entries.is_empty() {
            return plan;
        }
        let records: Vec<_> =
            entries.into_iter().map(|e| audit::record(e, self.core.node.ids.next(), st.guild.id, user, reason.as_deref())).collect();
        plan.changes.extend(records.iter().cloned().map(Change::AddAuditEntry));
        let then = plan.then;
        super::ops::Plan::new(plan.changes, move |a: &mut GuildActor, st: &mut State, rows: &[u64]| {
            let answer = then(a, st, rows);
            if matches!(answer, OpReply::Done { .. }) {
                a.audit_created(st, &records);
            }
            answer
        })
    }

    /// GUILD_AUDIT_LOG_ENTRY_CREATE to members who may read the log, with
    /// the GUILD_MODERATION intent.
    fn audit_created(&mut self, st: &State, records: &[store::AuditRecord]) {
        for r in records {
            // The stored entry is a JSON object with keys (`audit::record`):
            // the event is it with `guild_id` first, without a re-parse.
            let body = format!("{{\"guild_id\":\"{}\",{}", self.id.0, &r.entry[1..]);
            let event = FanEvent::new("GUILD_AUDIT_LOG_ENTRY_CREATE", Bytes::from(body), Filter::Intent(Intents::GUILD_MODERATION));
            self.publish_to(event, &|u| audit::reads_log(st, u));
        }
    }

    /// Commits `plan`'s changes through the writer (fenced by the epoch)
    /// and runs its `then` in commit order, answering `reply`.
    pub(super) fn submit_plan(&mut self, st: &mut State, plan: super::ops::Plan, reply: ReplyTo) {
        if plan.changes.is_empty() {
            let answer = (plan.then)(self, st, &[]);
            return self.core.node.guilds.reply(reply, encode(&answer));
        }
        let mut changes = plan.changes;
        // One new message of this guild (a webhook's, an interaction's
        // answer) goes with the group commit's batches, as members'
        // messages do, fenced the same way (by its guild's epoch), instead
        // of a transaction of its own.
        if let [Change::WebhookMessage(m)] = &changes[..] {
            if m.guild_id == Some(st.guild.id) {
                let Some(Change::WebhookMessage(m)) = changes.pop() else { unreachable!("matched above") };
                Self::posted(st, m.channel_id, m.id);
                return self.core.submit_message(m, Job::Op { then: plan.then, reply });
            }
        }
        self.core.submit_changes(changes, Job::Op { then: plan.then, reply });
    }

    /// A session's subscription moves to the node that took it over. The
    /// [`fanout::MOVED`] marker goes to where the guild's events
    /// went so far, behind them: the old node forwards it (after everything
    /// it forwarded), and only then does the new node let this guild's
    /// direct events through. Without an old subscription, straight to the
    /// new node.
    fn move_session(&mut self, m: node::route::Move) {
        let to = m.to.id.clone();
        let new = super::remote::move_subscriber(&self.core.node, self.key(), self.core.epoch, &mut self.subs, &mut self.remote, m);
        self.hidden.clear();
        match &new {
            Some(n) => self.lists.moved(&to, n),
            None => self.lists.unsubscribe(&to),
        }
    }

    /// A subscribed session, on this node or another.
    fn subscriber(&self, r: &SessionRef) -> Option<Sink> {
        if r.node == self.core.node.id {
            self.subs.get(&r.id)
        } else {
            self.remote.get(r)
        }
    }

    /// A session of another node: GUILD_CREATE goes to it alone, then its
    /// node adds it to its own audience of this guild (in that order, on
    /// the one stream this actor has to that node).
    fn subscribe_remote(&mut self, st: &State, r: SessionRef, info: SubInfo) {
        if self.remote.contains(&r) {
            return;
        }
        if info.intents.contains(Intents::GUILDS) {
            let body = st.guild_create(&info);
            if let Some(c) = self.core.node.cluster() {
                c.subscribed_after(&r, self.key(), self.core.epoch, Dispatch { name: "GUILD_CREATE", body })
            };
        } else {
            if let Some(c) = self.core.node.cluster() {
                c.subscribed(&r, self.key(), self.core.epoch, true)
            };
        }
        let passive = self.starts_passive(st, &info);
        self.remote.insert(&self.core.node, r.clone(), info);
        if passive {
            self.remote.set_passive(&self.core.node, self.key(), self.core.epoch, &r, true);
        }
        self.hidden.clear();
    }

    fn subscribe(&mut self, st: &State, session: Sink, info: &SubInfo) {
        // A session may be subscribed both by its IDENTIFY and by a MemberAdd
        // that was queued while the actor loaded: only the first counts.
        if self.subs.contains(session.id()) {
            return;
        }
        if info.intents.contains(Intents::GUILDS) {
            let d = Dispatch { name: "GUILD_CREATE", body: st.guild_create(info) };
            // A session just identified is framed here, with no hand-off
            // to a delivery thread: it is not in `subs` yet, so nothing of
            // this guild's is queued for it.
            if !session.clone().frame_if_starting(&d) {
                self.core.node.delivery.one(session.clone(), d);
            }
        }
        let id = session.id().clone();
        self.subs.insert(session);
        if self.starts_passive(st, info) {
            self.subs.set_passive(&id, true);
        }
        self.hidden.clear();
    }

    /// Whether a session subscribing with `info` starts passive: a person's,
    /// in a guild of more than `gateway.passive_guild_members` members.
    fn starts_passive(&self, st: &State, info: &SubInfo) -> bool {
        let t = self.core.node.config.gateway.passive_guild_members;
        t > 0 && !info.bot && st.members.len() > t as usize
    }

    /// The session opened the guild (active: every event from now on, in
    /// order, after the unread state gathered so far) or left it (passive
    /// again, if it would start passive here).
    fn set_open(&mut self, st: &mut State, r: &SessionRef, open: bool) {
        let local = r.node == self.core.node.id;
        let passive_now = if local { self.subs.is_passive(&r.id) } else { self.remote.is_passive(r) };
        if open != passive_now {
            return;
        }
        if open {
            // What passive sessions have not heard yet comes before the
            // first full event.
            self.flush_passive(st);
        } else {
            let Some(s) = self.subscriber(r) else { return };
            if !self.starts_passive(st, &s.sub_info()) {
                return;
            }
            self.lists.unsubscribe(&r.id);
        }
        if local {
            self.subs.set_passive(&r.id, !open);
        } else {
            self.remote.set_passive(&self.core.node, self.key(), self.core.epoch, r, !open);
        }
        self.hidden.clear();
    }

    /// Which subscribers an event of this guild reaches: what only matters
    /// to someone looking at the guild goes to active sessions alone.
    fn reach_of(name: &str) -> Reach {
        match name {
            "MESSAGE_CREATE"
            | "MESSAGE_UPDATE"
            | "MESSAGE_DELETE"
            | "MESSAGE_DELETE_BULK"
            | "MESSAGE_REACTION_ADD"
            | "MESSAGE_REACTION_REMOVE"
            | "MESSAGE_REACTION_REMOVE_ALL"
            | "MESSAGE_REACTION_REMOVE_EMOJI"
            | "TYPING_START"
            | "PRESENCE_UPDATE"
            | "GUILD_MEMBER_ADD"
            | "GUILD_MEMBER_UPDATE"
            | "GUILD_MEMBER_REMOVE" => Reach::Active,
            _ => Reach::All,
        }
    }

    /// Whether any subscriber, here or on another node, is passive.
    fn has_passive(&self) -> bool {
        self.subs.passive_count() > 0 || self.remote.passive_count() > 0
    }

    /// A new message, for the passive sessions: its channel joins the next
    /// PASSIVE_UPDATE_V1, and those it mentions (`pinged`: who may see it)
    /// get the message itself.
    fn passive_message(&mut self, st: &State, m: &Arc<model::Message>, body: &Bytes, pinged: &[UserId]) {
        if !self.has_passive() {
            return;
        }
        // Threads are not in the update: a thread's message reaches a
        // passive session only when it mentions it.
        if st.channels.iter().any(|c| c.id == m.channel_id) {
            self.unread.insert(m.channel_id, m.id);
            self.arm_flush();
        }
        if pinged.is_empty() {
            return;
        }
        let event = FanEvent::new("MESSAGE_CREATE", body.clone(), Filter::Message { message: m.clone(), redacted: Default::default() });
        let set: HashSet<UserId> = pinged.iter().copied().collect();
        self.publish_to_reach(event, &|u| set.contains(&u), Reach::Passive);
    }

    /// One event to the passive sessions of `user` (their own member
    /// changes), which active sessions got with everyone's.
    fn tell_passive_user(&mut self, user: UserId, name: &'static str, body: &Bytes, intent: u64) {
        if self.has_passive() {
            self.publish_to_reach(FanEvent::new(name, body.clone(), Filter::Intent(intent)), &|u| u == user, Reach::Passive);
        }
    }

    /// Asks for a `PassiveFlush` in `gateway.passive_update_ms`, unless one
    /// is on its way.
    fn arm_flush(&mut self) {
        if self.flush_armed {
            return;
        }
        self.flush_armed = true;
        let (node, key) = (self.core.node.clone(), self.key());
        let wait = std::time::Duration::from_millis(node.config.gateway.passive_update_ms.max(1));
        self.core.node.tasks.spawn(async move {
            tokio::time::sleep(wait).await;
            loop {
                match node.guilds.send(key, GuildMsg::PassiveFlush) {
                    Err(node::route::RouteError::Busy(_)) if !node.shutdown.is_cancelled() => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    Err(e) => return tracing::debug!(actor = %key, error = %e, "passive update not delivered"),
                    Ok(()) => return,
                }
            }
        });
    }

    /// PASSIVE_UPDATE_V1 to the passive sessions: of the channels with new
    /// messages, with the newest of each, those each person may see and
    /// was not told of since they last read them (one body per person,
    /// for all their passive sessions; nothing to whoever has nothing new).
    fn flush_passive(&mut self, st: &State) {
        if self.unread.is_empty() {
            return;
        }
        let unread = std::mem::take(&mut self.unread);
        let read_pending = std::mem::take(&mut self.read_pending);
        let (gid, owner) = (self.id, st.guild.owner_id);
        let news: Vec<(&ChannelRecord, protocol::MessageId, bool)> = unread
            .into_iter()
            .filter_map(|(c, m)| st.channels.iter().find(|x| x.id == c).map(|ch| (ch, m, perm::everyone_can_view(gid, &st.roles, ch))))
            .collect();
        // Each person's update, worked out once for all their sessions.
        let mut bodies: HashMap<UserId, Option<Bytes>> = HashMap::new();
        let told = &mut self.told;
        let mut body_of = |user: UserId| -> Option<Bytes> {
            bodies
                .entry(user)
                .or_insert_with(|| {
                    let member = st.members.get(&user)?;
                    let seen = told.entry(user).or_default();
                    let read = read_pending.get(&user).map_or(&[][..], Vec::as_slice);
                    let fresh: Vec<&(&ChannelRecord, protocol::MessageId, bool)> = news
                        .iter()
                        .filter(|(c, m, open)| {
                            !seen.contains(&c.id)
                                && !read.iter().any(|(rc, r)| *rc == c.id && m <= r)
                                && (*open || perm::can_view(gid, owner, &st.roles, &member, c))
                        })
                        .collect();
                    seen.extend(fresh.iter().map(|(c, _, _)| c.id));
                    let channels: Vec<Value> = fresh.iter().map(|(c, m, _)| json!({"id": c.id, "last_message_id": m})).collect();
                    if seen.is_empty() {
                        told.remove(&user);
                    }
                    (!channels.is_empty())
                        .then(|| encode(&json!({"guild_id": gid, "channels": channels, "voice_states": [], "members": []})))
                })
                .clone()
        };
        self.seq += 1;
        let wanted = |s: &dyn Recipient| s.intents().contains(Intents::GUILDS);
        let local: Vec<(Sink, Bytes)> = self
            .subs
            .passive_values()
            .filter(|s| wanted(s.as_ref()))
            .filter_map(|s| body_of(s.user_id()).map(|b| (s.clone(), b)))
            .collect();
        let remote: Vec<(Sink, Bytes)> = self
            .remote
            .values()
            .filter(|s| s.is_passive() && wanted(s.as_ref()))
            .filter_map(|s| body_of(s.info.user_id).map(|b| (s.clone() as Sink, b)))
            .collect();
        for (s, body) in local {
            self.core.node.delivery.one(s, Dispatch { name: "PASSIVE_UPDATE_V1", body });
        }
        for (s, body) in remote {
            s.push(Dispatch { name: "PASSIVE_UPDATE_V1", body });
        }
    }

    /// `user` read `channel` here up to `message` (an ack): the next new
    /// message there is news to them again, and an update pending for
    /// the channel that names nothing newer is not (the flush after an ack
    /// would otherwise tell them of what they read, count the channel as
    /// told and so keep the next message from them).
    pub(crate) fn passive_acked(&mut self, user: UserId, channel: ChannelId, message: protocol::MessageId) {
        if let Some(seen) = self.told.get_mut(&user) {
            seen.retain(|c| *c != channel);
            if seen.is_empty() {
                self.told.remove(&user);
            }
        }
        if self.unread.get(&channel).is_some_and(|m| *m <= message) {
            let read = self.read_pending.entry(user).or_default();
            read.retain(|(c, _)| *c != channel);
            read.push((channel, message));
        }
    }

    /// Hands one encoded event to the delivery workers, each with its share
    /// of the subscribers. Never waits.
    fn publish(&mut self, event: Arc<FanEvent>) {
        let reach = Self::reach_of(event.name);
        self.publish_as(event, reach);
    }

    /// `publish` to the subscribers `reach` names.
    fn publish_as(&mut self, event: Arc<FanEvent>, reach: Reach) {
        self.seq += 1;
        if self.wanted(&event) {
            self.core.node.delivery.fan_out(&event, self.subs.partitions_of(reach));
        }
        if !self.remote.is_empty() && self.remote_wanted(&event) {
            self.remote.fan(&self.core.node, self.key(), self.core.epoch, &event, None, reach);
        }
    }

    /// `publish` for an event of channel `c`: when not every member may see
    /// it, only to the subscribers who can (their split is cached per
    /// channel until subscribers, members or channels change).
    pub(crate) fn publish_in(&mut self, st: &State, c: &ChannelRecord, event: Arc<FanEvent>) {
        let reach = Self::reach_of(event.name);
        self.publish_in_as(st, c, event, reach);
    }

    /// `publish_in` to the subscribers `reach` names.
    fn publish_in_as(&mut self, st: &State, c: &ChannelRecord, event: Arc<FanEvent>, reach: Reach) {
        if perm::everyone_can_view(self.id, &st.roles, c) {
            return self.publish_as(event, reach);
        }
        self.seq += 1;
        let (gid, owner) = (self.id, st.guild.owner_id);
        if !self.remote.is_empty() && self.remote_wanted(&event) {
            let keep = |i: &SubInfo| st.members.get(&i.user_id).is_some_and(|m| perm::can_view(gid, owner, &st.roles, &m, c));
            self.remote.fan(&self.core.node, ActorKey::guild(gid), self.core.epoch, &event, Some(&keep), reach);
        }
        if !self.wanted(&event) {
            return;
        }
        let subs = &self.subs;
        let parts = self.hidden.entry((c.id, reach)).or_insert_with(|| {
            subs.partitions_of_where(reach, |s| st.members.get(&s.user_id()).is_some_and(|m| perm::can_view(gid, owner, &st.roles, &m, c)))
        });
        self.core.node.delivery.fan_out(&event, parts);
    }

    /// Whether any remote subscriber would get `event` at all.
    fn remote_wanted(&self, event: &FanEvent) -> bool {
        match &event.filter {
            Filter::Intent(i) | Filter::IntentNotUser(i, _) => self.remote.wants(*i),
            Filter::Message { .. } => self.remote.wants(Intents::GUILD_MESSAGES),
        }
    }

    /// Whether any local subscriber would get `event` at all.
    fn wanted(&self, event: &FanEvent) -> bool {
        match &event.filter {
            Filter::Intent(i) | Filter::IntentNotUser(i, _) => self.subs.wants(*i),
            Filter::Message { .. } => self.subs.wants(Intents::GUILD_MESSAGES),
        }
    }

    /// One dispatch that no intent gates (interactions), to every session of
    /// `user` subscribed to this guild, on this node and others.
    pub(crate) fn publish_direct(&mut self, event: Arc<FanEvent>, user: UserId) {
        self.seq += 1;
        if !self.remote.is_empty() {
            let keep_remote = |i: &SubInfo| i.user_id == user;
            self.remote.fan(&self.core.node, self.key(), self.core.epoch, &event, Some(&keep_remote), Reach::All);
        }
        let parts = self.subs.partitions_where(|s| s.user_id() == user);
        self.core.node.delivery.fan_out(&event, &parts);
    }

    /// Sends one shared body to every subscriber with `intent`.
    pub(crate) fn fan_out(&mut self, name: &'static str, body: &Bytes, intent: u64) {
        self.publish(FanEvent::new(name, body.clone(), Filter::Intent(intent)));
    }

    /// `fan_out` for an event of one channel: to those who may see it. An
    /// event of a channel this guild does not (or no longer) have goes to
    /// nobody rather than to everyone.
    pub(crate) fn fan_out_in(&mut self, st: &State, channel: ChannelId, name: &'static str, body: &Bytes, intent: u64) {
        self.publish_in_channel(st, channel, FanEvent::new(name, body.clone(), Filter::Intent(intent)));
    }

    /// MESSAGE_CREATE/UPDATE: to those who may see the channel; full content
    /// to those entitled to it, the redacted variant (encoded at most once)
    /// to bots without MESSAGE_CONTENT.
    fn fan_out_message(&mut self, st: &State, name: &'static str, m: Arc<model::Message>, body: &Bytes) {
        let channel = m.channel_id;
        self.publish_in_channel(
            st,
            channel,
            FanEvent::new(name, body.clone(), Filter::Message { message: m, redacted: Default::default() }),
        );
    }

    fn publish_in_channel(&mut self, st: &State, channel: ChannelId, event: Arc<FanEvent>) {
        match st.channels.iter().find(|c| c.id == channel) {
            Some(c) => self.publish_in(st, c, event),
            None if st.threads.get(channel).is_some() => self.publish_in_thread(st, channel, event),
            None => self.seq += 1,
        }
    }

    pub(crate) fn apply(&mut self, st: &mut State, ev: GuildEvent) -> bool {
        let gid = self.id;
        match ev {
            GuildEvent::MessageCreate { message, body } => {
                self.fan_out_message(st, "MESSAGE_CREATE", message.clone(), &body);
                if self.has_passive() {
                    let pinged = st.pinged(&message);
                    self.passive_message(st, &message, &body, &pinged);
                }
            }
            GuildEvent::MessageUpdate { message, body } => self.fan_out_message(st, "MESSAGE_UPDATE", message, &body),
            GuildEvent::MessageDelete { id, channel_id } => {
                let body = encode(&json!({"id": id, "channel_id": channel_id, "guild_id": gid}));
                self.fan_out_in(st, channel_id, "MESSAGE_DELETE", &body, Intents::GUILD_MESSAGES);
            }
            GuildEvent::TypingStart { channel_id, user_id, timestamp } => {
                let member = st.members.get(&user_id).map(|m| m.model(true));
                let body = encode(&json!({
                    "channel_id": channel_id, "guild_id": gid, "user_id": user_id,
                    "timestamp": timestamp, "member": member,
                }));
                self.fan_out_in(st, channel_id, "TYPING_START", &body, Intents::GUILD_MESSAGE_TYPING);
            }
            GuildEvent::ChannelCreate(c) => {
                let body = encode(&convert::channel(&c));
                // The load may already have seen this commit.
                st.channels.retain(|x| x.id != c.id);
                self.hidden.clear();
                let event = FanEvent::new("CHANNEL_CREATE", body, Filter::Intent(Intents::GUILDS));
                self.publish_in(st, &c, event);
                st.channels.push(c);
                st.channels.sort_by_key(|c| (c.position, c.id));
            }
            GuildEvent::ChannelUpdate(c) => {
                self.hidden.clear();
                match st.channels.iter().find(|x| x.id == c.id).cloned() {
                    // CHANNEL_UPDATE to who sees it before and after;
                    // CHANNEL_CREATE / CHANNEL_DELETE to who gains or loses it.
                    Some(before) => {
                        self.publish_channel_update(st, &before, &c);
                        self.thread_list_sync(st, &before, &c);
                    }
                    None => {
                        let body = encode(&convert::channel(&c));
                        self.publish_in(st, &c, FanEvent::new("CHANNEL_UPDATE", body, Filter::Intent(Intents::GUILDS)));
                    }
                }
                let overwrites_changed = st.channels.iter().any(|x| x.id == c.id && x.overwrites != c.overwrites);
                if let Some(old) = st.channels.iter_mut().find(|x| x.id == c.id) {
                    *old = c;
                }
                st.channels.sort_by_key(|c| (c.position, c.id));
                if overwrites_changed {
                    self.lists.rebuild(&st.view(), &st.channels);
                }
            }
            GuildEvent::ChannelDelete(c) => {
                st.channels.retain(|x| x.id != c.id);
                self.hidden.clear();
                let event = FanEvent::new("CHANNEL_DELETE", encode(&convert::channel(&c)), Filter::Intent(Intents::GUILDS));
                self.publish_in(st, &c, event);
                self.lists.rebuild(&st.view(), &st.channels);
            }
            GuildEvent::GuildUpdate(g) => {
                st.guild = g;
                self.hidden.clear();
                let body = encode(&st.guild_object());
                self.fan_out("GUILD_UPDATE", &body, Intents::GUILDS);
            }
            GuildEvent::GuildDelete => {
                let body = encode(&json!({"id": gid}));
                self.seq += 1;
                for s in self.subs.values() {
                    s.left(ActorKey::guild(gid));
                    if s.intents().contains(Intents::GUILDS) {
                        self.core.node.delivery.one(s.clone(), Dispatch { name: "GUILD_DELETE", body: body.clone() });
                    }
                }
                self.subs.clear();
                for s in self.remote.values() {
                    if s.info.intents.contains(Intents::GUILDS) {
                        s.clone().push(Dispatch { name: "GUILD_DELETE", body: body.clone() });
                    }
                    if let Some(c) = self.core.node.cluster() {
                        c.subscribed(&s.r, ActorKey::guild(gid), self.core.epoch, false)
                    };
                }
                self.remote = RemoteSubs::default();
                self.stopped = true;
                return false;
            }
            GuildEvent::MemberAdd { member, user } => {
                let uid = user.id;
                // Already in the loaded snapshot: the commit raced the load.
                let known = st.members.contains_key(&uid);
                let mut m = convert::member(&member, Some(&user));
                m.guild_id = Some(gid);
                st.online.report(uid, self.core.node.id.0, self.core.node.presences.get(uid));
                if let Some(names) = st.names.get_mut() {
                    names.replace(st.members.get(&uid), Some((&member, &user)));
                }
                st.members.insert(&member, &user);
                self.hidden.clear();
                self.lists.member_changed(&st.view(), uid);
                if !known {
                    self.fan_out("GUILD_MEMBER_ADD", &encode(&m), Intents::GUILD_MEMBERS);
                }
                // The new member's sessions on other nodes: their nodes subscribe them.
                if let Some(c) = self.core.node.cluster() {
                    c.member_joined(gid, uid)
                };
                // The new member's own sessions on this node start receiving the guild.
                for s in self.core.node.sessions.of_user(uid) {
                    if !self.subs.contains(s.id()) {
                        s.joined(ActorKey::guild(gid));
                        let info = s.sub_info();
                        self.subscribe(st, s, &info);
                    }
                }
            }
            GuildEvent::MemberUpdate(member) => {
                let uid = member.user_id;
                // New roles may show or hide channels: what the member saw before.
                let seen = st.members.get(&uid).filter(|old| old.roles() != member.roles).map(|_| self.seen_by(st, uid));
                let Some(old) = st.members.get(&uid) else { return true };
                let user = old.user();
                if let Some(names) = st.names.get_mut() {
                    names.replace(Some(old), Some((&member, &user)));
                }
                st.members.insert(&member, &user);
                self.hidden.clear();
                let mut m = convert::member(&member, Some(&user));
                m.guild_id = Some(gid);
                let body = encode(&m);
                self.fan_out("GUILD_MEMBER_UPDATE", &body, Intents::GUILD_MEMBERS);
                self.tell_passive_user(uid, "GUILD_MEMBER_UPDATE", &body, Intents::GUILD_MEMBERS);
                if let Some(before) = seen {
                    self.announce_seen_by(st, uid, &before);
                }
                self.lists.member_changed(&st.view(), uid);
            }
            GuildEvent::UserUpdate(user) => {
                let uid = user.id;
                let Some(held) = st.members.get(&uid) else { return true };
                let member = held.record();
                if let Some(names) = st.names.get_mut() {
                    names.replace(Some(held), Some((&member, &user)));
                }
                st.members.insert(&member, &user);
                let mut m = convert::member(&member, Some(&user));
                m.guild_id = Some(gid);
                let body = encode(&m);
                self.fan_out("GUILD_MEMBER_UPDATE", &body, Intents::GUILD_MEMBERS);
                self.tell_passive_user(uid, "GUILD_MEMBER_UPDATE", &body, Intents::GUILD_MEMBERS);
                self.lists.member_changed(&st.view(), uid);
            }
            GuildEvent::MemberRemove(uid) => {
                let Some((member, user)) = st.members.remove(&uid) else { return true };
                self.told.remove(&uid);
                if let Some(names) = st.names.get_mut() {
                    names.replace(Some((&member, &user)), None::<MemberRef<'_>>);
                }
                self.hidden.clear();
                st.online.forget(uid);
                self.lists.member_removed(&st.view(), uid);
                let body = encode(&json!({"guild_id": gid, "user": convert::user(&user)}));
                self.fan_out("GUILD_MEMBER_REMOVE", &body, Intents::GUILD_MEMBERS);
                self.tell_passive_user(uid, "GUILD_MEMBER_REMOVE", &body, Intents::GUILD_MEMBERS);
                let gone = encode(&json!({"id": gid}));
                for s in self.subs.remove_user(uid) {
                    s.left(ActorKey::guild(gid));
                    self.lists.unsubscribe(s.id());
                    if s.intents().contains(Intents::GUILDS) {
                        self.core.node.delivery.one(s, Dispatch { name: "GUILD_DELETE", body: gone.clone() });
                    }
                }
                for s in self.remote.remove_user(uid) {
                    self.lists.unsubscribe(&s.r.id);
                    if s.info.intents.contains(Intents::GUILDS) {
                        s.clone().push(Dispatch { name: "GUILD_DELETE", body: gone.clone() });
                    }
                    // Its node also takes the guild off the session's list.
                    if let Some(c) = self.core.node.cluster() {
                        c.subscribed(&s.r, ActorKey::guild(gid), self.core.epoch, false)
                    };
                }
            }
        }
        true
    }

    fn request_members(&mut self, st: &State, s: &Sink, req: RequestGuildMembers) {
        let query = req.query.unwrap_or_default();
        let limit = req.limit.unwrap_or(0) as usize;
        // A name prefix goes through the index, in its order and bound;
        // ids and the whole list are sorted by id and cut at `limit`.
        let by_name = req.user_ids.is_none() && !query.is_empty();
        let mut not_found = Vec::new();
        let mut found: Vec<MemberRef<'_>> = match req.user_ids {
            Some(ids) => ids
                .into_vec()
                .into_iter()
                .filter_map(|u| {
                    let m = st.members.get(&u);
                    if m.is_none() {
                        not_found.push(u);
                    }
                    m
                })
                .collect(),
            // Discord sends at most 100 for a prefix (and 100 for limit 0).
            None if by_name => st.search_members(&query, if limit == 0 { QUERY_MAX } else { limit.min(QUERY_MAX) }),
            None => st.members.iter().collect(),
        };
        if !by_name {
            found.sort_by_key(|m| m.id());
            if limit > 0 {
                found.truncate(limit);
            }
        }
        let with_presences = req.presences.unwrap_or(false) && s.intents().contains(Intents::GUILD_PRESENCES);
        let chunks: Vec<_> = found.chunks(CHUNK_SIZE).collect();
        let count = chunks.len().max(1);
        for i in 0..count {
            let part = chunks.get(i).copied().unwrap_or(&[]);
            let mut d = json!({
                "guild_id": self.id,
                "members": part.iter().map(|m| m.model(true)).collect::<Vec<_>>(),
                "chunk_index": i,
                "chunk_count": count,
            });
            if let Some(n) = &req.nonce {
                d["nonce"] = json!(n);
            }
            if i == 0 && !not_found.is_empty() {
                d["not_found"] = json!(not_found);
            }
            if with_presences {
                let ps: Vec<Value> =
                    part.iter().filter_map(|m| st.online.get(m.id()).map(|p| presence_json(self.id, m.id(), &p))).collect();
                d["presences"] = Value::Array(ps);
            }
            s.clone().push(Dispatch { name: "GUILD_MEMBERS_CHUNK", body: encode(&d) });
        }
    }
}

/// The roles `<@&id>` in `content` mentions: those of this guild that are
/// mentionable, or any of them for an author who may mention everyone.
fn role_mentions(content: &str, roles: &[RoleRecord], may_ping_all: bool) -> Vec<protocol::RoleId> {
    let mut found = Vec::new();
    for part in content.split("<@&").skip(1) {
        let Some(id) = part.split('>').next().and_then(|d| d.parse::<u64>().ok()) else { continue };
        if let Some(r) = roles.iter().find(|r| r.id.0 == id && r.bot_id.is_none() && (r.mentionable || may_ping_all)) {
            if !found.contains(&r.id) {
                found.push(r.id);
            }
        }
    }
    found
}

impl State {
    /// Who a new message counts as a mention for (read states): the
    /// members it names, those holding a role it mentions, everyone
    /// (`@everyone`) or everyone online (`@here`); never its author, and
    /// only those who may see its channel.
    pub(super) fn pinged(&self, m: &model::Message) -> Vec<UserId> {
        let here_only = m.mention_everyone && !m.content.contains("@everyone");
        let mut who: Vec<UserId> = if m.mention_everyone {
            self.members.ids().filter(|u| !here_only || self.online.contains(*u)).collect()
        } else {
            let mut v: Vec<UserId> = m.mentions.iter().map(|u| u.id).filter(|u| self.members.contains_key(u)).collect();
            if !m.mention_roles.is_empty() {
                v.extend(self.members.iter().filter(|mm| mm.roles().iter().any(|r| m.mention_roles.contains(r))).map(|mm| mm.id()));
                v.sort_unstable();
                v.dedup();
            }
            v
        };
        who.retain(|u| *u != m.author.id);
        if who.is_empty() {
            return who;
        }
        // A channel everyone may see needs no check per member.
        let open =
            self.channels.iter().find(|c| c.id == m.channel_id).is_some_and(|c| perm::everyone_can_view(self.guild.id, &self.roles, c));
        if !open {
            who.retain(|u| self.bits_in(m.channel_id, *u).is_some_and(|b| b != 0));
        }
        who
    }

    /// The members among `ids` (others are left out, as Discord does):
    /// their users for the message, their partial members for its events.
    pub(super) fn mentioned(&self, ids: &[UserId]) -> (Vec<UserRecord>, Vec<protocol::model::Member>) {
        ids.iter().filter_map(|u| self.members.get(u)).map(|m| (m.user(), m.model(false))).unzip()
    }

    fn view(&self) -> View<'_> {
        View { guild: self.guild.id, owner: self.guild.owner_id, roles: &self.roles, members: &self.members, online: &self.online }
    }

    fn from_snapshot(s: GuildSnapshot) -> State {
        let mut channels = s.channels;
        let members = super::members::Members::load(s.guild.id, s.members);
        let threads = super::threads::Threads::load(s.threads, &mut channels);
        State {
            guild: s.guild,
            roles: s.roles,
            channels,
            members,
            online: crate::online::Online::default(),
            emojis: s.emojis,
            bans: s.bans.into_iter().collect(),
            threads,
            interactions: Default::default(),
            names: Default::default(),
            gc_head: Default::default(),
        }
    }

    /// Members whose username, global name or nickname starts with
    /// `query` (any case), at most `limit`.
    pub(crate) fn search_members(&self, query: &str, limit: usize) -> Vec<MemberRef<'_>> {
        let names = self.names.get_or_init(|| Names::build(self.members.iter()));
        names.search(query, limit).iter().filter_map(|id| self.members.get(id)).collect()
    }

    /// GUILD_CREATE for one session. Large guilds list only online members
    /// (and the session's own); the rest come through op 8.
    ///
    /// The part every session gets alike (the guild object, its roles and
    /// emojis, the channels) is encoded once and kept until the state
    /// changes ([`State::changed`]); each session's own part (its member,
    /// the online members and presences, its threads) is appended to it.
    fn guild_create(&self, s: &SubInfo) -> Bytes {
        #[derive(Serialize)]
        struct Own {
            joined_at: Option<String>,
            large: bool,
            unavailable: bool,
            lazy: bool,
            member_count: usize,
            members: Vec<model::Member>,
            threads: Vec<Value>,
            presences: Vec<Value>,
        }
        let head = self.gc_head.get_or_init(|| self.guild_create_head());
        let large = self.members.len() > s.large_threshold as usize;
        // Large guilds: online members only, and only for sessions that get
        // presences (as Discord does); everyone else gets just their own member.
        // Built from the session's own entry and the online map, never by
        // scanning every member: a guild of N members subscribing N sessions
        // would otherwise cost N² checks.
        let with_online = s.intents.contains(Intents::GUILD_PRESENCES);
        let members = if large {
            let own = self.members.get(&s.user_id);
            // Without presences the online list is not walked at all.
            let online = with_online.then(|| self.online.users()).into_iter().flatten();
            let online = online.filter(|&u| u != s.user_id).filter_map(|u| self.members.get(&u));
            own.into_iter().chain(online).map(|m| m.model(true)).collect()
        } else {
            self.members.iter().map(|m| m.model(true)).collect()
        };
        let presences = if s.intents.contains(Intents::GUILD_PRESENCES) {
            self.online.iter().map(|(u, p)| presence_json(self.guild.id, u, &p)).collect()
        } else {
            Vec::new()
        };
        let own = Own {
            joined_at: self.members.get(&s.user_id).map(|m| iso8601(m.joined_at())),
            large,
            unavailable: false,
            lazy: true,
            member_count: self.members.len(),
            members,
            threads: self.threads_for(s.user_id),
            presences,
        };
        let mut out = Vec::with_capacity(head.len() + 256);
        out.extend_from_slice(head.as_bytes());
        // `{…}` of `own`, its opening brace replaced by the comma that
        // continues the head's object.
        if serde_json::to_writer(&mut out, &own).is_ok() {
            out[head.len()] = b',';
        }
        Bytes::from(out)
    }

    /// GUILD_CREATE's part alike for every session: the JSON object without
    /// its closing brace.
    fn guild_create_head(&self) -> String {
        #[derive(Serialize)]
        struct Head {
            #[serde(flatten)]
            guild: model::Guild,
            channels: Vec<model::Channel>,
            voice_states: [(); 0],
            stage_instances: [(); 0],
            guild_scheduled_events: [(); 0],
            soundboard_sounds: [(); 0],
        }
        let head = Head {
            guild: self.guild_object(),
            channels: self.channels.iter().map(convert::channel).collect(),
            voice_states: [],
            stage_instances: [],
            guild_scheduled_events: [],
            soundboard_sounds: [],
        };
        let mut json = serde_json::to_string(&head).unwrap_or_else(|_| "{}".into());
        json.pop();
        json
    }

    /// Drops what is kept encoded from the state ([`State::guild_create`]'s
    /// head): called after every message that may change it.
    pub(crate) fn changed(&mut self) {
        self.gc_head.take();
    }
}

fn presence_json(guild: GuildId, user: UserId, p: &Presence) -> Value {
    let status = p.status.as_str();
    let client_status = if p.status == Status::Offline { json!({}) } else { json!({ "desktop": status }) };
    json!({
        "user": {"id": user},
        "guild_id": guild,
        "status": status,
        "activities": p.activities.as_slice(),
        "client_status": client_status,
    })
}
