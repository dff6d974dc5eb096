//! The session task: one per identified session, alive while its socket is
//! and for the resume window after. It owns the session's sequence, its
//! replay buffer and its guild subscriptions; sockets come and go (RESUME
//! hands a new one in).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use protocol::gateway::{op, ClientFrame, GuildSubscription, GuildSubscriptionsBulk, PresenceUpdate, RequestGuildMembers};
use protocol::CloseCode;
use tokio::time::Instant;

use super::conn::{Conn, ReadStatus};
use super::ws::Incoming;
use super::{Control, Dispatch, SessionHandle};
use crate::guild::GuildMsg;
use crate::node::Node;
use crate::presence::Presence;

/// Everything IDENTIFY established.
pub struct Identified {
    pub handle: Arc<SessionHandle>,
    /// READY's `d`.
    pub ready: Bytes,
    pub presence: Presence,
}

/// How a connected phase ended.
enum Next {
    /// The socket is gone; the session stays resumable.
    Detached,
    /// A RESUME brought a new socket; replay after this sequence.
    Resumed(Box<Conn>, u64),
    /// The session is over.
    End,
}

struct Session {
    node: Arc<Node>,
    handle: Arc<SessionHandle>,
    /// Last sequence number assigned.
    seq: u64,
    /// Dispatches the client has not acknowledged yet, for RESUME; bounded
    /// by count, age and bytes. Trimmed at every heartbeat: a client's
    /// heartbeat carries the last sequence it received, and it can never
    /// resume from before that.
    replay: VecDeque<(u64, Dispatch, Instant)>,
    /// Body bytes held in `replay`.
    replay_bytes: usize,
    /// Everything at or below this was acknowledged; resuming below it is refused.
    acked: u64,
}

/// Runs an identified session to its end, starting on `conn`.
pub async fn run(node: Arc<Node>, conn: Conn, id: Identified, early: Vec<Incoming>) {
    let mut s = Session { node: node.clone(), handle: id.handle, seq: 0, replay: VecDeque::new(), replay_bytes: 0, acked: 0 };
    node.sessions.insert(s.handle.clone());
    let mut conn = Box::new(conn);
    s.record_and_send(&mut conn, Dispatch { name: "READY", body: id.ready });
    let guilds = s.handle.guild_ids();
    for &g in &guilds {
        let msg = GuildMsg::Subscribe { session: s.handle.clone() };
        if let Err(e) = node.guilds.send(&node, g, msg) {
            tracing::warn!(guild = %g, error = %e, "subscribe failed; guild stays unavailable");
        }
    }
    if let Some(p) = node.presences.session_started(s.handle.user_id, id.presence) {
        crate::guild::broadcast_presence(&node, s.handle.user_id, &guilds, p);
    }
    let mut next = s.connected(conn, early).await;
    loop {
        next = match next {
            Next::Resumed(conn, after) => {
                let mut conn = conn;
                s.replay_after(&mut conn, after);
                s.record_and_send(&mut conn, Dispatch { name: "RESUMED", body: Bytes::from_static(b"{\"_trace\":[\"throng\"]}") });
                s.connected(conn, Vec::new()).await
            }
            Next::Detached => s.detached().await,
            Next::End => break,
        };
    }
    s.end();
}

impl Session {
    fn gw(&self) -> &crate::config::GatewayConfig {
        &self.node.config.gateway
    }

    /// Assigns the next sequence, keeps the dispatch for replay.
    fn record(&mut self, d: Dispatch) -> u64 {
        self.seq += 1;
        let now = Instant::now();
        self.replay_bytes += d.body.len();
        self.replay.push_back((self.seq, d, now));
        let max_age = Duration::from_millis(self.gw().replay_max_age_ms);
        let (max, max_bytes) = (self.gw().replay_max_events, self.gw().replay_max_bytes);
        while self.replay.len() > max
            || self.replay_bytes > max_bytes
            || self.replay.front().is_some_and(|(_, _, t)| now.duration_since(*t) > max_age)
        {
            self.pop_replay();
        }
        self.seq
    }

    fn pop_replay(&mut self) {
        if let Some((_, d, _)) = self.replay.pop_front() {
            self.replay_bytes -= d.body.len();
        }
    }

