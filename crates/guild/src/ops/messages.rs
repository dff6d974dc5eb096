//! Typing, edits and deletes of messages (new messages are `GuildMsg::Post`).

use std::sync::Arc;

use axum::http::StatusCode;
use protocol::model::permission;
use protocol::{ErrorCode, UserId};
use store::Change;

use super::{gone, missing_permissions, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use fanout::encode;
use node::auth::now_ms;
use node::convert;
use node::route::ops::MessageAction;
use node::route::OpReply;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: MessageAction) -> Decided {
    let caller = st.caller(user)?;
    match action {
        MessageAction::Typing { channel } => {
            let c = st.channel(channel)?;
            caller.require_in(st, c, permission::SEND_MESSAGES)?;
            Ok(Plan::now(move |a, st| {
                a.apply(st, GuildEvent::TypingStart { channel_id: channel, user_id: user, timestamp: now_ms() / 1000 });
                OpReply::no_content()
            }))
        }
        MessageAction::Ack { channel, message } => match st.bits_in(channel, user) {
            None => Err(OpReply::not_found(ErrorCode::UnknownChannel)),
            Some(0) => Err(OpReply::forbidden(ErrorCode::MissingAccess)),
            Some(_) => Ok(Plan::now(move |a, _| {
                a.passive_acked(user, channel, message);
                OpReply::no_content()
            })),
        },
        MessageAction::Edit { message, referenced, pinned } => {
            let c = st.channel(message.channel_id)?;
            caller.view(st, c)?;
            if message.author_id != user {
                return Err(OpReply::forbidden(ErrorCode::CannotEditOthersMessage));
            }
            let mut rec = *message;
            let (mentions, mention_members) = st.mentioned(&rec.mentions);
            rec.mentions = mentions.iter().map(|u| u.id).collect();
            let author = caller.user.clone();
            let member = convert::member(&caller.member, None);
            Ok(Plan::new(vec![Change::UpdateMessage(rec.clone())], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownMessage);
                }
                let mut m = convert::message(&rec, &author, &mentions, Some(member));
                convert::attach_mention_members(&mut m, mention_members);
                m.pinned = pinned;
                if let Some(r) = referenced {
                    m.referenced_message = Some(r);
                }
                let message = Arc::new(m);
                let body = encode(&*message);
                a.apply(st, GuildEvent::MessageUpdate { message, body: body.clone() });
                OpReply::ok_bytes(StatusCode::OK, &body)
            }))
        }
        MessageAction::Delete { channel, id, author } => {
            let c = st.channel(channel)?;
            let bits = caller.view(st, c)?;
            if author != user && bits & permission::MANAGE_MESSAGES == 0 {
                return Err(missing_permissions());
            }
            Ok(Plan::new(vec![Change::DeleteMessage { channel, id }], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownMessage);
                }
                a.apply(st, GuildEvent::MessageDelete { id, channel_id: channel });
                OpReply::no_content()
            }))
        }
    }
}
