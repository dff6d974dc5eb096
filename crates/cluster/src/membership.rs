//! Heartbeats, the live set of nodes and the ring built from it, and what
//! a ring change moves.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use hashring::Ring;
use protocol::ActorKey;

use fanout::{Dispatch, NodeId, SessionRef};
use node::route::GuildMsg;
use node::Node;

use crate::wire::Heartbeat;
use crate::{ClusterError, ClusterRouter};

/// Starts heartbeats and membership on a thread of their own, with a
/// runtime and NATS connection of their own. On the node's runtime they
/// starved under load: in a 100,000-session reconnect storm over 6 nodes
/// one node processed no heartbeat for over 3 s, dropped every node from
/// its ring (itself included) and back, stopped its actors and lost the
/// subscriptions of sessions on other nodes (2,500 receipts never
/// arrived). Here a busy node still beats and still hears the others.
pub(crate) fn start_membership(
    node: Arc<Node>,
    r: Arc<ClusterRouter>,
    main: async_nats::Client,
    url: String,
    cc: config::ClusterConfig,
) -> Result<(), ClusterError> {
    let main_rt = tokio::runtime::Handle::current();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ClusterError::Membership)?;
    let name = format!("throng-node-{}-membership", node.id.0);
    std::thread::Builder::new()
        .name("throng-membership".into())
        .spawn(move || {
            rt.block_on(async move {
                let client = match async_nats::ConnectOptions::new()
                    .name(name)
                    .retry_on_initial_connect()
                    .connect(crate::nats_servers(&url))
                    .await
                {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "membership: cannot connect to NATS");
                        return;
                    }
                };
                let hb = match client.subscribe("throng.hb").await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "membership: cannot subscribe to heartbeats");
                        return;
                    }
                };
                // Others ask here whether this node lives (see `probe`).
                match client.subscribe(alive_subject(node.id)).await {
                    Ok(mut asks) => {
                        let c = client.clone();
                        tokio::spawn(async move {
                            while let Some(m) = asks.next().await {
                                if let Some(to) = m.reply {
                                    let _ = c.publish(to, Bytes::new()).await;
                                }
                            }
                        });
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "membership: cannot subscribe to liveness probes");
                        return;
                    }
                }
                membership(node, r, main, client, hb, cc, main_rt).await;
            })
        })
        .map_err(ClusterError::Membership)?;
    Ok(())
}

/// Where node `n` answers liveness probes (its membership connection).
fn alive_subject(n: NodeId) -> String {
    format!("throng.n.{n}.alive")
}

/// Asks `n` whether it lives; true only when NATS says nobody listens at
/// its probe subject: its connection is closed, so its process is gone (or
/// cut off). A slow or silent answer proves nothing (false): the heartbeat
/// timeout decides then.
async fn gone(client: &async_nats::Client, n: NodeId, wait: Duration) -> bool {
    match tokio::time::timeout(wait, client.request(alive_subject(n), Bytes::new())).await {
        Ok(Err(e)) => e.kind() == async_nats::RequestErrorKind::NoResponders,
        _ => false,
    }
}

