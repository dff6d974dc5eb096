//! The DM actor: one per DM channel, placed on the ring under the DM's key
//! (`protocol::ActorKey::dm`) like a guild's actor, so a DM has one
//! ordered stream of events and one writer of its messages, fenced by the
//! ownership epoch it claimed. Its subscribers are the sessions of its
//! recipients (subscribed at IDENTIFY, from READY's `private_channels`,
//! and on every node when the DM is created); sessions of other nodes get
//! each event once per node, as guild events do.
//!
//! It takes the guild actors' messages: `Subscribe`/`Unsubscribe`, `Post`
//! (a new message), `Op` with `MessageAction`s (typing, edit, delete) and
//! `DmAction`s, and `InteractionAction`s (commands of the bot it is a DM
//! with: see `crate::interact`); everything else is ignored or refused.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use protocol::gateway::Intents;
use protocol::{model, ActorKey, ChannelId, ErrorCode, GuildId, MessageId, UserId};
use serde_json::{json, Value};
use store::{Change, DmChannel, MessageRecord, UserRecord};
use tokio::sync::mpsc;

use super::fenced::{self, Core, Done, Fenced, Job, Plan};
use super::interact::{Admitted, Interactions, Venue};
use super::remote::RemoteSubs;
use super::GuildMsg;
use fanout::{encode, FanEvent, Filter, NodeId, SessionRef, SubInfo, Subscribers};
use node::auth::now_ms;
pub use node::convert::dm_json;
use node::route::dm::DmAction;
use node::route::interactions::Invoke;
use node::route::ops::MessageAction;
use node::route::{Action, Op, OpReply, Post, PostReply, ReplyTo, Subscription};
use node::Node;

/// How long a new DM waits for other nodes to subscribe their sessions of
/// its recipients before it answers anyway (a node that died meanwhile
/// leaves the ring within `cluster.node_timeout_ms`).
const SETTLE_TIMEOUT: Duration = Duration::from_millis(2_000);

type Then = super::fenced::Then<DmActor, DmState>;

/// What a DM's actor holds: the DM, and its interactions while their tokens live.
pub struct DmState {
    dm: DmChannel,
    interactions: Interactions,
}

/// The permissions an application has in a DM with its bot (`app_permissions`):
/// view, send, embed, attach, history, reactions, external emojis and stickers.
const DM_APP_PERMISSIONS: u64 = {
    use protocol::model::permission::*;
    VIEW_CHANNEL
        | SEND_MESSAGES
        | EMBED_LINKS
        | ATTACH_FILES
        | READ_MESSAGE_HISTORY
        | ADD_REACTIONS
        | USE_EXTERNAL_EMOJIS
        | USE_EXTERNAL_STICKERS
};

pub struct DmActor {
    /// Key, mailbox, epoch and the writer's answers (see `fenced`).
    core: Core<Then>,
    id: ChannelId,
    subs: Subscribers,
    remote: RemoteSubs,
    /// Answers waiting for `Opened`, and the nodes not settled yet.
    opening: Vec<ReplyTo>,
    unsettled: BTreeSet<NodeId>,
    /// A new group DM's creator: the others get its CHANNEL_CREATE once
    /// every node has subscribed their sessions.
    announce: Option<UserId>,
}

impl DmActor {
    pub fn new(node: Arc<Node>, key: ActorKey, id: ChannelId, rx: mpsc::Receiver<GuildMsg>) -> Self {
        DmActor {
            subs: Subscribers::new(node.delivery.workers()),
            core: Core::new(node, key, rx),
            id,
            remote: RemoteSubs::default(),
            opening: Vec::new(),
            unsettled: BTreeSet::new(),
            announce: None,
        }
    }

    pub async fn run(mut self) {
        let node = self.core.node.clone();
        if self.core.claim().await {
            match node.store.get_dm(self.id).await {
                Ok(Some(dm)) if self.core.load_keys(&[self.id]).await => {
                    fenced::serve(&mut self, &mut DmState { dm, interactions: Interactions::default() }).await
                }
                Ok(Some(_)) => {}
                Ok(None) => self.core.refuse_all(PostReply::UnknownChannel, OpReply::not_found(ErrorCode::UnknownChannel)).await,
                Err(e) => tracing::error!(dm = %self.id, error = %e, "DM load failed"),
            }
        }
        let key = self.core.key;
        drop(self);
        node.guilds.actor_stopped(key);
    }

