//! REST errors: every failure maps to a status and Discord's JSON error body
//! `{"code": N, "message": "...", "errors": {...}}`. 5xx bodies are generic;
//! the cause goes to the log.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::ErrorCode;
use serde_json::{json, Value};

use guild::RouteError;
use node::auth::AuthError;

#[derive(Debug)]
pub enum ApiError {
    /// A Discord error code with its status.
    Code(StatusCode, ErrorCode),
    /// 400 with code 50035 and per-field errors: `{field: {_errors: [{code, message}]}}`.
    InvalidForm(Value),
    /// 429 from a rate limit bucket.
    RateLimited { retry_after: f64, bucket: String, limit: u32, reset_at: f64 },
    /// Overloaded: a bounded resource is full. 503 with `Retry-After`.
    Busy,
    /// An internal failure; logged with its causes, answered with a
    /// generic 500.
    Internal(Box<dyn std::error::Error + Send + Sync>),
    /// An answer made elsewhere (a guild actor's refusal), passed on as it is.
    Passed(Box<Response>),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn not_found(code: ErrorCode) -> Self {
        ApiError::Code(StatusCode::NOT_FOUND, code)
    }
    pub fn forbidden(code: ErrorCode) -> Self {
        ApiError::Code(StatusCode::FORBIDDEN, code)
    }
    pub fn unauthorized() -> Self {
        ApiError::Code(StatusCode::UNAUTHORIZED, ErrorCode::General)
    }
    /// A 500 for `cause` (an error value, or a message).
    pub fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ApiError::Internal(cause.into())
    }
    /// A 50035 error for one field.
    pub fn field(field: &str, code: &str, message: &str) -> Self {
        ApiError::InvalidForm(protocol::codes::form_error(field, code, message))
    }
}

impl From<store::StoreError> for ApiError {
    /// A store that cannot answer just now is 503 with `Retry-After` (the
    /// client may retry); any other store error is a 500.
    fn from(e: store::StoreError) -> Self {
        if e.is_transient() {
            tracing::warn!(error = %e, "store busy: answered 503");
            return ApiError::Busy;
        }
        ApiError::internal(e)
    }
}

impl From<node::batch::BatchError> for ApiError {
    /// As a store error: 503 with `Retry-After` when the store could not
    /// answer just now, else 500.
    fn from(e: node::batch::BatchError) -> Self {
        match e {
            node::batch::BatchError::Store(s) if s.is_transient() => {
                tracing::warn!(error = %s, "store busy: answered 503");
                ApiError::Busy
            }
            other => ApiError::internal(other),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthorized => ApiError::unauthorized(),
            // The client's address has its share of password hashing in use
            // (or waited its turn too long): theirs to slow down.
            AuthError::Busy => ApiError::RateLimited {
                retry_after: 1.0,
                bucket: "password-hashing".into(),
                limit: 1,
                reset_at: node::auth::now_ms() as f64 / 1000.0 + 1.0,
            },
            AuthError::Store(e) => e.into(),
            e @ (AuthError::Hash(_) | AuthError::Task(_)) => ApiError::internal(e),
        }
    }
}

impl From<RouteError> for ApiError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Busy(_) | RouteError::Unavailable(_) => ApiError::Busy,
            // The change is committed; only its live delivery failed.
            RouteError::Gone(g) => ApiError::internal(format!("guild {g} actor gone")),
        }
    }
}

/// A JSON response with exactly `Content-Type: application/json` (discord.py
/// parses JSON only on that exact value).
pub fn json_bytes(status: StatusCode, body: impl Into<axum::body::Body>) -> Response {
    let mut r = (status, body.into()).into_response();
    r.headers_mut().insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            // Discord answers a missing or wrong token with code 0 and this message.
            ApiError::Code(StatusCode::UNAUTHORIZED, ErrorCode::General) => {
                json_bytes(StatusCode::UNAUTHORIZED, json!({ "code": 0, "message": "401: Unauthorized" }).to_string())
            }
            ApiError::Code(status, code) => json_bytes(status, json!({ "code": code.code(), "message": code.message() }).to_string()),
            ApiError::InvalidForm(errors) => json_bytes(
                StatusCode::BAD_REQUEST,
                json!({ "code": ErrorCode::InvalidFormBody.code(), "message": ErrorCode::InvalidFormBody.message(), "errors": errors })
                    .to_string(),
            ),
            ApiError::RateLimited { retry_after, bucket, limit, reset_at } => {
                let body = json!({ "message": "You are being rate limited.", "retry_after": retry_after, "global": false, "code": 0 });
                let mut r = json_bytes(StatusCode::TOO_MANY_REQUESTS, body.to_string());
                let h = r.headers_mut();
                let secs = retry_after.ceil().max(1.0) as u64;
                for (k, v) in [
                    ("retry-after", secs.to_string()),
                    ("via", "1.1 throng".to_string()),
                    ("x-ratelimit-limit", limit.to_string()),
                    ("x-ratelimit-remaining", "0".to_string()),
                    ("x-ratelimit-reset", format!("{reset_at:.3}")),
                    ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
                    ("x-ratelimit-bucket", bucket),
                    ("x-ratelimit-scope", "user".to_string()),
                ] {
                    if let Ok(v) = HeaderValue::from_str(&v) {
                        h.insert(k, v);
                    }
                }
                r
            }
            ApiError::Busy => {
                let mut r = json_bytes(
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({ "code": 0, "message": "Service busy, retry shortly.", "retry_after": 1.0 }).to_string(),
                );
                r.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
                r
            }
            ApiError::Passed(r) => *r,
            ApiError::Internal(cause) => {
                tracing::error!(cause = &*cause as &dyn std::error::Error, "internal error answering a request");
                json_bytes(StatusCode::INTERNAL_SERVER_ERROR, json!({ "code": 0, "message": "500: Internal Server Error" }).to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_guild_mailbox_is_503_with_retry_after_and_discords_body() {
        let resp = ApiError::from(RouteError::Busy(protocol::GuildId(42).into())).into_response();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], 0);
        assert!(v["retry_after"].is_number());
    }

    #[test]
    fn a_store_that_cannot_answer_now_is_503_with_retry_after_and_other_store_errors_500() {
        // Seen while fuzzing (fuzz/ multipart) with the process paused for
        // minutes: an upload's store write found no pooled connection in
        // time and was answered 500, as if the request were at fault.
        let busy: ApiError = store::StoreError::Db(sqlx::Error::PoolTimedOut).into();
        let r = busy.into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()["retry-after"], "1");
        let broken: ApiError = store::StoreError::Corrupt(serde_json::from_str::<u8>("x").unwrap_err()).into();
        assert_eq!(broken.into_response().status(), StatusCode::INTERNAL_SERVER_ERROR);
        let conflict: ApiError = store::StoreError::Conflict.into();
        assert_eq!(conflict.into_response().status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
