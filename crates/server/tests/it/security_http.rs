//! Issue #25, the HTTP edge and files: signed, expiring attachment URLs;
//! uploads judged from the request head before a byte is written; the
//! per-user storage quota; the request body deadline; caps on connections
//! per address and in total.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::attachments::{form, upload};
use crate::common::*;

const BOUNDARY: &str = "throngtestboundary7MA4YWxkTrZu0gW";
/// Body bytes sent between looks for an answer.
const PIECE: usize = 16 << 10;

fn addr(t: &TestServer) -> SocketAddr {
    t.server.as_ref().unwrap().addr
}

fn files_dir(t: &TestServer) -> PathBuf {
    t.node().config.data_dir.join("attachments")
}

/// Every file under the attachments directory, temporary ones included.
fn all_files(t: &TestServer) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![files_dir(t)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// Waits (deadline 10 s) until `f` holds.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One HTTP answer read from `s` (status code, body), or `None` if the
/// connection ended first or nothing came within `wait`.
async fn read_answer(s: &mut TcpStream, wait: Duration) -> Option<(u16, String)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= end + 4 + len {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return Some((status, String::from_utf8_lossy(&got[end + 4..end + 4 + len]).into_owned()));
            }
        }
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// Sends `head` and a first piece of the body, then more pieces, looking
/// for an answer (up to 250 ms) before each, until one comes or `max`
/// bytes went. The answer and how many body bytes had been sent when it
/// came.
async fn answer_while_sending(s: &mut TcpStream, head: &str, max: usize) -> (u16, String, usize) {
    let piece = vec![b'x'; PIECE];
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&piece).await.unwrap();
    let mut sent = PIECE;
    loop {
        if let Some((status, body)) = read_answer(s, Duration::from_millis(250)).await {
            return (status, body, sent);
        }
        assert!(sent < max, "no answer after {sent} body bytes");
        s.write_all(&piece).await.unwrap();
        sent += PIECE;
    }
}

/// Keeps sending after the answer: the server must stop taking bytes and
/// close the connection (a write fails with a reset) within 10 s, however
/// long the client goes on. How long it took and what was sent meanwhile.
async fn closed_while_sending(s: &mut TcpStream) -> (Duration, usize) {
    let start = Instant::now();
    let piece = vec![b'x'; PIECE];
    let mut sent = 0;
    loop {
        assert!(start.elapsed() < Duration::from_secs(10), "the connection was held open ({sent} bytes taken)");
        match tokio::time::timeout(Duration::from_millis(200), s.write_all(&piece)).await {
            Ok(Ok(())) => sent += PIECE,
            Ok(Err(_)) => return (start.elapsed(), sent),
            // The server stopped reading: its close (and our reset) follows.
            Err(_) => {}
        }
    }
}

/// An attachment URL without its query.
fn bare(url: &str) -> &str {
    url.split('?').next().unwrap()
}

async fn status_of(t: &TestServer, url: &str) -> u16 {
    t.http.get(url).send().await.unwrap().status().as_u16()
}

