//! The floor under an IDENTIFY: a bare gateway that does only what the
//! protocol makes any server do for one, so `connect` run against it
//! measures the machine rather than throng. Per connection: TCP accept, the
//! HTTP upgrade, HELLO, reading the IDENTIFY, and a READY plus one
//! GUILD_CREATE per guild of the user (from the fixture), padded to the
//! sizes throng sends, written at once; then heartbeats are acknowledged
//! and nothing else happens. No store, no actors, no JSON beyond finding
//! the token: what throng spends above this is its own.
//!
//! `GET …/gateway` answers `{"url": "ws://<listen>"}` so the load generator
//! finds the gateway as it does on throng.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use base64::Engine;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(clap::Args)]
pub struct FloorArgs {
    /// Where to listen (HTTP and WebSocket on one port, as throng).
    #[arg(long, default_value = "127.0.0.1:28181")]
    pub listen: SocketAddr,
    /// The fixture whose users connect (`throng seed --out`): tokens and
    /// the guilds each user is in.
    #[arg(long)]
    pub fixture: PathBuf,
    /// Size of the READY payload, in bytes (throng's for a user of 5
    /// guilds: ~870).
    #[arg(long, default_value_t = 870)]
    pub ready_bytes: usize,
    /// Size of each GUILD_CREATE payload, in bytes (throng's for a lazy
    /// guild of ~100 members: ~2,100).
    #[arg(long, default_value_t = 2_100)]
    pub guild_create_bytes: usize,
    /// Runtime worker threads (throng's default on this box: 2).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
}

struct Floor {
    /// Token -> the user's ready payload and GUILD_CREATEs, framed.
    sessions: HashMap<String, Arc<Vec<u8>>>,
    gateway_json: Vec<u8>,
}

/// One unmasked server text frame of `payload`.
fn frame(payload: &[u8], out: &mut Vec<u8>) {
    out.push(0x81);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= 0xffff => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// `prefix`, then `"_pad":"xxx…"}` to make `size` bytes in all.
fn padded(prefix: String, size: usize) -> Vec<u8> {
    let mut s = prefix;
    s.push_str(",\"_pad\":\"");
    while s.len() + 2 < size {
        s.push('x');
    }
    s.push_str("\"}");
    s.into_bytes()
}

fn build(a: &FloorArgs) -> anyhow::Result<Floor> {
    let text = std::fs::read_to_string(&a.fixture).with_context(|| format!("reading {}", a.fixture.display()))?;
    let f: crate::fixture::Fixture = serde_json::from_str(&text).context("parsing the fixture")?;
    let mut guilds_of: HashMap<&str, Vec<&str>> = HashMap::new();
    for g in &f.guilds {
        for m in &g.member_ids {
            guilds_of.entry(m.as_str()).or_default().push(g.id.as_str());
        }
    }
    let mut sessions = HashMap::with_capacity(f.users.len());
    for (n, u) in f.users.iter().enumerate() {
        let gs = guilds_of.get(u.id.as_str()).cloned().unwrap_or_default();
        let list: Vec<String> = gs.iter().map(|g| format!("{{\"id\":\"{g}\",\"unavailable\":true}}")).collect();
        let ready = format!(
            "{{\"op\":0,\"s\":1,\"t\":\"READY\",\"d\":{{\"v\":10,\"user\":{{\"id\":\"{}\",\"username\":\"u{n}\",\"bot\":false}},\"guilds\":[{}],\"session_id\":\"{n:032x}\"}}",
            u.id,
            list.join(",")
        );
        let mut out = Vec::new();
        frame(&padded(ready, a.ready_bytes), &mut out);
        for (i, g) in gs.iter().enumerate() {
            let gc = format!("{{\"op\":0,\"s\":{},\"t\":\"GUILD_CREATE\",\"d\":{{\"id\":\"{g}\",\"member_count\":100}}", i + 2);
            frame(&padded(gc, a.guild_create_bytes), &mut out);
        }
        sessions.insert(u.token.clone(), Arc::new(out));
    }
    let gateway_json = format!("{{\"url\":\"ws://{}\"}}", a.listen).into_bytes();
    Ok(Floor { sessions, gateway_json })
}

pub fn run(a: FloorArgs) -> anyhow::Result<()> {
    let floor = Arc::new(build(&a)?);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(a.workers.max(1)).enable_all().build()?;
    rt.block_on(async move {
        // The backlog throng's listener has (4,096): a ramp's burst of SYNs waits there.
        let sock = if a.listen.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        sock.set_reuseaddr(true)?;
        sock.bind(a.listen).with_context(|| format!("binding {}", a.listen))?;
        let listener: TcpListener = sock.listen(4096)?;
        eprintln!("identify floor: {} sessions known, listening on {}", floor.sessions.len(), a.listen);
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let floor = floor.clone();
            tokio::spawn(async move {
                let _ = serve(&floor, stream).await;
            });
        }
    })
}

