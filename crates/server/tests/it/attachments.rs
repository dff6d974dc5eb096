//! Attachments: multipart uploads streamed to disk by content hash, served
//! back with ranges, size limits (413/40005 declared or streamed), the
//! ATTACH_FILES permission, reference-counted removal and orphans.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

const BOUNDARY: &str = "throngtestboundary7MA4YWxkTrZu0gW";

/// A multipart body as the libraries send it: `payload_json`, then `files[n]`.
pub fn form(payload: &Value, files: &[(&str, &[u8])]) -> Vec<u8> {
    let typed: Vec<_> = files.iter().map(|(n, d)| (*n, *d, Some("application/octet-stream"))).collect();
    typed_form(payload, &typed)
}

/// A multipart body whose file parts declare the given types (or none).
pub fn typed_form(payload: &Value, files: &[(&str, &[u8], Option<&str>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{payload}\r\n"
        )
        .as_bytes(),
    );
    for (i, (name, data, ty)) in files.iter().enumerate() {
        let ty = ty.map(|t| format!("Content-Type: {t}\r\n")).unwrap_or_default();
        b.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"files[{i}]\"; filename=\"{name}\"\r\n{ty}\r\n").as_bytes(),
        );
        b.extend_from_slice(data);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    b
}

pub async fn upload(t: &TestServer, path: &str, auth: Option<&str>, payload: Value, files: &[(&str, &[u8])]) -> (u16, Value) {
    let mut r = t
        .http
        .post(format!("{}{path}", t.base))
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(form(&payload, files));
    if let Some(a) = auth {
        r = r.header("authorization", a);
    }
    let resp = r.send().await.unwrap();
    let s = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn data_dir(t: &TestServer) -> PathBuf {
    t.node().config.data_dir.join("attachments")
}

fn blob(t: &TestServer, data: &[u8]) -> PathBuf {
    let h = hex::encode(Sha256::digest(data));
    data_dir(t).join(&h[..2]).join(h)
}

/// Files under the attachments directory (not its temporary ones).
fn stored_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in std::fs::read_dir(dir).unwrap().flatten() {
        if sub.file_name() == "tmp" {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            out.push(f.path());
        }
    }
    out
}

fn tmp_files(t: &TestServer) -> usize {
    std::fs::read_dir(data_dir(t).join("tmp")).unwrap().count()
}

fn pseudo_random(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + 7) as u8).wrapping_mul(seed) ^ (i >> 8) as u8).collect()
}

/// Waits until `f` holds (discards run after the answer).
async fn eventually(mut f: impl FnMut() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition never held");
}

#[tokio::test]
async fn upload_is_served_back_with_ranges_and_removed_with_its_message() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let data = pseudo_random(200_000, 3);
    let path = format!("/channels/{}/messages", w.channel);
    let payload = json!({"content": "a file", "attachments": [{"id": 0, "description": "numbers"}]});
    let (s, m) = upload(&t, &path, Some(&w.bot_auth), payload, &[("some file.bin", &data)]).await;
    assert_eq!(s, 200, "{m}");
    let a = &m["attachments"][0];
    assert_eq!(a["filename"], "some_file.bin");
    assert_eq!(a["size"], 200_000);
    assert_eq!(a["description"], "numbers");
    assert_eq!(a["url"], a["proxy_url"]);
    let url = a["url"].as_str().unwrap().to_string();
    let (bare, signature) = url.split_once('?').unwrap();
    assert!(bare.ends_with(&format!("/attachments/{}/{}/some_file.bin", w.channel, a["id"].as_str().unwrap())), "{url}");
    assert!(signature.starts_with("ex=") && signature.contains("&hm="), "signed: {url}");
    assert!(blob(&t, &data).exists(), "stored under its content hash");

    let r = t.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-length"], "200000");
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert_eq!(r.bytes().await.unwrap().as_ref(), &data[..], "byte-identical");

    let r = t.http.get(&url).header("range", "bytes=1000-1999").send().await.unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.headers()["content-range"], "bytes 1000-1999/200000");
    assert_eq!(r.headers()["content-length"], "1000");
    assert_eq!(r.bytes().await.unwrap().as_ref(), &data[1000..2000]);
    let r = t.http.get(&url).header("range", "bytes=-10").send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.bytes().await.unwrap().as_ref()), (206, &data[199_990..]));
    let r = t.http.get(&url).header("range", "bytes=200000-").send().await.unwrap();
    assert_eq!(r.status(), 416);
    assert_eq!(r.headers()["content-range"], "bytes */200000");

    // History shows the same attachment object, its URLs signed afresh.
    let (_, h) = t.get(&format!("{path}?limit=1"), &w.owner).await;
    let unsigned = |v: &Value| {
        let mut v = v.clone();
        for k in ["url", "proxy_url"] {
            v[k] = v[k].as_str().unwrap().split('?').next().unwrap().into();
        }
        v
    };
    assert_eq!(unsigned(&h[0]["attachments"][0]), unsigned(a));
    // The wrong filename or channel in the URL is not the file.
    let wrong = url.replace("some_file.bin", "other.bin");
    assert_eq!(t.http.get(&wrong).send().await.unwrap().status(), 404);

    let mid = m["id"].as_str().unwrap();
    let (s, _, _) = t.req(Method::DELETE, &format!("{path}/{mid}"), Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    assert!(!blob(&t, &data).exists(), "the last reference went: the file is gone");
    assert_eq!(t.http.get(&url).send().await.unwrap().status(), 404);
}

