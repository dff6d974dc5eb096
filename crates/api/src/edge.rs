//! The HTTP edge's own limits (`[http]`), below the routes: how many
//! connections are held in total and per client address, how fast a
//! request body must arrive, and how a connection that still has unread
//! request bytes is closed.
//!
//! - **Connections** ([`ConnGate`]): every accepted socket holds a place in
//!   `http.max_connections` and, unless its peer is exempt (a trusted
//!   proxy, loopback by default), one of its address's
//!   `http.max_connections_per_ip`, until its HTTP connection ends. A
//!   WebSocket upgrade ends it: the gateway socket is then counted by
//!   `limits.max_gateway_connections` alone. At the total cap the accept
//!   loop waits (the kernel's backlog holds new connections); over an
//!   address's cap the connection is answered 429 and closed unread.
//! - **Bodies** ([`TimedBody`]): at least `http.body_min_bytes_per_window`
//!   per `http.body_window_ms`, and the whole body within
//!   `http.body_timeout_ms`, else the body ends in an error, the request
//!   is answered 408 and the connection closed.
//! - **Closing** ([`Edge`]): when hyper closes a connection whose request
//!   was not read to its end (an early refusal, a cut body), the socket
//!   first sends FIN, then drains what the client still sends for at most
//!   `http.close_drain_ms` / `http.close_drain_bytes`: the client reads the
//!   answer rather than a reset, and cannot hold the connection by sending.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use config::client_addr::TrustedProxies;
use config::HttpConfig;

/// The answer to a connection over its address's cap, written without
/// reading the request (Discord's rate-limit body: libraries wait
/// `retry_after` and retry).
const OVER_IP_CAP: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 94\r\n\r\n{\"message\":\"Too many connections from this address.\",\"retry_after\":1.0,\"global\":true,\"code\":0}";

/// Connections held per client address.
type PerIp = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// Counts of connections in the HTTP phase: in total and per address.
pub struct ConnGate {
    total: Arc<Semaphore>,
    per_ip: PerIp,
    max_per_ip: usize,
    trusted: TrustedProxies,
    exempt: TrustedProxies,
}

/// One connection's places; given back when dropped.
pub struct ConnSlot {
    _total: OwnedSemaphorePermit,
    ip: Option<(IpAddr, PerIp)>,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        if let Some((ip, map)) = self.ip.take() {
            let mut m = map.lock().expect("connection map poisoned");
            if let Some(n) = m.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&ip);
                }
            }
        }
    }
}

impl ConnGate {
    pub fn new(c: &HttpConfig) -> ConnGate {
        ConnGate {
            total: Arc::new(Semaphore::new(c.max_connections.max(1))),
            per_ip: Arc::default(),
            max_per_ip: c.max_connections_per_ip.max(1),
            // Both checked by `Config::validate`.
            trusted: TrustedProxies::parse(&c.trusted_proxies).unwrap_or_default(),
            exempt: TrustedProxies::parse(&c.per_ip_exempt).unwrap_or_default(),
        }
    }

    /// A place among all connections: waits while every one is taken.
    pub async fn place(&self) -> OwnedSemaphorePermit {
        self.total.clone().acquire_owned().await.expect("the connection semaphore is never closed")
    }

    /// Admits a connection from `peer` holding `place`, or `None` when its
    /// address is at its cap.
    pub fn admit(&self, place: OwnedSemaphorePermit, peer: IpAddr) -> Option<ConnSlot> {
        if self.trusted.contains(peer) || self.exempt.contains(peer) {
            return Some(ConnSlot { _total: place, ip: None });
        }
        let ip = canonical(peer);
        let mut m = self.per_ip.lock().expect("connection map poisoned");
        let n = m.entry(ip).or_default();
        if *n >= self.max_per_ip {
            return None;
        }
        *n += 1;
        drop(m);
        Some(ConnSlot { _total: place, ip: Some((ip, self.per_ip.clone())) })
    }
}

/// IPv4-mapped IPv6 peers count as their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Answers a connection over its address's cap and closes it, without
/// reading from it or waiting for room to write (a refusal costs nothing).
pub fn refuse(stream: TcpStream) {
    let _ = stream.try_write(OVER_IP_CAP);
}

/// A connection's socket as hyper sees it: reads and writes pass through;
/// closing sends FIN, then drains the client's bytes, bounded (see the
/// module doc).
///
/// Once [`UpgradeHold::hold`] is called (the request is a WebSocket upgrade
/// answered 101), what hyper writes is kept instead of sent and leaves with
/// the gateway's HELLO in one write ([`Edge::into_parts`]): one segment
/// and one wake-up of the client instead of two, as a bare gateway does.
pub struct Edge {
    stream: TcpStream,
    drain_for: Duration,
    drain_bytes: u64,
    closing: Option<Closing>,
    hold: UpgradeHold,
    held: Vec<u8>,
}

