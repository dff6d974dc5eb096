//! OAuth2, as Discord's own client and bots use it.
//!
//! - **Adding a bot** (`scope=bot`): a person with MANAGE_GUILD in a guild
//!   authorizes an application's bot into it (`POST /oauth2/authorize` with
//!   `{guild_id, permissions, authorize: true}`, what Discord's consent page
//!   sends); the bot joins with a managed role carrying the permissions.
//!   `GET` on the same route answers what a consent page shows. This is the
//!   only way a bot gets into a guild.
//! - **The authorization-code grant** (`identify`, `guilds`, `guilds.join`):
//!   a person consents, the application's redirect URI gets a code, the
//!   application exchanges it with its client secret at `POST /oauth2/token`
//!   for an access token. With `guilds.join`, the application's bot may add
//!   that person to its guilds (`PUT /guilds/{g}/members/{user}` with
//!   `access_token`); `identify` and `guilds` let the token read
//!   `/users/@me` and `/users/@me/guilds` (`Authorization: Bearer`).
//!
//! Codes, tokens and client secrets are stored as SHA-256 hashes only.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::model::permission;
use protocol::{ApplicationId, ErrorCode, GuildId, UserId};
use serde::Deserialize;
use serde_json::{json, Value};
use store::{ApplicationRecord, GrantKind, GrantRecord, OAuthApp, RoleRecord, UserRecord};

use super::guilds::StrOrInt;
use super::{ask, json_bytes, ApiError, ApiResult, Caller, JsonBody, Query};
use node::auth::{hash_token, new_secret, now_ms};
use node::convert;
use node::route::ops::MemberAction;
use node::route::Action;
use node::Node;

/// The scopes throng knows; any other is refused.
const SCOPES: &[&str] = &["bot", "applications.commands", "identify", "email", "guilds", "guilds.join", "guilds.members.read"];

/// Largest number of redirect URIs an application may register.
const MAX_REDIRECT_URIS: usize = 10;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct AuthorizeQuery {
    client_id: Option<String>,
    /// Space- (or `+`-) separated scopes.
    scope: Option<String>,
    /// The bot's permissions, as a decimal string (a default for the page).
    permissions: Option<String>,
    /// `code` for the authorization-code grant.
    response_type: Option<String>,
    redirect_uri: Option<String>,
    state: Option<String>,
    /// A guild to preselect on the consent page.
    guild_id: Option<String>,
}

/// A request's scopes and application, checked.
struct Asked {
    app: ApplicationRecord,
    bot: UserRecord,
    scopes: Vec<String>,
}

impl Asked {
    fn has(&self, s: &str) -> bool {
        self.scopes.iter().any(|x| x == s)
    }
}

async fn asked(node: &Node, q: &AuthorizeQuery) -> ApiResult<Asked> {
    let unknown = || ApiError::not_found(ErrorCode::UnknownApplication);
    let id: u64 = q
        .client_id
        .as_deref()
        .ok_or_else(|| ApiError::field("client_id", "BASE_TYPE_REQUIRED", "This field is required"))?
        .parse()
        .map_err(|_| unknown())?;
    // An application's id is its bot's user id.
    let app = node.store.application_of_bot(UserId(id)).await?.ok_or_else(unknown)?;
    let bot = node.store.get_user(app.bot_user_id).await?.ok_or_else(unknown)?;
    let scopes: Vec<String> = q.scope.as_deref().unwrap_or("").split([' ', '+']).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if scopes.is_empty() {
        return Err(ApiError::field("scope", "BASE_TYPE_REQUIRED", "This field is required"));
    }
    if let Some(bad) = scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
        return Err(ApiError::field("scope", "SCOPE_INVALID", &format!("Invalid scope: {bad}")));
    }
    Ok(Asked { app, bot, scopes })
}

fn application_json(node: &Node, app: &ApplicationRecord) -> Value {
    json!({
        "id": app.id, "name": app.name, "icon": null, "description": "", "summary": "",
        "bot_public": true, "bot_require_code_grant": false, "verify_key": node::signing::verify_key(&node.blobs.signer, app.id), "flags": app.flags,
    })
}

