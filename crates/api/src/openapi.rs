//! The REST routes as one table that is both the router and its OpenAPI 3.1
//! description. Each entry registers a handler and says what it takes and
//! answers ([`Op`]); [`Api::finish`] returns the axum router and the
//! document, so a route cannot exist without its description. Schemas come
//! from the Rust types themselves (`schemars`: JSON Schema 2020-12, which
//! is OpenAPI 3.1's dialect): request bodies as serde reads them, answers
//! as serde writes them. Served at `/api/v10/openapi.json`, browsable at
//! `/api/v10/docs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::MethodRouter;
use axum::Router;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::web::Asset;
use node::Node;

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// Who may call an operation.
#[derive(Clone, Copy, PartialEq)]
enum Auth {
    /// A user's or bot's token in `Authorization`.
    Token,
    /// No token (gateway discovery, accounts, invites, webhook tokens).
    Public,
    /// The operator's `X-Throng-Admin-Token`.
    Admin,
}

/// What one operation takes and answers.
pub struct Op {
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    auth: Auth,
    body: Option<SchemaFn>,
    /// The body may also be `multipart/form-data` (files plus `payload_json`).
    multipart: bool,
    /// The body is `application/x-www-form-urlencoded`, not JSON.
    form: bool,
    query: Option<SchemaFn>,
    answers: Vec<(u16, Option<SchemaFn>)>,
    /// Error statuses beyond those of every operation (`ERRORS` marks them).
    refusals: Vec<u16>,
}

/// An operation: its `operationId`, tag and one-line summary.
pub fn op(id: &'static str, tag: &'static str, summary: &'static str) -> Op {
    Op {
        id,
        tag,
        summary,
        auth: Auth::Token,
        body: None,
        multipart: false,
        form: false,
        query: None,
        answers: Vec::new(),
        refusals: Vec::new(),
    }
}

impl Op {
    pub fn public(mut self) -> Self {
        self.auth = Auth::Public;
        self
    }
    pub fn admin(mut self) -> Self {
        self.auth = Auth::Admin;
        self
    }
    /// A JSON body read as `T` (an empty body reads as `{}`).
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(schema_of::<T>);
        self
    }
    /// A form-encoded body (`application/x-www-form-urlencoded`) with the fields of `T`.
    pub fn form<T: JsonSchema>(mut self) -> Self {
        self.body = Some(schema_of::<T>);
        self.form = true;
        self
    }
    /// Also `multipart/form-data`: files and a `payload_json` part of the body's shape.
    pub fn multipart(mut self) -> Self {
        self.multipart = true;
        self
    }
    /// Query parameters: the fields of `T`.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        self.query = Some(schema_of::<T>);
        self
    }
    /// `status` with a JSON body of shape `T`.
    pub fn answer<T: JsonSchema>(mut self, status: u16) -> Self {
        self.answers.push((status, Some(schema_of::<T>)));
        self
    }
    pub fn ok<T: JsonSchema>(self) -> Self {
        self.answer::<T>(200)
    }
    pub fn created<T: JsonSchema>(self) -> Self {
        self.answer::<T>(201)
    }
    /// Also refuses with `status` (one of `ERRORS` that not every operation gives).
    pub fn refuses(mut self, status: u16) -> Self {
        self.refusals.push(status);
        self
    }
    /// 204 without a body.
    pub fn no_content(mut self) -> Self {
        self.answers.push((204, None));
        self
    }
}

/// The table being built: the router and what each route says of itself.
pub struct Api {
    router: Router<Arc<Node>>,
    ops: Vec<(Method, &'static str, Op)>,
}

impl Default for Api {
    fn default() -> Self {
        Api { router: Router::new(), ops: Vec::new() }
    }
}

macro_rules! method {
    ($name:ident, $route:ident, $method:ident) => {
        pub fn $name<H: Handler<T, Arc<Node>>, T: 'static>(self, path: &'static str, handler: H, op: Op) -> Self {
            self.on(Method::$method, path, axum::routing::$route(handler), op)
        }
    };
}

impl Api {
    method!(get, get, GET);
    method!(post, post, POST);
    method!(put, put, PUT);
    method!(patch, patch, PATCH);
    method!(delete, delete, DELETE);

    fn on(mut self, method: Method, path: &'static str, route: MethodRouter<Arc<Node>>, op: Op) -> Self {
        assert!(!op.answers.is_empty(), "{method} {path}: no answer described");
        assert!(!self.ops.iter().any(|(m, p, _)| *m == method && *p == path), "{method} {path} twice");
        // axum merges the methods of one path across `route` calls.
        self.router = self.router.route(path, route);
        self.ops.push((method, path, op));
        self
    }

    /// The router, and what its routes say of themselves (their document
    /// is built on demand: a process needs it once, however many routers).
    pub fn finish(self) -> (Router<Arc<Node>>, Described) {
        (self.router, Described(self.ops))
    }
}

