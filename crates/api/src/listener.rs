//! The one listening port: HTTP/1 for REST, and WebSocket upgrades for the
//! gateway. An upgrade gets the raw `TcpStream` back from hyper (plus any
//! bytes hyper had read ahead), so the gateway runs its own lean framing.
//! The edge's limits (connections in total and per address, the body
//! deadline, the bounded close) are in [`crate::edge`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use protocol::compress::{CompressParams, Transport};
use protocol::CloseCode;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use crate::edge::{BodyRule, ConnGate, Edge, TimedBody, UpgradeHold};
use gateway::socket::{Conn, ConnSlot};
use gateway::{handshake, ws};
use node::Node;

/// Binds the listen address, with SO_REUSEPORT when configured so several
/// processes can share the port.
/// Pending connections the kernel queues before `accept` (capped by
/// `net.core.somaxconn`): enough for a reconnect storm's burst of SYNs
/// while the accept loop catches up.
const LISTEN_BACKLOG: i32 = 4096;
/// Pause after a failed `accept` (out of file descriptors and the like),
/// so the loop backs off instead of spinning on the same error.
const ACCEPT_ERROR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);
/// A client must send its request head within this time (slowloris guard).
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let domain = if addr.is_ipv6() { socket2::Domain::IPV6 } else { socket2::Domain::IPV4 };
    let sock = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if reuse_port {
        sock.set_reuse_port(true)?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(LISTEN_BACKLOG)?;
    TcpListener::from_std(sock.into())
}

/// Accepts connections until shutdown.
pub async fn serve(node: Arc<Node>, sessions: Arc<gateway::Sessions>, listener: TcpListener) {
    let app = crate::router(node.clone(), sessions.clone());
    let gate = ConnGate::new(&node.config.http);
    loop {
        // At `http.max_connections`, wait for one to end before accepting:
        // new connections wait in the kernel's backlog meanwhile.
        let place = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            p = gate.place() => p,
        };
        let accepted = tokio::select! {
            _ = node.shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        let Some(slot) = gate.admit(place, peer.ip()) else {
            tracing::debug!(peer = %peer.ip(), "over http.max_connections_per_ip: refused");
            crate::edge::refuse(stream);
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "set_nodelay failed");
        }
        let (node2, sessions, app) = (node.clone(), sessions.clone(), app.clone());
        node.tasks.spawn(async move {
            serve_http(node2, sessions, app, stream, peer).await;
            // Held while the connection speaks HTTP: an upgrade ends
            // `serve_http` (hyper hands the socket over), so a gateway
            // socket is counted by `limits.max_gateway_connections` alone.
            drop(slot);
        });
    }
}

/// The answer to a request whose body broke `BodyRule`; the connection
/// closes after it.
fn body_timeout() -> Response<Body> {
    let mut r = plain(StatusCode::REQUEST_TIMEOUT, "The request body did not arrive in time.");
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

async fn serve_http(node: Arc<Node>, sessions: Arc<gateway::Sessions>, app: axum::Router, stream: TcpStream, peer: SocketAddr) {
    let n = node.clone();
    let rule = BodyRule::from_config(&node.config.http);
    let hold = UpgradeHold::default();
    let edge = Edge::new(stream, &node.config.http, hold.clone());
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let (node, sessions, app, hold) = (n.clone(), sessions.clone(), app.clone(), hold.clone());
        async move {
            if is_websocket(&req) {
                let r = upgrade(node, sessions, req);
                if r.status() == StatusCode::SWITCHING_PROTOCOLS {
                    // The 101 waits for HELLO and leaves with it (`Edge`).
                    hold.hold();
                }
                return Ok::<_, Infallible>(r);
            }
            let cut = Arc::new(AtomicBool::new(false));
            let req = req.map(|b| Body::new(TimedBody::new(b, rule, cut.clone())));
            let r = app.oneshot(req).await?;
            // Whatever the route made of the cut body, the client was too slow.
            Ok(if cut.load(Ordering::Relaxed) { body_timeout() } else { r })
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(edge), svc)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => if let Err(e) = r { tracing::trace!(error = %e, "http connection ended") },
        _ = node.shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, "http connection ended at shutdown");
            }
        }
    }
}