    /// The client confirmed receiving everything up to `seq` (heartbeat `d`):
    /// it can never ask for those again, so they leave the replay buffer.
    fn acknowledge(&mut self, seq: u64) {
        let seq = seq.min(self.seq);
        self.acked = self.acked.max(seq);
        while self.replay.front().is_some_and(|(s, _, _)| *s <= seq) {
            self.pop_replay();
        }
        if self.replay.is_empty() {
            self.replay = VecDeque::new();
        } else if self.replay.capacity() > 64 && self.replay.capacity() > 4 * self.replay.len() {
            self.replay.shrink_to(self.replay.len() * 2);
        }
    }

    fn record_and_send(&mut self, conn: &mut Conn, d: Dispatch) -> bool {
        let (name, body) = (d.name, d.body.clone());
        let seq = self.record(d);
        conn.send_dispatch(name, seq, &body).is_ok()
    }

    /// Whether a client that saw up to `seq` can resume without a gap.
    fn can_resume(&self, seq: Option<u64>) -> Option<u64> {
        let seq = seq.unwrap_or(0);
        if self.handle.is_lagged() || seq > self.seq || seq < self.acked {
            return None;
        }
        let oldest = self.replay.front().map(|(s, _, _)| *s).unwrap_or(self.seq + 1);
        (seq + 1 >= oldest).then_some(seq)
    }

    fn replay_after(&mut self, conn: &mut Conn, after: u64) {
        for (seq, d, _) in self.replay.iter().filter(|(s, _, _)| *s > after) {
            if conn.send_dispatch(d.name, *seq, &d.body).is_err() {
                return;
            }
        }
    }

    fn on_control(&mut self, c: Control) -> Option<Next> {
        match c {
            Control::Resume { conn, seq, reply } => match self.can_resume(seq) {
                Some(after) => match reply.send(Ok(())) {
                    Ok(()) => Some(Next::Resumed(conn, after)),
                    Err(_) => None,
                },
                None => {
                    if let Err(Ok(())) = reply.send(Err(conn)) {
                        tracing::debug!("resume requester went away");
                    }
                    None
                }
            },
            Control::Drop { done } => {
                if done.send(()).is_err() {
                    tracing::trace!("drop requester went away");
                }
                Some(Next::Detached)
            }
        }
    }

    async fn connected(&mut self, mut conn: Box<Conn>, early: Vec<Incoming>) -> Next {
        let hb_timeout = Duration::from_millis(self.node.config.heartbeat_timeout_ms());
        let mut frames = early;
        // Created once per connected phase, not per loop turn: a fresh
        // `cancelled()` would lock the node-wide token's waiter list, and a
        // fresh `sleep_until` would re-arm the runtime's shared timer, on
        // every event for every session.
        let node = self.node.clone();
        let shutdown = node.shutdown.cancelled();
        tokio::pin!(shutdown);
        let heartbeat = tokio::time::sleep_until(Instant::from_std(conn.last_heartbeat) + hb_timeout);
        tokio::pin!(heartbeat);
        loop {
            if !frames.is_empty() {
                if let Some((code, next)) = self.handle_frames(&mut conn, std::mem::take(&mut frames)) {
                    conn.close(code).await;
                    return next;
                }
            }
            // Everything queued for this session: controls first, then dispatches
            // (coalesced into one write below).
            let (controls, dispatches) = self.handle.take();
            let mut controls = controls.into_iter();
            while let Some(c) = controls.next() {
                if let Control::Drop { done } = c {
                    self.requeue(controls);
                    conn.close(CloseCode::UnknownError).await;
                    if done.send(()).is_err() {
                        tracing::trace!("drop requester went away");
                    }
                    return Next::Detached;
                }
                if let Some(next) = self.on_control(c) {
                    self.requeue(controls);
                    conn.close(CloseCode::UnknownError).await;
                    return next;
                }
            }
            for d in dispatches {
                self.record_and_send(&mut conn, d);
            }
            if self.handle.is_lagged() {
                conn.close(CloseCode::UnknownError).await;
                return Next::End;
            }
            if conn.has_pending() {
                match conn.try_flush() {
                    Ok(_) if conn.pending_len() > self.gw().max_pending_write_bytes => {
                        // Slow reader: drop the socket, keep the session; it can RESUME.
                        tracing::debug!(session = %self.handle.id, "slow consumer closed");
                        conn.close(CloseCode::UnknownError).await;
                        return Next::Detached;
                    }
                    Ok(_) => {}
                    Err(_) => return Next::Detached,
                }
            }
            let hb_deadline = Instant::from_std(conn.last_heartbeat) + hb_timeout;
            if heartbeat.deadline() != hb_deadline {
                heartbeat.as_mut().reset(hb_deadline);
            }
            tokio::select! {
                biased;
                _ = &mut shutdown => {
                    if conn.send_op(op::RECONNECT, b"null").is_ok() {
                        conn.close(CloseCode::UnknownError).await;
                    }
                    return Next::End;
                }
                _ = self.handle.woken() => {}
                r = conn.writable(), if conn.has_pending() => if r.is_err() { return Next::Detached },
                r = conn.readable() => {
                    if r.is_err() {
                        return Next::Detached;
                    }
                    match conn.read_frames(self.gw().max_client_payload, &mut frames) {
                        Ok(ReadStatus::Open) => {}
                        Ok(ReadStatus::Eof) => {
                            if let Some((code, next)) = self.handle_frames(&mut conn, std::mem::take(&mut frames)) {
                                conn.close(code).await;
                                return next;
                            }
                            return Next::Detached;
                        }
                        Err(_) => {
                            conn.close(CloseCode::DecodeError).await;
                            return Next::Detached;
                        }
                    }
                }
                _ = &mut heartbeat => {
                    conn.close(CloseCode::SessionTimedOut).await;
                    return Next::Detached;
                }
            }
        }
    }

