//! The REST side of a client: what a real client sends over HTTP (register,
//! guilds, invites, messages), with Discord's retry rules for 429 and a
//! backoff for 503 (the server's "busy, try again").

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};

/// How often a request is retried on 429/503 before it counts as failed.
const MAX_RETRIES: u32 = 30;

#[derive(Clone)]
pub struct Rest {
    http: Client,
    /// `http://host:port/api/v10`
    base: String,
}

/// The outcome of one request that the caller wants to count rather than fail on.
pub enum Sent {
    Ok,
    /// Status of the last attempt (after retries).
    Failed(u16),
    Transport,
}

impl Rest {
    /// `server` is the HTTP base (`http://127.0.0.1:8080`); `/api/v10` is appended.
    pub fn new(server: &str, pool_idle: usize) -> anyhow::Result<Rest> {
        let http = Client::builder()
            .pool_max_idle_per_host(pool_idle)
            // Below the server's 30 s idle limit for a keep-alive connection
            // (throng's header read timeout): a connection reused just as
            // the server closes it fails the request in transport (4 of
            // 492,408 sends in a 152,000-session capacity run).
            .pool_idle_timeout(Duration::from_secs(20))
            .timeout(Duration::from_secs(30))
            .tcp_nodelay(true)
            .build()
            .context("building HTTP client")?;
        Ok(Rest { http, base: format!("{}/api/v10", server.trim_end_matches('/')) })
    }

    /// One JSON request with retries on 429 (waits `retry_after`) and 503 (backoff).
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> anyhow::Result<(StatusCode, Value)> {
        self.request(method, path, token, body, true).await
    }

    /// As [`Rest::call`]; with `want_body` false a final answer's body is
    /// not parsed (returned as null): a chat send needs only its status.
    async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        want_body: bool,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let url = format!("{}{}", self.base, path);
        let mut delay = Duration::from_millis(50);
        for attempt in 0..=MAX_RETRIES {
            let mut req = self.http.request(method.clone(), &url);
            if let Some(t) = token {
                req = req.header("Authorization", t);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.with_context(|| format!("{method} {path}"))?;
            let status = resp.status();
            let retry_hdr = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<f64>().ok());
            let bytes = resp.bytes().await.with_context(|| format!("{method} {path}: body"))?;
            let busy = status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
            let last = !busy || attempt == MAX_RETRIES;
            let v: Value =
                if bytes.is_empty() || (last && !want_body) { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
            if last {
                return Ok((status, v));
            }
            let wait = v.get("retry_after").and_then(Value::as_f64).or(retry_hdr).map(Duration::from_secs_f64).unwrap_or(delay);
            let jitter = Duration::from_millis(rand::random::<u64>() % 50);
            tokio::time::sleep(wait.min(Duration::from_secs(10)) + jitter).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        unreachable!("the last attempt returns")
    }

    async fn expect(&self, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> anyhow::Result<Value> {
        let (status, v) = self.call(method.clone(), path, token, body).await?;
        if !status.is_success() {
            bail!("{method} {path}: {status} {v}");
        }
        Ok(v)
    }

    /// The gateway URL the server advertises.
    pub async fn gateway_url(&self) -> anyhow::Result<String> {
        let v = self.expect(Method::GET, "/gateway", None, None).await?;
        v["url"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("GET /gateway: no url in {v}"))
    }

    /// Registers a human user; returns (user_id, token).
    pub async fn register(&self, username: &str, password: &str) -> anyhow::Result<(String, String)> {
        let v = self.expect(Method::POST, "/auth/register", None, Some(&json!({"username": username, "password": password}))).await?;
        let token = v["token"].as_str().ok_or_else(|| anyhow!("register: no token in {v}"))?;
        let id = match &v["user_id"] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => self.me(token).await?,
        };
        Ok((id, token.to_owned()))
    }

    async fn me(&self, token: &str) -> anyhow::Result<String> {
        let v = self.expect(Method::GET, "/users/@me", Some(token), None).await?;
        v["id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("GET /users/@me: no id"))
    }

    /// Creates a guild; returns (guild_id, channel ids).
    pub async fn create_guild(&self, token: &str, name: &str) -> anyhow::Result<(String, Vec<String>)> {
        let v = self.expect(Method::POST, "/guilds", Some(token), Some(&json!({"name": name}))).await?;
        let id = v["id"].as_str().ok_or_else(|| anyhow!("create guild: no id in {v}"))?.to_owned();
        let mut channels: Vec<String> = v["channels"]
            .as_array()
            .map(|a| {
                a.iter().filter(|c| c["type"].as_u64().unwrap_or(0) == 0).filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()
            })
            .unwrap_or_default();
        if channels.is_empty() {
            let v = self.expect(Method::GET, &format!("/guilds/{id}/channels"), Some(token), None).await?;
            channels = v
                .as_array()
                .map(|a| {
                    a.iter().filter(|c| c["type"].as_u64().unwrap_or(0) == 0).filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()
                })
                .unwrap_or_default();
        }
        if channels.is_empty() {
            bail!("guild {id} has no text channel");
        }
        Ok((id, channels))
    }

    pub async fn create_invite(&self, token: &str, channel: &str) -> anyhow::Result<String> {
        let v = self.expect(Method::POST, &format!("/channels/{channel}/invites"), Some(token), Some(&json!({"max_age": 0}))).await?;
        v["code"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("invite: no code in {v}"))
    }

    pub async fn join(&self, token: &str, code: &str) -> anyhow::Result<()> {
        self.expect(Method::POST, &format!("/invites/{code}"), Some(token), Some(&json!({}))).await.map(|_| ())
    }

    /// A chat post, counted (not failed) by the caller. It carries `nonce` with `enforce_nonce`, as a careful
    /// client does: a 503 may answer a post the server went on to store,
    /// and the retry of it is then answered with that message instead of
    /// becoming a second one.
    pub async fn send_message(&self, token: &str, channel: &str, content: &str, nonce: u64) -> Sent {
        let body = json!({"content": content, "nonce": nonce.to_string(), "enforce_nonce": true});
        match self.request(Method::POST, &format!("/channels/{channel}/messages"), Some(token), Some(&body), false).await {
            Ok((s, _)) if s.is_success() => Sent::Ok,
            Ok((s, _)) => Sent::Failed(s.as_u16()),
            Err(_) => Sent::Transport,
        }
    }
}
