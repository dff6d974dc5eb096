//! Gateway discovery, accounts, the current user and applications.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use protocol::ErrorCode;
use serde::Deserialize;
use serde_json::json;
use store::{StoreError, UserRecord};

use super::{json_bytes, ApiError, ApiResult, Caller, JsonBody};
use crate::auth::now_ms;
use crate::convert;
use crate::node::Node;

fn ok(v: serde_json::Value) -> Response {
    json_bytes(StatusCode::OK, v.to_string())
}

pub async fn gateway(State(node): State<Arc<Node>>) -> Response {
    ok(json!({ "url": node.config.gateway_url() }))
}

pub async fn gateway_bot(State(node): State<Arc<Node>>, _c: Caller) -> Response {
    ok(json!({
        "url": node.config.gateway_url(),
        "shards": 1,
        "session_start_limit": {
            "total": 1000,
            "remaining": 1000,
            "reset_after": 86_400_000u64,
            "max_concurrency": 1,
        },
    }))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct Register {
    username: Option<String>,
    password: Option<String>,
    global_name: Option<String>,
}

fn validate_username(u: &str) -> ApiResult<()> {
    let n = u.chars().count();
    if !(2..=32).contains(&n) {
        return Err(ApiError::field("username", "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 32 in length."));
    }
    if !u.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
        return Err(ApiError::field("username", "USERNAME_INVALID_CHARACTERS", "Username may use letters, digits, _ and ."));
    }
    Ok(())
}

fn validate_password(p: &str) -> ApiResult<()> {
    if !(8..=128).contains(&p.chars().count()) {
        return Err(ApiError::field("password", "BASE_TYPE_BAD_LENGTH", "Must be between 8 and 128 in length."));
    }
    Ok(())
}

pub async fn register(State(node): State<Arc<Node>>, JsonBody(r): JsonBody<Register>) -> ApiResult<Response> {
    let username = r.username.ok_or_else(|| ApiError::field("username", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let password = r.password.ok_or_else(|| ApiError::field("password", "BASE_TYPE_REQUIRED", "This field is required"))?;
    validate_username(&username)?;
    validate_password(&password)?;
    if node.store.user_by_username(&username).await?.is_some() {
        return Err(ApiError::field(
            "username",
            "USERNAME_ALREADY_TAKEN",
            "Username is unavailable. Try adding numbers, letters, underscores _ , or periods.",
        ));
    }
    let hash = node.auth.hash_password(password).await?;
    let user = UserRecord {
        id: node.ids.next().into(),
        username,
        global_name: r.global_name,
        avatar: None,
        bot: false,
        flags: 0,
        created_at: now_ms(),
    };
    match node.store.create_user(&user, Some(&hash)).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => {
            return Err(ApiError::field("username", "USERNAME_ALREADY_TAKEN", "Username is unavailable."));
        }
        Err(e) => return Err(e.into()),
    }
    let token = node.auth.issue_token(user.id).await?;
    Ok(json_bytes(StatusCode::CREATED, json!({ "token": token, "user_id": user.id }).to_string()))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct Login {
    login: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

pub async fn login(State(node): State<Arc<Node>>, JsonBody(l): JsonBody<Login>) -> ApiResult<Response> {
    let invalid = || ApiError::field("login", "INVALID_LOGIN", "Login or password is invalid.");
    let name = l.login.or(l.username).ok_or_else(|| ApiError::field("login", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let password = l.password.ok_or_else(|| ApiError::field("password", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let Some((user, hash)) = node.store.user_by_username(&name).await? else { return Err(invalid()) };
    if !node.auth.verify_password(password, hash).await? {
        return Err(invalid());
    }
    let token = node.auth.issue_token(user.id).await?;
    Ok(ok(json!({ "token": token, "user_id": user.id })))
}

pub async fn me(Caller(u): Caller) -> Json<protocol::model::CurrentUser> {
    Json(convert::current_user(&u))
}

/// Discord's bound on a display name, in characters.
const GLOBAL_NAME_MAX: usize = 32;

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyMe {
    global_name: Option<String>,
}

/// Only `global_name` is modifiable for now; the change shows after the token cache refreshes.
pub async fn modify_me(State(_node): State<Arc<Node>>, Caller(u): Caller, JsonBody(m): JsonBody<ModifyMe>) -> ApiResult<Response> {
    let mut u = (*u).clone();
    if let Some(g) = m.global_name {
        if g.chars().count() > GLOBAL_NAME_MAX {
            return Err(ApiError::field("global_name", "BASE_TYPE_MAX_LENGTH", &format!("Must be {GLOBAL_NAME_MAX} or fewer in length.")));
        }
        u.global_name = Some(g);
    }
    Ok(json_bytes(StatusCode::OK, serde_json::to_string(&convert::current_user(&u)).map_err(|e| ApiError::Internal(e.to_string()))?))
}

pub async fn get_user(State(node): State<Arc<Node>>, Caller(me): Caller, Path(id): Path<String>) -> ApiResult<Json<protocol::model::User>> {
    let id = super::user_or_me(&id, me.id)?;
    let u = node.store.get_user(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownUser))?;
    Ok(Json(convert::user(&u)))
}

pub async fn my_guilds(State(node): State<Arc<Node>>, Caller(u): Caller) -> ApiResult<Response> {
    let mut out = Vec::new();
    for g in node.store.guilds_of_user(u.id).await? {
        let Some(guild) = node.store.get_guild(g).await? else { continue };
        let access = super::guild_access(&node, g, u.id).await?;
        out.push(json!({
            "id": guild.id, "name": guild.name, "icon": guild.icon, "banner": null,
            "owner": guild.owner_id == u.id, "permissions": access.perms.to_string(), "features": [],
        }));
    }
    Ok(ok(json!(out)))
}

pub async fn application(State(node): State<Arc<Node>>, Caller(u): Caller) -> ApiResult<Response> {
    let app = node.store.application_of_bot(u.id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    let owner = match app.owner_id {
        Some(o) => node.store.get_user(o).await?.unwrap_or_else(|| (*u).clone()),
        None => (*u).clone(),
    };
    Ok(ok(json!({
        "id": app.id,
        "name": app.name,
        "icon": null,
        "description": "",
        "summary": "",
        "type": null,
        "bot_public": true,
        "bot_require_code_grant": false,
        "verify_key": app.verify_key,
        "flags": app.flags,
        "owner": convert::user(&owner),
        "team": null,
        "bot": convert::user(&u),
        "rpc_origins": [],
        "tags": [],
        "redirect_uris": [],
        "interactions_endpoint_url": null,
        "approximate_guild_count": node.store.guilds_of_user(u.id).await?.len(),
    })))
}