/// The operations of a finished [`Api`].
pub struct Described(Vec<(Method, &'static str, Op)>);

impl Described {
    /// The OpenAPI document.
    pub fn document(&self) -> Value {
        document(&self.0)
    }
}

/// Error answers every operation may give, with Discord's JSON error body.
/// The 405 is only where an operation says it `refuses` with it.
const ERRORS: [(u16, &str, &str); 8] = [
    (400, "Error", "Malformed JSON (50109) or a body of the wrong shape (50035, with `errors` by field)."),
    (401, "Error", "Missing or invalid token (0), or a webhook's (50027)."),
    (403, "Error", "Missing access (50001) or permissions (50013)."),
    (404, "Error", "Unknown resource (10003 channel, 10004 guild, ...) or route (0)."),
    (405, "Error", "A method the path does not have for this caller, e.g. a reaction for someone else (0)."),
    (413, "Error", "Body over the size limit (40005)."),
    (429, "RateLimited", "Rate limited: `Retry-After` and `X-RateLimit-*` headers say when to retry."),
    (503, "Error", "Busy (a full guild mailbox or write queue), draining or the guild's owner is moving: retry after `Retry-After`."),
];

fn path_params(path: &str) -> Vec<Value> {
    let names = path.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'));
    names
        .map(|name| {
            let schema = match name {
                // `@me` (or `%40me`) is the caller wherever a user id goes.
                "user_id" => json!({ "type": "string", "pattern": "^(@me|[0-9]{1,20})$" }),
                "emoji" => {
                    json!({ "type": "string", "minLength": 1, "description": "A Unicode emoji, or `name:id` of a custom one (URL-encoded)." })
                }
                "code" | "token" => json!({ "type": "string", "minLength": 1 }),
                _ => json!({ "type": "string", "pattern": "^[0-9]{1,20}$", "description": "A snowflake." }),
            };
            json!({ "name": name, "in": "path", "required": true, "schema": schema })
        })
        .collect()
}

/// The query parameters of a struct's schema: one per property, `null`
/// dropped from their types (an absent parameter is the `None`).
fn query_params(schema: &Value) -> Vec<Value> {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    props
        .iter()
        .map(|(name, s)| {
            let mut s = s.clone();
            if let Some(types) = s.get_mut("type").and_then(Value::as_array_mut) {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    s["type"] = types[0].clone();
                }
            }
            if let Some(any) = s.get_mut("anyOf").and_then(Value::as_array_mut) {
                any.retain(|t| t.get("type").and_then(Value::as_str) != Some("null"));
            }
            json!({ "name": name, "in": "query", "required": required.contains(&name.as_str()), "schema": s })
        })
        .collect()
}

/// The definitions of one generator under `components/schemas`; a name the
/// other contract already uses for a different schema gets `suffix` (and
/// the references to it are rewritten).
fn merge_definitions(into: &mut Map<String, Value>, mut defs: Map<String, Value>, suffix: &str, schemas: &mut [&mut Value]) {
    let clash: Vec<String> = defs.iter().filter(|(k, v)| into.get(*k).is_some_and(|o| o != *v)).map(|(k, _)| k.clone()).collect();
    fn rename(v: &mut Value, clash: &[String], suffix: &str) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "$ref" {
                        if let Some(name) = x.as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
                            if clash.iter().any(|c| c == name) {
                                *x = Value::String(format!("#/components/schemas/{name}{suffix}"));
                            }
                        }
                    } else {
                        rename(x, clash, suffix);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| rename(x, clash, suffix)),
            _ => {}
        }
    }
    for v in defs.values_mut() {
        rename(v, &clash, suffix);
    }
    for s in schemas.iter_mut() {
        rename(s, &clash, suffix);
    }
    for (k, v) in defs {
        let k = if clash.contains(&k) { format!("{k}{suffix}") } else { k };
        into.insert(k, v);
    }
}

fn generator(contract: Contract, inline: bool) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.contract = contract;
            s.inline_subschemas = inline;
        })
        .into_generator()
}

/// One operation's object, before its body's schema is placed.
struct Built {
    path: &'static str,
    method: String,
    object: Value,
    body: Option<Value>,
    multipart: bool,
    form: bool,
}

fn operation(path: &'static str, method: &Method, op: &Op, out_gen: &mut SchemaGenerator, in_gen: &mut SchemaGenerator) -> Built {
    let mut params = path_params(path);
    if let Some(q) = op.query {
        // Query parameters are flat: no references.
        params.extend(query_params(&q(&mut generator(Contract::Deserialize, true)).to_value()));
    }
    let mut responses = Map::new();
    for (status, schema) in &op.answers {
        let mut r = json!({ "description": status_text(*status) });
        if let Some(f) = schema {
            r["content"] = json!({ "application/json": { "schema": f(out_gen).to_value() } });
        }
        responses.insert(status.to_string(), r);
    }
    for (status, _, _) in ERRORS {
        // An operation's own description of a status wins (the OAuth2 errors).
        let own = op.answers.iter().any(|(s, _)| *s == status);
        let skip = own || (status == 413 && op.body.is_none()) || (status == 405 && !op.refusals.contains(&405));
        if !skip {
            responses.insert(status.to_string(), json!({ "$ref": format!("#/components/responses/E{status}") }));
        }
    }
    let mut object = json!({ "operationId": op.id, "tags": [op.tag], "summary": op.summary, "responses": responses });
    if !params.is_empty() {
        object["parameters"] = Value::Array(params);
    }
    match op.auth {
        Auth::Token => {}
        Auth::Public => object["security"] = json!([]),
        Auth::Admin => object["security"] = json!([{ "admin": [] }]),
    }
    let body = op.body.map(|f| f(in_gen).to_value());
    Built { path, method: method.as_str().to_ascii_lowercase(), object, body, multipart: op.multipart, form: op.form }
}