/// Shared by a connection's [`Edge`] and its request handler: set when the
/// handler answers 101.
#[derive(Clone, Default)]
pub struct UpgradeHold(Arc<AtomicBool>);

impl UpgradeHold {
    /// From now on the connection's writes are kept for the upgraded socket.
    pub fn hold(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

struct Closing {
    deadline: Pin<Box<Sleep>>,
    left: u64,
    fin_sent: bool,
}

impl Edge {
    pub fn new(stream: TcpStream, c: &HttpConfig, hold: UpgradeHold) -> Edge {
        Edge {
            stream,
            drain_for: Duration::from_millis(c.close_drain_ms),
            drain_bytes: c.close_drain_bytes,
            closing: None,
            hold,
            held: Vec::new(),
        }
    }

    /// The socket of an upgraded connection, and the bytes of the answer
    /// kept for it (the 101), to be written before anything else.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.stream, self.held)
    }
}

impl AsyncRead for Edge {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Edge {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.hold.is_set() {
            self.held.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        if self.hold.is_set() {
            let n = bufs.iter().map(|b| b.len()).sum();
            for b in bufs {
                self.held.extend_from_slice(b);
            }
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.hold.is_set() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    /// FIN, then read and drop until the client's EOF, the byte bound or
    /// the deadline; the socket is closed when hyper drops it. An answer
    /// kept for an upgrade that did not happen is written first.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        while !this.held.is_empty() {
            match ready!(Pin::new(&mut this.stream).poll_write(cx, &this.held)) {
                Ok(n) if n > 0 => drop(this.held.drain(..n)),
                _ => this.held.clear(),
            }
        }
        let (drain_for, drain_bytes) = (this.drain_for, this.drain_bytes);
        let c = this.closing.get_or_insert_with(|| Closing {
            deadline: Box::pin(tokio::time::sleep(drain_for)),
            left: drain_bytes,
            fin_sent: false,
        });
        if !c.fin_sent {
            if ready!(Pin::new(&mut this.stream).poll_shutdown(cx)).is_err() {
                return Poll::Ready(Ok(()));
            }
            c.fin_sent = true;
        }
        let mut buf = [0u8; 8192];
        loop {
            if c.left == 0 || c.deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut buf);
            match Pin::new(&mut this.stream).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => c.left = c.left.saturating_sub(rb.filled().len() as u64),
                // EOF or an error: the client is done.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The rule a request body is read under (see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct BodyRule {
    pub window: Duration,
    pub min_per_window: u64,
    pub total: Duration,
}

impl BodyRule {
    pub fn from_config(c: &HttpConfig) -> BodyRule {
        BodyRule {
            window: Duration::from_millis(c.body_window_ms.max(1)),
            min_per_window: c.body_min_bytes_per_window,
            total: Duration::from_millis(c.body_timeout_ms.max(1)),
        }
    }
}

/// The error a body cut by its rule ends in.
#[derive(Debug, thiserror::Error)]
#[error("request body too slow")]
pub struct BodyTooSlow;

/// A request body read under a [`BodyRule`]. The clock starts when the
/// handler first asks for the body; a body that breaks the rule yields
/// [`BodyTooSlow`] and sets `cut`, which the listener answers 408.
pub struct TimedBody {
    inner: Incoming,
    rule: BodyRule,
    cut: Arc<AtomicBool>,
    clock: Option<Clock>,
}

struct Clock {
    ends: Instant,
    window_ends: Instant,
    window_bytes: u64,
    timer: Pin<Box<Sleep>>,
}

impl TimedBody {
    pub fn new(inner: Incoming, rule: BodyRule, cut: Arc<AtomicBool>) -> TimedBody {
        TimedBody { inner, rule, cut, clock: None }
    }
}

impl Clock {
    /// Whether the body still keeps the rule at `now`; a window that ended
    /// with enough bytes starts the next one.
    fn keeps(&mut self, rule: &BodyRule, now: Instant) -> bool {
        if now >= self.ends {
            return false;
        }
        if now >= self.window_ends {
            if self.window_bytes < rule.min_per_window {
                return false;
            }
            self.window_bytes = 0;
            self.window_ends = now + rule.window;
        }
        true
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let rule = this.rule;
        let clock = this.clock.get_or_insert_with(|| {
            let now = Instant::now();
            Clock {
                ends: now + rule.total,
                window_ends: now + rule.window,
                window_bytes: 0,
                timer: Box::pin(tokio::time::sleep(rule.window)),
            }
        });
        loop {
            let polled = Pin::new(&mut this.inner).poll_frame(cx);
            let now = Instant::now();
            match polled {
                Poll::Ready(Some(Ok(frame))) => {
                    clock.window_bytes += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if !clock.keeps(&rule, now) {
                        break;
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    if !clock.keeps(&rule, now) {
                        break;
                    }
                    // Wake at the end of the window (or of the whole time)
                    // to judge it even if no byte comes.
                    let at = clock.window_ends.min(clock.ends);
                    clock.timer.as_mut().reset(at);
                    if clock.timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
        }
        this.cut.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(Box::new(BodyTooSlow))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(per_ip: usize, exempt: &[&str]) -> ConnGate {
        ConnGate::new(&HttpConfig {
            max_connections: 10,
            max_connections_per_ip: per_ip,
            per_ip_exempt: exempt.iter().map(|s| s.to_string()).collect(),
            trusted_proxies: vec!["10.0.0.1".into()],
            ..HttpConfig::default()
        })
    }

    /// A connected pair over loopback: (the server's end, the client's).
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        (l.accept().await.unwrap().0, client)
    }

    /// Everything queued for the client right now, without waiting.
    fn arrived(client: &TcpStream) -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        match client.try_read(&mut buf) {
            Ok(n) => buf[..n].to_vec(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Vec::new(),
            Err(e) => panic!("{e}"),
        }
    }

    /// Writes pass through until the hold; after it, the answer is kept
    /// (nothing reaches the client) and comes back with the socket.
    #[tokio::test]
    async fn an_upgrade_answer_is_kept_for_the_socket_after_the_hold() {
        use tokio::io::AsyncWriteExt;
        let (server, client) = pair().await;
        let hold = UpgradeHold::default();
        let mut edge = Edge::new(server, &HttpConfig::default(), hold.clone());
        edge.write_all(b"before").await.unwrap();
        edge.flush().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < 6 && std::time::Instant::now() < deadline {
            client.readable().await.unwrap();
            got.extend(arrived(&client));
        }
        assert_eq!(got, b"before");
        hold.hold();
        edge.write_all(b"HTTP/1.1 101 Switching Protocols\r\n").await.unwrap();
        let bufs = [std::io::IoSlice::new(b"Upgrade: websocket\r\n"), std::io::IoSlice::new(b"\r\n")];
        let n = edge.write_vectored(&bufs).await.unwrap();
        assert_eq!(n, 22);
        edge.flush().await.unwrap();
        let (stream, answer) = edge.into_parts();
        assert_eq!(answer, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
        // Nothing of the answer left on its own (the pair is idle: a write
        // would have arrived by now, as the first did above).
        tokio::task::yield_now().await;
        assert_eq!(arrived(&client), b"", "the kept answer was not sent");
        drop(stream);
    }

    /// A kept answer whose upgrade never happens still reaches the client
    /// before the FIN.
    #[tokio::test]
    async fn a_kept_answer_is_sent_when_the_connection_closes_instead() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (server, mut client) = pair().await;
        let hold = UpgradeHold::default();
        let mut edge = Edge::new(server, &HttpConfig { close_drain_ms: 50, ..HttpConfig::default() }, hold.clone());
        hold.hold();
        edge.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").await.unwrap();
        edge.shutdown().await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut got)).await.unwrap().unwrap();
        assert_eq!(got, b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
    }

    #[tokio::test]
    async fn per_address_cap_counts_until_a_slot_is_dropped_and_spares_the_exempt() {
        let g = gate(2, &[]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let a = g.admit(g.place().await, ip("192.0.2.1")).unwrap();
        let _b = g.admit(g.place().await, ip("::ffff:192.0.2.1")).expect("mapped is the same address");
        assert!(g.admit(g.place().await, ip("192.0.2.1")).is_none(), "third from one address");
        assert!(g.admit(g.place().await, ip("192.0.2.2")).is_some(), "another address");
        drop(a);
        assert!(g.admit(g.place().await, ip("192.0.2.1")).is_some(), "a place came back");
        let proxied: Vec<_> = (0..5).filter_map(|_| g.admit(g.total.clone().try_acquire_owned().unwrap(), ip("10.0.0.1"))).collect();
        assert_eq!(proxied.len(), 5, "a trusted proxy has no per-address cap");
        let g = gate(1, &["127.0.0.0/8"]);
        let local: Vec<_> = (0..3).filter_map(|_| g.admit(g.total.clone().try_acquire_owned().unwrap(), ip("127.0.0.9"))).collect();
        assert_eq!(local.len(), 3, "exempt peers");
    }

    #[test]
    fn the_refusal_is_one_whole_http_answer() {
        let text = std::str::from_utf8(OVER_IP_CAP).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["retry_after"], 1.0);
    }

    #[tokio::test]
    async fn the_total_cap_waits_for_a_place() {
        let g = ConnGate::new(&HttpConfig { max_connections: 1, ..HttpConfig::default() });
        let first = g.place().await;
        assert!(tokio::time::timeout(Duration::from_millis(20), g.place()).await.is_err(), "the second waits");
        drop(first);
        let _second = tokio::time::timeout(Duration::from_secs(5), g.place()).await.expect("admitted once the first is gone");
    }
}
