//! REST rate limits: a fixed window per (caller, route bucket). The caller
//! is who is asking: the user or bot when the request carries a valid
//! token, otherwise the client's address (see `client_addr`), so a fresh
//! made-up `Authorization` header buys no fresh budget. This middleware
//! also resolves the token once for the handler (`Resolved`), before any
//! handler reads a body.
//!
//! Every response carries Discord's `X-RateLimit-*` headers (clients need
//! the whole set or none); a 429 carries `Retry-After`, `Via` and a JSON
//! `retry_after` (discord.py retries a 429 only when both are present).

use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use store::UserRecord;

use super::error::ApiError;
use node::auth::AuthError;
use node::Node;

fn hash_of(parts: &[&str]) -> u64 {
    // Fixed-key SipHash: stable within the process, which is all a bucket needs.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// The major parameter of a route (channel, guild or webhook id), which
/// Discord buckets by. An interaction's routes are bucketed by the
/// interaction (its callback by id, its followups and edits by token): a bot
/// answering many people from one address is not limited as one caller,
/// as Discord does not count interaction responses against a bot's limit.
fn major(path: &str) -> &str {
    let mut it = path.split('/').skip_while(|s| !matches!(*s, "channels" | "guilds" | "webhooks" | "interactions"));
    let kind = it.next();
    let id = it.next().unwrap_or("");
    match (kind, it.next()) {
        (Some("webhooks"), Some(token)) if node::route::interactions::looks_like_token(token) => token,
        _ => id,
    }
}

const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const RESET_AFTER: HeaderName = HeaderName::from_static("x-ratelimit-reset-after");
const BUCKET: HeaderName = HeaderName::from_static("x-ratelimit-bucket");

/// The client's address as the limits see it (the TCP peer, or what a
/// trusted proxy says; see `client_addr`). Put on every API request.
#[derive(Clone, Copy, Debug)]
pub struct ClientIp(pub IpAddr);

/// What the request's `Authorization` header turned out to be.
#[derive(Clone)]
pub enum Resolved {
    /// A login or bot token.
    User(Arc<UserRecord>),
    /// An OAuth2 access token, with its scopes.
    Bearer(Arc<UserRecord>, Arc<[String]>),
    /// A header naming no live token.
    Invalid,
}

/// The client address of a request that came through the listener.
pub fn client_ip(node: &Node, req: &Request) -> IpAddr {
    let peer = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
    node.trusted_proxies.client_ip(peer, req.headers())
}

async fn resolve(node: &Node, header: &str) -> Result<Resolved, ApiError> {
    if let Some(t) = header.strip_prefix("Bearer ") {
        return Ok(match super::oauth2::bearer(node, t.trim()).await? {
            Some((u, scopes)) => Resolved::Bearer(u, scopes),
            None => Resolved::Invalid,
        });
    }
    match node.auth.user_for_header(header).await {
        Ok(u) => Ok(Resolved::User(u)),
        Err(AuthError::Unauthorized) => Ok(Resolved::Invalid),
        Err(e) => Err(e.into()),
    }
}

pub async fn middleware(State(node): State<Arc<Node>>, mut req: Request, next: Next) -> Response {
    let ip = client_ip(&node, &req);
    req.extensions_mut().insert(ClientIp(ip));
    let header = req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let resolved = match header {
        Some(h) => match resolve(&node, &h).await {
            Ok(r) => Some(r),
            Err(e) => return e.into_response(),
        },
        None => None,
    };
    let caller = match &resolved {
        Some(Resolved::User(u) | Resolved::Bearer(u, _)) => hash_of(&["user", &u.id.0.to_string()]),
        _ => hash_of(&["ip", &ip.to_string()]),
    };
    if let Some(r) = resolved {
        req.extensions_mut().insert(r);
    }
    let route = req.extensions().get::<MatchedPath>().map_or("", |m| m.as_str());
    let bucket = hash_of(&[req.method().as_str(), route, major(req.uri().path())]);
    let limiter = &node.rest_limits;
    let v = limiter.check(caller, bucket);
    let now_epoch = node::auth::now_ms() as f64 / 1000.0;
    let bucket_id = format!("{:016x}", v.bucket);
    if !v.allowed {
        return ApiError::RateLimited {
            retry_after: v.reset_after,
            bucket: bucket_id,
            limit: limiter.limit(),
            reset_at: now_epoch + v.reset_after,
        }
        .into_response();
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(LIMIT, HeaderValue::from(limiter.limit()));
    h.insert(REMAINING, HeaderValue::from(v.remaining));
    for (k, val) in
        [(RESET, format!("{:.3}", now_epoch + v.reset_after)), (RESET_AFTER, format!("{:.3}", v.reset_after)), (BUCKET, bucket_id)]
    {
        if let Ok(val) = HeaderValue::from_str(&val) {
            h.insert(k, val);
        }
    }
    resp
}

/// A per-address or per-account budget (login, registration): 429 with
/// Discord's body when spent.
pub fn budget(limiter: &node::ratelimit::RateLimiter, key: &[&str]) -> Result<(), ApiError> {
    let v = limiter.check(hash_of(key), 0);
    if v.allowed {
        return Ok(());
    }
    Err(ApiError::RateLimited {
        retry_after: v.reset_after,
        bucket: format!("{:016x}", hash_of(key)),
        limit: limiter.limit(),
        reset_at: node::auth::now_ms() as f64 / 1000.0 + v.reset_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_parameter() {
        assert_eq!(major("/api/v10/channels/123/messages"), "123");
        assert_eq!(major("/api/v10/guilds/7"), "7");
        assert_eq!(major("/api/v10/users/@me"), "");
        assert_eq!(major("/api/v10/interactions/42/a.b.c/callback"), "42");
        assert_eq!(major("/api/v10/webhooks/9/a.b.c/messages/@original"), "a.b.c");
        assert_eq!(major("/api/v10/webhooks/9/plaintoken"), "9");
    }
}
