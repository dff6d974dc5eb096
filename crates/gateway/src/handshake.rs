//! A gateway connection before it belongs to a session: HELLO, heartbeats,
//! then IDENTIFY (which starts a session) or RESUME (which hands the socket
//! to the existing session). Either way this task ends there; the node's
//! reader (`crate::reader`) takes over the socket.

use std::sync::Arc;
use std::time::Duration;

use protocol::gateway::{op, ClientFrame, Identify, Intents, Resume};
use protocol::{ActorKey, CloseCode};
use rand::RngCore;
use serde_json::json;
use tokio::time::Instant;

use super::session::{self, Identified};
use super::socket::{Conn, ReadStatus};
use super::ws::Incoming;
use super::SessionHandle;
use node::presence::Presence;
use node::Node;

/// Discord's smallest `large_threshold`: a lower value in IDENTIFY is raised to it.
const LARGE_THRESHOLD_MIN: u32 = 50;

/// What to do with a connection after one of its frames.
enum Step {
    Continue,
    Close(CloseCode),
    /// The connection was handed to a session task.
    Gone,
}

/// Serves one upgraded gateway socket until it is identified (then it runs
/// the new session here) or handed over by RESUME.
pub async fn serve(node: Arc<Node>, sessions: Arc<crate::Sessions>, mut conn: Conn) {
    let hello = json!({ "heartbeat_interval": node.config.gateway.heartbeat_interval_ms, "_trace": ["throng"] });
    if conn.send_op(op::HELLO, hello.to_string().as_bytes()).is_err() {
        return;
    }
    let identify_deadline = Instant::now() + Duration::from_millis(node.config.gateway.identify_timeout_ms);
    let hb_timeout = Duration::from_millis(node.config.heartbeat_timeout_ms());
    let mut frames = Vec::new();
    loop {
        if conn.has_pending() && conn.try_flush().is_err() {
            return;
        }
        let hb_deadline = Instant::from_std(conn.last_heartbeat) + hb_timeout;
        let timeout_code = if identify_deadline <= hb_deadline { CloseCode::NotAuthenticated } else { CloseCode::SessionTimedOut };
        tokio::select! {
            biased;
            _ = node.shutdown.cancelled() => return conn.close(CloseCode::UnknownError).await,
            _ = tokio::time::sleep_until(identify_deadline.min(hb_deadline)) => return conn.close(timeout_code).await,
            r = conn.writable(), if conn.has_pending() => if r.is_err() { return },
            r = conn.readable() => {
                if r.is_err() {
                    return;
                }
                match conn.read_frames(node.config.gateway.max_client_payload, &mut frames) {
                    Ok(ReadStatus::Open) => {}
                    Ok(ReadStatus::Eof) => return,
                    Err(e) => {
                        tracing::debug!(error = %e, "unreadable frame before identify");
                        return conn.close(CloseCode::DecodeError).await;
                    }
                }
            }
        }
        let mut batch = std::mem::take(&mut frames).into_iter();
        while let Some(frame) = batch.next() {
            let payload = match frame {
                Incoming::Message { payload, .. } => payload,
                Incoming::Ping(p) => {
                    conn.pong(&p);
                    continue;
                }
                Incoming::Pong => continue,
                Incoming::Close(code) => return conn.close_echo(code).await,
            };
            let gw = &node.config.gateway;
            if !conn.count_event(gw.client_events_per_window, Duration::from_millis(gw.client_event_window_ms)) {
                return conn.close(CloseCode::RateLimited).await;
            }
            let parsed: ClientFrame = match serde_json::from_slice(&payload) {
                Ok(f) => f,
                Err(_) => return conn.close(CloseCode::DecodeError).await,
            };
            let d = parsed.d.map(|d| d.get()).unwrap_or("null");
            let step = match parsed.op {
                op::HEARTBEAT | op::QOS_HEARTBEAT => {
                    conn.last_heartbeat = std::time::Instant::now();
                    conn.send_op(op::HEARTBEAT_ACK, b"null").map(|_| Step::Continue).unwrap_or(Step::Gone)
                }
                op::IDENTIFY => match identify(&node, &mut conn, d).await {
                    Ok(Some(identified)) => {
                        session::start(&node, &sessions, conn, identified, batch.collect());
                        return;
                    }
                    Ok(None) => Step::Continue,
                    Err(code) => Step::Close(code),
                },
                op::RESUME => {
                    // RESUMEs share IDENTIFY's admission: a reconnect storm is
                    // bounded the same way. Busy: op 9 `d:true`, the client
                    // retries and its session is still there.
                    let Ok(_permit) = node.identify_permits.try_acquire() else {
                        if conn.send_op(op::INVALID_SESSION, b"true").is_err() {
                            return;
                        }
                        continue;
                    };
                    match resume(&node, &sessions, conn, d).await {
                        Ok(()) => return,
                        Err((c, step)) => {
                            conn = *c;
                            if let Step::Continue = step {
                                // Not resumable: the client will IDENTIFY (usually on a new socket).
                                if conn.send_op(op::INVALID_SESSION, b"false").is_err() {
                                    return;
                                }
                            }
                            step
                        }
                    }
                }
                op::PRESENCE_UPDATE
                | op::VOICE_STATE_UPDATE
                | op::REQUEST_GUILD_MEMBERS
                | op::GUILD_SYNC
                | op::GUILD_SUBSCRIPTIONS
                | op::GUILD_SUBSCRIPTIONS_BULK
                | op::TIME_SPENT
                | op::REQUEST_CHANNEL_INFO => Step::Close(CloseCode::NotAuthenticated),
                _ => Step::Close(CloseCode::UnknownOpcode),
            };
            match step {
                Step::Continue => {}
                Step::Close(code) => return conn.close(code).await,
                Step::Gone => return,
            }
        }
    }
}