    fn handle(&mut self, st: &mut DmState, msg: GuildMsg) {
        let dm = &st.dm;
        match msg {
            GuildMsg::Subscribe(sub) => {
                let Subscription { session, info, .. } = *sub;
                self.subscribe(dm, session, info);
            }
            GuildMsg::Unsubscribe { session, .. } => {
                if session.node != self.core.node.id {
                    if self.remote.remove(&session).is_some() {
                        if let Some(c) = self.core.node.cluster() {
                            c.subscribed(&session, self.core.key, self.core.epoch, false)
                        };
                    }
                } else {
                    self.subs.remove(&session.id);
                }
            }
            GuildMsg::Move(m) => {
                super::remote::move_subscriber(&self.core.node, self.core.key, self.core.epoch, &mut self.subs, &mut self.remote, *m);
            }
            GuildMsg::Post(p) => self.post(dm, *p),
            GuildMsg::Op(op) => self.op(st, *op),
            GuildMsg::Counts { reply } => self.core.node.guilds.reply(reply, encode(&(dm.recipients.len(), 0))),
            // Guild matters: a DM has no member list, presences or members to request.
            GuildMsg::ListSubscribe(_)
            | GuildMsg::Opened { .. }
            | GuildMsg::PassiveFlush
            | GuildMsg::RequestMembers { .. }
            | GuildMsg::Presence { .. }
            | GuildMsg::NodesLive(_)
            | GuildMsg::Event(_) => {}
        }
    }

    fn is_recipient(dm: &DmChannel, user: UserId) -> bool {
        dm.recipients.iter().any(|u| u.id == user)
    }

    fn subscribe(&mut self, dm: &DmChannel, session: SessionRef, info: SubInfo) {
        if !Self::is_recipient(dm, info.user_id) {
            return;
        }
        if session.node != self.core.node.id {
            if !self.remote.contains(&session) {
                // Its node adds the session to its audience of this DM.
                if let Some(c) = self.core.node.cluster() {
                    c.subscribed(&session, self.core.key, self.core.epoch, true)
                };
                self.remote.insert(&self.core.node, session, info);
            }
        } else if let Some(s) = self.core.node.sessions.get(&session.id) {
            s.joined(self.core.key);
            self.subs.insert(s);
        }
    }

    /// Every session of the recipients on this node.
    fn subscribe_local(&mut self, dm: &DmChannel) {
        for u in &dm.recipients {
            for s in self.core.node.sessions.of_user(u.id) {
                s.joined(self.core.key);
                if !self.subs.contains(s.id()) {
                    self.subs.insert(s);
                }
            }
        }
    }

    /// Sends `event` to the subscribers whose user `keep` accepts (all:
    /// `None`), locally and once per other node.
    fn publish(&mut self, event: Arc<FanEvent>, keep: Option<&dyn Fn(UserId) -> bool>) {
        let intent = match &event.filter {
            Filter::Intent(i) | Filter::IntentNotUser(i, _) => *i,
            Filter::Message { .. } => Intents::DIRECT_MESSAGES,
        };
        if !self.remote.is_empty() && self.remote.wants(intent) {
            match keep {
                None => self.remote.fan(&self.core.node, self.core.key, self.core.epoch, &event, None, fanout::Reach::All),
                Some(k) => self.remote.fan(
                    &self.core.node,
                    self.core.key,
                    self.core.epoch,
                    &event,
                    Some(&|i: &SubInfo| k(i.user_id)),
                    fanout::Reach::All,
                ),
            }
        }
        if !self.subs.wants(intent) {
            return;
        }
        match keep {
            None => self.core.node.delivery.fan_out(&event, self.subs.partitions()),
            Some(k) => {
                let parts = self.subs.partitions_where(|s| k(s.user_id()));
                self.core.node.delivery.fan_out(&event, &parts);
            }
        }
    }

