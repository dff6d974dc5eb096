//! REST rate limits: a fixed window per (caller, route bucket). Every
//! response carries Discord's `X-RateLimit-*` headers (clients need the whole
//! set or none); a 429 carries `Retry-After`, `Via` and a JSON `retry_after`
//! (discord.py retries a 429 only when both are present).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::node::Node;

fn hash_of(parts: &[&str]) -> u64 {
    // Fixed-key SipHash: stable within the process, which is all a bucket needs.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// The major parameter of a route (channel, guild or webhook id), which
/// Discord buckets by.
fn major(path: &str) -> &str {
    let mut it = path.split('/').skip_while(|s| !matches!(*s, "channels" | "guilds" | "webhooks"));
    it.next();
    it.next().unwrap_or("")
}

const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const RESET_AFTER: HeaderName = HeaderName::from_static("x-ratelimit-reset-after");
const BUCKET: HeaderName = HeaderName::from_static("x-ratelimit-bucket");

pub async fn middleware(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    let caller = match req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        Some(a) => hash_of(&["token", a]),
        None => {
            let ip = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string());
            hash_of(&["ip", ip.as_deref().unwrap_or("?")])
        }
    };
    let route = req.extensions().get::<MatchedPath>().map_or("", |m| m.as_str());
    let bucket = hash_of(&[req.method().as_str(), route, major(req.uri().path())]);
    let limiter = &node.rest_limits;
    let v = limiter.check(caller, bucket);
    let now_epoch = crate::auth::now_ms() as f64 / 1000.0;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_parameter() {
        assert_eq!(major("/api/v10/channels/123/messages"), "123");
        assert_eq!(major("/api/v10/guilds/7"), "7");
        assert_eq!(major("/api/v10/users/@me"), "");
    }
}