/// Attachment URLs carry `ex`, `is` and `hm`; the file is served only
/// under a valid, unexpired signature (404 otherwise, in Discord's body);
/// a REST read signs afresh; the gateway's MESSAGE_CREATE carries the URL
/// signed at creation; the key is the store's, shared by every node.
#[tokio::test]
async fn attachment_urls_are_signed_and_only_a_valid_unexpired_signature_serves() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    let path = format!("/channels/{}/messages", w.channel);
    let (s, m) = upload(&t, &path, Some(&w.bot_auth), json!({"content": "signed"}), &[("a.txt", b"the file")]).await;
    assert_eq!(s, 200, "{m}");
    let url = m["attachments"][0]["url"].as_str().unwrap().to_string();
    let query = url.split_once('?').map(|(_, q)| q.to_string()).unwrap_or_default();
    let keys: Vec<&str> = query.split('&').filter_map(|p| p.split_once('=')).map(|(k, _)| k).collect();
    assert_eq!(keys, ["ex", "is", "hm"], "{url}");
    assert_eq!(m["attachments"][0]["proxy_url"], url.as_str());
    let created = g.until("MESSAGE_CREATE").await;
    assert_eq!(created["d"]["attachments"][0]["url"], url.as_str(), "the gateway carries the URL signed at creation");
    let r = t.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"the file");

    // Unsigned, tampered: 404 with Discord's body.
    let r = t.http.get(bare(&url)).send().await.unwrap();
    assert_eq!(r.status(), 404, "unsigned");
    let v: Value = r.json().await.unwrap();
    assert!(v["code"].is_number() && v["message"].is_string(), "{v}");
    let hm_at = url.find("hm=").unwrap() + 3;
    let mut tampered = url.clone().into_bytes();
    tampered[hm_at] = if tampered[hm_at] == b'0' { b'1' } else { b'0' };
    assert_eq!(status_of(&t, &String::from_utf8(tampered).unwrap()).await, 404, "tampered hm");
    let ex: String = query.split('&').find_map(|p| p.strip_prefix("ex=")).unwrap().into();
    let later = format!("{:x}", u64::from_str_radix(&ex, 16).unwrap() + 86_400);
    assert_eq!(status_of(&t, &url.replace(&format!("ex={ex}"), &format!("ex={later}"))).await, 404, "a moved expiry");
    let other = url.replace("a.txt?", "b.txt?");
    assert_eq!(status_of(&t, &other).await, 404, "the signature is for one path");
    // Signed with the server's own key, but longer ago than the lifetime.
    let (origin, file_path) = bare(&url).split_at(url.find("/attachments/").unwrap());
    let lifetime = t.node().config.attachments.url_lifetime_s;
    let old = t.node().blobs.signer.sign(file_path, server::attachments::now_s() - lifetime - 1);
    assert_eq!(status_of(&t, &format!("{origin}{old}")).await, 404, "expired");

    // REST reads hand out URLs signed now, which work.
    let mid = m["id"].as_str().unwrap();
    for (route, pick) in [(format!("{path}/{mid}"), "/attachments/0/url"), (format!("{path}?limit=1"), "/0/attachments/0/url")] {
        let (s, v) = t.get(&route, &w.owner).await;
        assert_eq!(s, 200, "{v}");
        let fresh = v.pointer(pick).and_then(Value::as_str).unwrap().to_string();
        assert_eq!(bare(&fresh), bare(&url));
        assert_eq!(status_of(&t, &fresh).await, 200, "{route}");
    }

    // The key is the store's (what every node of a cluster reads).
    let stored = t.node().store.setting_or_init("attachments.url_signing_key", "not this").await.unwrap();
    assert_eq!(t.node().config.attachments.url_signing_key.as_deref(), Some(stored.as_str()));
    assert_eq!(stored.len(), 64, "32 random bytes, hex");
}

/// `attachments.url_lifetime_s` (3 s here): the URL handed out stops
/// working once it passes; a REST read then gives a new one that works.
#[tokio::test]
async fn an_attachment_url_expires_after_its_lifetime_and_a_read_renews_it() {
    let t = TestServer::start_with(|c| c.attachments.url_lifetime_s = 3).await;
    let w = t.world().await;
    let path = format!("/channels/{}/messages", w.channel);
    let (s, m) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("a.txt", b"the file")]).await;
    assert_eq!(s, 200, "{m}");
    let url = m["attachments"][0]["url"].as_str().unwrap().to_string();
    assert_eq!(status_of(&t, &url).await, 200, "good for 2-3 s");
    let start = Instant::now();
    while status_of(&t, &url).await != 404 {
        assert!(start.elapsed() < Duration::from_secs(10), "never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (s, v) = t.get(&format!("{path}/{}", m["id"].as_str().unwrap()), &w.owner).await;
    assert_eq!(s, 200, "{v}");
    let fresh = v["attachments"][0]["url"].as_str().unwrap();
    assert_ne!(fresh, url, "signed afresh");
    assert_eq!(status_of(&t, fresh).await, 200);
}

/// A guild member's channel they cannot see, and a webhook of the guild.
async fn hidden_channel(t: &TestServer, w: &World) -> (String, String, String) {
    let (s, c) = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "staff"})).await;
    assert_eq!(s, 201, "{c}");
    let hidden = c["id"].as_str().unwrap().to_string();
    let deny = json!({"type": 0, "deny": (1u64 << 10).to_string()});
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{hidden}/permissions/{}", w.guild), Some(&w.owner), Some(deny)).await;
    assert_eq!(s, 204);
    let (s, hook) = t.post(&format!("/channels/{}/webhooks", w.channel), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 200, "{hook}");
    (hidden, hook["id"].as_str().unwrap().into(), hook["token"].as_str().unwrap().into())
}

