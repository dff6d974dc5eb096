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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_the_embedded_bundle() {
        let index = std::str::from_utf8(INDEX.body).unwrap();
        assert!(index.contains(r#"src="/app.js""#) && index.contains(r#"href="/app.css""#));
        // The bundle is the built client, not a placeholder.
        assert!(APP_JS.body.len() > 10_000);
        assert!(std::str::from_utf8(APP_JS.body).unwrap().contains("GUILD_MEMBER_LIST_UPDATE"));
        assert!(!APP_CSS.body.is_empty());
    }

    #[tokio::test]
    async fn routes_serve_each_asset_with_its_type() {
        use tower::ServiceExt;
        let app: Router = routes();
        for (path, kind) in [("/", "text/html"), ("/app.js", "text/javascript"), ("/app.css", "text/css")] {
            let req = axum::http::Request::get(path).body(axum::body::Body::empty()).unwrap();
            let r = app.clone().oneshot(req).await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind), "{path}");
        }
    }
}