    fn post(&mut self, dm: &DmChannel, p: Post) {
        let reply = p.reply;
        let refuse = |node: &Node, r: PostReply| node.guilds.reply(reply, encode(&r));
        let Some(author) = dm.recipients.iter().find(|u| u.id == p.author) else {
            return refuse(&self.core.node, PostReply::MissingAccess);
        };
        if !self.core.first_post(p.author, p.key.as_deref(), reply) {
            return;
        }
        let mentions: Vec<UserRecord> = dm.recipients.iter().filter(|u| p.mentions.contains(&u.id)).cloned().collect();
        let mut extra = p.extra;
        fenced::keep_key(&mut extra, p.key.as_deref());
        let rec = MessageRecord {
            id: self.core.node.ids.next().into(),
            channel_id: self.id,
            guild_id: None,
            author_id: p.author,
            edited_at: None,
            kind: if p.reference.is_some() { 19 } else { 0 },
            flags: p.flags,
            tts: p.tts,
            mention_everyone: false,
            mentions: mentions.iter().map(|u| u.id).collect(),
            reference: p.reference.as_ref().and_then(|r| serde_json::to_value(r).ok()),
            extra,
            content: p.content,
        };
        let mut message = node::convert::message(&rec, author, &mentions, None);
        if rec.kind == 19 {
            message.referenced_message = Some(p.referenced);
        }
        let message = Arc::new(message);
        let body = encode(&*message);
        let key = p.key.map(|k| (p.author, k));
        self.core.submit_changes(vec![Change::CreateDmMessage(rec)], Job::Message { message, body, reply, key });
    }

    fn op(&mut self, st: &mut DmState, op: Op) {
        let Op { user, action, reply, .. } = op;
        let refuse = |node: &Node, r: OpReply| node.guilds.reply(reply, encode(&r));
        let dm = &st.dm;
        let recipient = Self::is_recipient(dm, user);
        match action {
            // A bot's callbacks carry no user: the interaction's token decides.
            Action::Interaction(i) => match crate::interact::plan(self, st, user, i) {
                Ok(plan) => self.submit_plan(st, plan, reply),
                Err(r) => refuse(&self.core.node, r),
            },
            Action::Dm(DmAction::Opened) if recipient => {
                self.subscribe_local(dm);
                if dm.channel.kind == model::channel_type::GROUP_DM {
                    self.announce = Some(user);
                }
                let users: Vec<UserId> = dm.recipients.iter().map(|u| u.id).collect();
                let asked = self.core.node.cluster().map_or_else(Vec::new, |c| c.dm_opened(self.core.key, &users));
                if asked.is_empty() {
                    self.announce_group(&st.dm);
                    return refuse(&self.core.node, OpReply::no_content());
                }
                if self.unsettled.is_empty() {
                    self.settle_timer();
                }
                self.unsettled.extend(asked);
                self.opening.push(reply);
            }
            Action::Dm(DmAction::Settled { node }) => {
                match node {
                    Some(n) => {
                        self.unsettled.remove(&n);
                    }
                    None => self.unsettled.clear(),
                }
                if self.unsettled.is_empty() {
                    self.announce_group(&st.dm);
                    for r in std::mem::take(&mut self.opening) {
                        self.core.node.guilds.reply(r, encode(&OpReply::no_content()));
                    }
                }
            }
            _ if !recipient => refuse(&self.core.node, OpReply::forbidden(ErrorCode::MissingAccess)),
            // A recipient may mark the DM read.
            Action::Message(MessageAction::Ack { .. }) => refuse(&self.core.node, OpReply::no_content()),
            Action::Message(MessageAction::Typing { .. }) => {
                let body = encode(&json!({ "channel_id": self.id, "user_id": user, "timestamp": now_ms() / 1000 }));
                self.publish(FanEvent::new("TYPING_START", body, Filter::Intent(Intents::DIRECT_MESSAGE_TYPING)), None);
                refuse(&self.core.node, OpReply::no_content());
            }
            Action::Message(MessageAction::Edit { message, referenced, .. }) => {
                if message.author_id != user {
                    return refuse(&self.core.node, OpReply::forbidden(ErrorCode::CannotEditOthersMessage));
                }
                let mut rec = *message;
                let mentions: Vec<UserRecord> = dm.recipients.iter().filter(|u| rec.mentions.contains(&u.id)).cloned().collect();
                rec.mentions = mentions.iter().map(|u| u.id).collect();
                let Some(author) = dm.recipients.iter().find(|u| u.id == user).cloned() else { return };
                let change = Change::UpdateMessage(rec.clone());
                let then: Then = Box::new(move |a: &mut DmActor, _: &mut DmState, rows: &[u64]| {
                    if rows.first() == Some(&0) {
                        return OpReply::not_found(ErrorCode::UnknownMessage);
                    }
                    let mut m = node::convert::message(&rec, &author, &mentions, None);
                    if let Some(r) = referenced {
                        m.referenced_message = Some(r);
                    }
                    let message = Arc::new(m);
                    let body = encode(&*message);
                    a.publish(
                        FanEvent::new("MESSAGE_UPDATE", body.clone(), Filter::Message { message, redacted: Default::default() }),
                        None,
                    );
                    OpReply::ok_bytes(StatusCode::OK, &body)
                });
                self.submit(vec![change], then, reply);
            }
            Action::Message(MessageAction::Delete { channel, id, author }) => {
                if author != user {
                    return refuse(&self.core.node, OpReply::forbidden(ErrorCode::CannotExecuteOnDm));
                }
                let then: Then = Box::new(move |a: &mut DmActor, _: &mut DmState, rows: &[u64]| {
                    if rows.first() == Some(&0) {
                        return OpReply::not_found(ErrorCode::UnknownMessage);
                    }
                    let body = encode(&json!({ "id": id, "channel_id": channel }));
                    a.publish(FanEvent::new("MESSAGE_DELETE", body, Filter::Intent(Intents::DIRECT_MESSAGES)), None);
                    OpReply::no_content()
                });
                self.submit(vec![Change::DeleteMessage { channel, id }], then, reply);
            }
            // Guild things (channel settings, members, threads) have no meaning here.
            _ => refuse(&self.core.node, OpReply::forbidden(ErrorCode::CannotExecuteOnDm)),
        }
    }