/// People only: bots and OAuth2 tokens cannot authorize anything.
fn person(u: &UserRecord) -> ApiResult<()> {
    if u.bot {
        return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
    }
    Ok(())
}

/// `GET /oauth2/authorize`: what a consent page shows: the application,
/// its bot, the caller, and (with `bot`) the caller's guilds where they
/// may add it (MANAGE_GUILD), with their permissions there.
pub async fn authorize_info(State(node): State<Arc<Node>>, Caller(u): Caller, Query(q): Query<AuthorizeQuery>) -> ApiResult<Response> {
    person(&u)?;
    let a = asked(&node, &q).await?;
    let mut guilds = Vec::new();
    if a.has("bot") {
        for g in node.store.guilds_of_user(u.id).await? {
            let access = super::guild_access(&node, g, u.id).await?;
            if access.require(permission::MANAGE_GUILD).is_ok() {
                guilds.push(json!({
                    "id": g, "name": access.guild.name, "icon": access.guild.icon,
                    "permissions": access.perms.to_string(),
                }));
            }
        }
    }
    let body = json!({
        "application": application_json(&node, &a.app),
        "bot": a.has("bot").then(|| convert::user(&a.bot)),
        "user": convert::user(&u),
        "guilds": guilds,
        "authorized": false,
        "redirect_uri": q.redirect_uri,
        "scopes": a.scopes,
        "permissions": q.permissions.unwrap_or_else(|| "0".into()),
        "guild_id": q.guild_id,
    });
    Ok(json_bytes(StatusCode::OK, body.to_string()))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct AuthorizeBody {
    /// The guild to add the bot to (`bot` scope).
    guild_id: Option<protocol::Snowflake>,
    /// The bot's permissions in it, as a decimal string or a number.
    permissions: Option<StrOrInt>,
    /// `false`: the person declined.
    authorize: Option<bool>,
}

/// `POST /oauth2/authorize`: the caller consents. With `bot`, the bot joins
/// `guild_id` with a managed role of `permissions` (the caller needs
/// MANAGE_GUILD there and every permission given); with
/// `response_type=code`, an authorization code goes to the redirect URI.
/// Answers `{location}`: where the page goes next.
pub async fn authorize(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Query(q): Query<AuthorizeQuery>,
    JsonBody(b): JsonBody<AuthorizeBody>,
) -> ApiResult<Response> {
    person(&u)?;
    let a = asked(&node, &q).await?;
    let code_grant = q.response_type.as_deref() == Some("code");
    if let Some(t) = q.response_type.as_deref().filter(|t| *t != "code") {
        return Err(ApiError::field("response_type", "BASE_TYPE_CHOICES", &format!("Unsupported response type: {t}")));
    }
    let oauth = node.store.oauth_app(a.app.id).await?.unwrap_or_default();
    let redirect = redirect_uri(&oauth, q.redirect_uri.as_deref(), code_grant)?;
    let mut to = redirect.clone().unwrap_or_else(|| format!("{}/oauth2/authorized", node::attachments::http_base(&node.config)));
    let mut params: Vec<(&str, String)> = Vec::new();
    if b.authorize == Some(false) {
        params.push(("error", "access_denied".into()));
        params.push(("error_description", "The resource owner or authorization server denied the request".into()));
    } else {
        if a.has("bot") {
            let guild = b.guild_id.ok_or_else(|| ApiError::field("guild_id", "BASE_TYPE_REQUIRED", "This field is required"))?;
            let perms = match b.permissions.as_ref() {
                Some(p) => p.bits_of("permissions")?,
                None => q
                    .permissions
                    .as_deref()
                    .unwrap_or("0")
                    .parse()
                    .map_err(|_| ApiError::field("permissions", "BASE_TYPE_INVALID", "Invalid permission bits"))?,
            } & permission::ALL;
            add_bot(&node, u.id, GuildId(guild.0), &a, perms).await?;
            params.push(("guild_id", guild.0.to_string()));
            params.push(("permissions", perms.to_string()));
        }
        if code_grant {
            let (code, hash) = new_secret();
            node.store
                .put_grant(&GrantRecord {
                    hash,
                    kind: GrantKind::Code,
                    application_id: a.app.id,
                    user_id: u.id,
                    scopes: a.scopes.clone(),
                    redirect_uri: redirect.clone(),
                    expires_at: now_ms() + node.config.oauth2.code_ttl_s * 1000,
                })
                .await?;
            params.push(("code", code));
        }
    }
    if let Some(s) = q.state {
        params.push(("state", s));
    }
    if !params.is_empty() {
        to.push(if to.contains('?') { '&' } else { '?' });
        to.push_str(&form_urlencoded::Serializer::new(String::new()).extend_pairs(params).finish());
    }
    Ok(json_bytes(StatusCode::OK, json!({ "location": to }).to_string()))
}

/// The redirect URI a code goes to: one the application registered (the
/// only one if the request names none). Without the code grant, a given
/// URI must be registered too, and none is needed.
fn redirect_uri(o: &OAuthApp, given: Option<&str>, needed: bool) -> ApiResult<Option<String>> {
    let invalid = || ApiError::field("redirect_uri", "REDIRECT_URI_INVALID", "Invalid \"redirect_uri\" in request.");
    match given {
        Some(g) if o.redirect_uris.iter().any(|r| r == g) => Ok(Some(g.to_owned())),
        Some(_) => Err(invalid()),
        None if !needed => Ok(None),
        None if o.redirect_uris.len() == 1 => Ok(o.redirect_uris.first().cloned()),
        None => Err(invalid()),
    }
}

/// Asks the guild's actor to take the bot in with its managed role.
async fn add_bot(node: &Arc<Node>, by: UserId, guild: GuildId, a: &Asked, perms: u64) -> ApiResult<()> {
    let role = RoleRecord {
        id: node.ids.next().into(),
        guild_id: guild,
        name: a.bot.username.clone(),
        color: 0,
        hoist: false,
        position: 0,
        permissions: perms,
        mentionable: false,
        bot_id: Some(a.bot.id),
    };
    let action = MemberAction::AuthorizeBot { bot: Box::new(a.bot.clone()), role: Box::new(role), joined_at: now_ms() };
    let answer = ask(node, guild, by, Action::Member(action)).await?;
    if !answer.status().is_success() {
        return Err(ApiError::Passed(Box::new(answer)));
    }
    Ok(())
}

/// The fields of `POST /oauth2/token`'s form.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct TokenForm {
    /// `authorization_code` or `refresh_token`.
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    refresh_token: Option<String>,
    /// The application, unless given as HTTP Basic credentials.
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// An OAuth2 error of the token endpoint (RFC 6749 5.2), as Discord sends it.
fn grant_error(status: StatusCode, error: &str, description: &str) -> Response {
    json_bytes(status, json!({ "error": error, "error_description": description }).to_string())
}

/// `POST /oauth2/token` (form-encoded): `authorization_code` or
/// `refresh_token`, with the application's client id and secret in the
/// body or as HTTP Basic credentials. Answers an access token (and a
/// refresh token) for the scopes consented to.
pub async fn token(State(node): State<Arc<Node>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    match token_inner(&node, &headers, &body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn token_inner(node: &Node, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let fields: serde_json::Map<String, Value> =
        form_urlencoded::parse(body).into_owned().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k, Value::String(v))).collect();
    let Ok(form) = serde_json::from_value::<TokenForm>(Value::Object(fields)) else {
        return Ok(grant_error(StatusCode::BAD_REQUEST, "invalid_request", "Malformed request."));
    };
    let (client_id, secret) = match basic_credentials(headers) {
        Some(c) => c,
        None => (form.client_id.clone().unwrap_or_default(), form.client_secret.clone().unwrap_or_default()),
    };
    let bad_client = || grant_error(StatusCode::UNAUTHORIZED, "invalid_client", "Invalid client credentials");
    let Ok(app_id) = client_id.parse::<u64>().map(ApplicationId) else { return Ok(bad_client()) };
    let Some(oauth) = node.store.oauth_app(app_id).await? else { return Ok(bad_client()) };
    match oauth.secret_hash {
        Some(h) if same(&h, &hash_token(&secret)) => {}
        _ => return Ok(bad_client()),
    }
    let invalid_grant = || grant_error(StatusCode::BAD_REQUEST, "invalid_grant", "Invalid \"code\" in request.");
    let now = now_ms();
    let grant = match form.grant_type.as_deref() {
        Some("authorization_code") => {
            let Some(code) = form.code.as_deref() else { return Ok(invalid_grant()) };
            let Some(g) = node.store.use_grant(&hash_token(code), GrantKind::Code, now).await? else { return Ok(invalid_grant()) };
            // The redirect URI the code was made for must be named again.
            if g.redirect_uri.is_some() && g.redirect_uri != form.redirect_uri {
                return Ok(grant_error(StatusCode::BAD_REQUEST, "invalid_grant", "Invalid \"redirect_uri\" in request."));
            }
            g
        }
        Some("refresh_token") => {
            let Some(t) = form.refresh_token.as_deref() else { return Ok(invalid_grant()) };
            let Some(g) = node.store.use_grant(&hash_token(t), GrantKind::Refresh, now).await? else { return Ok(invalid_grant()) };
            g
        }
        Some(_) => return Ok(grant_error(StatusCode::BAD_REQUEST, "unsupported_grant_type", "Unsupported grant type")),
        None => return Ok(grant_error(StatusCode::BAD_REQUEST, "invalid_request", "Missing \"grant_type\" in request.")),
    };
    if grant.application_id != app_id {
        return Ok(invalid_grant());
    }
    let ttl = node.config.oauth2.access_token_ttl_s;
    let (access, access_hash) = new_secret();
    let (refresh, refresh_hash) = new_secret();
    let mut g = GrantRecord { hash: access_hash, kind: GrantKind::Access, expires_at: now + ttl * 1000, redirect_uri: None, ..grant };
    node.store.put_grant(&g).await?;
    // A refresh token outlives its access token (Discord: about a month more).
    g.hash = refresh_hash;
    g.kind = GrantKind::Refresh;
    g.expires_at = now + 4 * ttl * 1000;
    node.store.put_grant(&g).await?;
    let body = json!({
        "access_token": access, "token_type": "Bearer", "expires_in": ttl,
        "refresh_token": refresh, "scope": g.scopes.join(" "),
    });
    Ok(json_bytes(StatusCode::OK, body.to_string()))
}

/// Equal byte strings, in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Authorization: Basic base64(client_id:client_secret)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let h = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Basic ")?;
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, h.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

/// The user and scopes of a live OAuth2 access token (`Authorization: Bearer`).
pub async fn bearer(node: &Node, token: &str) -> ApiResult<Option<(Arc<UserRecord>, Arc<[String]>)>> {
    let Some(g) = node.store.use_grant(&hash_token(token), GrantKind::Access, now_ms()).await? else { return Ok(None) };
    let Some(u) = node.store.get_user(g.user_id).await? else { return Ok(None) };
    Ok(Some((Arc::new(u), g.scopes.into())))
}

/// A `guilds.join` token that `user` gave the application of bot `bot`:
/// else 403 50025.
pub async fn check_join_token(node: &Node, token: &str, user: UserId, bot: UserId) -> ApiResult<()> {
    let invalid = || ApiError::forbidden(ErrorCode::InvalidOAuthToken);
    let g = node.store.use_grant(&hash_token(token), GrantKind::Access, now_ms()).await?.ok_or_else(invalid)?;
    let app = node.store.application_of_bot(bot).await?.ok_or_else(invalid)?;
    if g.user_id != user || g.application_id != app.id || !g.scopes.iter().any(|s| s == "guilds.join") {
        return Err(invalid());
    }
    Ok(())
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyApplication {
    /// Where authorization codes may be sent (replaces the list).
    redirect_uris: Option<Vec<String>>,
    /// Where the application gets interactions as signed POSTs; `null` or
    /// `""`: over its gateway sessions (see `interactions_http`).
    #[serde(default, deserialize_with = "some_value")]
    #[schemars(with = "Option<String>")]
    interactions_endpoint_url: Option<Value>,
}

/// A field that is present, even as `null` (`Some(Value::Null)`).
fn some_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `PATCH /applications/@me` (the bot): its redirect URIs. Other fields of
/// Discord's route are accepted and ignored.
pub async fn modify_application(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    _: super::guard::Bot,
    JsonBody(b): JsonBody<ModifyApplication>,
) -> ApiResult<Response> {
    let app = node.store.application_of_bot(u.id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    if let Some(uris) = b.redirect_uris {
        if uris.len() > MAX_REDIRECT_URIS {
            return Err(ApiError::field(
                "redirect_uris",
                "BASE_TYPE_MAX_LENGTH",
                &format!("Must be {MAX_REDIRECT_URIS} or fewer in length."),
            ));
        }
        if let Some(bad) = uris.iter().find(|u| !(u.starts_with("http://") || u.starts_with("https://")) || u.contains('#')) {
            return Err(ApiError::field("redirect_uris", "URL_TYPE_INVALID_URL", &format!("Not a well formed URL: {bad}")));
        }
        let mut o = node.store.oauth_app(app.id).await?.unwrap_or_default();
        o.redirect_uris = uris;
        node.store.set_oauth_app(app.id, &o).await?;
    }
    match b.interactions_endpoint_url {
        None => {}
        Some(Value::Null) => node.store.set_interactions_endpoint(app.id, None).await?,
        Some(Value::String(url)) if url.is_empty() => node.store.set_interactions_endpoint(app.id, None).await?,
        Some(Value::String(url)) => {
            let invalid = |why: &str| ApiError::field("interactions_endpoint_url", "APPLICATION_INTERACTIONS_ENDPOINT_URL_INVALID", why);
            super::interactions_http::check_url(&node, &url).map_err(invalid)?;
            if !super::interactions_http::verify(&node, app.id, &url).await {
                return Err(invalid("The specified interactions endpoint url could not be verified."));
            }
            node.store.set_interactions_endpoint(app.id, Some(&url)).await?;
        }
        Some(_) => return Err(ApiError::field("interactions_endpoint_url", "STRING_TYPE_CONVERT", "Could not interpret value as string.")),
    }
    node.lookups.forget_application(app.id);
    super::users::application(State(node), Caller(u)).await
}

/// `POST /applications/@me/secret` (the bot; throng's own route, where
/// Discord has its developer portal): a new OAuth2 client secret, shown
/// once; the old one stops working.
pub async fn reset_secret(State(node): State<Arc<Node>>, Caller(u): Caller) -> ApiResult<Response> {
    let app = node.store.application_of_bot(u.id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    let (secret, hash) = new_secret();
    let mut o = node.store.oauth_app(app.id).await?.unwrap_or_default();
    o.secret_hash = Some(hash);
    node.store.set_oauth_app(app.id, &o).await?;
    Ok(json_bytes(StatusCode::OK, json!({ "secret": secret }).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_goes_only_to_a_registered_redirect_uri() {
        let none = OAuthApp::default();
        let one = OAuthApp { secret_hash: None, redirect_uris: vec!["http://a/cb".into()] };
        assert_eq!(redirect_uri(&none, None, false).unwrap(), None, "adding a bot needs none");
        assert!(redirect_uri(&none, None, true).is_err(), "a code needs somewhere to go");
        assert!(redirect_uri(&none, Some("http://evil/"), false).is_err(), "an unregistered one is refused");
        assert_eq!(redirect_uri(&one, None, true).unwrap().as_deref(), Some("http://a/cb"));
        assert_eq!(redirect_uri(&one, Some("http://a/cb"), true).unwrap().as_deref(), Some("http://a/cb"));
        assert!(redirect_uri(&one, Some("http://a/cb/../x"), true).is_err());
    }

    #[test]
    fn basic_credentials_and_constant_time_equality() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Basic MTIzOnNlY3JldA==".parse().unwrap());
        assert_eq!(basic_credentials(&h), Some(("123".into(), "secret".into())));
        assert!(same(&[1; 32], &[1; 32]));
        assert!(!same(&[1; 32], &[2; 32]));
    }
}