    /// Handles client frames. `Some((code, next))` closes the socket.
    fn handle_frames(&mut self, conn: &mut Conn, frames: Vec<Incoming>) -> Option<(CloseCode, Next)> {
        for f in frames {
            let payload = match f {
                Incoming::Message { payload, .. } => payload,
                Incoming::Ping(p) => {
                    conn.pong(&p);
                    continue;
                }
                Incoming::Pong => continue,
                // 1000/1001 from the client ends the session (Discord's rule);
                // any other close keeps it resumable. The echo is best effort.
                Incoming::Close(code) => {
                    let next = if matches!(code, Some(1000) | Some(1001)) { Next::End } else { Next::Detached };
                    return Some((CloseCode::UnknownError, next));
                }
            };
            let gw = self.gw();
            if !conn.count_event(gw.client_events_per_window, Duration::from_millis(gw.client_event_window_ms)) {
                return Some((CloseCode::RateLimited, Next::Detached));
            }
            let Ok(frame) = serde_json::from_slice::<ClientFrame>(&payload) else {
                return Some((CloseCode::DecodeError, Next::Detached));
            };
            let d = frame.d.map(|d| d.get()).unwrap_or("null");
            match frame.op {
                op::HEARTBEAT | op::QOS_HEARTBEAT => {
                    conn.last_heartbeat = std::time::Instant::now();
                    if frame.op == op::HEARTBEAT {
                        if let Ok(Some(acked)) = serde_json::from_str::<Option<u64>>(d) {
                            self.acknowledge(acked);
                        }
                    }
                    if conn.send_op(op::HEARTBEAT_ACK, b"null").is_err() {
                        return Some((CloseCode::UnknownError, Next::Detached));
                    }
                }
                op::IDENTIFY => return Some((CloseCode::AlreadyAuthenticated, Next::Detached)),
                op::RESUME => return Some((CloseCode::AlreadyAuthenticated, Next::Detached)),
                op::PRESENCE_UPDATE => {
                    let Ok(p) = serde_json::from_str::<PresenceUpdate>(d) else {
                        return Some((CloseCode::DecodeError, Next::Detached));
                    };
                    let p = Presence { status: p.status, activities: p.activities.unwrap_or_default() };
                    if let Some(changed) = self.node.presences.update(self.handle.user_id, p) {
                        crate::guild::broadcast_presence(&self.node, self.handle.user_id, &self.handle.guild_ids(), changed);
                    }
                }
                op::REQUEST_GUILD_MEMBERS => {
                    let Ok(req) = serde_json::from_str::<RequestGuildMembers>(d) else {
                        return Some((CloseCode::DecodeError, Next::Detached));
                    };
                    let g = req.guild_id;
                    if self.handle.guild_ids().contains(&g) {
                        let msg = GuildMsg::RequestMembers { session: self.handle.clone(), req };
                        if let Err(e) = self.node.guilds.send(&self.node, g, msg) {
                            tracing::debug!(error = %e, "member request dropped");
                        }
                    }
                }
                op::GUILD_SUBSCRIPTIONS => {
                    let Ok(sub) = serde_json::from_str::<GuildSubscription>(d) else {
                        return Some((CloseCode::DecodeError, Next::Detached));
                    };
                    self.list_subscribe(sub.guild_id, sub.channels);
                }
                op::GUILD_SUBSCRIPTIONS_BULK => {
                    let Ok(bulk) = serde_json::from_str::<GuildSubscriptionsBulk>(d) else {
                        return Some((CloseCode::DecodeError, Next::Detached));
                    };
                    for (g, body) in bulk.subscriptions {
                        self.list_subscribe(g, body.channels);
                    }
                }
                // Known ops this server accepts and has nothing to do for (yet):
                // voice, deprecated guild sync, client telemetry.
                op::VOICE_STATE_UPDATE | op::GUILD_SYNC | op::TIME_SPENT | op::REQUEST_CHANNEL_INFO => {}
                _ => return Some((CloseCode::UnknownOpcode, Next::Detached)),
            }
        }
        None
    }