    /// A new group DM: CHANNEL_CREATE to each recipient but its creator,
    /// each with the recipients other than themselves (a 1:1 DM is told at
    /// its first message instead, as on Discord).
    fn announce_group(&mut self, dm: &DmChannel) {
        let Some(creator) = self.announce.take() else { return };
        for r in dm.recipients.iter().map(|u| u.id).filter(|&u| u != creator) {
            let created = encode(&dm_json(dm, r));
            self.publish(FanEvent::new("CHANNEL_CREATE", created, Filter::Intent(Intents::DIRECT_MESSAGES)), Some(&|u| u == r));
        }
    }

    /// Stops waiting for other nodes after [`SETTLE_TIMEOUT`].
    fn settle_timer(&self) {
        let (node, key) = (self.core.node.clone(), self.core.key);
        self.core.node.tasks.spawn(async move {
            tokio::time::sleep(SETTLE_TIMEOUT).await;
            let op = Op {
                user: UserId(0),
                action: Action::Dm(DmAction::Settled { node: None }),
                reply: ReplyTo { node: node.id, id: 0 },
                reason: None,
            };
            let _ = node.guilds.send(key, GuildMsg::Op(Box::new(op)));
        });
    }

    fn submit(&mut self, changes: Vec<Change>, then: Then, reply: ReplyTo) {
        self.core.submit_changes(changes, Job::Op { then, reply });
    }

    fn submit_plan(&mut self, st: &mut DmState, plan: Plan<DmActor, DmState>, reply: ReplyTo) {
        if plan.changes.is_empty() {
            let answer = (plan.then)(self, st, &[]);
            return self.core.node.guilds.reply(reply, encode(&answer));
        }
        self.submit(plan.changes, plan.then, reply);
    }

    /// A committed new message: to both sides (the first one also tells
    /// the other side of the DM).
    fn message_created(&mut self, st: &mut DmState, message: Arc<model::Message>, body: &Bytes) {
        let dm = &mut st.dm;
        // A 1:1 DM is news to the other side at its first message (a group
        // DM was announced when it was made).
        if dm.channel.last_message_id.is_none() && dm.channel.kind != model::channel_type::GROUP_DM {
            let author = message.author.id;
            let created = encode(&dm_json(dm, dm.recipients.iter().find(|u| u.id != author).map_or(author, |u| u.id)));
            self.publish(FanEvent::new("CHANNEL_CREATE", created, Filter::Intent(Intents::DIRECT_MESSAGES)), Some(&|u| u != author));
        }
        dm.channel.last_message_id = Some(message.id);
        self.publish(FanEvent::new("MESSAGE_CREATE", body.clone(), Filter::Message { message, redacted: Default::default() }), None);
    }
}

impl Venue for DmActor {
    type St = DmState;

    fn ix(st: &DmState) -> &Interactions {
        &st.interactions
    }

    fn ix_mut(st: &mut DmState) -> &mut Interactions {
        &mut st.interactions
    }

    fn node(&self) -> &Arc<Node> {
        &self.core.node
    }

    fn key(&self) -> ActorKey {
        self.core.key
    }

    fn guild_id(_: &DmState) -> Option<GuildId> {
        None
    }

