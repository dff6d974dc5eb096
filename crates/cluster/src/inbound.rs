//! What a node does with what other nodes send it: messages to the guilds
//! it owns, deliveries to its sessions, session hand-overs, notices.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use protocol::{ActorKey, UserId};

use fanout::{FanEvent, Filter, NodeId, SessionRef, Subscribers};
use node::route::{raw, ClusterLink, GuildMsg, ReplyTo, Router, TakeOver};
use node::Node;

use crate::membership::move_subscriptions;
use crate::wire::{intern, messages, push_one, send_to, wire_dispatch, ToNode, WireFilter};
use crate::ClusterRouter;

/// Hands this node's session `t.session` to the node that asked (see
/// `SessionHandle::hand_over`); answers `false` if it cannot. A session
/// handed over already is asked for where it went.
pub(crate) fn hand_over(r: &ClusterRouter, t: TakeOver) {
    let to = t.reply.node;
    let found = r.sessions.get(&t.session).filter(|h| h.user_id == t.user);
    if let Some(next) = found.as_ref().and_then(|h| h.handed_to.get()).copied() {
        if next != to && r.nodes().contains(&next.0) && r.to_node(next, &ToNode::TakeOver(t.clone())) {
            return;
        }
    }
    let done = found.is_some_and(|h| {
        let (out, sid) = (r.out.clone(), h.id.clone());
        let forward: gateway::session::Forward = Box::new(move |name, body| {
            send_to(&out, to, &ToNode::Fwd { s: sid.clone(), name: name.to_string(), body: raw(body) });
        });
        let reply = |ho: gateway::session::HandOver| {
            let msg = ToNode::HandOver {
                id: t.reply.id,
                s: h.id.clone(),
                user: h.user_id,
                bot: h.bot,
                intents: h.intents.0,
                large_threshold: h.large_threshold,
                actors: ho.actors,
                seq: ho.seq,
                replay: ho.replay.into_iter().map(|(q, d)| (q, d.name.to_string(), raw(&d.body))).collect(),
                home: SessionRef { node: r.me, id: h.id.clone() },
            };
            r.to_node(to, &msg);
        };
        let handed = h.hand_over(t.seq, reply, forward);
        if handed {
            let _first = h.handed_to.set(to);
        }
        handed
    });
    if done {
        tracing::debug!(session = %t.session, to = %to, "session handed over");
    } else {
        r.reply(t.reply, Bytes::from_static(b"false"));
    }
}

/// A DM was created: this node's sessions of its recipients subscribe to
/// it, then the actor hears this node is settled (after the subscriptions,
/// on the same ordered stream), so its answer to the DM's opener, and so
/// the first message, come after every session is subscribed.
pub(crate) fn dm_opened(node: &Arc<Node>, sessions: &gateway::Sessions, key: ActorKey, users: &[UserId]) {
    use node::route::dm::DmAction;
    for &u in users {
        for s in sessions.of_user(u) {
            let sub = s.subscription(node);
            if let Err(e) = node.guilds.send(key, GuildMsg::Subscribe(Box::new(sub))) {
                tracing::debug!(dm = %key, error = %e, "subscribe to a new DM failed");
            }
        }
    }
    let settled = node::route::Op {
        user: UserId(0),
        action: node::route::Action::Dm(DmAction::Settled { node: Some(node.id) }),
        // Nobody waits for this answer: request id 0 is never registered.
        reply: ReplyTo { node: node.id, id: 0 },
        reason: None,
    };
    if let Err(e) = node.guilds.send(key, GuildMsg::Op(Box::new(settled))) {
        tracing::debug!(dm = %key, error = %e, "DM settle not sent");
    }
}

/// The subject every node hears: `Node::notify`'s notices, as `(from, notice)`.
pub(crate) const NOTICES: &str = "throng.all";

/// Acts on other nodes' notices (token revocations, account changes).
pub(crate) async fn inbound_notices(node: Arc<Node>, mut sub: async_nats::Subscriber) {
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<(NodeId, node::Notice)>(&m.payload) {
            match x {
                Ok((from, n)) if from != node.id => node.apply_notice(&n),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable notice");
                    break;
                }
            }
        }
    }
}

/// Messages to the guilds this node owns.
pub(crate) async fn inbound_guild(node: Arc<Node>, r: Arc<ClusterRouter>, mut sub: async_nats::Subscriber) {
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<(ActorKey, GuildMsg)>(&m.payload) {
            r.received.fetch_add(1, Ordering::Relaxed);
            let (guild, msg) = match x {
                Ok(x) => x,
                Err(e) => {
                    // The rest of a batch cannot be told apart either.
                    tracing::warn!(error = %e, "undecodable guild message");
                    break;
                }
            };
            // Waits for room rather than dropping: the sending node already
            // told its session or client yes (a 100,000-session IDENTIFY ramp
            // overflowed one guild's mailbox with subscriptions, and every
            // dropped one was a session that never got the guild's messages).
            if let Err(e) = r.local.send_wait(guild, msg).await {
                tracing::warn!(guild = %guild, error = %e, "guild message from another node dropped");
            }
        }
    }
}

