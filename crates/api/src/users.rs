//! Gateway discovery, accounts, the current user and applications.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::{ErrorCode, UserId};
use serde::Deserialize;
use serde_json::json;
use store::{StoreError, UserRecord};

use super::{json_bytes, ApiError, ApiResult, Caller, ClientIp, JsonBody, MeCaller};
use node::auth::now_ms;
use node::convert;
use node::{Node, Notice};

fn ok(v: serde_json::Value) -> Response {
    json_bytes(StatusCode::OK, v.to_string())
}

pub async fn gateway(State(node): State<Arc<Node>>) -> Response {
    ok(json!({ "url": node.config.gateway_url() }))
}

pub async fn gateway_bot(State(node): State<Arc<Node>>, Caller(u): Caller, headers: HeaderMap) -> ApiResult<Response> {
    let gw = &node.config.gateway;
    // A bot's session starts are counted per token (see `gateway::handshake`).
    let (remaining, reset_after) = match headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        Some(h) if u.bot => {
            let token = node::auth::hash_token(node::auth::split_header(h).0);
            node.store.session_starts_left(&token, now_ms(), &node.config.start_limits()).await?
        }
        _ => (gw.session_start_limit, gw.session_start_period_ms),
    };
    Ok(ok(json!({
        "url": node.config.gateway_url(),
        "shards": 1,
        "session_start_limit": {
            "total": gw.session_start_limit,
            "remaining": remaining,
            "reset_after": reset_after,
            "max_concurrency": gw.identify_max_concurrency.max(1),
        },
    })))
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

fn validate_password(field: &str, p: &str) -> ApiResult<()> {
    if !(8..=128).contains(&p.chars().count()) {
        return Err(ApiError::field(field, "BASE_TYPE_BAD_LENGTH", "Must be between 8 and 128 in length."));
    }
    Ok(())
}

fn validate_global_name(g: &str) -> ApiResult<()> {
    if g.chars().count() > GLOBAL_NAME_MAX {
        return Err(ApiError::field("global_name", "BASE_TYPE_MAX_LENGTH", &format!("Must be {GLOBAL_NAME_MAX} or fewer in length.")));
    }
    Ok(())
}

fn username_taken() -> ApiError {
    ApiError::field(
        "username",
        "USERNAME_ALREADY_TAKEN",
        "Username is unavailable. Try adding numbers, letters, underscores _ , or periods.",
    )
}

/// Registration's budget per client address (`auth.register_per_address`),
/// spent before the body is read.
pub struct RegisterBudget;

impl FromRequestParts<Arc<Node>> for RegisterBudget {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let ClientIp(ip) = ClientIp::from_request_parts(parts, node).await?;
        super::ratelimit::budget(&node.login_limits.register_by_address, &["register", &ip.to_string()])?;
        Ok(RegisterBudget)
    }
}

/// Login's budget per client address (`auth.login_per_address`), spent
/// before the body is read.
pub struct LoginBudget;

impl FromRequestParts<Arc<Node>> for LoginBudget {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let ClientIp(ip) = ClientIp::from_request_parts(parts, node).await?;
        super::ratelimit::budget(&node.login_limits.login_by_address, &["login", &ip.to_string()])?;
        Ok(LoginBudget)
    }
}

/// What a token was issued to: the request's User-Agent.
fn client_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok())
}

