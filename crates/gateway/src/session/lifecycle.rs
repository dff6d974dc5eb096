//! A session's life: it starts after IDENTIFY (READY, subscriptions, its
//! reader), comes back with RESUME, moves to another node (hand-over),
//! drops its socket, and ends; one sweeper per node enforces heartbeat
//! timeouts and resume windows.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protocol::gateway::{op, Resume};
use protocol::{ActorKey, CloseCode};

use crate::socket::Conn;
use crate::ws::Incoming;
use crate::{Dispatch, SessionHandle};
use node::route::GuildMsg;
use node::Node;

use super::{now, Forward, HandOver, Holding, Identified, Outcome};

impl SessionHandle {
    /// Closes the current socket with 4004 (authentication failed): its
    /// token was revoked. A RESUME with that token is refused.
    pub fn close_revoked(&self) {
        let mut st = self.lock();
        st.detach(self, Some(CloseCode::AuthenticationFailed.into()));
    }

    /// Closes the current socket with a resumable code and keeps the session
    /// (operator/test hook). Returns whether there was a socket.
    pub fn drop_connection(self: &Arc<Self>) -> bool {
        let mut st = self.lock();
        let had = st.conn.is_some();
        st.detach(self, Some(CloseCode::UnknownError.into()));
        had
    }

    /// Hands this session over to another node (a RESUME there from
    /// sequence `seq`): closes its socket, gives `reply` what the client has
    /// not seen, then sends every later dispatch through `forward`. The
    /// session keeps its guild subscriptions here, so its dispatches keep
    /// one order until the new node has moved them (`GuildMsg::Move`).
    /// False if it cannot be resumed from `seq`, or is still moving here.
    pub fn hand_over(self: &Arc<Self>, seq: u64, reply: impl FnOnce(HandOver), forward: Forward) -> bool {
        let mut st = self.lock();
        // Not while its own subscriptions are still moving here.
        if st.forward.is_some() || st.holding.is_some() || !st.can_resume(Some(seq)) {
            return false;
        }
        st.detach(self, Some(CloseCode::UnknownError.into()));
        let replay = st.replay.iter().filter(|(q, _, _)| *q > seq).map(|(q, d, _)| (*q, d.clone())).collect();
        // Under the lock: nothing is forwarded before the hand-over itself.
        reply(HandOver { seq: st.seq, replay, actors: self.actors() });
        st.replay = VecDeque::new();
        st.replay_bytes = 0;
        st.forward = Some(forward);
        true
    }

    /// Writes a new session's READY (and what came after it) if it is
    /// still waiting for some of its guilds' GUILD_CREATEs.
    fn release_ready(self: &Arc<Self>) {
        let mut st = self.lock();
        if st.ready_held > 0 {
            st.ready_held = 0;
            self.flush_locked(&mut st);
        }
    }

    /// Whether this session, taken over from another node, still waits for
    /// some of its guilds to move here.
    pub fn is_moving(&self) -> bool {
        self.lock().holding.is_some()
    }

    /// Registers a session handed over by another node, detached, with its
    /// sequence and unseen dispatches; a RESUME attaches the socket next.
    /// Its `moving` guilds' events are held until their markers come (see
    /// [`Holding`]).
    pub fn adopt(self: &Arc<Self>, sessions: &crate::Sessions, seq: u64, replay: Vec<(u64, Dispatch)>, moving: Vec<ActorKey>) {
        {
            let mut st = self.lock();
            let now = now();
            if !moving.is_empty() {
                st.holding = Some(Box::new(Holding { moving, held: Vec::new(), since: now }));
            }
            st.seq = seq;
            st.replay_bytes = replay.iter().map(|(_, d)| d.body.len()).sum();
            st.replay = replay.into_iter().map(|(q, d)| (q, d, now)).collect();
            st.detached_at = Some(now);
        }
        sessions.insert(self.clone());
    }

    /// Ends the session: closes its socket, leaves its guilds, updates presence.
    pub fn end(self: &Arc<Self>, node: &Arc<Node>) {
        {
            let mut st = self.lock();
            if st.ended {
                return;
            }
            st.detach(self, Some(CloseCode::UnknownError.into()));
            st.ended = true;
            st.replay = VecDeque::new();
            st.replay_bytes = 0;
        }
        node.sessions.remove(&self.id);
        if let Some(home) = self.home.get().filter(|h| h.node != node.id) {
            // Taken over from another node: the session ends there too.
            if let Some(c) = node.cluster() {
                c.end(home)
            };
        }
        // The presence others now see goes with each unsubscription: one
        // message per guild (none while the node shuts down).
        let presence = if node.shutdown.is_cancelled() { None } else { node.presences.session_ended(self.user_id) };
        for g in self.actors() {
            // DM actors have no presences to show.
            let presence = presence.clone().filter(|_| g.as_guild().is_some()).map(|p| Box::new((self.user_id, p)));
            let msg = GuildMsg::Unsubscribe { session: self.session_ref(node), presence };
            if let Err(e) = node.guilds.send(g, msg) {
                tracing::debug!(guild = %g, error = %e, "unsubscribe not delivered");
            }
        }
    }
}

