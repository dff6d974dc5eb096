//! Test harness: an in-process server on 127.0.0.1:0 with a fresh data
//! directory, a REST client and a raw gateway client.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use protocol::compress::{Decompressor, Transport};
use serde_json::{json, Value};
use server::{Config, Server};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const WAIT: Duration = Duration::from_secs(5);

pub struct TestServer {
    pub server: Option<Server>,
    pub base: String,
    pub ws: String,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config { listen: "127.0.0.1:0".parse().unwrap(), data_dir: dir.path().to_path_buf(), ..Config::default() };
        c.admin_token = Some("admin".into());
        c.gateway.heartbeat_interval_ms = 2_000;
        c.gateway.resume_window_ms = 2_000;
        c.limits.rest_requests_per_window = 1_000;
        // Tests register and log in many users from one address; the
        // security tests set these budgets back to what they test.
        c.auth.register_per_address = 100_000;
        c.auth.login_per_address = 100_000;
        c.auth.login_per_account = 100_000;
        // Tests identify one bot many times in a row; the security tests
        // (and the real libraries in the compat suite) meet the real
        // one-per-5-s window.
        c.gateway.identify_window_ms = 0;
        tweak(&mut c);
        let server = Server::start(c).await.unwrap();
        let addr = server.addr;
        TestServer {
            server: Some(server),
            base: format!("http://{addr}/api/v10"),
            ws: format!("ws://{addr}/?v=10&encoding=json"),
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    /// The data directory (SQLite's `throng.db`).
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub fn node(&self) -> &Arc<server::Node> {
        &self.server.as_ref().unwrap().node
    }

    /// The node's sessions, as the gateway's own type.
    pub fn sessions(&self) -> &Arc<server::gateway::Sessions> {
        &self.server.as_ref().unwrap().sessions
    }

    pub async fn req(
        &self,
        method: reqwest::Method,
        path: &str,
        auth: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let v = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        (status, v, headers)
    }

    pub async fn get(&self, path: &str, auth: &str) -> (u16, Value) {
        let (s, v, _) = self.req(reqwest::Method::GET, path, Some(auth), None).await;
        (s, v)
    }

    pub async fn post(&self, path: &str, auth: &str, body: Value) -> (u16, Value) {
        let (s, v, _) = self.req(reqwest::Method::POST, path, Some(auth), Some(body)).await;
        (s, v)
    }

    /// Registers a human; returns (token, user id).
    pub async fn user(&self, name: &str) -> (String, String) {
        let (s, v, _) =
            self.req(reqwest::Method::POST, "/auth/register", None, Some(json!({"username": name, "password": "correct horse"}))).await;
        assert_eq!(s, 201, "{v}");
        (v["token"].as_str().unwrap().to_string(), v["user_id"].as_str().unwrap().to_string())
    }

    /// Creates a bot; returns ("Bot <token>", raw token, user id).
    pub async fn bot(&self, name: &str) -> (String, String, String) {
        let node = self.node();
        let (u, token) = server::auth::create_bot(&node.store, &node.ids, name).await.unwrap();
        (format!("Bot {token}"), token, u.id.to_string())
    }

    /// Creates a guild owned by `owner`; returns (guild id, default channel id).
    pub async fn guild(&self, owner: &str) -> (String, String) {
        let (s, v) = self.post("/guilds", owner, json!({"name": "test guild"})).await;
        assert_eq!(s, 201, "{v}");
        (v["id"].as_str().unwrap().to_string(), v["channels"][0]["id"].as_str().unwrap().to_string())
    }

    /// Guild with a human owner and a bot member: (owner token, bot auth, bot token, bot id, guild, channel).
    pub async fn world(&self) -> World {
        let (owner, owner_id) = self.user("owner").await;
        let (bot_auth, bot_token, bot_id) = self.bot("robot").await;
        let (guild, channel) = self.guild(&owner).await;
        self.add_bot(&owner, &guild, &bot_id, 0).await;
        World { owner, owner_id, bot_auth, bot_token, bot_id, guild, channel }
    }

    /// `by` (MANAGE_GUILD) adds bot `bot_id` to `guild` as Discord's consent
    /// page does, with a managed role of `permissions`.
    pub async fn add_bot(&self, by: &str, guild: &str, bot_id: &str, permissions: u64) {
        let body = json!({"guild_id": guild, "permissions": permissions.to_string(), "authorize": true});
        let path = format!("/oauth2/authorize?client_id={bot_id}&scope=bot+applications.commands");
        let (s, v, _) = self.req(reqwest::Method::POST, &path, Some(by), Some(body)).await;
        assert_eq!(s, 200, "{v}");
    }

    /// An OAuth2 access token with `identify guilds.join` that the person
    /// `user` gives the application of bot `bot_id` (`bot_auth`): the code
    /// grant as the application and the person's browser go through it.
    pub async fn join_token(&self, user: &str, bot_auth: &str, bot_id: &str) -> String {
        let cb = "http://127.0.0.1:9/callback";
        let (s, v, _) = self.req(reqwest::Method::PATCH, "/applications/@me", Some(bot_auth), Some(json!({"redirect_uris": [cb]}))).await;
        assert_eq!(s, 200, "{v}");
        let (s, v) = self.post("/applications/@me/secret", bot_auth, json!({})).await;
        assert_eq!(s, 200, "{v}");
        let secret = v["secret"].as_str().unwrap().to_string();
        let path =
            format!("/oauth2/authorize?client_id={bot_id}&scope=identify+guilds.join&response_type=code&redirect_uri={cb}&state=xyz");
        let (s, v) = self.post(&path, user, json!({"authorize": true})).await;
        assert_eq!(s, 200, "{v}");
        let location = v["location"].as_str().unwrap();
        assert!(location.starts_with(cb) && location.contains("state=xyz"), "{location}");
        let code = location.split(['?', '&']).find_map(|p| p.strip_prefix("code=")).unwrap();
        let form = format!("grant_type=authorization_code&code={code}&redirect_uri={cb}&client_id={bot_id}&client_secret={secret}");
        let r = self
            .http
            .post(format!("{}/oauth2/token", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["token_type"], "Bearer");
        v["access_token"].as_str().unwrap().to_string()
    }

    /// `member` joins the guild of `channel` through an invite `inviter` makes there.
    pub async fn join(&self, inviter: &str, channel: &str, member: &str) {
        let (s, inv) = self.post(&format!("/channels/{channel}/invites"), inviter, json!({})).await;
        assert_eq!(s, 200, "{inv}");
        let (s, v) = self.post(&format!("/invites/{}", inv["code"].as_str().unwrap()), member, json!({})).await;
        assert_eq!(s, 200, "{v}");
    }

    pub async fn say(&self, auth: &str, channel: &str, content: &str) -> Value {
        let (s, v) = self.post(&format!("/channels/{channel}/messages"), auth, json!({"content": content})).await;
        assert_eq!(s, 200, "{v}");
        v
    }

    pub async fn shutdown(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

pub struct World {
    pub owner: String,
    pub owner_id: String,
    pub bot_auth: String,
    pub bot_token: String,
    pub bot_id: String,
    pub guild: String,
    pub channel: String,
}

pub const ALL_INTENTS: u64 = 0x331_ffff;
pub const BOT_INTENTS: u64 = 1 | 2 | 256 | 512 | 2048 | 32768;

/// A raw gateway client that decodes what it receives.
pub struct Gw {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    inflate: Option<Decompressor>,
    pub seq: Option<u64>,
    pub binary_frames: usize,
    pub text_frames: usize,
    /// How long `next` waits for a frame.
    pub wait: Duration,
}

/// What the server ended a connection with.
#[derive(Debug, PartialEq)]
pub enum Closed {
    Code(u16),
    /// The TCP stream ended without a close frame.
    Abrupt,
}

impl Gw {
    pub async fn connect(url: &str) -> Gw {
        Self::connect_with(url, Transport::None).await
    }

    pub async fn connect_with(url: &str, t: Transport) -> Gw {
        let url = match t {
            Transport::None => url.to_string(),
            Transport::ZlibStream => format!("{url}&compress=zlib-stream"),
            Transport::ZstdStream => format!("{url}&compress=zstd-stream"),
        };
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut g = Gw { ws, inflate: Decompressor::new(t).unwrap(), seq: None, binary_frames: 0, text_frames: 0, wait: WAIT };
        let hello = g.recv().await;
        assert_eq!(hello["op"], 10, "{hello}");
        assert!(hello["d"]["heartbeat_interval"].as_u64().unwrap() > 0);
        g
    }

    pub async fn send(&mut self, v: Value) {
        self.ws.send(Message::Text(v.to_string())).await.unwrap();
    }

    pub async fn send_raw(&mut self, s: &str) {
        self.ws.send(Message::Text(s.to_string())).await.unwrap();
    }

    /// The next gateway payload; panics on close or timeout.
    pub async fn recv(&mut self) -> Value {
        match self.next().await {
            Ok(v) => v,
            Err(c) => panic!("connection closed: {c:?}"),
        }
    }

    /// The next payload, or how the connection ended.
    pub async fn next(&mut self) -> Result<Value, Closed> {
        loop {
            let m = tokio::time::timeout(self.wait, self.ws.next()).await.expect("timed out waiting for the gateway");
            let bytes = match m {
                Some(Ok(Message::Text(t))) => {
                    self.text_frames += 1;
                    t.as_bytes().to_vec()
                }
                Some(Ok(Message::Binary(b))) => {
                    self.binary_frames += 1;
                    let mut out = Vec::new();
                    self.inflate.as_mut().expect("binary frame without compression").decompress(&b, &mut out).unwrap();
                    out
                }
                Some(Ok(Message::Close(Some(f)))) => return Err(Closed::Code(u16::from(f.code))),
                Some(Ok(Message::Close(None))) => return Err(Closed::Abrupt),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err(Closed::Abrupt),
            };
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            if let Some(s) = v["s"].as_u64() {
                self.seq = Some(s);
            }
            return Ok(v);
        }
    }

    /// Skips payloads until a dispatch named `t`.
    pub async fn until(&mut self, t: &str) -> Value {
        loop {
            let v = self.recv().await;
            if v["t"] == t {
                return v;
            }
        }
    }

    /// The next dispatch not named in `skip` (other opcodes are skipped too).
    pub async fn until_not(&mut self, skip: &[&str]) -> Value {
        loop {
            let v = self.recv().await;
            if v["op"] == 0 && !skip.iter().any(|t| v["t"] == *t) {
                return v;
            }
        }
    }

    /// Skips payloads until the connection closes; returns the close.
    pub async fn closed(&mut self) -> Closed {
        loop {
            if let Err(c) = self.next().await {
                return c;
            }
        }
    }

    pub async fn identify(&mut self, token: &str, intents: u64) -> Value {
        self.send(
            json!({"op": 2, "d": {"token": token, "intents": intents, "properties": {"os": "linux", "browser": "it", "device": "it"}}}),
        )
        .await;
        let ready = self.recv().await;
        assert_eq!(ready["t"], "READY", "{ready}");
        ready
    }

    pub async fn close_abruptly(self) {
        // Dropping the stream closes the TCP connection without a close frame.
        drop(self.ws);
    }

    pub async fn close_with(&mut self, code: u16) {
        let frame = tokio_tungstenite::tungstenite::protocol::CloseFrame { code: WsCode::from(code), reason: "".into() };
        self.ws.send(Message::Close(Some(frame))).await.unwrap();
    }
}

// A server in another process (`throng serve` spawned by a test), over
// plain HTTP.

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits (up to 10 s) until `base` (`http://…/api/v10`) answers.
pub async fn wait_up(http: &reqwest::Client, base: &str) {
    for _ in 0..200 {
        if http.get(format!("{base}/gateway")).send().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server at {base} did not come up");
}

/// POSTs JSON and returns the JSON answer (any status).
pub async fn post_json(http: &reqwest::Client, url: &str, auth: Option<&str>, body: Value) -> Value {
    let mut req = http.post(url).json(&body);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    req.send().await.unwrap().json().await.unwrap()
}

/// Registers `username` and creates a guild: (token, guild id, channel id).
pub async fn user_with_guild(http: &reqwest::Client, base: &str, username: &str) -> (String, String, String) {
    let reg = post_json(http, &format!("{base}/auth/register"), None, json!({"username": username, "password": "correct horse"})).await;
    let token = reg["token"].as_str().unwrap_or_else(|| panic!("not registered: {reg}")).to_string();
    let g = post_json(http, &format!("{base}/guilds"), Some(&token), json!({"name": format!("{username}'s guild")})).await;
    let guild = g["id"].as_str().unwrap_or_else(|| panic!("guild not created: {g}")).to_string();
    (token, guild, g["channels"][0]["id"].as_str().unwrap().to_string())
}

/// Every message id in `channel`'s history, oldest first (pages of 100).
pub async fn history_ids(http: &reqwest::Client, base: &str, channel: &str, auth: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut after = 0u64;
    loop {
        let url = format!("{base}/channels/{channel}/messages?after={after}&limit=100");
        let page: Value = http.get(url).header("authorization", auth).send().await.unwrap().json().await.unwrap();
        let mut got: Vec<u64> =
            page.as_array().unwrap_or_else(|| panic!("{page}")).iter().map(|m| m["id"].as_str().unwrap().parse().unwrap()).collect();
        let Some(&max) = got.iter().max() else { return ids };
        got.sort_unstable();
        ids.extend(got);
        after = max;
    }
}

/// Sends `method url` with a head declaring 4 KiB of JSON and only its
/// first byte: the answer (status, JSON body) if one comes within 10 s
/// without the rest, `None` if the server waits for the body.
pub async fn stalled_request(method: &str, url: &str, auth: Option<&str>) -> Option<(u16, Value)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n");
    if let Some(a) = auth {
        head.push_str(&format!("Authorization: {a}\r\n"));
    }
    head.push_str("\r\n{");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(k) => out.extend_from_slice(&buf[..k]),
            }
            let text = String::from_utf8_lossy(&out);
            if let Some((h, b)) = text.split_once("\r\n\r\n") {
                let len = h.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()));
                if matches!(len, Some(Ok(n)) if b.len() >= n) {
                    return;
                }
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (h, b) = text.split_once("\r\n\r\n")?;
    let status = h.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok())?;
    Some((status, serde_json::from_str(b).unwrap_or(Value::Null)))
}
