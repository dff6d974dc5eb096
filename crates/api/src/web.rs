//! The browser client (issue 15), served at `/`. Its built files
//! (`web/dist`, made by `scripts/web.sh build` from `web/src`) are embedded
//! in the binary, so a fresh machine needs no Node.js to run it. The client
//! speaks only the public API: these REST routes and the gateway upgrade
//! that the listener takes on `/` when a request asks for a WebSocket.
//!
//! The page shows what anyone may write (names, messages, topics), so it
//! is served with a strict Content-Security-Policy (issue 25): scripts and
//! styles only from these files, no inline script or style, no eval, no
//! framing, connections only to this origin and the gateway's. The client
//! builds its DOM from text nodes, and the policy stops anything that still
//! slipped through from running.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use config::Config;

/// One embedded file: its bytes, content type, and its compressed forms:
/// gzip and Brotli made by `web/build.mjs` for the client's files, or gzip
/// made at the first request that accepts it, then kept.
pub struct Asset {
    pub body: &'static [u8],
    pub kind: &'static str,
    pub gzipped: std::sync::OnceLock<Vec<u8>>,
    /// Made at build time: (gzip, Brotli).
    pub packed: Option<(&'static [u8], &'static [u8])>,
}

impl Asset {
    pub const fn new(body: &'static [u8], kind: &'static str) -> Asset {
        Asset { body, kind, gzipped: std::sync::OnceLock::new(), packed: None }
    }

    /// A file with its gzip and Brotli forms made at build time.
    pub const fn packed(body: &'static [u8], kind: &'static str, gz: &'static [u8], br: &'static [u8]) -> Asset {
        Asset { body, kind, gzipped: std::sync::OnceLock::new(), packed: Some((gz, br)) }
    }

    /// `app.<first 10 hex digits of its SHA-256>.<ext>`: the name the page
    /// loads it by (`web/build.mjs` names it the same way).
    pub fn hashed_name(&self, stem: &str, ext: &str) -> String {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(self.body));
        format!("{stem}.{}.{ext}", &digest[..10])
    }

    /// The gzip form (level 9: made once per process, unless made at build time).
    fn gzip(&self) -> &[u8] {
        if let Some((gz, _)) = self.packed {
            return gz;
        }
        self.gzipped.get_or_init(|| {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(self.body.len() / 3), flate2::Compression::best());
            e.write_all(self.body).expect("writing to a Vec");
            e.finish().expect("writing to a Vec")
        })
    }
}

macro_rules! dist {
    ($file:literal, $kind:literal) => {
        Asset::packed(
            include_bytes!(concat!("../../../web/dist/", $file)),
            $kind,
            include_bytes!(concat!("../../../web/dist/", $file, ".gz")),
            include_bytes!(concat!("../../../web/dist/", $file, ".br")),
        )
    };
}

static INDEX: Asset = dist!("index.html", "text/html; charset=utf-8");
static APP_JS: Asset = dist!("app.js", "text/javascript; charset=utf-8");
static APP_CSS: Asset = dist!("app.css", "text/css; charset=utf-8");

/// Whether the request's `Accept-Encoding` takes `coding` (not with `q=0`).
fn accepts(h: &HeaderMap, coding: &str) -> bool {
    h.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|e| {
        let mut parts = e.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let q0 = parts.any(|p| p.strip_prefix("q=").is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q == 0.0)));
        (name.eq_ignore_ascii_case(coding) || name == "*") && !q0
    })
}

/// How long a browser may keep a file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Caching {
    /// Asked again each time (`no-cache`): a stable name whose bytes change with the binary.
    Revalidate,
    /// Never kept (`no-store`): the page, which names the current files.
    Never,
    /// A year, never asked again (`immutable`): a name that changes with the bytes.
    Forever,
}

/// The client's Content-Security-Policy. `connect-src` holds 'self' (which
/// covers ws:// and wss:// to the page's own host and port) and the origin
/// of `gateway_url`, the address `GET /gateway` hands out, when that is a
/// valid CSP source; an IPv6 literal is not one, and only 'self' can name it.
pub fn client_policy(gateway_url: &str) -> String {
    let gateway = gateway_source(gateway_url).map(|g| format!(" {g}")).unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'{gateway}; \
         font-src 'self'; media-src 'self' blob:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// `ws://host:port` of a gateway URL, or None when it is not a plain
/// `ws`/`wss` URL with a DNS name or IPv4 host: a source the browser would
/// refuse only adds a console warning.
fn gateway_source(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "ws" && scheme != "wss" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let host_ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()));
    (host_ok && port_ok).then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// The headers of every page of ours and of the files it loads (the