    /// Forwards a member-list subscription to its guild (ignored for guilds
    /// the session is not in, or without channels).
    fn list_subscribe(&self, guild: protocol::GuildId, channels: Option<std::collections::BTreeMap<protocol::ChannelId, Vec<(u64, u64)>>>) {
        let Some(channels) = channels else { return };
        if !self.handle.guild_ids().contains(&guild) {
            return;
        }
        let msg = GuildMsg::ListSubscribe { session: self.handle.clone(), channels: channels.into_iter().collect() };
        if let Err(e) = self.node.guilds.send(&self.node, guild, msg) {
            tracing::debug!(guild = %guild, error = %e, "member list subscription dropped");
        }
    }

    /// Waits for a RESUME while buffering dispatches, until the resume window ends.
    async fn detached(&mut self) -> Next {
        let until = Instant::now() + Duration::from_millis(self.gw().resume_window_ms);
        let node = self.node.clone();
        let shutdown = node.shutdown.cancelled();
        tokio::pin!(shutdown);
        let expiry = tokio::time::sleep_until(until);
        tokio::pin!(expiry);
        loop {
            let (controls, dispatches) = self.handle.take();
            let mut controls = controls.into_iter();
            while let Some(c) = controls.next() {
                if let Some(next @ Next::Resumed(..)) = self.on_control(c) {
                    self.requeue(controls);
                    return next;
                }
            }
            for d in dispatches {
                self.record(d);
            }
            if self.handle.is_lagged() {
                return Next::End;
            }
            tokio::select! {
                biased;
                _ = &mut shutdown => return Next::End,
                _ = self.handle.woken() => {}
                _ = &mut expiry => return Next::End,
            }
        }
    }

    /// Puts back controls that arrived in the same batch as one that changed state.
    fn requeue(&self, rest: impl Iterator<Item = Control>) {
        for c in rest {
            if let Err(c) = self.handle.control(c) {
                answer_ended(c);
            }
        }
    }

    fn end(self) {
        for c in self.handle.close() {
            answer_ended(c);
        }
        self.node.sessions.remove(&self.handle.id);
        let guilds = self.handle.guild_ids();
        for &g in &guilds {
            let msg = GuildMsg::Unsubscribe { session_id: self.handle.id.clone() };
            if let Err(e) = self.node.guilds.send(&self.node, g, msg) {
                tracing::debug!(guild = %g, error = %e, "unsubscribe not delivered");
            }
        }
        if let Some(p) = self.node.presences.session_ended(self.handle.user_id) {
            crate::guild::broadcast_presence(&self.node, self.handle.user_id, &guilds, p);
        }
    }
}

/// Answers a control message for a session that has ended: a RESUME gets
/// its connection back (the client will get op 9), a drop is simply done.
fn answer_ended(c: Control) {
    match c {
        Control::Resume { conn, reply, .. } => {
            if reply.send(Err(conn)).is_err() {
                tracing::trace!("resume requester went away");
            }
        }
        Control::Drop { done } => {
            if done.send(()).is_err() {
                tracing::trace!("drop requester went away");
            }
        }
    }
}