fn is_websocket(req: &Request<Incoming>) -> bool {
    req.headers().get(header::UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Gateway query parameters: `v`, `encoding`, `compress`.
struct GatewayQuery {
    transport: Transport,
    /// A close code to send right after the upgrade (bad version/encoding).
    reject: Option<CloseCode>,
}

fn gateway_query(query: Option<&str>) -> GatewayQuery {
    let mut q = GatewayQuery { transport: Transport::None, reject: None };
    for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "v" if !matches!(v, "9" | "10") => q.reject = Some(CloseCode::InvalidApiVersion),
            "encoding" if v != "json" => q.reject = Some(CloseCode::DecodeError),
            "compress" => match Transport::parse(v) {
                Some(t) => q.transport = t,
                None => q.reject = Some(CloseCode::DecodeError),
            },
            _ => {}
        }
    }
    q
}

fn plain(status: StatusCode, msg: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(format!("{{\"code\":0,\"message\":\"{msg}\"}}")));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn upgrade(node: Arc<Node>, sessions: Arc<gateway::Sessions>, mut req: Request<Incoming>) -> Response<Body> {
    let version_ok = req.headers().get(header::SEC_WEBSOCKET_VERSION).is_some_and(|v| v == "13");
    let Some(key) = req.headers().get(header::SEC_WEBSOCKET_KEY).and_then(|k| k.to_str().ok()).map(ws::accept_key) else {
        return plain(StatusCode::BAD_REQUEST, "Missing Sec-WebSocket-Key");
    };
    if !version_ok {
        return plain(StatusCode::BAD_REQUEST, "Unsupported WebSocket version");
    }
    let Some(slot) = ConnSlot::try_acquire(&node.gateway_connections, node.config.limits.max_gateway_connections) else {
        let mut r = plain(StatusCode::SERVICE_UNAVAILABLE, "Too many gateway connections on this node, retry shortly");
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let q = gateway_query(req.uri().query());
    let on_upgrade = hyper::upgrade::on(&mut req);
    let tasks = node.tasks.clone();
    tasks.spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => return tracing::debug!(error = %e, "upgrade failed"),
        };
        let Ok(parts) = upgraded.downcast::<TokioIo<Edge>>() else {
            return tracing::error!("upgraded connection is not the listener's socket");
        };
        let hyper::upgrade::Parts { io, read_buf, .. } = parts;
        let (stream, answer) = io.into_inner().into_parts();
        let sndbuf = node.config.gateway.socket_send_buffer_bytes;
        if sndbuf > 0 {
            if let Err(e) = socket2::SockRef::from(&stream).set_send_buffer_size(sndbuf) {
                tracing::debug!(error = %e, "SO_SNDBUF not set");
            }
        }
        let conn = Conn::new(slot, stream, answer, &read_buf, q.transport, &CompressParams::default());
        // `read_buf` may be a slice of hyper's whole read buffer (8 KiB+):
        // release it now rather than holding it for the session's lifetime.
        drop(read_buf);
        let conn = match conn {
            Ok(c) => c,
            Err(e) => return tracing::error!(error = %e, "cannot set up connection"),
        };
        match q.reject {
            Some(code) => conn.close(code).await,
            None => handshake::serve(node, sessions, conn).await,
        }
    });
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&key) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let q = gateway_query(Some("v=10&encoding=json&compress=zstd-stream"));
        assert_eq!(q.transport, Transport::ZstdStream);
        assert!(q.reject.is_none());
        assert_eq!(gateway_query(Some("v=6")).reject, Some(CloseCode::InvalidApiVersion));
        assert_eq!(gateway_query(Some("encoding=etf")).reject, Some(CloseCode::DecodeError));
        assert!(gateway_query(None).reject.is_none());
    }
}
