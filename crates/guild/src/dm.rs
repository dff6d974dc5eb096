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
//! `DmAction`s; everything else is ignored or refused.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use protocol::gateway::Intents;
use protocol::{ActorKey, ChannelId, ErrorCode, UserId};
use serde_json::json;
use store::{Change, DmChannel, MessageRecord, UserRecord};
use tokio::sync::mpsc;

use super::fenced::{self, Core, Done, Fenced, Job};
use super::remote::RemoteSubs;
use super::GuildMsg;
use fanout::{encode, FanEvent, Filter, NodeId, SessionRef, SubInfo, Subscribers};
use node::auth::now_ms;
pub use node::convert::dm_json;
use node::route::dm::DmAction;
use node::route::ops::MessageAction;
use node::route::{Action, Op, OpReply, Post, PostReply, ReplyTo, Subscription};
use node::Node;

/// How long a new DM waits for other nodes to subscribe their sessions of
/// its recipients before it answers anyway (a node that died meanwhile
/// leaves the ring within `cluster.node_timeout_ms`).
const SETTLE_TIMEOUT: Duration = Duration::from_millis(2_000);

type Then = Box<dyn FnOnce(&mut DmActor, &[u64]) -> OpReply + Send>;

pub struct DmActor {
    /// Key, mailbox, epoch and the writer's answers (see `fenced`).
    core: Core<Then>,
    id: ChannelId,
    subs: Subscribers,
    remote: RemoteSubs,
    /// Answers waiting for `Opened`, and the nodes not settled yet.
    opening: Vec<ReplyTo>,
    unsettled: BTreeSet<NodeId>,
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
        }
    }

    pub async fn run(mut self) {
        let node = self.core.node.clone();
        if self.core.claim().await {
            match node.store.get_dm(self.id).await {
                Ok(Some(mut dm)) => fenced::serve(&mut self, &mut dm).await,
                Ok(None) => self.core.refuse_all(PostReply::UnknownChannel, OpReply::not_found(ErrorCode::UnknownChannel)).await,
                Err(e) => tracing::error!(dm = %self.id, error = %e, "DM load failed"),
            }
        }
        let key = self.core.key;
        drop(self);
        node.guilds.actor_stopped(key);
    }

    fn handle(&mut self, dm: &mut DmChannel, msg: GuildMsg) {
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
            GuildMsg::Op(op) => self.op(dm, *op),
            GuildMsg::Counts { reply } => self.core.node.guilds.reply(reply, encode(&(dm.recipients.len(), 0))),
            // Guild matters: a DM has no member list, presences or members to request.
            GuildMsg::ListSubscribe(_)
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
                None => self.remote.fan(&self.core.node, self.core.key, self.core.epoch, &event, None),
                Some(k) => self.remote.fan(&self.core.node, self.core.key, self.core.epoch, &event, Some(&|i: &SubInfo| k(i.user_id))),
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
        let mentions: Vec<UserRecord> = dm.recipients.iter().filter(|u| p.mentions.contains(&u.id)).cloned().collect();
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
            extra: p.extra,
            content: p.content,
        };
        let mut message = node::convert::message(&rec, author, &mentions, None);
        if rec.kind == 19 {
            message.referenced_message = Some(p.referenced);
        }
        let message = Arc::new(message);
        let body = encode(&*message);
        self.core.submit_changes(vec![Change::CreateDmMessage(rec)], Job::Message { message, body, reply });
    }

    fn op(&mut self, dm: &DmChannel, op: Op) {
        let Op { user, action, reply } = op;
        let refuse = |node: &Node, r: OpReply| node.guilds.reply(reply, encode(&r));
        let recipient = Self::is_recipient(dm, user);
        match action {
            Action::Dm(DmAction::Opened) if recipient => {
                self.subscribe_local(dm);
                let users: Vec<UserId> = dm.recipients.iter().map(|u| u.id).collect();
                let asked = self.core.node.cluster().map_or_else(Vec::new, |c| c.dm_opened(self.core.key, &users));
                if asked.is_empty() {
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
                    for r in std::mem::take(&mut self.opening) {
                        self.core.node.guilds.reply(r, encode(&OpReply::no_content()));
                    }
                }
            }
            _ if !recipient => refuse(&self.core.node, OpReply::forbidden(ErrorCode::MissingAccess)),
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
                let then: Then = Box::new(move |a: &mut DmActor, rows: &[u64]| {
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
                let then: Then = Box::new(move |a: &mut DmActor, rows: &[u64]| {
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

    /// Stops waiting for other nodes after [`SETTLE_TIMEOUT`].
    fn settle_timer(&self) {
        let (node, key) = (self.core.node.clone(), self.core.key);
        self.core.node.tasks.spawn(async move {
            tokio::time::sleep(SETTLE_TIMEOUT).await;
            let op = Op { user: UserId(0), action: Action::Dm(DmAction::Settled { node: None }), reply: ReplyTo { node: node.id, id: 0 } };
            let _ = node.guilds.send(key, GuildMsg::Op(Box::new(op)));
        });
    }

    fn submit(&mut self, changes: Vec<Change>, then: Then, reply: ReplyTo) {
        self.core.submit_changes(changes, Job::Op { then, reply });
    }
}

impl Fenced for DmActor {
    type State = DmChannel;
    type Then = Then;

    fn core(&mut self) -> &mut Core<Then> {
        &mut self.core
    }

    fn handle(&mut self, dm: &mut DmChannel, msg: GuildMsg) -> bool {
        DmActor::handle(self, dm, msg);
        true
    }

    fn committed(&mut self, dm: &mut DmChannel, done: Done<Then>) -> bool {
        match done {
            Done::Message { message, body, reply } => {
                // The first message: the other side learns of the DM now.
                if dm.channel.last_message_id.is_none() {
                    let author = message.author.id;
                    let created = encode(&dm_json(dm, dm.recipients.iter().find(|u| u.id != author).map_or(author, |u| u.id)));
                    self.publish(
                        FanEvent::new("CHANNEL_CREATE", created, Filter::Intent(Intents::DIRECT_MESSAGES)),
                        Some(&|u| u != author),
                    );
                }
                dm.channel.last_message_id = Some(message.id);
                self.publish(
                    FanEvent::new("MESSAGE_CREATE", body.clone(), Filter::Message { message, redacted: Default::default() }),
                    None,
                );
                self.core.node.guilds.reply(reply, PostReply::ok_bytes(&body));
            }
            Done::Op { rows, then, reply } => {
                let answer = then(self, &rows);
                self.core.node.guilds.reply(reply, encode(&answer));
            }
        }
        true
    }
}