/// 32 hex digits: this node's id (four digits, see `gateway::home_node`),
/// then random.
fn new_session_id(node: fanout::NodeId) -> Arc<str> {
    let mut b = [0u8; 14];
    rand::thread_rng().fill_bytes(&mut b);
    format!("{:04x}{}", node.0 as u16, hex::encode(b)).into()
}

/// Validates IDENTIFY and prepares the session. `Ok(None)`: op 9 was
/// queued: `d:true` when the node is busy (the client may retry), `d:false`
/// for a bot's IDENTIFY beyond its `max_concurrency`.
async fn identify(node: &Arc<Node>, conn: &mut Conn, d: &str) -> Result<Option<Identified>, CloseCode> {
    let ident: Identify = serde_json::from_str(d).map_err(|_| CloseCode::DecodeError)?;
    // A cluster node cut off from its bus takes no new sessions: a
    // resumable close sends the client to another node (behind a balancer).
    if let Err(why) = node.health() {
        tracing::warn!(reason = why, "IDENTIFY refused: node not in its cluster");
        return Err(CloseCode::UnknownError);
    }
    let Ok(_permit) = node.identify_permits.try_acquire() else {
        conn.send_op(op::INVALID_SESSION, b"true").map_err(|_| CloseCode::UnknownError)?;
        return Ok(None);
    };
    let token = ident.token.strip_prefix("Bot ").unwrap_or(&ident.token);
    let token_hash = node::auth::hash_token(token);
    // DMs arrive on shard 0, as on Discord.
    let want_dms = ident.shard.is_none_or(|[id, _]| id == 0);
    // The token, READY's DMs and (people's) read states in one batched read.
    let start = match node.session_starts.get((token_hash, want_dms)).await {
        Ok(Some(s)) if s.who.token_expires_at.is_none_or(|e| e > node::auth::now_ms()) => s,
        Ok(_) => return Err(CloseCode::AuthenticationFailed),
        Err(e) => {
            tracing::error!(error = %e, "identify: token lookup failed");
            return Err(CloseCode::UnknownError);
        }
    };
    let node::batch::SessionStart { who, dms, read_states } = start;
    let (user, mut guilds, application) = (who.user, who.guilds, who.application);
    let intents = match ident.intents {
        Some(bits) => Intents(bits),
        None if user.bot => return Err(CloseCode::InvalidIntents),
        // Official user clients send capabilities, not intents: they get everything.
        None => Intents::ALL,
    };
    if !intents.is_valid() {
        return Err(CloseCode::InvalidIntents);
    }
    if let Some([id, count]) = ident.shard {
        if count == 0 || id >= count {
            return Err(CloseCode::InvalidShard);
        }
    }
    let gw = &node.config.gateway;
    // One user's sessions on this node are bounded (people and bots alike).
    if node.sessions.of_user(user.id).len() >= gw.max_sessions_per_user {
        tracing::info!(user = %user.id, "IDENTIFY refused: too many sessions of this user on this node");
        return Err(CloseCode::RateLimited);
    }
    // A bot's session starts: `max_concurrency` buckets per window and the
    // period's total, as /gateway/bot advertises them.
    if user.bot {
        let bucket = ident.shard.map_or(0, |[id, _]| id % gw.identify_max_concurrency.max(1));
        let limits = node.config.start_limits();
        match node.store.start_session(&token_hash, bucket, node::auth::now_ms(), &limits).await {
            Ok(store::SessionStart::Started { .. }) => {}
            Ok(store::SessionStart::TooSoon) => {
                // Discord's answer to an IDENTIFY beyond max_concurrency.
                conn.send_op(op::INVALID_SESSION, b"false").map_err(|_| CloseCode::UnknownError)?;
                return Ok(None);
            }
            Ok(store::SessionStart::Exhausted { .. }) => {
                tracing::warn!(user = %user.id, "IDENTIFY refused: the bot's session start limit is used up");
                return Err(CloseCode::AuthenticationFailed);
            }
            Err(e) => {
                tracing::error!(error = %e, "identify: session start not counted");
                return Err(CloseCode::UnknownError);
            }
        }
    }
    let large_threshold = ident.large_threshold.unwrap_or(gw.large_threshold_default).clamp(LARGE_THRESHOLD_MIN, gw.large_threshold_max);
    if let Some([id, count]) = ident.shard {
        guilds.retain(|g| (g.0 >> 22) % u64::from(count) == u64::from(id));
    }
    let read_state = read_states.map(|states| node::read_states::ready_json(&states, node::auth::now_ms()));
    let session_id = new_session_id(node.id);
    let mut ready = json!({
        "v": 10,
        "user": node::convert::current_user(&user),
        "guilds": guilds.iter().map(|g| json!({"id": g, "unavailable": true})).collect::<Vec<_>>(),
        "session_id": &*session_id,
        "session_type": "normal",
        "resume_gateway_url": node.config.gateway_url(),
        "private_channels": dms.iter().map(|d| node::convert::dm_json(d, user.id)).collect::<Vec<_>>(),
        "relationships": [],
        "presences": [],
        "guild_join_requests": [],
        "geo_ordered_rtc_regions": [],
        "user_settings": {},
        "auth": {},
        "_trace": ["throng"],
    });
    if let Some((id, flags)) = application.filter(|_| user.bot) {
        ready["application"] = json!({ "id": id, "flags": flags });
    }
    if let Some(shard) = ident.shard {
        ready["shard"] = json!(shard);
    }
    if let Some(r) = read_state {
        ready["read_state"] = r;
    }
    // The session subscribes to its DMs' actors as to its guilds.
    let mut actors: Vec<ActorKey> = guilds.iter().map(|&g| ActorKey::guild(g)).collect();
    actors.extend(dms.iter().map(|d| ActorKey::dm(d.channel.id)));
    let handle = SessionHandle::new(session_id, user.id, user.bot, intents, large_threshold, actors, &node.delivery);
    let _ = handle.token_hash.set(token_hash);
    let presence = match ident.presence {
        Some(p) => Presence { status: p.status, activities: p.activities.unwrap_or_default().into() },
        None => Presence::new(protocol::gateway::Status::Online),
    };
    Ok(Some(Identified { handle, ready: serde_json::to_vec(&ready).map_err(|_| CloseCode::UnknownError)?.into(), presence }))
}