/// An upload to a channel the caller cannot see, or to a webhook with a
/// wrong token, is answered from the request head while the client is
/// still sending its body: well before 1 MiB, with Discord's body; the
/// connection is then closed however long the client keeps sending, and
/// nothing reaches the attachments directory.
#[tokio::test]
async fn an_upload_that_may_not_happen_is_refused_before_1_mib_and_writes_nothing() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (hidden, hook, _) = hidden_channel(&t, &w).await;
    let declared = 20 << 20;
    let cases = [
        (format!("/api/v10/channels/{hidden}/messages"), Some(w.bot_auth.clone()), 403, 50001),
        (format!("/api/v10/webhooks/{hook}/{}", "x".repeat(68)), None, 401, 50027),
    ];
    for (path, auth, status, code) in cases {
        let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {declared}\r\n\r\n"
        );
        let mut s = TcpStream::connect(addr(&t)).await.unwrap();
        let start = Instant::now();
        let (got, body, sent) = answer_while_sending(&mut s, &head, 1 << 20).await;
        let answered = start.elapsed();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((got, v["code"].as_u64()), (status, Some(code)), "{path}: {body}");
        assert!(sent < 1 << 20, "answered after {sent} bytes");
        let (closed, more) = closed_while_sending(&mut s).await;
        eprintln!(
            "{path}: {got} after {sent} of {declared} body bytes ({answered:?}); closed {closed:?} later, {more} more bytes taken meanwhile"
        );
    }
    assert_eq!(all_files(&t), Vec::<PathBuf>::new(), "no temporary file, no blob");
    // The member may still upload where they can see.
    let (s, v) = upload(&t, &format!("/channels/{}/messages", w.channel), Some(&w.bot_auth), json!({}), &[("ok.txt", b"fine")]).await;
    assert_eq!(s, 200, "{v}");
}

/// The per-user quota: the upload that would pass it is 413 40005 (judged
/// from Content-Length up front, and while streaming when the length says
/// less), leaves nothing behind, and earlier files stay; a deleted message
/// gives its bytes back. A webhook's files count for its creator.
#[tokio::test]
async fn the_quota_refuses_the_upload_that_goes_over_and_keeps_earlier_files() {
    let t = TestServer::start_with(|c| c.attachments.user_quota_bytes = 100_000).await;
    let w = t.world().await;
    let path = format!("/channels/{}/messages", w.channel);
    let first = vec![7u8; 60_000];
    let (s, m1) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("first.bin", &first)]).await;
    assert_eq!(s, 200, "{m1}");
    let kept = all_files(&t);

    // Streamed: the declared length is within the allowance for framing.
    let (s, v) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("second.bin", &[8u8; 50_000])]).await;
    assert_eq!((s, v["code"].as_u64()), (413, Some(40005)), "{v}");
    // Up front: 10 MB declared, refused before any body byte.
    let head = format!(
        "POST /api/v10{path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 10000000\r\n\r\n",
        w.bot_auth
    );
    let mut s = TcpStream::connect(addr(&t)).await.unwrap();
    let (status, body, sent) = answer_while_sending(&mut s, &head, 1 << 20).await;
    assert_eq!(status, 413, "{body}");
    assert!(sent < 1 << 20, "answered after {sent} bytes");
    assert!(body.contains("40005"), "{body}");
    // A webhook's upload counts for its creator (the owner has room).
    let (_, hook, token) = hidden_channel(&t, &w).await;
    let (s, v) = upload(&t, &format!("/webhooks/{hook}/{token}?wait=true"), None, json!({}), &[("h.bin", &[9u8; 90_000])]).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = upload(&t, &format!("/webhooks/{hook}/{token}?wait=true"), None, json!({}), &[("h.bin", &[10u8; 20_000])]).await;
    assert_eq!((s, v["code"].as_u64()), (413, Some(40005)), "the owner's quota: {v}");

    eventually("refused uploads discarded", || all_files(&t).len() == kept.len() + 1).await;
    for f in &kept {
        assert!(f.exists(), "earlier file kept: {f:?}");
    }
    let url = m1["attachments"][0]["url"].as_str().unwrap();
    assert_eq!(t.http.get(url).send().await.unwrap().bytes().await.unwrap().as_ref(), &first[..]);
    // Room again once the first message is deleted.
    let (s, _, _) = t.req(Method::DELETE, &format!("{path}/{}", m1["id"].as_str().unwrap()), Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    let (s, v) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("second.bin", &[8u8; 50_000])]).await;
    assert_eq!(s, 200, "{v}");
}

