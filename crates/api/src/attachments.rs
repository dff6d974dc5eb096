//! Uploads in `multipart/form-data` message bodies (`payload_json` plus
//! `files[n]`, as discord.py and discord.js send them), streamed to disk
//! (see [`node::attachments`]), and the files served back at their
//! attachment `url` with ranges.
//!
//! A multipart request is judged from its head before any byte of its body
//! is read: the route checks that the sender may post there ([`Sender`]:
//! VIEW_CHANNEL and SEND_MESSAGES, or a webhook's token), and the declared
//! Content-Length must fit the request limit and the sender's quota. A
//! refusal is answered at once; the listener then closes the connection
//! (draining a bounded amount), and nothing of the body reaches the disk.

use std::io::SeekFrom;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use protocol::{ChannelId, ErrorCode, Snowflake, UserId};
use serde::de::DeserializeOwned;
use serde_json::Value;
use store::AttachmentRecord;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::OwnedSemaphorePermit;

use super::{parse_json, ApiError, ApiResult};
use node::attachments::{attachment_json, clean_filename, content_type_of, http_base, image_size, Reservation};
use node::auth::now_ms;
use node::Node;

/// Room for the multipart framing (boundaries, part headers) on top of the
/// configured request limit when judging a declared Content-Length.
const FORM_OVERHEAD: u64 = 64 << 10;
/// An attachment's description (Discord: 1024 characters).
const MAX_DESCRIPTION: usize = 1024;

/// The uploads of one request, recorded as pending. Dropped without
/// [`Uploads::keep`], they are discarded (rows and unreferenced files): the
/// post was refused or failed before it reached the store.
pub struct Uploads {
    node: Arc<Node>,
    pub list: Vec<AttachmentRecord>,
    _permit: Option<OwnedSemaphorePermit>,
    /// The files' bytes, held against the uploader's quota until the
    /// request ends (by then the rows count in the store, or are gone).
    _quota: Option<Reservation>,
}

impl Uploads {
    fn none(node: &Arc<Node>) -> Uploads {
        Uploads { node: node.clone(), list: Vec::new(), _permit: None, _quota: None }
    }

    /// The attachment objects, for the message's `attachments`, their URLs
    /// signed now (what MESSAGE_CREATE carries).
    pub fn json(&self) -> Vec<Value> {
        let base = http_base(&self.node.config);
        self.list.iter().map(|a| attachment_json(a, &base, &self.node.blobs.signer)).collect()
    }

    /// The message committed (its commit linked the rows), or its fate is
    /// unknown (no answer in time: the sweeper decides later).
    pub fn keep(mut self) {
        self.list.clear();
    }
}

impl Drop for Uploads {
    fn drop(&mut self) {
        if self.list.is_empty() {
            return;
        }
        let ids: Vec<Snowflake> = self.list.iter().map(|a| a.id).collect();
        let node = self.node.clone();
        tokio::spawn(async move { node.blobs.discard(&*node.store, &ids).await });
    }
}

fn too_large() -> ApiError {
    ApiError::Code(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::EntityTooLarge)
}

fn bad_form() -> ApiError {
    ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidFormBody)
}

/// Whether a request's body is a multipart form (it may carry files).
pub fn is_multipart(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("multipart/form-data"))
}

/// Who a multipart request's files come from, decided by its route from the
/// request head (the caller's access to the channel, or a webhook's token)
/// before any byte of the body is read.
pub struct Sender {
    /// Whose quota the files count against.
    pub uploader: UserId,
    /// Whether the sender may attach files (ATTACH_FILES): without it, the
    /// first file part is refused (403 50013) before a byte of it is
    /// written. The guild's actor checks again at commit.
    pub may_attach: bool,
}

/// Where a request's files go: a channel the route knows from its path, or
/// the `channel_id` of its `payload_json` (an interaction), which must then
/// come before the files.
#[derive(Clone, Copy)]
pub enum UploadChannel {
    Known(ChannelId),
    InPayload,
}

impl From<ChannelId> for UploadChannel {
    fn from(c: ChannelId) -> Self {
        UploadChannel::Known(c)
    }
}

