//! Webhooks of a guild's channels (MANAGE_WEBHOOKS, or the webhook's own
//! token) and the messages they send.

use std::sync::Arc;

use axum::http::StatusCode;
use protocol::gateway::Intents;
use protocol::model::permission;
use protocol::{ChannelId, ErrorCode, UserId};
use serde_json::json;
use store::{Change, UserRecord};

use super::{gone, Decided, Plan};
use crate::actor::{GuildActor, State};
use crate::GuildEvent;
use fanout::encode;
use node::convert;
use node::route::ops::WebhookAction;
use node::route::OpReply;

pub(super) fn plan(_a: &GuildActor, st: &State, user: UserId, action: WebhookAction) -> Decided {
    match action {
        WebhookAction::Create { webhook, body } => {
            manage_in(st, user, webhook.channel_id)?;
            let channel = webhook.channel_id;
            Ok(Plan::new(vec![Change::CreateWebhook(*webhook)], move |a, st, _| {
                updated(a, st, &[channel]);
                OpReply::ok(StatusCode::OK, &body)
            }))
        }
        WebhookAction::Modify { webhook, from, by_token, body } => {
            st.channel(from)?;
            if !by_token {
                manage_in(st, user, from)?;
                if webhook.channel_id != from {
                    manage_in(st, user, webhook.channel_id)?;
                }
            }
            let to = webhook.channel_id;
            Ok(Plan::new(vec![Change::UpdateWebhook(*webhook)], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownWebhook);
                }
                let both = [from, to];
                updated(a, st, if to == from { &both[..1] } else { &both[..] });
                OpReply::ok(StatusCode::OK, &body)
            }))
        }
        WebhookAction::Delete { id, channel, by_token } => {
            if !by_token {
                manage_in(st, user, channel)?;
            }
            Ok(Plan::new(vec![Change::DeleteWebhook(id)], move |a, st, rows| {
                if gone(rows) {
                    return OpReply::not_found(ErrorCode::UnknownWebhook);
                }
                updated(a, st, &[channel]);
                OpReply::no_content()
            }))
        }
        WebhookAction::Execute { message } => {
            st.channel(message.channel_id)?;
            let mut rec = *message;
            rec.guild_id = Some(st.guild.id);
            let (mentions, mention_members) = st.mentioned(&rec.mentions);
            rec.mentions = mentions.iter().map(|u| u.id).collect();
            Ok(Plan::new(vec![Change::WebhookMessage(rec.clone())], move |a, st, _| {
                // The author is built from `extra.webhook_author`; this
                // record only fills the fields that are not shown.
                let placeholder = UserRecord {
                    id: rec.author_id,
                    username: String::new(),
                    global_name: None,
                    avatar: None,
                    bot: true,
                    flags: 0,
                    created_at: 0,
                };
                let mut message = convert::message(&rec, &placeholder, &mentions, None);
                convert::attach_mention_members(&mut message, mention_members);
                let message = Arc::new(message);
                let body = encode(&*message);
                a.apply(st, GuildEvent::MessageCreate { message, body: body.clone() });
                OpReply::ok_bytes(StatusCode::OK, &body)
            }))
        }
    }
}

/// The caller may manage webhooks in `channel`: a member who sees it, with
/// MANAGE_WEBHOOKS there.
fn manage_in(st: &State, user: UserId, channel: ChannelId) -> Result<(), OpReply> {
    let caller = st.caller(user)?;
    let c = st.channel(channel)?;
    caller.require_in(st, c, permission::MANAGE_WEBHOOKS).map(drop)
}

/// WEBHOOKS_UPDATE for each channel, to those who may see it.
fn updated(a: &mut GuildActor, st: &State, channels: &[ChannelId]) {
    for &c in channels {
        let body = encode(&json!({"guild_id": st.guild.id, "channel_id": c}));
        a.fan_out_in(st, c, "WEBHOOKS_UPDATE", &body, Intents::GUILD_WEBHOOKS);
    }
}
