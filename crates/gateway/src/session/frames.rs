//! What a session does with its client's frames: heartbeats, presence,
//! member requests and member-list subscriptions; IDENTIFY or RESUME again
//! closes the socket.

use std::sync::Arc;
use std::time::Duration;

use protocol::gateway::{op, ClientFrame, GuildSubscription, GuildSubscriptionsBulk, Intents, PresenceUpdate, RequestGuildMembers};
use protocol::{ActorKey, CloseCode};

use crate::ws::Incoming;
use crate::SessionHandle;
use node::presence::Presence;
use node::route::{GuildMsg, ListSubscription};
use node::Node;

use super::{now, Close, Outcome, SessionState};

impl SessionHandle {
    /// Handles client frames; `Some` closes the socket.
    pub(super) fn handle_frames(self: &Arc<Self>, node: &Arc<Node>, st: &mut SessionState, frames: &mut Vec<Incoming>) -> Option<Outcome> {
        let gw = &node.config.gateway;
        for f in frames.drain(..) {
            let conn = st.conn.as_mut()?;
            let payload = match f {
                Incoming::Message { payload, .. } => payload,
                Incoming::Ping(p) => {
                    conn.pong(&p);
                    continue;
                }
                Incoming::Pong => continue,
                // 1000/1001 from the client ends the session (Discord's rule);
                // any other close keeps it resumable.
                Incoming::Close(code) => {
                    return Some(if matches!(code, Some(1000) | Some(1001)) {
                        Outcome::End(Close::Echo(code))
                    } else {
                        Outcome::Detach(Some(Close::Echo(code)))
                    });
                }
            };
            if !conn.count_event(gw.client_events_per_window, Duration::from_millis(gw.client_event_window_ms)) {
                return Some(Outcome::Detach(Some(CloseCode::RateLimited.into())));
            }
            let Ok(frame) = serde_json::from_slice::<ClientFrame>(&payload) else {
                return Some(Outcome::Detach(Some(CloseCode::DecodeError.into())));
            };
            let d = frame.d.map(|d| d.get()).unwrap_or("null");
            match frame.op {
                op::HEARTBEAT | op::QOS_HEARTBEAT => {
                    conn.last_heartbeat = now();
                    if conn.send_op(op::HEARTBEAT_ACK, b"null").is_err() {
                        return Some(Outcome::Detach(Some(CloseCode::UnknownError.into())));
                    }
                    if frame.op == op::HEARTBEAT {
                        if let Ok(Some(acked)) = serde_json::from_str::<Option<u64>>(d) {
                            st.acknowledge(acked);
                        }
                    }
                }
                op::IDENTIFY | op::RESUME => return Some(Outcome::Detach(Some(CloseCode::AlreadyAuthenticated.into()))),
                op::PRESENCE_UPDATE => {
                    let Ok(p) = serde_json::from_str::<PresenceUpdate>(d) else {
                        return Some(Outcome::Detach(Some(CloseCode::DecodeError.into())));
                    };
                    let p = Presence { status: p.status, activities: p.activities.unwrap_or_default().into() };
                    if let Some(changed) = node.presences.update(self.user_id, p) {
                        node::route::broadcast_presence(node.guilds.as_ref(), node.id.0, self.user_id, &self.actors(), changed);
                    }
                }
                op::REQUEST_GUILD_MEMBERS => {
                    let Ok(req) = serde_json::from_str::<RequestGuildMembers>(d) else {
                        return Some(Outcome::Detach(Some(CloseCode::DecodeError.into())));
                    };
                    let g = req.guild_id;
                    // The whole member list (no ids, empty query) needs the
                    // GUILD_MEMBERS intent; without it Discord sends nothing.
                    let whole_list = req.user_ids.is_none() && req.query.as_deref().unwrap_or("").is_empty();
                    if whole_list && !self.intents.contains(Intents::GUILD_MEMBERS) {
                        tracing::debug!(guild = %g, "member list request without GUILD_MEMBERS ignored");
                    } else if self.in_guild(g) {
                        let msg = GuildMsg::RequestMembers { session: self.session_ref(node), req: Box::new(req) };
                        if let Err(e) = node.guilds.send(ActorKey::guild(g), msg) {
                            tracing::debug!(error = %e, "member request dropped");
                        }
                    }
                }
                op::GUILD_SUBSCRIPTIONS => {
                    let Ok(sub) = serde_json::from_str::<GuildSubscription>(d) else {
                        return Some(Outcome::Detach(Some(CloseCode::DecodeError.into())));
                    };
                    self.list_subscribe(node, st, sub.guild_id, sub.channels);
                }
                op::GUILD_SUBSCRIPTIONS_BULK => {
                    let Ok(bulk) = serde_json::from_str::<GuildSubscriptionsBulk>(d) else {
                        return Some(Outcome::Detach(Some(CloseCode::DecodeError.into())));
                    };
                    for (g, body) in bulk.subscriptions {
                        self.list_subscribe(node, st, g, body.channels);
                    }
                }
                // Known ops this server accepts and has nothing to do for (yet):
                // voice, deprecated guild sync, client telemetry.
                op::VOICE_STATE_UPDATE | op::GUILD_SYNC | op::TIME_SPENT | op::REQUEST_CHANNEL_INFO => {}
                _ => return Some(Outcome::Detach(Some(CloseCode::UnknownOpcode.into()))),
            }
        }
        None
    }

    /// Forwards a member-list subscription to its guild (ignored for guilds
    /// the session is not in, or without channels).
    /// The client has the guild open: the guild is told (a large guild makes
    /// the session active there), and the guild it opened longest ago, one
    /// past `gateway.open_guilds_max`, that it is open no longer.
    fn list_subscribe(
        self: &Arc<Self>,
        node: &Arc<Node>,
        st: &mut SessionState,
        guild: protocol::GuildId,
        channels: Option<std::collections::BTreeMap<protocol::ChannelId, Vec<(u64, u64)>>>,
    ) {
        if !self.in_guild(guild) {
            return;
        }
        st.open_guilds.retain(|g| *g != guild);
        st.open_guilds.push(guild);
        let max = node.config.gateway.open_guilds_max.max(1);
        let closed: Vec<protocol::GuildId> = st.open_guilds.drain(..st.open_guilds.len().saturating_sub(max)).collect();
        for g in closed {
            let msg = GuildMsg::Opened { session: self.session_ref(node), open: false };
            if let Err(e) = node.guilds.send(ActorKey::guild(g), msg) {
                tracing::debug!(guild = %g, error = %e, "guild close dropped");
            }
        }
        let Some(channels) = channels else {
            let msg = GuildMsg::Opened { session: self.session_ref(node), open: true };
            if let Err(e) = node.guilds.send(ActorKey::guild(guild), msg) {
                tracing::debug!(guild = %guild, error = %e, "guild open dropped");
            }
            return;
        };
        // The member-list subscription opens the guild as well.
        let msg = GuildMsg::ListSubscribe(Box::new(ListSubscription {
            session: self.session_ref(node),
            channels: channels.into_iter().collect(),
        }));
        if let Err(e) = node.guilds.send(ActorKey::guild(guild), msg) {
            tracing::debug!(guild = %guild, error = %e, "member list subscription dropped");
        }
    }
}