/// Reads a message body from JSON, or from multipart (`payload_json`, or a
/// `content` field, plus files). Files are streamed to disk and recorded as
/// pending uploads of `channel` by `sender`; the limits of `[attachments]`
/// apply (413, 40005, whether the client declared the size or not), the
/// uploader's quota among them.
pub async fn read_body<T: DeserializeOwned + Default>(
    req: Request,
    node: &Arc<Node>,
    channel: impl Into<UploadChannel>,
    sender: Sender,
) -> ApiResult<(T, Uploads)> {
    let channel = channel.into();
    if !is_multipart(req.headers()) {
        let super::JsonBody(b) = super::JsonBody::<T>::from_request(req, node).await?;
        return Ok((b, Uploads::none(node)));
    }
    let content_type = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let cfg = &node.blobs.config;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cfg.max_request_bytes + FORM_OVERHEAD) {
        return Err(too_large());
    }
    // The quota, from the declared length first (the form's framing and
    // fields get the same allowance as above).
    let quota_left = node.blobs.quota_left(&*node.store, sender.uploader).await?;
    if declared.is_some_and(|n| n > quota_left.saturating_add(FORM_OVERHEAD)) {
        return Err(too_large());
    }
    let permit = node.blobs.try_upload().ok_or(ApiError::Busy)?;
    let boundary = multer::parse_boundary(&content_type).map_err(|_| bad_form())?;
    let mut form = multer::Multipart::new(req.into_body().into_data_stream(), boundary);
    let mut uploads = Uploads { node: node.clone(), list: Vec::new(), _permit: Some(permit), _quota: None };
    let mut quota = FileBudget { left: quota_left, held: node.blobs.reserve(sender.uploader) };
    let mut payload: Option<Value> = None;
    let mut content: Option<String> = None;
    // Every byte of the request's fields, against `max_request_bytes`.
    let mut total: u64 = 0;
    while let Some(mut field) = form.next_field().await.map_err(form_error)? {
        let name = field.name().unwrap_or("").to_string();
        if name == "payload_json" || name == "content" {
            let text = read_small(&mut field, &mut total, node).await?;
            if name == "payload_json" {
                payload = Some(parse_json(&text)?);
            } else {
                content = Some(String::from_utf8_lossy(&text).into_owned());
            }
        } else if name.starts_with("files[") || name.starts_with("file") {
            if !sender.may_attach {
                return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
            }
            if uploads.list.len() >= cfg.max_files {
                return Err(ApiError::field("files", "BASE_TYPE_MAX_LENGTH", &format!("Must be {} or fewer in length.", cfg.max_files)));
            }
            let channel = match channel {
                UploadChannel::Known(c) => c,
                UploadChannel::InPayload => {
                    payload.as_ref().and_then(|p| p.get("channel_id")?.as_str()?.parse().ok()).ok_or_else(|| {
                        ApiError::field("payload_json", "BASE_TYPE_REQUIRED", "payload_json with channel_id must come first.")
                    })?
                }
            };
            let a = store_file(node, channel, sender.uploader, &mut field, &mut total, &mut quota).await?;
            uploads.list.push(a);
        } else {
            // Fields we do not know are read and dropped, still counted.
            while let Some(c) = field.chunk().await.map_err(form_error)? {
                count(&mut total, c.len(), cfg.max_request_bytes)?;
            }
        }
    }
    uploads._quota = Some(quota.held);
    let mut payload = payload.unwrap_or_else(|| Value::Object(Default::default()));
    if let (Some(c), Some(obj)) = (content, payload.as_object_mut()) {
        obj.entry("content").or_insert(Value::String(c));
    }
    describe(&mut uploads.list, &payload)?;
    let body: T = serde_json::from_value(payload).map_err(|e| {
        ApiError::InvalidForm(serde_json::json!({ "_errors": [{ "code": "BASE_TYPE_INVALID", "message": e.to_string() }] }))
    })?;
    Ok((body, uploads))
}

/// Adds `n` bytes to the request's total: 413 past the limit.
fn count(total: &mut u64, n: usize, max: u64) -> ApiResult<()> {
    *total += n as u64;
    if *total > max {
        return Err(too_large());
    }
    Ok(())
}

fn form_error(e: multer::Error) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => too_large(),
        _ => bad_form(),
    }
}

/// A non-file field, held in memory: at most `limits.max_body_bytes`.
async fn read_small(field: &mut multer::Field<'_>, total: &mut u64, node: &Node) -> ApiResult<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(c) = field.chunk().await.map_err(form_error)? {
        count(total, c.len(), node.blobs.config.max_request_bytes)?;
        if out.len() + c.len() > node.config.limits.max_body_bytes {
            return Err(too_large());
        }
        out.extend_from_slice(&c);
    }
    Ok(out)
}

/// What is left of the uploader's quota for this request's files, and the
/// bytes of them held so far.
struct FileBudget {
    left: u64,
    held: Reservation,
}

impl FileBudget {
    /// Holds `n` more bytes: 413 past the quota.
    fn take(&mut self, n: u64) -> ApiResult<()> {
        if self.held.bytes() + n > self.left {
            return Err(too_large());
        }
        self.held.add(n);
        Ok(())
    }
}

