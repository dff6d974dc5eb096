//! The browser client (issue 15), served at `/`. Its built files
//! (`web/dist`, made by `scripts/web.sh build` from `web/src`) are embedded
//! in the binary, so a fresh machine needs no Node.js to run it. The client
//! speaks only the public API: these REST routes and the gateway upgrade
//! that the listener takes on `/` when a request asks for a WebSocket.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// One embedded file: its bytes and content type.
struct Asset {
    body: &'static [u8],
    kind: &'static str,
}

const INDEX: Asset = Asset { body: include_bytes!("../../../../web/dist/index.html"), kind: "text/html; charset=utf-8" };
const APP_JS: Asset = Asset { body: include_bytes!("../../../../web/dist/app.js"), kind: "text/javascript; charset=utf-8" };
const APP_CSS: Asset = Asset { body: include_bytes!("../../../../web/dist/app.css"), kind: "text/css; charset=utf-8" };

fn serve(a: &'static Asset) -> Response {
    let mut r = (StatusCode::OK, a.body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.kind));
    // Revalidate each load: the bundle changes with the binary.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    r
}

/// `/` and the client's two assets; plain GETs only (the gateway upgrade on
/// `/` never reaches the router).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { serve(&INDEX) }))
        .route("/app.js", get(|| async { serve(&APP_JS) }))
        .route("/app.css", get(|| async { serve(&APP_CSS) }))
}