/// Announces this node, tracks the others, and rebuilds the ring when the
/// live set changes. A node that cannot reach NATS leaves its own ring
/// (and so owns no guild) until it can again. Runs on the membership
/// thread; the work a ring change causes (re-subscribing sessions, ending
/// sessions of a node that is gone) runs on the node's runtime.
pub(crate) async fn membership(
    node: Arc<Node>,
    r: Arc<ClusterRouter>,
    main: async_nats::Client,
    client: async_nats::Client,
    mut hb: async_nats::Subscriber,
    cc: config::ClusterConfig,
    main_rt: tokio::runtime::Handle,
) {
    let me = r.me;
    let timeout = Duration::from_millis(cc.node_timeout_ms);
    // A node silent for `probe_after_ms` is asked whether it lives; if
    // NATS has nobody at its probe subject, it leaves at once rather than
    // at the timeout (a killed process: its connection closed with it).
    let probe_after = (cc.probe_after_ms > 0).then(|| Duration::from_millis(cc.probe_after_ms));
    let (dead_tx, mut dead_rx) = tokio::sync::mpsc::unbounded_channel::<(NodeId, Instant)>();
    let mut probed: HashMap<NodeId, Instant> = HashMap::new();
    let mut seen: HashMap<NodeId, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(cc.heartbeat_ms.max(10)));
    let beat = serde_json::to_vec(&Heartbeat { node: me, url: node.config.gateway_url() }).expect("heartbeat encodes");
    let mut live: Vec<u64> = Vec::new();
    // Since when this node's own connections are down (while the client
    // moves to another NATS server): within `grace` the ring stays, so a
    // reconnection of a millisecond neither stops this node's actors (and
    // loses their subscribers on other nodes) nor fails a send.
    let grace = Duration::from_millis(cc.disconnect_grace_ms);
    let mut cut_since: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = node.shutdown.cancelled() => break,
            _ = tick.tick() => {
                if let Err(e) = client.publish("throng.hb", beat.clone().into()).await {
                    tracing::warn!(error = %e, "heartbeat not published");
                }
            }
            m = hb.next() => {
                let Some(m) = m else { break };
                if let Ok(h) = serde_json::from_slice::<Heartbeat>(&m.payload) {
                    seen.insert(h.node, Instant::now());
                }
            }
            Some((n, last)) = dead_rx.recv() => {
                // Unless it beat again meanwhile.
                if seen.get(&n) == Some(&last) {
                    tracing::info!(node = %n, "node gone: nobody at its probe subject");
                    seen.remove(&n);
                }
            }
        }
        let connected = [&main, &client].iter().all(|c| matches!(c.connection_state(), async_nats::connection::State::Connected));
        let now = Instant::now();
        cut_since = if connected { None } else { cut_since.or(Some(now)) };
        let on_bus = cut_since.is_none_or(|t| now.duration_since(t) < grace);
        seen.retain(|_, t| now.duration_since(*t) < timeout);
        if let (Some(after), true) = (probe_after, connected) {
            for (&n, &last) in seen.iter().filter(|(&n, &t)| n != me && now.duration_since(t) >= after) {
                if probed.get(&n).is_some_and(|&p| p >= last) {
                    continue; // asked since its last heartbeat
                }
                probed.insert(n, now);
                let (c, tx) = (client.clone(), dead_tx.clone());
                tokio::spawn(async move {
                    if gone(&c, n, after).await {
                        let _ = tx.send((n, last));
                    }
                });
            }
            probed.retain(|n, _| seen.contains_key(n));
        }
        let mut next: Vec<u64> = if !on_bus || !seen.contains_key(&me) {
            Vec::new()
        } else if connected {
            seen.keys().map(|n| n.0).collect()
        } else {
            live.clone() // within the grace: as it was
        };
        next.sort_unstable();
        if next != live {
            tracing::info!(nodes = ?next, connected, "cluster membership changed");
            let old = r.ring.load_full();
            r.ring.store(Ring::with_vnodes(next.iter().copied(), cc.vnodes));
            r.healthy.store(!next.is_empty(), Ordering::Release);
            r.bump_changes();
            let (node2, r2, live_now) = (node.clone(), r.clone(), next.clone());
            main_rt.spawn(async move {
                rehome(&node2, &r2, &old);
                // Sessions taken over from a node that is gone while their
                // guilds were still moving here would miss what it had: they
                // end, and their clients IDENTIFY again. Those whose guilds
                // all moved stand on their own.
                for s in r2.sessions.all() {
                    if s.home.get().is_some_and(|h| h.node != me && !live_now.contains(&h.node.0)) && s.is_moving() {
                        s.end(&node2);
                    }
                }
            });
            live = next;
        }
    }
}

/// A session just taken over from `from`: each of its guilds moves its
/// subscription here. A guild that cannot be asked now (busy, or its owner
/// unknown) keeps it at `from`, which forwards its events as before: the
/// marker sent here releases that guild at once, in order.
pub(crate) fn move_subscriptions(node: &Arc<Node>, h: &Arc<gateway::SessionHandle>, from: SessionRef, actors: &[ActorKey]) {
    let to = h.session_ref(node);
    let info = fanout::Recipient::sub_info(&**h);
    for &g in actors {
        let m = node::route::Move { from: from.clone(), to: to.clone(), info: info.clone() };
        if let Err(e) = node.guilds.send(g, GuildMsg::Move(Box::new(m))) {
            tracing::debug!(guild = %g, error = %e, "subscription not moved; the old node keeps forwarding it");
            node.delivery.forwarded(h.clone(), Dispatch { name: fanout::MOVED, body: Bytes::from(g.raw().to_string()) });
        }
    }
}

/// After a ring change: this node's sessions subscribe again to every
/// guild whose owner changed (the new owner sends GUILD_CREATE again, so
/// nobody is left with a silent hole), and actors of guilds this node no
/// longer owns stop taking messages.
pub(crate) fn rehome(node: &Arc<Node>, r: &ClusterRouter, old: &Ring) {
    let new = r.ring.load_full();
    for s in r.sessions.all() {
        for g in s.actors() {
            let (a, b) = (old.lookup(g.raw()), new.lookup(g.raw()));
            if a != b && b.is_some() {
                let sub = s.subscription(node);
                if let Err(e) = node.guilds.send(g, GuildMsg::Subscribe(Box::new(sub))) {
                    // No silent hole: the session ends and its client
                    // identifies again (and subscribes from scratch).
                    tracing::warn!(guild = %g, error = %e, "re-subscribe after a ring change failed; the session ends");
                    s.end(node);
                    break;
                }
            }
        }
    }
    r.local.retain(|g| new.lookup(g.raw()) == Some(r.me.0));
    // The guilds that stay here forget presences of nodes that are gone.
    if old.nodes().iter().any(|n| !new.nodes().contains(n)) {
        let live = new.nodes().to_vec();
        r.local.send_all(|| GuildMsg::NodesLive(live.clone()));
    }
}