/// Starts an identified session on `conn`: READY, its socket in the node's
/// reader, guild subscriptions, presence.
pub fn start(node: &Arc<Node>, sessions: &crate::Sessions, conn: Conn, id: Identified, mut early: Vec<Incoming>) {
    let s = id.handle;
    let conn = match conn.into_session() {
        Ok(c) => c,
        Err(e) => return tracing::debug!(error = %e, "socket not taken off tokio; session not started"),
    };
    sessions.insert(s.clone());
    let limits = &s.delivery().shared.limits;
    // READY waits (briefly) for the GUILD_CREATEs its guilds' actors send,
    // to leave with them in one write.
    // One snapshot of the actors: the guilds READY waits for are the ones
    // subscribed below.
    let actors = s.actors();
    let hold = Duration::from_millis(node.config.gateway.ready_hold_ms);
    let guilds = if hold.is_zero() || !s.intents.contains(protocol::gateway::Intents::GUILDS) {
        0
    } else {
        actors.iter().filter(|k| k.as_guild().is_some()).count()
    };
    let gen = {
        let mut st = s.lock();
        let gen = st.attach(conn);
        st.record_and_send(limits, Dispatch { name: "READY", body: id.ready });
        crate::counters::COUNTERS.identifies.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        st.ready_held = u8::try_from(guilds).unwrap_or(u8::MAX);
        s.flush_locked(&mut st);
        gen
    };
    if guilds > 0 {
        let s = s.clone();
        node.tasks.spawn(async move {
            tokio::time::sleep(hold).await;
            s.release_ready();
        });
    }
    // The presence goes with each subscription (`Subscription::presence`,
    // read after this): an actor on another node gets one message per
    // session, not a subscription and then a presence report.
    node.presences.session_started(s.user_id, id.presence);
    for g in actors {
        subscribe(node, &s, g);
    }
    if !early.is_empty() {
        let mut st = s.lock();
        match s.handle_frames(node, &mut st, &mut early) {
            Some(Outcome::Detach(code)) => return st.detach(&s, code),
            Some(Outcome::End(code)) => {
                st.detach(&s, Some(code));
                drop(st);
                return s.end(node);
            }
            None => s.flush_locked(&mut st),
        }
    }
    // Read from here on: the frames that came with IDENTIFY went first,
    // behind the subscriptions.
    register(node, sessions, &s, gen);
}

/// Puts socket generation `gen` of session `s` in the node's reader, if it
/// is still the session's socket; one that cannot be is closed (the client
/// resumes).
fn register(node: &Arc<Node>, sessions: &crate::Sessions, s: &Arc<SessionHandle>, gen: u32) {
    let reader = sessions.reader(node);
    let mut st = s.lock();
    // A test's pipe has a reader task of its own.
    #[cfg(test)]
    if let Some(pipe) = st.conn.as_ref().filter(|_| st.gen == gen).and_then(Conn::pipe_of) {
        node.tasks.spawn(s.clone().read_loop(node.clone(), pipe, gen));
        return;
    }
    let r = reader.and_then(|r| st.register(r, s, gen));
    if let Err(e) = r {
        tracing::warn!(error = %e, "session socket not registered with the reader; closed");
        st.detach(s, None);
    }
}

/// A subscription refused by a full guild mailbox (a big guild during an
/// IDENTIFY ramp) is sent again this often, up to `SUBSCRIBE_RETRIES`
/// times (30 s in all) before the guild stays unavailable to the session.
const SUBSCRIBE_RETRY_EVERY: Duration = Duration::from_millis(50);
const SUBSCRIBE_RETRIES: u32 = 600;