/// An attachment's `content_type`: what its bytes prove, else what its part
/// declared, else a guess from its name; left out when nothing says.
#[tokio::test]
async fn content_type_is_sniffed_then_declared_then_guessed_else_absent() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0; 16]].concat();
    let files: [(&str, &[u8], Option<&str>); 5] = [
        ("lies.txt", &png, Some("text/plain")),
        ("data.bin", b"abc", Some("application/x-custom")),
        ("notes.md", b"# hi", Some("application/octet-stream")),
        ("blob", b"xyz", None),
        ("opaque", b"xyz2", Some("application/octet-stream")),
    ];
    let resp = t
        .http
        .post(format!("{}/channels/{}/messages", t.base, w.channel))
        .header("authorization", &w.owner)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(typed_form(&json!({"content": "types"}), &files))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let m: Value = resp.json().await.unwrap();
    let a = m["attachments"].as_array().unwrap();
    assert_eq!(a[0]["content_type"], "image/png", "sniffed beats declared");
    assert_eq!(a[1]["content_type"], "application/x-custom", "declared");
    assert_eq!(a[2]["content_type"], "text/plain; charset=utf-8", "octet-stream: guessed from the name");
    assert!(a[3].get("content_type").is_none(), "nothing says: left out, not null: {}", a[3]);
    assert_eq!(a[4]["content_type"], "application/octet-stream", "declared octet-stream, nothing better");
}

#[tokio::test]
async fn the_same_content_is_stored_once_and_removed_with_its_last_message() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let data = pseudo_random(50_000, 5);
    let path = format!("/channels/{}/messages", w.channel);
    let (s1, m1) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("a.bin", &data)]).await;
    let (s2, m2) = upload(&t, &path, Some(&w.owner), json!({"content": "again"}), &[("b.bin", &data), ("c.bin", &data)]).await;
    assert_eq!((s1, s2), (200, 200), "{m1} {m2}");
    assert_eq!(stored_files(&data_dir(&t)), vec![blob(&t, &data)], "one file for three attachments");
    let del = |m: &Value| format!("{path}/{}", m["id"].as_str().unwrap());
    assert_eq!(t.req(Method::DELETE, &del(&m1), Some(&w.owner), None).await.0, 204);
    assert!(blob(&t, &data).exists(), "still named by the second message");
    let url = m2["attachments"][1]["url"].as_str().unwrap();
    assert_eq!(t.http.get(url).send().await.unwrap().bytes().await.unwrap().as_ref(), &data[..]);
    assert_eq!(t.req(Method::DELETE, &del(&m2), Some(&w.owner), None).await.0, 204);
    assert!(!blob(&t, &data).exists());
    assert_eq!(t.node().store.blob_refs(&hex::encode(Sha256::digest(&data))).await.unwrap(), 0);
}