/// Hands the connection to the session it resumes. On failure the connection
/// comes back with what to do next.
async fn resume(node: &Arc<Node>, sessions: &crate::Sessions, conn: Conn, d: &str) -> Result<(), (Box<Conn>, Step)> {
    let Ok(r) = serde_json::from_str::<Resume>(d) else { return Err((Box::new(conn), Step::Close(CloseCode::DecodeError))) };
    let token = r.token.strip_prefix("Bot ").unwrap_or(&r.token);
    // Batched with concurrent IDENTIFYs and RESUMEs (see `batch`): a
    // reconnect storm is thousands of these at once.
    let user = match node.identify_lookups.get(node::auth::hash_token(token)).await {
        Ok(Some(who)) if who.token_expires_at.is_none_or(|e| e > node::auth::now_ms()) => who.user,
        Ok(_) => return Err((Box::new(conn), Step::Close(CloseCode::AuthenticationFailed))),
        Err(e) => {
            tracing::error!(error = %e, "resume: token lookup failed");
            return Err((Box::new(conn), Step::Close(CloseCode::UnknownError)));
        }
    };
    let conn = match session::resume(node, sessions, conn, &r, user.id) {
        Ok(()) => return Ok(()),
        Err(conn) => conn,
    };
    // A session of another live node (the client came back through a
    // balancer): take it over from there, then resume it here.
    let holder = super::home_node(&r.session_id).filter(|&h| h != node.id && node.cluster_nodes().contains(&h.0));
    if let Some(holder) = holder {
        if node.sessions.get(&r.session_id).is_none() && take_over(node, holder, &r, user.id).await {
            return session::resume(node, sessions, *conn, &r, user.id).map_err(|c| (c, Step::Continue));
        }
    }
    Err((conn, Step::Continue))
}

/// Asks `holder` to hand session `r` over to this node (see
/// `cluster`): true once the session is registered here.
async fn take_over(node: &Arc<Node>, holder: fanout::NodeId, r: &Resume, user: protocol::UserId) -> bool {
    let (reply, answer) = node.replies.register();
    let req = node::route::TakeOver { session: r.session_id.as_str().into(), user, seq: r.seq.unwrap_or(0), reply };
    if !node.cluster().is_some_and(|c| c.take_over(holder, req)) {
        return false;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(node.config.cluster.takeover_timeout_ms);
    let mut answer = std::pin::pin!(answer);
    // A holder that dies meanwhile leaves the ring (`cluster.node_timeout_ms`):
    // the answer is op 9 then, not at the timeout.
    loop {
        tokio::select! {
            got = &mut answer => return matches!(got, Ok(b) if &b[..] == b"true"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if tokio::time::Instant::now() >= deadline || !node.cluster_nodes().contains(&holder.0) {
            return false;
        }
    }
}