/// Subscribes the session to guild `g`. A guild whose mailbox is full (an
/// IDENTIFY storm into one big guild) is tried again every
/// `SUBSCRIBE_RETRY_EVERY` rather than left unavailable: a dropped
/// subscription is a session that silently never gets the guild's events.
fn subscribe(node: &Arc<Node>, s: &Arc<SessionHandle>, g: ActorKey) {
    fn msg(node: &Node, s: &SessionHandle) -> GuildMsg {
        GuildMsg::Subscribe(Box::new(s.subscription(node)))
    }
    match node.guilds.send(g, msg(node, s)) {
        Ok(()) => {}
        Err(node::route::RouteError::Busy(_)) => {
            let (node2, s) = (node.clone(), s.clone());
            node.tasks.spawn(async move {
                for _ in 0..SUBSCRIBE_RETRIES {
                    tokio::time::sleep(SUBSCRIBE_RETRY_EVERY).await;
                    if s.lock().ended || node2.shutdown.is_cancelled() {
                        return;
                    }
                    match node2.guilds.send(g, msg(&node2, &s)) {
                        Err(node::route::RouteError::Busy(_)) => continue,
                        Err(e) => return tracing::warn!(guild = %g, error = %e, "subscribe failed; guild stays unavailable"),
                        Ok(()) => return,
                    }
                }
                let waited = SUBSCRIBE_RETRY_EVERY * SUBSCRIBE_RETRIES;
                tracing::warn!(guild = %g, waited_ms = waited.as_millis() as u64, "guild busy; subscription given up, guild stays unavailable");
            });
        }
        Err(e) => tracing::warn!(guild = %g, error = %e, "subscribe failed; guild stays unavailable"),
    }
}

/// Hands `conn` to the session `r` resumes and replays what the client
/// missed; gives the connection back if the session cannot be resumed (the
/// caller answers op 9 `d:false`).
pub fn resume(node: &Arc<Node>, sessions: &crate::Sessions, conn: Conn, r: &Resume, user: protocol::UserId) -> Result<(), Box<Conn>> {
    let Some(s) = sessions.get(&r.session_id).filter(|s| s.user_id == user) else {
        return Err(Box::new(conn));
    };
    let limits = &s.delivery().shared.limits;
    let gen = {
        let mut guard = s.lock();
        let st = &mut *guard;
        if !st.can_resume(r.seq) {
            return Err(Box::new(conn));
        }
        let conn = match conn.into_session() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "socket not taken off tokio; not resumed");
                return Ok(());
            }
        };
        // A socket still attached is replaced (the client has moved on).
        st.detach(&s, Some(CloseCode::UnknownError.into()));
        let gen = st.attach(conn);
        st.replay_from(r.seq.unwrap_or(0));
        st.record_and_send(limits, Dispatch { name: "RESUMED", body: Bytes::from_static(b"{\"_trace\":[\"throng\"]}") });
        crate::counters::COUNTERS.resumes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        s.flush_locked(st);
        gen
    };
    register(node, sessions, &s, gen);
    Ok(())
}

/// Enforces heartbeat timeouts (4009) and resume windows for every session
/// of the node, until shutdown; then closes every session with RECONNECT.
pub async fn sweeper(node: Arc<Node>, sessions: Arc<crate::Sessions>) {
    let hb_timeout = Duration::from_millis(node.config.heartbeat_timeout_ms());
    let window = Duration::from_millis(node.config.gateway.resume_window_ms);
    let move_timeout = Duration::from_millis(node.config.cluster.takeover_timeout_ms);
    let every = (hb_timeout.min(window) / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = node.shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        sweep(&node, &sessions, now(), hb_timeout, window, move_timeout);
    }
    // Shutdown: every socket gets RECONNECT and a resumable close.
    for s in sessions.all() {
        {
            let mut st = s.lock();
            if let Some(conn) = st.conn.as_mut() {
                if conn.send_op(op::RECONNECT, b"null").is_err() {
                    tracing::trace!("reconnect not framed");
                }
                // Keep RECONNECT: only frames queued before it may be cut.
                if let Err(e) = st.try_write() {
                    tracing::trace!(error = %e, "reconnect not written");
                }
            }
            st.detach(&s, Some(CloseCode::UnknownError.into()));
        }
        s.end(&node);
    }
}

/// One pass of the sweeper at `now`: closes sockets without a heartbeat for
/// `hb_timeout` (4009, resumable), ends sessions detached for longer than
/// the resume `window`, and sessions taken over from another node whose
/// guilds did not finish moving within `move_timeout`.
pub(super) fn sweep(
    node: &Arc<Node>,
    sessions: &crate::Sessions,
    now: Instant,
    hb_timeout: Duration,
    window: Duration,
    move_timeout: Duration,
) {
    for s in sessions.all() {
        let expired = {
            let mut st = s.lock();
            if st.holding.as_ref().is_some_and(|h| now.duration_since(h.since) > move_timeout) {
                // Its guilds never finished moving here: rather than a
                // silent hole, the session ends and its client identifies again.
                tracing::warn!(session = %s.id, "guild subscriptions did not move in time; the session ends");
                drop(st);
                s.end(node);
                continue;
            }
            if let Some(conn) = st.conn.as_ref() {
                if now.duration_since(conn.last_heartbeat) > hb_timeout {
                    st.detach(&s, Some(CloseCode::SessionTimedOut.into()));
                }
                false
            } else {
                // A handed-over session lives as long as its new node keeps it.
                st.forward.is_none() && st.detached_at.is_some_and(|t| now.duration_since(t) > window)
            }
        };
        if expired {
            s.end(node);
        }
    }
}