/// Sends `body` to a JSON route one byte every `every`; the answer and
/// when it came.
async fn trickle(t: &TestServer, w: &World, every: Duration, body_len: usize) -> (u16, String, Duration, usize) {
    let head = format!(
        "POST /api/v10/channels/{}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n",
        w.channel, w.bot_auth
    );
    let mut s = TcpStream::connect(addr(t)).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let start = Instant::now();
    let mut sent = 0;
    loop {
        if let Some((status, body)) = read_answer(&mut s, every).await {
            let at = start.elapsed();
            assert_eq!(read_answer(&mut s, Duration::from_secs(5)).await, None, "closed after the answer");
            return (status, body, at, sent);
        }
        assert!(start.elapsed() < Duration::from_secs(60) && sent < body_len, "never cut");
        s.write_all(b" ").await.unwrap();
        sent += 1;
    }
}

/// The body deadline, shortened (1 KiB per 1 s window): a trickle is cut
/// with 408 and the connection closed; a multipart upload cut so leaves no
/// file; a slow but steady client gets through.
#[tokio::test]
async fn a_trickled_body_is_cut_with_408_and_a_slow_steady_one_is_not() {
    let t = TestServer::start_with(|c| {
        c.http.body_window_ms = 1_000;
        c.http.body_min_bytes_per_window = 1_024;
    })
    .await;
    let w = t.world().await;
    let (status, body, at, sent) = trickle(&t, &w, Duration::from_millis(200), 10_000).await;
    eprintln!("trickle at 1 B/200 ms under 1 KiB/1 s: {status} after {at:?} ({sent} bytes)");
    assert_eq!(status, 408, "{body}");
    assert!(at < Duration::from_secs(5), "{at:?}");

    // A multipart upload trickled after its first part.
    let full = form(&json!({}), &[("slow.bin", &[1u8; 100_000])]);
    let head = format!(
        "POST /api/v10/channels/{}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n",
        w.channel,
        w.bot_auth,
        full.len()
    );
    let mut s = TcpStream::connect(addr(&t)).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&full[..2_000]).await.unwrap();
    let mut answer = None;
    for b in &full[2_000..2_100] {
        answer = read_answer(&mut s, Duration::from_millis(200)).await;
        if answer.is_some() {
            break;
        }
        s.write_all(&[*b]).await.unwrap();
    }
    assert_eq!(answer.map(|a| a.0), Some(408));
    eventually("the cut upload's temporary file removed", || all_files(&t).is_empty()).await;

    // 20 KiB at 4 KiB per 500 ms (8 KiB/s): through.
    let padded = format!("{}{}", " ".repeat(20 << 10), json!({"content": "slow but steady"}));
    let head = format!(
        "POST /api/v10/channels/{}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        w.channel,
        w.bot_auth,
        padded.len()
    );
    let mut s = TcpStream::connect(addr(&t)).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    for piece in padded.as_bytes().chunks(4 << 10) {
        s.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, body) = read_answer(&mut s, WAIT).await.expect("an answer");
    assert_eq!(status, 200, "{body}");
}