/// The end of an HTTP head in `buf`, if it is all there.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

async fn serve(floor: &Floor, mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    // HTTP requests (keep-alive) until an upgrade.
    let key = loop {
        let end = loop {
            if let Some(e) = head_end(&buf) {
                break e;
            }
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let key = head
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.eq_ignore_ascii_case("sec-websocket-key"))
            .map(|(_, v)| v.trim().to_string());
        if let Some(k) = key {
            break k;
        }
        let path = head.split(' ').nth(1).unwrap_or("");
        let (status, body): (&str, &[u8]) = if path.ends_with("/gateway") || path.ends_with("/gateway/bot") || path == "/health" {
            ("200 OK", &floor.gateway_json)
        } else {
            ("404 Not Found", b"{\"code\":0,\"message\":\"404: Not Found\"}")
        };
        let resp = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
        s.write_all(resp.as_bytes()).await?;
        s.write_all(body).await?;
    };
    let accept = {
        let mut h = Sha1::new();
        h.update(key.as_bytes());
        h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
        base64::engine::general_purpose::STANDARD.encode(h.finalize())
    };
    let mut out =
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n")
            .into_bytes();
    frame(b"{\"op\":10,\"s\":null,\"t\":null,\"d\":{\"heartbeat_interval\":20000}}", &mut out);
    s.write_all(&out).await?;
    // Client frames (masked): IDENTIFY answered with its READY and
    // GUILD_CREATEs, heartbeats with ACKs, anything else ignored.
    loop {
        while let Some((used, payload)) = client_frame(&buf) {
            buf.drain(..used);
            let text = String::from_utf8_lossy(&payload);
            let op: Option<u8> = text.split("\"op\":").nth(1).and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
            if op == Some(2) {
                let token = text.split("\"token\":\"").nth(1).and_then(|t| t.split('"').next()).unwrap_or("");
                match floor.sessions.get(token) {
                    Some(bytes) => s.write_all(bytes).await?,
                    None => return Ok(()),
                }
            } else if op == Some(1) {
                let mut ack = Vec::new();
                frame(b"{\"op\":11}", &mut ack);
                s.write_all(&ack).await?;
            }
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A complete masked client frame at the start of `buf`: its length and
/// unmasked payload.
fn client_frame(buf: &[u8]) -> Option<(usize, Vec<u8>)> {
    if buf.len() < 2 {
        return None;
    }
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().ok()?) as usize, 10),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    let mask = if masked {
        let m: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(m)
    } else {
        None
    };
    let body = buf.get(at..at + len)?;
    let payload = match mask {
        Some(m) => body.iter().enumerate().map(|(i, b)| b ^ m[i % 4]).collect(),
        None => body.to_vec(),
    };
    Some((at + len, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_pad_to_size() {
        let p = padded("{\"a\":1".into(), 40);
        assert_eq!(p.len(), 40);
        assert!(serde_json::from_slice::<serde_json::Value>(&p).is_ok());
        let mut f = Vec::new();
        frame(&vec![b'x'; 300], &mut f);
        assert_eq!(&f[..4], &[0x81, 126, 1, 44]);
        // A masked client frame of 5 bytes.
        let m = [1u8, 2, 3, 4];
        let mut c = vec![0x81, 0x85];
        c.extend_from_slice(&m);
        c.extend(b"hello".iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        assert_eq!(client_frame(&c), Some((11, b"hello".to_vec())));
        assert_eq!(client_frame(&c[..7]), None);
    }
}