/// A request over the limits: 413 with code 40005, whether its
/// Content-Length says so or it streams more than it declared (chunked);
/// nothing is left on disk or in the store.
#[tokio::test]
async fn over_the_size_limits_is_413_40005_and_leaves_nothing() {
    let t = TestServer::start_with(|c| {
        c.attachments.max_file_bytes = 100_000;
        c.attachments.max_request_bytes = 150_000;
    })
    .await;
    let w = t.world().await;
    let path = format!("/channels/{}/messages", w.channel);
    let big = pseudo_random(100_001, 7);
    let (s, v) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("big.bin", &big)]).await;
    assert_eq!((s, v["code"].as_u64()), (413, Some(40005)), "one file over max_file_bytes: {v}");
    let ok = pseudo_random(90_000, 9);
    let (s, v) = upload(&t, &path, Some(&w.bot_auth), json!({}), &[("a.bin", &ok), ("b.bin", &pseudo_random(90_000, 11))]).await;
    assert_eq!((s, v["code"].as_u64()), (413, Some(40005)), "files together over max_request_bytes: {v}");

    // Declared: refused before any byte of the body is read.
    let addr = t.server.as_ref().unwrap().addr;
    let head = format!(
        "POST /api/v10{path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 900000000\r\n\r\n",
        w.bot_auth
    );
    let (status, body) = raw_request(addr, head.as_bytes(), &[]).await;
    assert!(status.contains(" 413 ") && body.contains("40005"), "{status} {body}");

    // Streamed: chunked, no length declared, the file grows past the limit.
    let head = format!(
        "POST /api/v10{path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nTransfer-Encoding: chunked\r\n\r\n",
        w.bot_auth
    );
    let full = form(&json!({}), &[("s.bin", &pseudo_random(300_000, 13))]);
    let (status, body) = raw_request(addr, head.as_bytes(), &full).await;
    assert!(status.contains(" 413 ") && body.contains("40005"), "{status} {body}");

    // Files of a refused request are discarded after the answer: the one
    // stored before the second file went over the limit too.
    eventually(|| tmp_files(&t) == 0 && stored_files(&data_dir(&t)).is_empty()).await;
    let (_, h) = t.get(&format!("{path}?limit=5"), &w.owner).await;
    assert_eq!(h, json!([]), "no message");
}