/// The default rule (8 KiB per 10 s): a body trickled at 1 byte per 5 s is
/// cut within 30 s; a 25 MiB upload over loopback goes through.
#[tokio::test]
async fn the_default_rule_cuts_a_trickle_of_1_byte_per_5_s_within_30_s() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let big = vec![5u8; 25 << 20];
    let start = Instant::now();
    let (s, v) = upload(&t, &format!("/channels/{}/messages", w.channel), Some(&w.bot_auth), json!({}), &[("big.bin", &big)]).await;
    assert_eq!(s, 200, "{v}");
    eprintln!("25 MiB upload over loopback: {:?}", start.elapsed());
    let (status, body, at, sent) = trickle(&t, &w, Duration::from_secs(5), 1_000).await;
    eprintln!("trickle at 1 B/5 s under the default rule: {status} after {at:?} ({sent} bytes)");
    assert_eq!(status, 408, "{body}");
    assert!(at < Duration::from_secs(30), "{at:?}");
}

/// A connection from `ip` to the server.
async fn connect_from(ip: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{ip}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

async fn health(s: &mut TcpStream, wait: Duration) -> Option<(u16, String)> {
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await.ok()?;
    read_answer(s, wait).await
}

/// `http.max_connections_per_ip`: the (N+1)th connection from one address
/// is answered 429 and closed while another address still gets in; a
/// place comes back when a connection ends. Gateway sockets leave the
/// count at their upgrade.
#[tokio::test]
async fn the_per_address_cap_refuses_the_next_connection_and_spares_other_addresses() {
    let t = TestServer::start_with(|c| {
        c.http.max_connections_per_ip = 3;
        c.http.per_ip_exempt = Vec::new();
    })
    .await;
    let to = addr(&t);
    // Five gateway sockets from one address: upgraded, not counted.
    let mut gws = Vec::new();
    for _ in 0..5 {
        gws.push(Gw::connect(&t.ws).await);
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = connect_from("127.0.0.1", to).await;
        assert_eq!(health(&mut s, WAIT).await.map(|a| a.0), Some(200));
        held.push(s);
    }
    let mut over = connect_from("127.0.0.1", to).await;
    let (status, body) = read_answer(&mut over, WAIT).await.expect("the refusal");
    assert_eq!(status, 429, "{body}");
    assert_eq!(read_answer(&mut over, WAIT).await, None, "closed");
    let mut other = connect_from("127.0.0.2", to).await;
    assert_eq!(health(&mut other, WAIT).await.map(|a| a.0), Some(200), "another address gets in");

    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = connect_from("127.0.0.1", to).await;
        if health(&mut s, WAIT).await.map(|a| a.0) == Some(200) {
            break;
        }
        assert!(Instant::now() < deadline, "the place never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(gws);
}

/// `http.max_connections`: at the cap the server stops accepting, and the
/// next connection is served once one ends (backpressure, not refusal).
#[tokio::test]
async fn at_the_total_cap_the_next_connection_waits_for_a_place() {
    let t = TestServer::start_with(|c| c.http.max_connections = 2).await;
    let to = addr(&t);
    let mut a = connect_from("127.0.0.1", to).await;
    assert_eq!(health(&mut a, WAIT).await.map(|a| a.0), Some(200));
    let mut b = connect_from("127.0.0.3", to).await;
    assert_eq!(health(&mut b, WAIT).await.map(|a| a.0), Some(200));
    let mut waiting = connect_from("127.0.0.4", to).await;
    assert_eq!(health(&mut waiting, Duration::from_millis(300)).await, None, "not accepted while two are held");
    drop(a);
    let (status, _) = read_answer(&mut waiting, WAIT).await.expect("served once a place is free");
    assert_eq!(status, 200);
}