/// Streams one file part to disk, records it as a pending upload, then
/// gives it its content's name. A part over a limit leaves nothing behind
/// (its temporary file is removed when the upload is dropped).
async fn store_file(
    node: &Node,
    channel: ChannelId,
    uploader: UserId,
    field: &mut multer::Field<'_>,
    total: &mut u64,
    quota: &mut FileBudget,
) -> ApiResult<AttachmentRecord> {
    let cfg = &node.blobs.config;
    let filename = clean_filename(field.file_name().unwrap_or("unknown"));
    let declared_type = field.content_type().map(|m| m.to_string());
    let io = |e: std::io::Error| ApiError::internal(format!("attachment write: {e}"));
    let mut up = node.blobs.begin().await.map_err(io)?;
    while let Some(c) = field.chunk().await.map_err(form_error)? {
        count(total, c.len(), cfg.max_request_bytes)?;
        if up.size + c.len() as u64 > cfg.max_file_bytes {
            return Err(too_large());
        }
        quota.take(c.len() as u64)?;
        up.write(&c).await.map_err(io)?;
    }
    let hash = up.finish().await.map_err(io)?;
    let content_type = content_type_of(&filename, &up.head, declared_type);
    let dims = content_type.as_deref().filter(|t| t.starts_with("image/")).and_then(|_| image_size(&up.head));
    let rec = AttachmentRecord {
        id: node.ids.next(),
        channel_id: channel,
        message_id: None,
        hash,
        filename,
        size: up.size,
        content_type,
        width: dims.map(|d| d.0),
        height: dims.map(|d| d.1),
        description: None,
        created_at: now_ms(),
        uploader_id: Some(uploader),
    };
    // The row first, then the name (see `node::attachments`).
    node.store.create_attachment(&rec).await?;
    if let Err(e) = node.blobs.publish(up, &rec.hash).await {
        node.blobs.discard(&*node.store, &[rec.id]).await;
        return Err(io(e));
    }
    Ok(rec)
}

/// Descriptions from `payload_json.attachments` (`{id, description}`, the
/// id being the file's index, as both libraries send it). Only the
/// description is taken: the files themselves are what was uploaded.
fn describe(list: &mut [AttachmentRecord], payload: &Value) -> ApiResult<()> {
    let Some(meta) = payload.get("attachments").and_then(Value::as_array) else { return Ok(()) };
    for m in meta {
        let idx = match m.get("id") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        let (Some(i), Some(d)) = (idx, m.get("description").and_then(Value::as_str)) else { continue };
        if d.chars().count() > MAX_DESCRIPTION {
            return Err(ApiError::field("attachments", "BASE_TYPE_MAX_LENGTH", "Must be 1024 or fewer in length."));
        }
        if let Some(a) = usize::try_from(i).ok().and_then(|i| list.get_mut(i)) {
            a.description = Some(d.to_string());
        }
    }
    Ok(())
}

/// The hashes of a message's files, read before the message is deleted
/// (none for a message without attachments: no store read).
pub async fn files_of(node: &Node, m: &store::MessageRecord) -> ApiResult<Vec<String>> {
    if !node::attachments::has_files(&m.extra) {
        return Ok(Vec::new());
    }
    Ok(node.store.attachments_of_message(m.id).await?.into_iter().map(|a| a.hash).collect())
}

/// After a message's deletion committed: its files go unless another
/// message still names them.
pub async fn release(node: &Node, mut hashes: Vec<String>) {
    hashes.sort();
    hashes.dedup();
    for h in hashes {
        node.blobs.release(&*node.store, &h).await;
    }
}

/// Serving: `/attachments/{channel_id}/{attachment_id}/{filename}`, as
/// Discord's CDN lays its URLs out. No token, like Discord's: whoever has a
/// URL the API signed has the file until the signature expires
/// (`attachments.url_lifetime_s`); without one, 404.
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/attachments/{channel_id}/{attachment_id}/{filename}", get(|s, p, q, h| serve(s, p, q, h, false)))
        // A pending upload (an interaction's attachment option), to the bot.
        .route("/ephemeral-attachments/{channel_id}/{attachment_id}/{filename}", get(|s, p, q, h| serve(s, p, q, h, true)))
}