/// client's and the API reference's): its policy, and no framing, no
/// referrer (nothing the pages link to needs to know where a visitor came
/// from, and an invite link in an address must not leak), no type
/// sniffing, and a browsing context of its own.
pub fn harden(h: &mut HeaderMap, policy: &HeaderValue) {
    h.insert(header::CONTENT_SECURITY_POLICY, policy.clone());
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
}

/// An embedded file with its type and `policy`: in Brotli if the request
/// (`req`) takes it and it was made, else gzipped if it takes that.
pub fn serve(a: &'static Asset, policy: &HeaderValue, req: &HeaderMap, caching: Caching) -> Response {
    let (body, coding): (&[u8], Option<&'static str>) = match a.packed {
        Some((_, br)) if accepts(req, "br") => (br, Some("br")),
        _ if accepts(req, "gzip") => (a.gzip(), Some("gzip")),
        _ => (a.body, None),
    };
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    if let Some(c) = coding {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(c));
    }
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.kind));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(match caching {
            Caching::Revalidate => "no-cache",
            Caching::Never => "no-store",
            Caching::Forever => "public, max-age=31536000, immutable",
        }),
    );
    harden(h, policy);
    r
}

/// A handler that answers with `a` under `policy`.
pub fn file(
    a: &'static Asset,
    policy: &HeaderValue,
    caching: Caching,
) -> impl Fn(HeaderMap) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    let policy = policy.clone();
    move |req: HeaderMap| std::future::ready(serve(a, &policy, &req, caching))
}

/// What the client shows before an upload: this server's
/// `[attachments]` limits (public, as the page itself is).
pub fn client_settings(config: &Config) -> String {
    serde_json::json!({
        "max_file_bytes": config.attachments.max_file_bytes,
        "max_files": config.attachments.max_files,
    })
    .to_string()
}

