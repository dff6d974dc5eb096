//! HTTP interactions: an application with an `interactions_endpoint_url`
//! gets its interactions as POSTs there, signed with its Ed25519 key
//! (`node::signing`), instead of INTERACTION_CREATE on its gateway
//! sessions; the answer to the POST is its initial response.
//!
//! - Setting the URL (`PATCH /applications/@me`) is checked as Discord
//!   checks it: a PING with a good signature must be answered 200 with
//!   `{"type": 1}`, and one with a bad signature refused 401. Otherwise the
//!   URL is refused (400, 50035) and nothing is stored.
//! - The URL's host must be in `interactions.endpoint_hosts` (empty by
//!   default: HTTP interactions are off), so a bot's owner cannot point the
//!   server at hosts the deployment did not allow. Redirects are not
//!   followed; an answer is read up to `interactions.endpoint_max_response_bytes`
//!   within `interactions.endpoint_timeout_ms`.
//! - The node that took the invocation POSTs it; a usable answer goes to
//!   the interaction's actor as [`super::interactions::respond`] would
//!   take a callback. An answer that is not one (an error status, no
//!   answer in time, a body that is not a response) leaves the interaction
//!   to fail as one without a response does.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use node::Node;
use protocol::{ActorKey, ApplicationId};
use serde_json::{json, Value};

/// One client for every endpoint: connections are kept per host.
fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("throng (interactions)")
            .build()
            .expect("an HTTP client")
    })
}

/// Why an endpoint URL cannot be used.
pub fn check_url(node: &Node, url: &str) -> Result<(), &'static str> {
    let u = reqwest::Url::parse(url).map_err(|_| "Not a well formed URL.")?;
    if !matches!(u.scheme(), "http" | "https") || u.cannot_be_a_base() || u.fragment().is_some() {
        return Err("Not a well formed URL.");
    }
    let host = u.host_str().unwrap_or("");
    let allowed = &node.config.interactions.endpoint_hosts;
    if !allowed.iter().any(|h| h == "*" || h.eq_ignore_ascii_case(host)) {
        return Err("This server does not send interactions to that host.");
    }
    Ok(())
}

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// POSTs `body` to `url`, signed as `app` (or, `forged`, with a signature
/// that does not verify); the status and at most the configured bytes of
/// the answer.
async fn post(node: &Node, app: ApplicationId, url: &str, body: Vec<u8>, forged: bool) -> Option<(u16, Vec<u8>)> {
    let cfg = &node.config.interactions;
    let timestamp = now_s().to_string();
    // Forged: a well-formed signature of something else.
    let signed: &[u8] = if forged { b"{}" } else { &body };
    let signature = node::signing::sign(&node::signing::key_pair(&node.blobs.signer, app), &timestamp, signed);
    let send = client()
        .post(url)
        .header("content-type", "application/json")
        .header("x-signature-ed25519", signature)
        .header("x-signature-timestamp", timestamp)
        .body(body)
        .timeout(Duration::from_millis(cfg.endpoint_timeout_ms))
        .send();
    let mut res = match send.await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(app = app.0, error = %e, "interactions endpoint unreachable");
            return None;
        }
    };
    let status = res.status().as_u16();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(cfg.endpoint_timeout_ms);
    loop {
        match tokio::time::timeout_at(deadline, res.chunk()).await {
            Ok(Ok(Some(c))) if out.len() + c.len() <= cfg.endpoint_max_response_bytes => out.extend_from_slice(&c),
            Ok(Ok(None)) => return Some((status, out)),
            _ => return None,
        }
    }
}

/// Discord's check of a new endpoint URL: a signed PING is answered with a
/// PONG, and a PING with a bad signature is refused 401.
pub async fn verify(node: &Node, app: ApplicationId, url: &str) -> bool {
    let ping = json!({
        "id": node.ids.next().0.to_string(), "application_id": app, "type": 1, "version": 1,
        "token": "ping", "user": null,
    })
    .to_string()
    .into_bytes();
    let good = match post(node, app, url, ping.clone(), false).await {
        Some((200, body)) => serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.get("type")?.as_u64()) == Some(1),
        _ => false,
    };
    good && matches!(post(node, app, url, ping, true).await, Some((401, _)))
}

/// POSTs an interaction (`payload`, the bot's INTERACTION_CREATE data) to
/// the application's endpoint, and gives its answer to the interaction's
/// actor. In the background: the person's request is answered already.
pub fn deliver(node: Arc<Node>, key: ActorKey, app: ApplicationId, url: String, payload: Vec<u8>) {
    tokio::spawn(async move {
        let ids: Option<(u64, String)> = serde_json::from_slice::<Value>(&payload)
            .ok()
            .and_then(|v| Some((v.get("id")?.as_str()?.parse().ok()?, v.get("token")?.as_str()?.to_owned())));
        let Some((id, token)) = ids else { return };
        let Some((status, body)) = post(&node, app, &url, payload, false).await else { return };
        if !(200..300).contains(&status) {
            tracing::debug!(app = app.0, status, "interactions endpoint refused an interaction");
            return;
        }
        let Ok(answer) = serde_json::from_slice::<super::interactions::CallbackBody>(&body) else {
            tracing::debug!(app = app.0, "interactions endpoint answered with no interaction response");
            return;
        };
        if let Err(e) = super::interactions::respond(&node, key, id, token, answer, false).await {
            tracing::debug!(app = app.0, error = ?e, "an interactions endpoint's answer was refused");
        }
    });
}