fn document(ops: &[(Method, &'static str, Op)]) -> Value {
    // Answers as serde writes them; bodies and queries as serde reads them.
    let mut out_gen = generator(Contract::Serialize, false);
    let mut in_gen = generator(Contract::Deserialize, false);
    let mut built: Vec<Built> = ops.iter().map(|(m, p, op)| operation(p, m, op, &mut out_gen, &mut in_gen)).collect();
    let mut schemas = out_gen.take_definitions(true);
    let mut bodies: Vec<&mut Value> = built.iter_mut().filter_map(|b| b.body.as_mut()).collect();
    merge_definitions(&mut schemas, in_gen.take_definitions(true), "Input", &mut bodies);
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for b in built {
        let mut o = b.object;
        if let Some(schema) = b.body {
            let mut content = Map::new();
            let kind = if b.form { "application/x-www-form-urlencoded" } else { "application/json" };
            content.insert(kind.into(), json!({ "schema": schema }));
            if b.multipart {
                content.insert(
                    "multipart/form-data".into(),
                    json!({ "schema": {
                        "type": "object",
                        "properties": {
                            "payload_json": { "type": "string", "description": "The JSON body, as text." },
                            "files[0]": { "type": "string", "contentMediaType": "application/octet-stream" },
                        },
                    } }),
                );
            }
            // An empty body reads as `{}`.
            o["requestBody"] = json!({ "required": false, "content": content });
        }
        paths.entry(b.path).or_default().insert(b.method, o);
    }
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "description": "Discord's error body.",
            "required": ["code", "message"],
            "properties": {
                "code": { "type": "integer", "description": "Discord's JSON error code (0 for a general error)." },
                "message": { "type": "string" },
                "errors": { "type": "object", "description": "Per field: `{ \"field\": { \"_errors\": [{ \"code\", \"message\" }] } }`." },
                "retry_after": { "type": "number" },
            },
        }),
    );
    schemas.insert(
        "RateLimited".into(),
        json!({
            "type": "object",
            "required": ["message", "retry_after", "global"],
            "properties": {
                "message": { "type": "string" },
                "retry_after": { "type": "number", "description": "Seconds." },
                "global": { "type": "boolean" },
                "code": { "type": "integer" },
            },
        }),
    );
    let mut error_responses = Map::new();
    for (status, schema, text) in ERRORS {
        error_responses.insert(
            format!("E{status}"),
            json!({
                "description": text,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
            }),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "throng REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Discord's REST API v10 as throng serves it: the same paths, objects and JSON error bodies, so Discord client libraries work unmodified. Also under `/api/v9` and `/api`. Generated from the server's route table.",
        },
        "servers": [{ "url": "/api/v10" }],
        "security": [{ "token": [] }],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": error_responses,
            "securitySchemes": {
                "token": { "type": "apiKey", "in": "header", "name": "Authorization", "description": "`Bot <token>` for a bot, or a user's bare token." },
                "admin": { "type": "apiKey", "in": "header", "name": "X-Throng-Admin-Token", "description": "The operator's `admin_token`; the admin routes do not exist without one." },
            },
        },
    })
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No content",
        _ => "Answer",
    }
}

/// `GET /api/v10/docs`: the document as a page, with its script and style
/// beside it (`docs.js`, `docs.css`), nothing from elsewhere.
pub static DOCS_PAGE: Asset = Asset::new(include_bytes!("openapi.html"), "text/html; charset=utf-8");
pub static DOCS_JS: Asset = Asset::new(include_bytes!("openapi.js"), "text/javascript; charset=utf-8");
pub static DOCS_CSS: Asset = Asset::new(include_bytes!("openapi.css"), "text/css; charset=utf-8");

/// The reference page's own policy: the client's, less what it does not
/// use (it only fetches `openapi.json` beside it, and has no form).
pub const DOCS_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                               base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A handler that answers with a file of the reference page under its policy.
pub fn docs_file(
    a: &'static Asset,
) -> impl Fn(axum::http::HeaderMap) -> std::future::Ready<axum::response::Response> + Clone + Send + Sync + 'static {
    super::web::file(a, &axum::http::HeaderValue::from_static(DOCS_POLICY), super::web::Caching::Revalidate)
}