    /// A recipient runs a command of the bot on the other side (the
    /// command's contexts were checked against BOT_DM by REST).
    fn admit(&self, st: &DmState, user: UserId, inv: &Invoke) -> Result<Admitted, OpReply> {
        let dm = &st.dm;
        let Some(invoker) = dm.recipients.iter().find(|u| u.id == user) else {
            return Err(OpReply::forbidden(ErrorCode::MissingAccess));
        };
        if inv.channel != self.id {
            return Err(OpReply::not_found(ErrorCode::UnknownChannel));
        }
        let Some(bot) = dm.recipients.iter().find(|u| u.id == inv.bot && u.id != user) else {
            return Err(OpReply::not_found(ErrorCode::UnknownApplication));
        };
        let mut fields = serde_json::Map::new();
        fields.insert("channel".into(), dm_json(dm, user));
        fields.insert("user".into(), serde_json::to_value(node::convert::user(invoker)).unwrap_or(Value::Null));
        fields.insert("app_permissions".into(), json!(DM_APP_PERMISSIONS.to_string()));
        // BOT_DM
        fields.insert("context".into(), json!(1));
        Ok(Admitted {
            bot: Arc::new(bot.clone()),
            invoker: invoker.clone(),
            fields,
            // GUILD_INSTALL, in the bot's DM: "0".
            owners: json!({"0": "0"}),
        })
    }

    /// The recipients the options name (a DM has no roles or other channels).
    fn resolve(st: &DmState, inv: &Invoke) -> serde_json::Map<String, Value> {
        let m = &inv.mentions;
        let mut users = serde_json::Map::new();
        for id in m.users.iter().copied().chain(m.either.iter().map(|&x| UserId(x))) {
            if let Some(u) = st.dm.recipients.iter().find(|u| u.id == id) {
                users.insert(id.to_string(), serde_json::to_value(node::convert::user(u)).unwrap_or(Value::Null));
            }
        }
        let mut r = serde_json::Map::new();
        if !users.is_empty() {
            r.insert("users".into(), Value::Object(users));
        }
        r
    }

    fn bot_member(_: &DmState, _: UserId) -> Option<model::Member> {
        None
    }

    /// To every session of `user` subscribed to this DM, here and on other nodes.
    fn to_user(&mut self, user: UserId, name: &'static str, body: Bytes) {
        let event = FanEvent::new(name, body, Filter::Intent(0));
        if !self.remote.is_empty() {
            self.remote.fan(
                &self.core.node,
                self.core.key,
                self.core.epoch,
                &event,
                Some(&|i: &SubInfo| i.user_id == user),
                fanout::Reach::All,
            );
        }
        let parts = self.subs.partitions_where(|s| s.user_id() == user);
        self.core.node.delivery.fan_out(&event, &parts);
    }

    fn create_change(rec: MessageRecord) -> Change {
        Change::CreateDmMessage(rec)
    }

    fn created(&mut self, st: &mut DmState, message: Arc<model::Message>, body: Bytes) {
        self.message_created(st, message, &body);
    }

    fn updated(&mut self, _: &mut DmState, message: Arc<model::Message>, body: Bytes) {
        self.publish(FanEvent::new("MESSAGE_UPDATE", body, Filter::Message { message, redacted: Default::default() }), None);
    }

    fn deleted(&mut self, _: &mut DmState, id: MessageId, channel: ChannelId) {
        let body = encode(&json!({ "id": id, "channel_id": channel }));
        self.publish(FanEvent::new("MESSAGE_DELETE", body, Filter::Intent(Intents::DIRECT_MESSAGES)), None);
    }
}

impl Fenced for DmActor {
    type State = DmState;
    type Then = Then;

    fn core(&mut self) -> &mut Core<Then> {
        &mut self.core
    }

    fn handle(&mut self, st: &mut DmState, msg: GuildMsg) -> bool {
        DmActor::handle(self, st, msg);
        true
    }

    fn committed(&mut self, st: &mut DmState, done: Done<Then>) -> bool {
        match done {
            Done::Message { message, body, reply } => {
                // Every message of a DM counts as a mention for the others.
                let others: Vec<UserId> = st.dm.recipients.iter().map(|u| u.id).filter(|u| *u != message.author.id).collect();
                self.core.node.read_states.mentioned(message.channel_id, message.id, others);
                self.message_created(st, message, &body);
                self.core.node.guilds.reply(reply, PostReply::ok_bytes(&body));
            }
            Done::Op { rows, then, reply } => {
                let answer = then(self, st, &rows);
                self.core.node.guilds.reply(reply, encode(&answer));
            }
        }
        true
    }
}