async fn serve(
    State(node): State<Arc<Node>>,
    Path((c, id, name)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ephemeral: bool,
) -> Response {
    match serve_file(&node, &c, &id, &name, query.as_deref(), &headers, ephemeral).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn serve_file(
    node: &Node,
    c: &str,
    id: &str,
    name: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    ephemeral: bool,
) -> ApiResult<Response> {
    let missing = || ApiError::not_found(ErrorCode::UnknownRoute);
    let id: u64 = id.parse().map_err(|_| missing())?;
    // The signature before the store: a forged URL costs no read. It signs
    // the path as the API wrote it (filenames are kept URL-safe).
    let path = if ephemeral {
        node::attachments::ephemeral_url_path(ChannelId(c.parse().map_err(|_| missing())?), Snowflake(id), name)
    } else {
        format!("/attachments/{c}/{id}/{name}")
    };
    if !node.blobs.signer.verify(&path, query, node::attachments::now_s()) {
        return Err(missing());
    }
    let a = node.store.get_attachment(Snowflake(id)).await?.ok_or_else(missing)?;
    // A message's files at their path only; pending uploads at theirs only.
    if a.channel_id.to_string() != c || a.filename != name || a.message_id.is_some() == ephemeral {
        return Err(missing());
    }
    let mut file = tokio::fs::File::open(node.blobs.path(&a.hash)).await.map_err(|_| missing())?;
    let len = file.metadata().await.map_err(ApiError::internal)?.len();
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok()).map(|r| parse_range(r, len));
    let (status, start, end) = match range {
        None | Some(Range::Ignored) => (StatusCode::OK, 0, len),
        Some(Range::Bytes(s, e)) => (StatusCode::PARTIAL_CONTENT, s, e),
        Some(Range::Unsatisfiable) => {
            let mut r = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
            r.headers_mut().insert(header::CONTENT_RANGE, hv(&format!("bytes */{len}")));
            return Ok(r);
        }
    };
    file.seek(SeekFrom::Start(start)).await.map_err(ApiError::internal)?;
    let body = Body::from_stream(chunks(file.take(end - start)));
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    let ct = a.content_type.as_deref().unwrap_or("application/octet-stream");
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    h.insert(header::CONTENT_LENGTH, hv(&(end - start).to_string()));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    h.insert(header::ETAG, hv(&format!("\"{}\"", a.hash)));
    // Uploads share the web client's origin: never let a browser run one
    // (no sniffing into HTML; and if one is opened as a page anyway, it
    // runs no script and reaches nothing, as a sandboxed document).
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("default-src 'none'; sandbox"));
    if !is_inline_safe(ct) {
        h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    }
    if status == StatusCode::PARTIAL_CONTENT {
        h.insert(header::CONTENT_RANGE, hv(&format!("bytes {start}-{}/{len}", end - 1)));
    }
    Ok(r)
}

/// Bytes read per chunk of a served file.
const READ_CHUNK: usize = 64 << 10;

/// A file as a stream of chunks (one buffer in memory at a time).
fn chunks(r: tokio::io::Take<tokio::fs::File>) -> impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>> {
    futures_util::stream::unfold(r, |mut r| async move {
        let mut buf = bytes::BytesMut::with_capacity(READ_CHUNK);
        match r.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(buf.freeze()), r)),
            Err(e) => Some((Err(e), r)),
        }
    })
}

fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).expect("ASCII header value")
}

/// Types a browser shows without running anything.
fn is_inline_safe(ct: &str) -> bool {
    let t = ct.split(';').next().unwrap_or("").trim();
    (t.starts_with("image/") && t != "image/svg+xml") || t.starts_with("video/") || t.starts_with("audio/") || t == "text/plain"
}

#[derive(Debug, PartialEq)]
enum Range {
    /// Bytes `start..end` (end exclusive).
    Bytes(u64, u64),
    /// No byte of the file is in the range: 416.
    Unsatisfiable,
    /// Not a single byte range we serve (other units, several ranges,
    /// malformed): the whole file, as RFC 9110 allows.
    Ignored,
}

/// `bytes=a-b`, `bytes=a-`, `bytes=-n` (one range) against a file of `len` bytes.
fn parse_range(h: &str, len: u64) -> Range {
    let Some(spec) = h.trim().strip_prefix("bytes=") else { return Range::Ignored };
    if spec.contains(',') {
        return Range::Ignored;
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Range::Ignored };
    let (a, b) = (a.trim(), b.trim());
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(s), Ok(e)) if s <= e => {
            if s >= len {
                Range::Unsatisfiable
            } else {
                Range::Bytes(s, e.min(len - 1) + 1)
            }
        }
        (Ok(s), Err(_)) if b.is_empty() => {
            if s >= len {
                Range::Unsatisfiable
            } else {
                Range::Bytes(s, len)
            }
        }
        (Err(_), Ok(n)) if a.is_empty() => {
            if n == 0 || len == 0 {
                Range::Unsatisfiable
            } else {
                Range::Bytes(len.saturating_sub(n), len)
            }
        }
        _ => Range::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Range::Bytes(0, 10));
        assert_eq!(parse_range("bytes=90-", 100), Range::Bytes(90, 100));
        assert_eq!(parse_range("bytes=-10", 100), Range::Bytes(90, 100));
        assert_eq!(parse_range("bytes=-500", 100), Range::Bytes(0, 100));
        assert_eq!(parse_range("bytes=50-1000", 100), Range::Bytes(50, 100));
        assert_eq!(parse_range("bytes=100-", 100), Range::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Range::Unsatisfiable);
        assert_eq!(parse_range("bytes=5-2", 100), Range::Ignored);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Range::Ignored);
        assert_eq!(parse_range("items=0-1", 100), Range::Ignored);
    }
}