/// Sends `head` then `body` in chunks of the chunked encoding (when the head
/// says so), without waiting; returns the status line and the body read.
async fn raw_request(addr: std::net::SocketAddr, head: &[u8], body: &[u8]) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head).await.unwrap();
    let chunked = String::from_utf8_lossy(head).contains("chunked");
    for c in body.chunks(16 << 10) {
        let w = if chunked {
            let mut v = format!("{:x}\r\n", c.len()).into_bytes();
            v.extend_from_slice(c);
            v.extend_from_slice(b"\r\n");
            s.write_all(&v).await
        } else {
            s.write_all(c).await
        };
        // The server may answer and close before the whole body is sent.
        if w.is_err() {
            break;
        }
    }
    if chunked {
        let _ = s.write_all(b"0\r\n\r\n").await;
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.windows(4).any(|w| w == b"\r\n\r\n") && String::from_utf8_lossy(&out).contains("\"code\"") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// A guild made in the store: `@everyone` without ATTACH_FILES, a role
/// `uploader` granting it, the owner, a member with the role, one without.
pub struct RoleWorld {
    pub owner: String,
    pub with: String,
    pub without: String,
    pub stranger: String,
    pub guild: String,
    pub channel: String,
}

pub async fn role_world(t: &TestServer, granted: u64, everyone_lacks: u64) -> RoleWorld {
    use protocol::{ChannelId, GuildId, RoleId, UserId};
    let (owner, owner_id) = t.user("owner").await;
    let (with, with_id) = t.user("granted").await;
    let (without, without_id) = t.user("plain").await;
    let (stranger, _) = t.user("stranger").await;
    let node = t.node();
    let gid: GuildId = node.ids.next().into();
    let cid: ChannelId = node.ids.next().into();
    let role: RoleId = node.ids.next().into();
    let id = |s: &str| UserId(s.parse().unwrap());
    let mut everyone = server::guild::everyone_role(gid);
    everyone.permissions &= !everyone_lacks;
    let r = store::RoleRecord {
        id: role,
        guild_id: gid,
        name: "granted".into(),
        color: 0,
        hoist: false,
        position: 1,
        permissions: granted,
        mentionable: false,
        bot_id: None,
    };
    let m = |u: UserId, roles: Vec<RoleId>| store::MemberRecord { roles, ..store::MemberRecord::joined(gid, u, 1) };
    let guild = store::GuildRecord {
        id: gid,
        name: "perms".into(),
        icon: None,
        description: None,
        owner_id: id(&owner_id),
        system_channel_id: Some(cid),
        created_at: 1,
    };
    node.store
        .create_guild(&store::NewGuild {
            guild,
            roles: vec![everyone, r],
            channels: vec![server::guild::text_channel(cid, gid, "general".into(), 0)],
            members: vec![m(id(&owner_id), vec![]), m(id(&with_id), vec![role]), m(id(&without_id), vec![])],
        })
        .await
        .unwrap();
    RoleWorld { owner, with, without, stranger, guild: gid.to_string(), channel: cid.to_string() }
}

/// ATTACH_FILES, checked by the guild's actor: the owner and a member with
/// it may upload; a member without it gets 403 50013 (text alone is fine),
/// a non-member 403 50001. A refused upload leaves no file and no row.
#[tokio::test]
async fn attach_files_is_required_and_a_refused_upload_leaves_no_orphan() {
    use protocol::model::permission::ATTACH_FILES;
    let t = TestServer::start().await;
    let r = role_world(&t, ATTACH_FILES, ATTACH_FILES).await;
    let path = format!("/channels/{}/messages", r.channel);
    let cases = [(&r.owner, 200, None), (&r.with, 200, None), (&r.without, 403, Some(50013)), (&r.stranger, 403, Some(50001))];
    for (i, (who, status, code)) in cases.iter().enumerate() {
        let data = pseudo_random(1000 + i, 17);
        let (s, v) = upload(&t, &path, Some(who), json!({"content": "file"}), &[("f.txt", &data)]).await;
        assert_eq!((s, v["code"].as_u64()), (*status, *code), "case {i}: {v}");
        if s == 200 {
            assert_eq!(v["attachments"][0]["content_type"], "text/plain; charset=utf-8", "guessed from the name");
            assert!(blob(&t, &data).exists());
        } else {
            let p = blob(&t, &data);
            eventually(|| !p.exists()).await;
            let refs = t.node().store.blob_refs(&hex::encode(Sha256::digest(&data))).await.unwrap();
            assert_eq!(refs, 0, "case {i}: the pending row is gone");
        }
    }
    let (s, _) = t.post(&path, &r.without, json!({"content": "text is fine"})).await;
    assert_eq!(s, 200);
    assert_eq!(tmp_files(&t), 0);
}

/// The sweeper: a pending upload older than the grace (its REST node died
/// before the answer) goes with its file; a file no row names goes; a
/// linked file stays.
#[tokio::test]
async fn the_sweeper_removes_orphans_and_keeps_what_messages_name() {
    let t = TestServer::start_with(|c| c.attachments.pending_grace_ms = 1).await;
    let w = t.world().await;
    let node = t.node();
    let kept = pseudo_random(5_000, 19);
    let (s, m) = upload(&t, &format!("/channels/{}/messages", w.channel), Some(&w.bot_auth), json!({}), &[("k.bin", &kept)]).await;
    assert_eq!(s, 200, "{m}");
    // A pending upload whose message never came.
    let orphan = pseudo_random(6_000, 23);
    let hash = hex::encode(Sha256::digest(&orphan));
    let rec = store::AttachmentRecord {
        id: node.ids.next(),
        channel_id: w.channel.parse::<u64>().map(protocol::ChannelId).unwrap(),
        message_id: None,
        hash: hash.clone(),
        filename: "o.bin".into(),
        size: orphan.len() as u64,
        content_type: None,
        width: None,
        height: None,
        description: None,
        created_at: 1,
        uploader_id: None,
    };
    node.store.create_attachment(&rec).await.unwrap();
    std::fs::create_dir_all(blob(&t, &orphan).parent().unwrap()).unwrap();
    std::fs::write(blob(&t, &orphan), &orphan).unwrap();
    // A file nothing names (its message went with its channel, say).
    let stray = pseudo_random(7_000, 29);
    std::fs::create_dir_all(blob(&t, &stray).parent().unwrap()).unwrap();
    std::fs::write(blob(&t, &stray), &stray).unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    node.blobs.sweep(&*node.store).await.unwrap();
    assert!(!blob(&t, &orphan).exists(), "expired pending upload removed");
    assert!(node.store.get_attachment(rec.id).await.unwrap().is_none());
    assert!(!blob(&t, &stray).exists(), "unnamed file removed");
    assert!(blob(&t, &kept).exists(), "a message's file stays");
}

/// Uploads in flight are bounded per node: one more is 503 with
/// Retry-After at once, while the first still streams.
#[tokio::test]
async fn uploads_in_flight_are_bounded() {
    let t = TestServer::start_with(|c| c.attachments.upload_concurrency = 1).await;
    let w = t.world().await;
    let addr = t.server.as_ref().unwrap().addr;
    let path = format!("/api/v10/channels/{}/messages", w.channel);
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nTransfer-Encoding: chunked\r\n\r\n",
        w.bot_auth
    );
    let start = form(&json!({}), &[("s.bin", &[1u8; 10])]);
    let part = &start[..start.len() / 2];
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(format!("{:x}\r\n", part.len()).as_bytes()).await.unwrap();
    slow.write_all(part).await.unwrap();
    slow.write_all(b"\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let p = format!("/channels/{}/messages", w.channel);
    let r = t
        .http
        .post(format!("{}{p}", t.base))
        .header("authorization", &w.bot_auth)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(form(&json!({}), &[("x.bin", b"xyz")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    drop(slow);
    // The slot comes back once the first request is gone.
    let mut ok = false;
    for _ in 0..50 {
        let (s, _) = upload(&t, &p, Some(&w.bot_auth), json!({}), &[("x.bin", b"xyz")]).await;
        if s == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "the slot was given back");
    eventually(|| tmp_files(&t) == 0).await;
}
