//! Pins (PIN_MESSAGES or MANAGE_MESSAGES; at most [`MAX_PINS`] per
//! channel, each announced by a system message of type 6) and bulk deletes
//! (MANAGE_MESSAGES). CHANNEL_PINS_UPDATE and MESSAGE_DELETE_BULK go to
//! those who may see the channel.

use std::sync::Arc;

use axum::http::StatusCode;
use protocol::gateway::Intents;
use protocol::model::{iso8601, permission};
use protocol::{ErrorCode, UserId};
use serde_json::json;
use store::{Change, MessageRecord};

use super::{missing_permissions, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use fanout::encode;
use node::auth::now_ms;
use node::convert;
use node::route::ops::PinAction;
use node::route::OpReply;

/// Pins per channel: Discord's documented limit (30003 beyond; it was 50
/// until 2025, and discord.py 2.7 documents 250).
pub(crate) const MAX_PINS: u32 = 250;

/// The system message announcing a pin.
const CHANNEL_PINNED_MESSAGE: u8 = 6;

/// Message types a user writes (default, reply, and the two kinds of
/// command answers); every other type is a system message, which cannot be
/// pinned (50021).
fn is_system(kind: u8) -> bool {
    !matches!(kind, 0 | 19 | 20 | 23)
}

/// Pinning needs PIN_MESSAGES or, as before Discord split it off, MANAGE_MESSAGES.
fn may_pin(bits: u64) -> Result<(), OpReply> {
    if bits & (permission::PIN_MESSAGES | permission::MANAGE_MESSAGES) == 0 {
        return Err(missing_permissions());
    }
    Ok(())
}

pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: PinAction) -> Decided {
    let caller = st.caller(user)?;
    let gid = a.id();
    match action {
        PinAction::Pin { channel, message, kind, pinned, count, notice, .. } => {
            let c = st.channel(channel)?;
            may_pin(caller.view(st, c)?)?;
            if is_system(kind) {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::SystemMessage));
            }
            if pinned {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            if count >= u64::from(MAX_PINS) {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::MaxPins));
            }
            let at = now_ms();
            let rec = MessageRecord {
                id: notice,
                channel_id: channel,
                guild_id: Some(gid),
                author_id: user,
                content: String::new(),
                edited_at: None,
                kind: CHANNEL_PINNED_MESSAGE,
                flags: 0,
                tts: false,
                mention_everyone: false,
                mentions: Vec::new(),
                reference: Some(json!({ "type": 0, "message_id": message, "channel_id": channel, "guild_id": gid })),
                extra: json!({}),
            };
            let (author, member) = (caller.user.clone(), convert::member(&caller.member, None));
            let changes = vec![
                Change::PinMessage { channel, message, at, max: MAX_PINS },
                Change::PinNotice { message: rec.clone(), pinned: message, at },
            ];
            Ok(Plan::new(changes, move |a, st, rows| {
                // Not pinned: it raced another pin of it, its deletion or the channel's last free pin.
                if rows.first() != Some(&1) {
                    return OpReply::no_content();
                }
                if rows.get(1) == Some(&1) {
                    let m = Arc::new(convert::message(&rec, &author, &[], Some(member)));
                    let body = encode(&*m);
                    a.apply(st, GuildEvent::MessageCreate { message: m, body });
                }
                let body = encode(&json!({ "guild_id": a.id(), "channel_id": channel, "last_pin_timestamp": iso8601(at) }));
                a.fan_out_in(st, channel, "CHANNEL_PINS_UPDATE", &body, Intents::GUILDS);
                OpReply::no_content()
            }))
        }
        PinAction::Unpin { channel, message, pinned, last, .. } => {
            let c = st.channel(channel)?;
            may_pin(caller.view(st, c)?)?;
            if !pinned {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            Ok(Plan::new(vec![Change::UnpinMessage { channel, message }], move |a, st, rows| {
                if rows.first() == Some(&1) {
                    let body = encode(&json!({ "guild_id": a.id(), "channel_id": channel, "last_pin_timestamp": last.map(iso8601) }));
                    a.fan_out_in(st, channel, "CHANNEL_PINS_UPDATE", &body, Intents::GUILDS);
                }
                OpReply::no_content()
            }))
        }
        PinAction::BulkDelete { channel, ids } => {
            let c = st.channel(channel)?;
            caller.require_in(st, c, permission::MANAGE_MESSAGES)?;
            if ids.is_empty() {
                return Ok(Plan::now(|_, _| OpReply::no_content()));
            }
            Ok(Plan::new(vec![Change::DeleteMessages { channel, ids: ids.clone() }], move |a, st, rows| {
                if rows.first() > Some(&0) {
                    let body = encode(&json!({ "ids": ids, "channel_id": channel, "guild_id": a.id() }));
                    a.fan_out_in(st, channel, "MESSAGE_DELETE_BULK", &body, Intents::GUILD_MESSAGES);
                }
                OpReply::no_content()
            }))
        }
    }
}