/// `/` and the client's assets, and `/oauth2/authorize` (any query):
/// the address of a bot's invitation, as on Discord, where the client shows
/// its "add a bot" page; `/client.json`, [`client_settings`]. Plain GETs
/// only (the gateway upgrade on `/` never reaches the router).
pub fn routes<S: Clone + Send + Sync + 'static>(config: &Config) -> Router<S> {
    let policy = HeaderValue::from_str(&client_policy(&config.gateway_url())).expect("the policy is ASCII");
    let settings = client_settings(config);
    let settings_policy = policy.clone();
    // The hashed names the page loads its files by.
    let assets: Vec<(String, &'static Asset)> =
        vec![(APP_JS.hashed_name("app", "js"), &APP_JS), (APP_CSS.hashed_name("app", "css"), &APP_CSS)];
    let asset_policy = policy.clone();
    Router::new()
        .route("/", get(file(&INDEX, &policy, Caching::Never)))
        .route("/oauth2/authorize", get(file(&INDEX, &policy, Caching::Never)))
        // The stable names, for anything that linked them before.
        .route("/app.js", get(file(&APP_JS, &policy, Caching::Revalidate)))
        .route("/app.css", get(file(&APP_CSS, &policy, Caching::Revalidate)))
        .route(
            "/assets/{name}",
            get(move |Path(name): Path<String>, req: HeaderMap| {
                let found = assets.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
                std::future::ready(match found {
                    Some(a) => serve(a, &asset_policy, &req, Caching::Forever),
                    None => StatusCode::NOT_FOUND.into_response(),
                })
            }),
        )
        .route(
            "/client.json",
            get(move || {
                let mut r = settings.clone().into_response();
                let h = r.headers_mut();
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                harden(h, &settings_policy);
                std::future::ready(r)
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_go_gzipped_to_whoever_takes_gzip() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            m
        };
        for yes in ["gzip", "gzip, deflate, br", "br;q=1.0, GZIP;q=0.5", "*"] {
            assert!(accepts(&h(yes), "gzip"), "{yes}");
        }
        for no in ["br", "identity", "gzip;q=0", "deflate, gzip; q=0.0"] {
            assert!(!accepts(&h(no), "gzip"), "{no}");
        }
        assert!(!accepts(&HeaderMap::new(), "gzip"));
        assert!(accepts(&h("gzip, br"), "br") && !accepts(&h("gzip, br;q=0"), "br"));
        let policy = HeaderValue::from_static("default-src 'none'");
        let r = serve(&APP_JS, &policy, &h("gzip, br"), Caching::Forever);
        assert_eq!(r.headers()[header::CONTENT_ENCODING], "br", "Brotli when taken");
        assert_eq!(r.headers()[header::CACHE_CONTROL], "public, max-age=31536000, immutable");
        let r = serve(&APP_JS, &policy, &h("gzip"), Caching::Revalidate);
        assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(r.headers()[header::VARY], "accept-encoding");
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
        // The gzip form is the file, and much smaller.
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(APP_JS.gzip()), &mut back).unwrap();
        assert_eq!(back, APP_JS.body);
        assert!(APP_JS.gzip().len() * 2 < APP_JS.body.len());
        assert!(serve(&APP_JS, &policy, &HeaderMap::new(), Caching::Never).headers().get(header::CONTENT_ENCODING).is_none());
        // Brotli made at build time: smaller still.
        let (_, br) = APP_JS.packed.unwrap();
        assert!(br.len() < APP_JS.gzip().len());
    }

    #[test]
    fn the_page_loads_the_embedded_bundle() {
        let index = std::str::from_utf8(INDEX.body).unwrap();
        // The names the build wrote into the page are the ones served.
        let js = format!(r#"src="/assets/{}""#, APP_JS.hashed_name("app", "js"));
        let css = format!(r#"href="/assets/{}""#, APP_CSS.hashed_name("app", "css"));
        assert!(index.contains(&js) && index.contains(&css), "{index}");
        // The bundle is the built client, not a placeholder.
        assert!(APP_JS.body.len() > 10_000);
        assert!(std::str::from_utf8(APP_JS.body).unwrap().contains("GUILD_MEMBER_LIST_UPDATE"));
        assert!(!APP_CSS.body.is_empty());
    }

    #[test]
    fn the_page_has_nothing_inline_for_the_policy_to_refuse() {
        let index = std::str::from_utf8(INDEX.body).unwrap();
        // Every script is a file; no style element or attribute, no handler.
        assert_eq!(index.matches("<script").count(), index.matches("<script defer src=\"/").count());
        for inline in ["<style", "style=", "onload=", "onclick=", "onerror=", "javascript:"] {
            assert!(!index.contains(inline), "{inline}");
        }
    }

    #[test]
    fn the_policy_names_the_gateway_origin() {
        let p = client_policy("ws://127.0.0.1:8080");
        assert_eq!(
            p,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
             connect-src 'self' ws://127.0.0.1:8080; font-src 'self'; media-src 'self' blob:; base-uri 'none'; \
             form-action 'self'; frame-ancestors 'none'"
        );
        assert!(!p.contains("unsafe"));
        assert!(client_policy("wss://Chat.Example.com/gateway").contains("connect-src 'self' wss://chat.example.com;"));
        // Sources a browser would not take are left to 'self'.
        for odd in ["ws://[::1]:8080", "http://example.com", "ws://a b", "ws://user@host", "ws://host:80x", "wss://"] {
            assert!(client_policy(odd).contains("connect-src 'self';"), "{odd}");
        }
    }

    #[test]
    fn client_settings_are_the_upload_limits() {
        let mut c = Config::default();
        c.attachments.max_file_bytes = 1234;
        c.attachments.max_files = 3;
        let v: serde_json::Value = serde_json::from_str(&client_settings(&c)).unwrap();
        assert_eq!(v, serde_json::json!({ "max_file_bytes": 1234, "max_files": 3 }));
    }

    #[tokio::test]
    async fn routes_serve_each_asset_with_its_type_and_policy() {
        use tower::ServiceExt;
        let app: Router = routes(&Config::default());
        for (path, kind) in [
            ("/", "text/html"),
            ("/oauth2/authorize?client_id=1&scope=bot&permissions=8", "text/html"),
            ("/app.js", "text/javascript"),
            ("/app.css", "text/css"),
            ("/client.json", "application/json"),
        ] {
            let req = axum::http::Request::get(path).body(axum::body::Body::empty()).unwrap();
            let r = app.clone().oneshot(req).await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            let h = r.headers();
            assert!(h[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind), "{path}");
            let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self';"), "{path}: {csp}");
            assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
            assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h["cross-origin-opener-policy"], "same-origin");
        }
    }
}