pub async fn register(
    State(node): State<Arc<Node>>,
    _: RegisterBudget,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(r): JsonBody<Register>,
) -> ApiResult<Response> {
    let username = r.username.ok_or_else(|| ApiError::field("username", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let password = r.password.ok_or_else(|| ApiError::field("password", "BASE_TYPE_REQUIRED", "This field is required"))?;
    validate_username(&username)?;
    validate_password("password", &password)?;
    if let Some(g) = &r.global_name {
        validate_global_name(g)?;
    }
    if node.store.user_by_username(&username).await?.is_some() {
        return Err(username_taken());
    }
    let hash = node.auth.hash_password(ip, password).await?;
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
        Err(StoreError::Conflict) => return Err(username_taken()),
        Err(e) => return Err(e.into()),
    }
    let token = node.auth.issue_token(user.id, client_of(&headers)).await?;
    Ok(json_bytes(StatusCode::CREATED, json!({ "token": token, "user_id": user.id }).to_string()))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct Login {
    login: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

pub async fn login(
    State(node): State<Arc<Node>>,
    _: LoginBudget,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(l): JsonBody<Login>,
) -> ApiResult<Response> {
    let invalid = || ApiError::field("login", "INVALID_LOGIN", "Login or password is invalid.");
    let name = l.login.or(l.username).ok_or_else(|| ApiError::field("login", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let password = l.password.ok_or_else(|| ApiError::field("password", "BASE_TYPE_REQUIRED", "This field is required"))?;
    // Per account, from anywhere: a guesser spread over addresses meets it too.
    super::ratelimit::budget(&node.login_limits.login_by_account, &["login-account", &name.to_lowercase()])?;
    let found = node.store.user_by_username(&name).await?;
    // An unknown name is checked against a dummy hash: the same work.
    let (user, hash) = match found {
        Some((u, h)) => (Some(u), Some(h)),
        None => (None, None),
    };
    if !node.auth.verify_password(ip, password, hash).await? {
        return Err(invalid());
    }
    let user = user.ok_or_else(invalid)?;
    let token = node.auth.issue_token(user.id, client_of(&headers)).await?;
    Ok(ok(json!({ "token": token, "user_id": user.id })))
}

/// The hash of the token this request carries.
fn own_token(headers: &HeaderMap) -> ApiResult<[u8; 32]> {
    let h = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(ApiError::unauthorized)?;
    Ok(node::auth::hash_token(node::auth::split_header(h).0))
}

/// `POST /auth/logout`: revokes the calling token, on every node. People
/// only: a bot's token is its only one.
pub async fn logout(State(node): State<Arc<Node>>, Caller(u): Caller, headers: HeaderMap) -> ApiResult<Response> {
    if u.bot {
        return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
    }
    let gone = node.store.revoke_tokens(u.id, &[own_token(&headers)?]).await?;
    node.notify(Notice::revoke_tokens(&gone));
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The public id of a token in the session list: not its hash (which the
/// store keys by), a hash of that.
fn session_id_hash(token_hash: &[u8; 32]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(token_hash);
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &d[..18])
}

/// `GET /auth/sessions`: the account's logged-in sessions (one per token),
/// in the shape of Discord's client.
pub async fn sessions(State(node): State<Arc<Node>>, Caller(u): Caller, headers: HeaderMap) -> ApiResult<Response> {
    if u.bot {
        return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
    }
    let own = own_token(&headers)?;
    let list: Vec<_> = node
        .store
        .tokens_of_user(u.id)
        .await?
        .iter()
        .map(|t| {
            json!({
                "id_hash": session_id_hash(&t.hash),
                "approx_last_used_time": protocol::model::iso8601(t.created_at),
                "created_at": protocol::model::iso8601(t.created_at),
                "expires_at": t.expires_at.map(protocol::model::iso8601),
                "client_info": { "os": t.client.as_deref(), "platform": t.client.as_deref(), "location": null },
                "current": t.hash == own,
            })
        })
        .collect();
    Ok(ok(json!({ "user_sessions": list })))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct LogoutSessions {
    session_id_hashes: Vec<String>,
}

/// `POST /auth/sessions/logout`: revokes the named sessions of the account.
pub async fn logout_sessions(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    _: super::guard::Person,
    JsonBody(b): JsonBody<LogoutSessions>,
) -> ApiResult<Response> {
    let mine = node.store.tokens_of_user(u.id).await?;
    let pick: Vec<[u8; 32]> = mine.iter().filter(|t| b.session_id_hashes.contains(&session_id_hash(&t.hash))).map(|t| t.hash).collect();
    let gone = node.store.revoke_tokens(u.id, &pick).await?;
    node.notify(Notice::revoke_tokens(&gone));
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn me(State(_node): State<Arc<Node>>, caller: MeCaller) -> ApiResult<Json<protocol::model::CurrentUser>> {
    let u = caller.with_scope("identify")?;
    Ok(Json(convert::current_user(&u)))
}

/// Discord's bound on a display name, in characters.
const GLOBAL_NAME_MAX: usize = 32;

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyMe {
    username: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    global_name: Option<Option<String>>,
    /// A data URI of a PNG, JPEG, GIF or WebP image; `null` removes it.
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    avatar: Option<Option<String>>,
    /// The current password: needed to change the username or the password.
    password: Option<String>,
    new_password: Option<String>,
}

/// `PATCH /users/@me`: username (unique; people give their password),
/// display name, avatar, password (every other token is revoked). The new
/// profile goes out as USER_UPDATE to the user's sessions and
/// GUILD_MEMBER_UPDATE in each of their guilds.
pub async fn modify_me(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(m): JsonBody<ModifyMe>,
) -> ApiResult<Response> {
    let mut next = (*u).clone();
    if let Some(name) = &m.username {
        validate_username(name)?;
        next.username = name.clone();
    }
    if let Some(g) = &m.global_name {
        if let Some(g) = g {
            validate_global_name(g)?;
        }
        next.global_name = g.clone().filter(|g| !g.is_empty());
    }
    if let Some(p) = &m.new_password {
        validate_password("new_password", p)?;
    }
    if u.bot && (m.new_password.is_some() || m.password.is_some()) {
        return Err(ApiError::field("password", "BASE_TYPE_INVALID", "Bots have no password."));
    }
    let avatar = match &m.avatar {
        Some(Some(uri)) => {
            let (bytes, kind) = node::emoji::decode_image_uri(uri, node.config.limits.max_avatar_bytes).map_err(|e| match e {
                node::emoji::ImageError::TooLarge => ApiError::field(
                    "avatar",
                    "BINARY_TYPE_MAX_SIZE",
                    &format!("File cannot be larger than {} bytes.", node.config.limits.max_avatar_bytes),
                ),
                node::emoji::ImageError::Invalid => ApiError::field("avatar", "IMAGE_INVALID", "Invalid image data"),
            })?;
            let hash = avatar_hash(&bytes, node::emoji::animated(kind, &bytes));
            next.avatar = Some(hash.clone());
            Some((hash, bytes))
        }
        Some(None) => {
            next.avatar = None;
            None
        }
        None => None,
    };
    // People prove who they are to change how they log in.
    let renamed = !u.bot && next.username != u.username;
    if renamed || m.new_password.is_some() {
        let given = m.password.clone().ok_or_else(|| ApiError::field("password", "BASE_TYPE_REQUIRED", "This field is required"))?;
        let stored = node.store.password_of(u.id).await?;
        if stored.is_none() || !node.auth.verify_password(ip, given, stored).await? {
            return Err(ApiError::field("password", "PASSWORD_DOES_NOT_MATCH", "Password does not match."));
        }
    }
    if let Some((hash, bytes)) = &avatar {
        let path = avatar_path(&node.config, u.id, hash);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|e| ApiError::internal(format!("avatar directory: {e}")))?;
        }
        tokio::fs::write(&path, bytes).await.map_err(|e| ApiError::internal(format!("avatar file: {e}")))?;
    }
    if next != *u {
        match node.store.update_user(&next).await {
            Ok(()) => {}
            Err(StoreError::Conflict) => return Err(username_taken()),
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(p) = m.new_password {
        let hash = node.auth.hash_password(ip, p).await?;
        node.store.set_password(u.id, &hash).await?;
        let gone = node.store.revoke_other_tokens(u.id, &own_token(&headers)?).await?;
        node.notify(Notice::revoke_tokens(&gone));
    }
    let body = serde_json::to_string(&convert::current_user(&next)).map_err(ApiError::internal)?;
    if next != *u {
        // Every node's token cache holds the old record: drop it there.
        let tokens: Vec<[u8; 32]> = node.store.tokens_of_user(u.id).await?.iter().map(|t| t.hash).collect();
        node.notify(Notice::forget_tokens(&tokens));
        let raw = serde_json::value::RawValue::from_string(body.clone()).map_err(ApiError::internal)?;
        node.notify(Notice::UserUpdate { user: u.id, body: raw });
        for g in node.store.guilds_of_user(u.id).await? {
            super::publish(&node, g, guild::GuildEvent::UserUpdate(next.clone()));
        }
    }
    Ok(json_bytes(StatusCode::OK, body))
}

/// An avatar's name: the first 32 hex digits of its SHA-256, `a_` first if
/// it moves (as Discord names animated avatars).
pub(crate) fn avatar_hash(bytes: &[u8], animated: bool) -> String {
    use sha2::Digest;
    let h = hex::encode(&sha2::Sha256::digest(bytes)[..16]);
    if animated {
        format!("a_{h}")
    } else {
        h
    }
}

/// Where an avatar's file lives: beside the uploaded files (the directory
/// a cluster's nodes share), `avatars/<user>/<hash>`.
fn avatar_path(config: &config::Config, user: UserId, hash: &str) -> std::path::PathBuf {
    image_path(config, "avatars", user.0, hash)
}

/// Where a picture of ours lives: `<kind>/<owner>/<hash>` beside the
/// uploaded files (avatars of users, icons of guilds).
pub(crate) fn image_path(config: &config::Config, kind: &str, owner: u64, hash: &str) -> std::path::PathBuf {
    let dir = config.attachments.dir.clone().unwrap_or_else(|| config.data_dir.join("attachments"));
    dir.join(kind).join(owner.to_string()).join(hash)
}

/// `GET /avatars/{user_id}/{hash}.{png|jpg|webp|gif}`: a user's avatar, in
/// the format it was uploaded (the extension is not a conversion request).
pub async fn avatar(State(node): State<Arc<Node>>, Path((user, file)): Path<(String, String)>) -> Response {
    serve_image(&node, "avatars", &user, &file).await
}

/// A picture of ours by its owner and hashed name (`avatars`, `icons`).
pub(crate) async fn serve_image(node: &Node, kind: &str, owner: &str, file: &str) -> Response {
    let not_found = || ApiError::not_found(ErrorCode::UnknownRoute).into_response();
    let Ok(owner) = owner.parse::<u64>() else { return not_found() };
    let hash = file.split_once('.').map_or(file, |(h, _)| h);
    let plain = hash.strip_prefix("a_").unwrap_or(hash);
    // Only names we made: no path separators or dots can reach the disk.
    if plain.len() != 32 || !plain.bytes().all(|b| b.is_ascii_hexdigit()) {
        return not_found();
    }
    let Ok(bytes) = tokio::fs::read(image_path(&node.config, kind, owner, hash)).await else { return not_found() };
    let kind = node::emoji::ImageKind::sniff(&bytes).unwrap_or(node::emoji::ImageKind::Png);
    let mut r = (StatusCode::OK, bytes).into_response();
    let h = r.headers_mut();
    h.insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static(kind.content_type()));
    // An avatar's name is its content's hash: it never changes.
    h.insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("public, max-age=31536000, immutable"));
    h.insert(axum::http::header::X_CONTENT_TYPE_OPTIONS, axum::http::HeaderValue::from_static("nosniff"));
    r
}

pub async fn get_user(State(node): State<Arc<Node>>, Caller(me): Caller, Path(id): Path<String>) -> ApiResult<Json<protocol::model::User>> {
    let id = super::user_or_me(&id, me.id)?;
    let u = node.store.get_user(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownUser))?;
    Ok(Json(convert::user(&u)))
}

pub async fn my_guilds(State(node): State<Arc<Node>>, caller: MeCaller) -> ApiResult<Response> {
    let u = caller.with_scope("guilds")?;
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
        "verify_key": node::signing::verify_key(&node.blobs.signer, app.id),
        "flags": app.flags,
        "owner": convert::user(&owner),
        "team": null,
        "bot": convert::user(&u),
        "rpc_origins": [],
        "tags": [],
        "redirect_uris": [],
        "interactions_endpoint_url": app.interactions_endpoint_url,
        "approximate_guild_count": node.store.guilds_of_user(u.id).await?.len(),
    })))
}
