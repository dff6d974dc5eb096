//! The OpenAPI document (`/api/v10/openapi.json`): well formed, served, and
//! true of real answers. [`conforms`] is called by the authorization matrix
//! for every cell, so every route's answers, successes and refusals, are
//! checked against what the document says of them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};

use crate::common::TestServer;

fn doc() -> &'static Value {
    server::http::openapi()
}

/// Validators by (operation, status), compiled once.
fn validator(method: &str, path: &str, status: u16) -> Result<Option<std::sync::Arc<jsonschema::Validator>>, String> {
    type Cache = Mutex<HashMap<(String, String, u16), Option<std::sync::Arc<jsonschema::Validator>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (method.to_ascii_lowercase(), path.to_string(), status);
    if let Some(v) = CACHE.get_or_init(Default::default).lock().unwrap().get(&key) {
        return Ok(v.clone());
    }
    let d = doc();
    let o = d["paths"][path].get(&key.0).ok_or_else(|| format!("{method} {path} is not in the document"))?;
    let mut r = o["responses"].get(status.to_string()).ok_or_else(|| format!("{method} {path}: status {status} is not documented"))?;
    if let Some(name) = r["$ref"].as_str().and_then(|x| x.strip_prefix("#/components/responses/")) {
        r = &d["components"]["responses"][name];
    }
    let v = match r["content"]["application/json"].get("schema") {
        None => None,
        Some(s) => {
            // The answer's schema with the document's components beside it,
            // so its `#/components/...` references resolve.
            let mut root = json!({ "$schema": "https://json-schema.org/draft/2020-12/schema", "components": d["components"] });
            root["allOf"] = json!([s]);
            Some(std::sync::Arc::new(jsonschema::validator_for(&root).map_err(|e| format!("{method} {path} {status}: bad schema: {e}"))?))
        }
    };
    CACHE.get().unwrap().lock().unwrap().insert(key, v.clone());
    Ok(v)
}

/// Whether an answer is what the document says `method path` answers with
/// `status`: a documented status, and a body of its schema (none for 204).
pub fn conforms(method: &str, path: &str, status: u16, content_type: Option<&str>, body: &str) -> Result<(), String> {
    let v = validator(method, path, status)?;
    match v {
        None if body.is_empty() => Ok(()),
        None => Err(format!("{method} {path} {status}: a body where none is documented: {body:.200}")),
        Some(v) => {
            if !content_type.is_some_and(|c| c.starts_with("application/json")) {
                return Err(format!("{method} {path} {status}: content type {content_type:?}, documented application/json"));
            }
            let value: Value = serde_json::from_str(body).map_err(|e| format!("{method} {path} {status}: not JSON ({e}): {body:.200}"))?;
            let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{} at {}", e, e.instance_path())).take(3).collect();
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{method} {path} {status}: {} in {body:.300}", errors.join("; ")))
            }
        }
    }
}

/// The document's (method, path) pairs.
pub fn operations() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc()["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            out.insert((method.to_ascii_uppercase(), path.clone()));
        }
    }
    out
}

/// Every `$ref` in `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[test]
fn the_document_is_openapi_3_1_and_consistent() {
    let d = doc();
    assert_eq!(d["openapi"], "3.1.0");
    let ops = operations();
    assert!(ops.len() > 100, "{} operations", ops.len());
    // operationIds are unique; each path parameter is declared; every
    // operation has a success answer and Discord's error answers.
    let mut ids = BTreeSet::new();
    for (path, item) in d["paths"].as_object().unwrap() {
        for (method, o) in item.as_object().unwrap() {
            let id = o["operationId"].as_str().expect("an operationId");
            assert!(ids.insert(id.to_string()), "operationId {id} twice");
            let declared: BTreeSet<&str> = o["parameters"]
                .as_array()
                .map(|ps| ps.iter().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap()).collect())
                .unwrap_or_default();
            let in_path: BTreeSet<&str> = path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
            assert_eq!(declared, in_path, "{method} {path}");
            let statuses: Vec<&String> = o["responses"].as_object().unwrap().keys().collect();
            assert!(statuses.iter().any(|s| s.starts_with('2')), "{method} {path}: no success answer");
            for s in ["400", "403", "404", "429", "503"] {
                assert!(statuses.iter().any(|x| *x == s), "{method} {path}: {s} undocumented");
            }
        }
    }
    // Every reference resolves.
    let mut all = Vec::new();
    refs(d, &mut all);
    assert!(all.len() > 100);
    for r in all {
        let ptr = r.strip_prefix('#').unwrap_or_else(|| panic!("external reference {r}"));
        assert!(d.pointer(ptr).is_some(), "{r} does not resolve");
    }
    // Every component schema is a valid JSON Schema 2020-12 schema.
    for (name, s) in d["components"]["schemas"].as_object().unwrap() {
        let mut s = s.clone();
        if let Some(o) = s.as_object_mut() {
            o.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
        }
        assert!(jsonschema::meta::is_valid(&s), "schema {name} is not valid JSON Schema");
    }
}

#[test]
fn a_refusal_and_a_success_are_checked_against_the_document() {
    // The checker itself: what it must refuse.
    assert!(conforms("GET", "/gateway", 200, Some("application/json"), r#"{"url":"ws://x"}"#).is_ok());
    assert!(conforms("GET", "/gateway", 200, Some("application/json"), r#"{"uri":"ws://x"}"#).is_err());
    assert!(conforms("GET", "/gateway", 201, Some("application/json"), r#"{"url":"ws://x"}"#).is_err());
    assert!(conforms("GET", "/users/@me", 404, Some("application/json"), r#"{"code":10013,"message":"Unknown User"}"#).is_ok());
    assert!(conforms("GET", "/users/@me", 404, Some("application/json"), r#"{"message":"no code"}"#).is_err());
    assert!(conforms("DELETE", "/guilds/{guild_id}", 204, None, "").is_ok());
    assert!(conforms("DELETE", "/guilds/{guild_id}", 204, None, "{}").is_err());
    assert!(conforms("GET", "/nowhere", 200, None, "").is_err());
}

#[tokio::test]
async fn the_document_and_its_page_are_served_under_every_prefix() {
    let t = TestServer::start().await;
    let root = t.base.trim_end_matches("/api/v10").to_string();
    for prefix in ["/api/v10", "/api/v9", "/api"] {
        let r = t.http.get(format!("{root}{prefix}/openapi.json")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
        let served: Value = r.json().await.unwrap();
        assert_eq!(&served, doc(), "{prefix}");
    }
    // The page and its two files, each under the page's policy (no inline
    // script or style: the page loads docs.js, which fetches the document).
    for (file, kind, holds) in [
        ("docs", "text/html", "src=\"docs.js\""),
        ("docs.js", "text/javascript", "fetch(\"openapi.json\")"),
        ("docs.css", "text/css", "details"),
    ] {
        let r = t.http.get(format!("{}/{file}", t.base)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with(kind), "{file}");
        let csp = r.headers()["content-security-policy"].to_str().unwrap().to_string();
        assert!(csp.contains("script-src 'self';") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"), "{csp}");
        let body = r.text().await.unwrap();
        assert!(body.contains(holds), "{file}");
        if file == "docs" {
            assert!(!body.contains("<style") && !body.contains("<script>"), "nothing inline");
        }
    }
}
