//! The audit log's REST side: `X-Audit-Log-Reason` for every route (a
//! middleware keeps it for the request, and [`super::ask_actor_reply`]
//! hands it to the actor that writes the entry), and
//! `GET /guilds/{guild_id}/audit-logs`.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use protocol::model::permission;
use protocol::{ActorKey, ErrorCode, GuildId, Snowflake, UserId};
use serde::Deserialize;
use serde_json::value::RawValue;
use store::AuditQuery;

use super::{guild_access, json_bytes, parse_id, ApiError, ApiResult, Caller, Query};
use node::convert;
use node::route::ops::{audit_kind, AuditNote, GuildAction};
use node::route::Action;
use node::Node;

/// Discord's bound on a reason.
const MAX_REASON_CHARS: usize = 512;
/// `limit`: Discord's default and largest page.
const PAGE_DEFAULT: u32 = 50;
const PAGE_MAX: u32 = 100;

tokio::task_local! {
    static REASON: Option<String>;
}

/// Keeps the request's `X-Audit-Log-Reason` (percent-decoded, as clients
/// encode it) while the request is handled.
pub async fn with_reason(req: Request, next: Next) -> Response {
    let reason = req.headers().get("x-audit-log-reason").and_then(|v| decode(v.as_bytes()));
    REASON.scope(reason, next.run(req)).await
}

/// The reason the current request gave, if any.
pub fn reason() -> Option<String> {
    REASON.try_with(Clone::clone).ok().flatten()
}

fn decode(raw: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (raw[i], raw.get(i + 1).copied().and_then(hex), raw.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    let s: String = String::from_utf8_lossy(&out).chars().take(MAX_REASON_CHARS).collect();
    (!s.trim().is_empty()).then_some(s)
}

/// Records an entry for a change made outside the guild's actor (already
/// committed): the actor writes and announces it. A failure is logged; the
/// change stands.
pub async fn note(node: &Arc<Node>, guild: GuildId, user: UserId, note: AuditNote) {
    let action = Action::Guild(GuildAction::Record(Box::new(note)));
    if let Err(e) = super::ask_actor_reply(node, ActorKey::guild(guild), user, action).await {
        tracing::warn!(guild = %guild, error = ?e, "audit log entry not recorded");
    }
}

/// An invite's entry (INVITE_CREATE with new values, INVITE_DELETE with old).
pub fn invite_note(action: u16, i: &store::InviteRecord) -> AuditNote {
    let fields = [
        ("code", serde_json::Value::from(i.code.clone())),
        ("channel_id", i.channel_id.0.to_string().into()),
        ("inviter_id", i.inviter_id.map(|u| u.0.to_string()).into()),
        ("uses", i.uses.into()),
        ("max_uses", i.max_uses.into()),
        ("max_age", i.max_age.into()),
        ("temporary", false.into()),
    ];
    let changes =
        if action == audit_kind::INVITE_CREATE { AuditNote::diff(None, Some(&fields)) } else { AuditNote::diff(Some(&fields), None) };
    AuditNote::new(action, None).with(changes)
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct AuditLogQuery {
    /// Entries by this user.
    user_id: Option<String>,
    /// Entries of this type.
    action_type: Option<u16>,
    /// Entries before this id (newest first).
    before: Option<String>,
    /// Entries after this id (oldest first, without `before`).
    after: Option<String>,
    /// 1 to 100; 50 if absent.
    limit: Option<u32>,
}

fn id_field(v: &Option<String>, field: &str) -> ApiResult<Option<u64>> {
    v.as_deref().filter(|s| !s.is_empty()).map(|s| super::snowflake_param(field, s)).transpose()
}

/// `GET /guilds/{guild_id}/audit-logs` (VIEW_AUDIT_LOG): entries with the
/// users and webhooks they name.
pub async fn list(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<AuditLogQuery>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    guild_access(&node, gid, u.id).await?.require(permission::VIEW_AUDIT_LOG)?;
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {PAGE_MAX}.")));
    }
    let query = AuditQuery {
        user_id: id_field(&q.user_id, "user_id")?.map(UserId),
        action_type: q.action_type,
        before: id_field(&q.before, "before")?.map(Snowflake),
        after: id_field(&q.after, "after")?.map(Snowflake),
        limit,
    };
    let entries = node.store.audit_log(gid, &query).await?;
    // The users and webhooks the entries name (as actors or targets).
    let mut named: Vec<u64> = Vec::new();
    let mut raw: Vec<&RawValue> = Vec::with_capacity(entries.len());
    for e in &entries {
        let v: &RawValue = serde_json::from_str(&e.entry).map_err(ApiError::internal)?;
        #[derive(Deserialize)]
        struct Ids {
            user_id: Option<Snowflake>,
            target_id: Option<Snowflake>,
        }
        let ids: Ids = serde_json::from_str(v.get()).map_err(ApiError::internal)?;
        named.extend(ids.user_id.into_iter().chain(ids.target_id).map(|s| s.0));
        raw.push(v);
    }
    named.sort_unstable();
    named.dedup();
    let users = node.store.get_users(&named.iter().map(|&n| UserId(n)).collect::<Vec<_>>()).await?;
    let names_webhooks = entries.iter().any(|e| (audit_kind::WEBHOOK_CREATE..=audit_kind::WEBHOOK_DELETE).contains(&e.action_type));
    let webhooks: Vec<_> = if names_webhooks {
        let hooks = node.store.webhooks_of_guild(gid).await?;
        hooks.iter().filter(|w| named.binary_search(&w.id.0).is_ok()).map(super::webhooks::public_json).collect()
    } else {
        Vec::new()
    };
    let body = serde_json::json!({
        "audit_log_entries": raw,
        "users": users.iter().map(convert::user).collect::<Vec<_>>(),
        "webhooks": webhooks,
        "integrations": [],
        "threads": [],
        "application_commands": [],
        "auto_moderation_rules": [],
        "guild_scheduled_events": [],
    });
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&body).map_err(ApiError::internal)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reasons_are_percent_decoded_and_bounded() {
        assert_eq!(super::decode(b"spam%20and%20%F0%9F%98%80").as_deref(), Some("spam and 😀"));
        assert_eq!(super::decode(b"100%").as_deref(), Some("100%"));
        assert_eq!(super::decode(b"  "), None);
        assert_eq!(super::decode(&[b'a'; 600]).map(|s| s.chars().count()), Some(512));
    }
}