/// Deliveries to this node's sessions of guilds owned elsewhere: the
/// node's own audience of each such guild, split over its delivery workers.
pub(crate) async fn inbound_deliver(node: Arc<Node>, r: Arc<ClusterRouter>, mut sub: async_nats::Subscriber) {
    let mut audience: HashMap<ActorKey, Subscribers> = HashMap::new();
    // The newest ownership epoch seen per guild: events of an owner that
    // another has fenced off since are not taken (its sessions get the
    // guild again from the new owner instead).
    let mut epochs: HashMap<ActorKey, u64> = HashMap::new();
    let mut current = |g: ActorKey, e: u64| {
        let seen = epochs.entry(g).or_insert(e);
        if e < *seen {
            return false;
        }
        *seen = e;
        true
    };
    let workers = node.delivery.workers();
    loop {
        let m = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            m = sub.next() => m,
        };
        let Some(m) = m else { break };
        for x in messages::<ToNode>(&m.payload) {
            r.received.fetch_add(1, Ordering::Relaxed);
            let msg = match x {
                Ok(x) => x,
                Err(e) => {
                    // The rest of a batch cannot be told apart either.
                    tracing::warn!(error = %e, "undecodable delivery");
                    break;
                }
            };
            match msg {
                ToNode::Sub { s, g, e, on, first } => {
                    if let Some((name, body)) = first {
                        // As `One`: the session's own dispatch, whatever the epoch.
                        push_one(&node, &s, &name, &body);
                    }
                    if !current(g, e) {
                        r.stale.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let sink = node.sessions.get(&s);
                    if on {
                        if let Some(sink) = sink {
                            sink.joined(g);
                            audience.entry(g).or_insert_with(|| Subscribers::new(workers)).insert(sink);
                        }
                    } else {
                        if let Some(sink) = sink {
                            sink.left(g);
                        }
                        if let Some(a) = audience.get_mut(&g) {
                            a.remove(&s);
                            if a.is_empty() {
                                audience.remove(&g);
                            }
                        }
                    }
                }
                ToNode::Passive { s, g, e, passive } => {
                    if !current(g, e) {
                        r.stale.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let Some(a) = audience.get_mut(&g) {
                        a.set_passive(&s, passive);
                    }
                }
                ToNode::Fan { g, e, name, body, filter, only, reach } => {
                    if !current(g, e) {
                        r.stale.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let Some(a) = audience.get_mut(&g) else { continue };
                    let body = Bytes::copy_from_slice(body.get().as_bytes());
                    let filter = match filter {
                        WireFilter::Intent(i) => Filter::Intent(i),
                        WireFilter::IntentNotUser(i, u) => Filter::IntentNotUser(i, u),
                        WireFilter::Message => match serde_json::from_slice(&body) {
                            Ok(message) => Filter::Message { message: Arc::new(message), redacted: Default::default() },
                            Err(e) => {
                                tracing::warn!(error = %e, "message event without a message");
                                continue;
                            }
                        },
                    };
                    let event = FanEvent::new(intern(&name), body, filter);
                    match only {
                        None => node.delivery.fan_out(&event, a.partitions_of(reach)),
                        Some(ids) => {
                            let ids: std::collections::HashSet<Arc<str>> = ids.into_iter().collect();
                            let parts = a.partitions_of_where(reach, |s| ids.contains(s.id()));
                            node.delivery.fan_out(&event, &parts);
                        }
                    }
                }
                ToNode::One { s, name, body } => push_one(&node, &s, &name, &body),
                ToNode::Fwd { s, name, body } => {
                    if let Some(sink) = node.sessions.get(&s) {
                        node.delivery.forwarded(sink, wire_dispatch(&name, &body));
                    }
                }
                ToNode::Reply { id, body } => node.replies.complete(id, Bytes::copy_from_slice(body.get().as_bytes())),
                ToNode::TakeOver(t) => hand_over(&r, t),
                ToNode::HandOver { id, s, user, bot, intents, large_threshold, actors, seq, replay, home } => {
                    if node.sessions.get(&s).is_some() {
                        node.replies.complete(id, Bytes::from_static(b"false"));
                        continue;
                    }
                    let h = gateway::SessionHandle::new(
                        s,
                        user,
                        bot,
                        protocol::gateway::Intents(intents),
                        large_threshold,
                        actors,
                        &node.delivery,
                    );
                    let _first = h.home.set(Box::new(home.clone()));
                    let replay = replay.into_iter().map(|(q, name, body)| (q, wire_dispatch(&name, &body))).collect();
                    // Registered before the next message of this stream (its
                    // first forwarded dispatch, maybe) is read.
                    let actors = h.actors();
                    h.adopt(&r.sessions, seq, replay, actors.clone());
                    move_subscriptions(&node, &h, home, &actors);
                    node.replies.complete(id, Bytes::from_static(b"true"));
                }
                ToNode::Joined { g, u } => {
                    for s in r.sessions.of_user(u) {
                        let sub = s.subscription(&node);
                        if let Err(e) = node.guilds.send(g.into(), GuildMsg::Subscribe(Box::new(sub))) {
                            tracing::debug!(guild = %g, error = %e, "subscribe of a new member's session failed");
                        }
                    }
                }
                ToNode::DmOpened { g, users } => dm_opened(&node, &r.sessions, g, &users),
                ToNode::End { s } => {
                    if let Some(h) = r.sessions.get(&s) {
                        h.end(&node);
                    }
                }
            }
        }
    }
}
