//! Uploaded files on disk: streamed to a temporary file while hashed, then
//! named by the SHA-256 of their content (the same content is stored once),
//! and removed when the last attachment row naming them goes.
//!
//! ## References and removal
//!
//! A file's references are the attachment rows naming its hash, pending
//! (the upload's message is not committed yet) or linked to a message. An
//! upload records its pending row *before* it renames its temporary file to
//! the content's name; the message's commit links the row in the same
//! transaction as the message. Deleting a message deletes its rows (the
//! foreign key cascades), then [`Blobs::release`] each hash:
//!
//! 1. no row names the hash: rename the file to a tombstone of its own;
//! 2. count again: still none, remove the tombstone; one appeared (an
//!    upload of the same content recorded its row meanwhile), link the
//!    tombstone back (if that upload has not already renamed its own copy
//!    into place) and remove it.
//!
//! An upload whose row was counted in (2) is restored; one whose row came
//! after (2) renames its file after the tombstone moved away, so it never
//! loses its file. This holds across nodes sharing one directory (renames
//! are atomic) and needs no lock.
//!
//! ## Orphans
//!
//! A refused or failed post removes its pending rows and releases their
//! files at once ([`Blobs::discard`]). A REST node that dies between the
//! upload and the answer leaves pending rows: the sweeper removes those
//! older than `pending_grace_ms` and releases their files, and removes
//! temporary files as old. Messages removed with their channel or guild
//! take their rows with them (cascade); the sweeper's walk over the
//! directory releases files no row names any more.
//!
//! ## Signed URLs
//!
//! As on Discord's CDN, every attachment URL the API hands out carries
//! `ex` (expiry) and `is` (issued), unix seconds in hex, and `hm`, the hex
//! HMAC-SHA256 of the path with both under the deployment's key
//! ([`UrlSigner`]). A URL is good for `attachments.url_lifetime_s` from its
//! signing; REST reads sign afresh, so a client that still sees a message
//! gets a working URL. Without a valid, unexpired signature a file is 404.
//!
//! ## Quota
//!
//! Each row records its uploader; a user's stored bytes are the sizes of
//! their rows (`Store::uploaded_bytes`), and uploads still streaming on this
//! node are held in [`Blobs::reserve`] until their request ends, so two
//! requests of one user at once cannot both take the last of the quota.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use protocol::{ChannelId, Snowflake, UserId};
use sha2::{Digest, Sha256};
use store::{AttachmentRecord, Store};
use tokio::io::AsyncWriteExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use config::{AttachmentsConfig, Config};

/// Bytes of a file's start kept to read an image's size from its header.
const HEAD_BYTES: usize = 64 << 10;
/// Subdirectory of temporary uploads and tombstones (same file system as
/// the files, so renames are atomic).
const TMP_DIR: &str = "tmp";

/// The name of the URL-signing key among the store's settings.
const SIGNING_KEY_SETTING: &str = "attachments.url_signing_key";

/// The node's file store and its upload bound.
pub struct Blobs {
    dir: PathBuf,
    tmp: PathBuf,
    uploads: Arc<Semaphore>,
    pub config: AttachmentsConfig,
    /// Signs the URLs handed out and checks the ones served.
    pub signer: UrlSigner,
    /// Bytes of uploads of this node whose requests have not ended, per
    /// uploader (see [`Blobs::reserve`]).
    streaming: Arc<std::sync::Mutex<std::collections::HashMap<UserId, u64>>>,
}

impl Blobs {
    pub fn new(config: &Config) -> Blobs {
        let dir = config.attachments.dir.clone().unwrap_or_else(|| config.data_dir.join("attachments"));
        let tmp = dir.join(TMP_DIR);
        if let Err(e) = std::fs::create_dir_all(&tmp) {
            tracing::error!(dir = %tmp.display(), error = %e, "cannot create the attachments directory; uploads will fail");
        }
        Blobs {
            dir,
            tmp,
            uploads: Arc::new(Semaphore::new(config.attachments.upload_concurrency.max(1))),
            config: config.attachments.clone(),
            signer: UrlSigner::from_config(&config.attachments),
            streaming: Arc::default(),
        }
    }

    /// A hold on `user`'s quota for one request's files; its bytes count
    /// until it is dropped (when the request ends: by then its rows are in
    /// the store, or gone).
    pub fn reserve(&self, user: UserId) -> Reservation {
        Reservation { user, bytes: 0, streaming: self.streaming.clone() }
    }

    /// Bytes `user` may still upload: the quota less what the store holds
    /// of theirs and what streams on this node (`u64::MAX`: no quota).
    pub async fn quota_left(&self, store: &dyn Store, user: UserId) -> store::Result<u64> {
        let quota = self.config.user_quota_bytes;
        if quota == 0 {
            return Ok(u64::MAX);
        }
        let stored = store.uploaded_bytes(user).await?;
        let streaming = self.streaming.lock().expect("quota map poisoned").get(&user).copied().unwrap_or(0);
        Ok(quota.saturating_sub(stored.saturating_add(streaming)))
    }

    /// A place among the uploads in flight, or `None` when all are taken.
    pub fn try_upload(&self) -> Option<OwnedSemaphorePermit> {
        self.uploads.clone().try_acquire_owned().ok()
    }

    /// Where the file of `hash` lives: `<dir>/<first two hex digits>/<hash>`
    /// (256 subdirectories keep directories small).
    pub fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(hash)
    }

    /// A new temporary file to stream an upload into.
    pub async fn begin(&self) -> std::io::Result<TempUpload> {
        let path = self.tmp.join(format!("{:032x}.part", rand::random::<u128>()));
        let file = tokio::fs::File::create(&path).await?;
        Ok(TempUpload { path: Some(path), file, hasher: Sha256::new(), size: 0, head: Vec::new() })
    }

    /// Gives a finished upload its content's name. Call only after its
    /// pending row is recorded (see the module doc).
    pub async fn publish(&self, mut upload: TempUpload, hash: &str) -> std::io::Result<()> {
        let dest = self.path(hash);
        tokio::fs::create_dir_all(dest.parent().expect("a file under the directory")).await?;
        let from = upload.path.take().expect("not published twice");
        let r = tokio::fs::rename(&from, &dest).await;
        if r.is_err() {
            let _ = tokio::fs::remove_file(&from).await;
        }
        r
    }

    /// Removes the file of `hash` if no attachment row names it any more
    /// (see the module doc for why this is safe against a concurrent upload).
    pub async fn release(&self, store: &dyn Store, hash: &str) {
        if let Err(e) = self.try_release(store, hash).await {
            tracing::warn!(hash, error = %e, "attachment file not released; the sweeper will retry");
        }
    }

    async fn try_release(&self, store: &dyn Store, hash: &str) -> anyhow::Result<()> {
        if !is_hash(hash) || store.blob_refs(hash).await? > 0 {
            return Ok(());
        }
        let path = self.path(hash);
        let tomb = self.tmp.join(format!("{hash}.{:016x}.del", rand::random::<u64>()));
        match tokio::fs::rename(&path, &tomb).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        if store.blob_refs(hash).await.unwrap_or(1) > 0 {
            // An upload of the same content came in between: put it back,
            // unless that upload already renamed its own copy into place.
            match tokio::fs::hard_link(&tomb, &path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        tokio::fs::remove_file(&tomb).await?;
        Ok(())
    }

    /// Uploads whose message will never commit: their pending rows go, then
    /// their files if nothing else names them.
    pub async fn discard(&self, store: &dyn Store, ids: &[Snowflake]) {
        match store.delete_pending_attachments(ids).await {
            Ok(mut hashes) => {
                hashes.sort();
                hashes.dedup();
                for h in hashes {
                    self.release(store, &h).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "pending attachments not discarded; the sweeper will"),
        }
    }

    /// One pass of the sweeper: pending rows older than the grace, stale
    /// temporary files, and files no row names.
    pub async fn sweep(&self, store: &dyn Store) -> anyhow::Result<()> {
        let grace = Duration::from_millis(self.config.pending_grace_ms);
        let before = crate::auth::now_ms().saturating_sub(self.config.pending_grace_ms);
        let mut hashes = store.expire_pending_attachments(before).await?;
        hashes.sort();
        hashes.dedup();
        for h in &hashes {
            self.release(store, h).await;
        }
        let old = |p: &Path| {
            std::fs::metadata(p).and_then(|m| m.modified()).is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > grace)
        };
        let mut tmp = tokio::fs::read_dir(&self.tmp).await?;
        while let Some(e) = tmp.next_entry().await? {
            // Tombstones are a release in progress (or one that died): only old ones go.
            if old(&e.path()) {
                let _ = tokio::fs::remove_file(e.path()).await;
            }
        }
        let mut top = tokio::fs::read_dir(&self.dir).await?;
        while let Some(sub) = top.next_entry().await? {
            if sub.file_name() == TMP_DIR || !sub.file_type().await?.is_dir() {
                continue;
            }
            let mut files = tokio::fs::read_dir(sub.path()).await?;
            while let Some(f) = files.next_entry().await? {
                if let Some(h) = f.file_name().to_str() {
                    self.release(store, h).await;
                }
            }
        }
        Ok(())
    }
}

/// Runs [`Blobs::sweep`] every `sweep_interval_ms` until shutdown.
pub async fn sweeper(node: Arc<crate::Node>) {
    let every = Duration::from_millis(node.config.attachments.sweep_interval_ms.max(1_000));
    loop {
        tokio::select! {
            _ = node.shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = node.blobs.sweep(&*node.store).await {
            tracing::warn!(error = %e, "attachment sweep failed");
        }
    }
}

/// Bytes of one request's files held against their uploader's quota.
pub struct Reservation {
    user: UserId,
    bytes: u64,
    streaming: Arc<std::sync::Mutex<std::collections::HashMap<UserId, u64>>>,
}

impl Reservation {
    /// Holds `n` more bytes.
    pub fn add(&mut self, n: u64) {
        self.bytes += n;
        *self.streaming.lock().expect("quota map poisoned").entry(self.user).or_default() += n;
    }

    /// The bytes held so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut map = self.streaming.lock().expect("quota map poisoned");
        if let Some(b) = map.get_mut(&self.user) {
            *b = b.saturating_sub(self.bytes);
            if *b == 0 {
                map.remove(&self.user);
            }
        }
    }
}

/// The key that signs attachment URLs: `attachments.url_signing_key` if
/// set, else the one kept in the store, created by the first node to ask
/// (32 random bytes, hex), so every node of a cluster signs alike.
pub async fn signing_key(config: &Config, store: &dyn Store) -> store::Result<String> {
    if let Some(k) = &config.attachments.url_signing_key {
        return Ok(k.clone());
    }
    store.setting_or_init(SIGNING_KEY_SETTING, &hex::encode(rand::random::<[u8; 32]>())).await
}

/// Signs and checks attachment URLs: `?ex=<expiry>&is=<issued>&hm=<mac>`,
/// times in unix seconds as hex, `mac` the hex HMAC-SHA256 of
/// `<path>\n<ex>\n<is>` (the path only, so a change of public origin keeps
/// URLs valid).
pub struct UrlSigner {
    key: Vec<u8>,
    lifetime_s: u64,
}

impl UrlSigner {
    pub fn new(key: &[u8], lifetime_s: u64) -> UrlSigner {
        UrlSigner { key: key.to_vec(), lifetime_s }
    }

    /// With the configured key, or, where none was resolved (a node built
    /// without [`crate::Server::start`], as unit tests do), a key of this
    /// process only.
    fn from_config(c: &AttachmentsConfig) -> UrlSigner {
        let key = match &c.url_signing_key {
            Some(k) => k.as_bytes().to_vec(),
            None => rand::random::<[u8; 32]>().to_vec(),
        };
        UrlSigner::new(&key, c.url_lifetime_s)
    }

    fn mac(&self, path: &str, ex: &str, is: &str) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(path.as_bytes());
        m.update(b"\n");
        m.update(ex.as_bytes());
        m.update(b"\n");
        m.update(is.as_bytes());
        m
    }

    /// A MAC of `what` under the same cluster-wide key, as hex (interaction
    /// tokens: any node checks one without asking the actor that made it).
    pub fn tag(&self, what: &str) -> String {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(what.as_bytes());
        hex::encode(m.finalize().into_bytes())
    }

    /// Whether `tag` is [`UrlSigner::tag`] of `what` (constant time).
    pub fn check_tag(&self, what: &str, tag: &str) -> bool {
        let Ok(tag) = hex::decode(tag) else { return false };
        let mut m = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(what.as_bytes());
        m.verify_slice(&tag).is_ok()
    }

    /// `path` with a signature good from `now_s` for the lifetime.
    pub fn sign(&self, path: &str, now_s: u64) -> String {
        let (ex, is) = (format!("{:x}", now_s.saturating_add(self.lifetime_s)), format!("{now_s:x}"));
        let hm = hex::encode(self.mac(path, &ex, &is).finalize().into_bytes());
        format!("{path}?ex={ex}&is={is}&hm={hm}")
    }

    /// A URL (absolute, or a path) with its signature made afresh.
    pub fn resign(&self, url: &str, now_s: u64) -> String {
        let bare = url.split_once('?').map_or(url, |(b, _)| b);
        let path_at = bare.find("://").map_or(0, |i| bare[i + 3..].find('/').map_or(bare.len(), |j| i + 3 + j));
        let (origin, path) = bare.split_at(path_at);
        format!("{origin}{}", self.sign(path, now_s))
    }

    /// Signs afresh the `url` and `proxy_url` of attachment objects.
    pub fn resign_all(&self, attachments: &mut [serde_json::Value], now_s: u64) {
        for a in attachments {
            for k in ["url", "proxy_url"] {
                if let Some(u) = a.get(k).and_then(|v| v.as_str()).map(|u| self.resign(u, now_s)) {
                    a[k] = u.into();
                }
            }
        }
    }

    /// Whether `query` carries a signature of `path` that has not expired
    /// at `now_s` (other parameters are ignored, as on Discord's CDN).
    pub fn verify(&self, path: &str, query: Option<&str>, now_s: u64) -> bool {
        let (mut ex, mut is, mut hm) = (None, None, None);
        for pair in query.unwrap_or("").split('&') {
            match pair.split_once('=') {
                Some(("ex", v)) => ex = Some(v),
                Some(("is", v)) => is = Some(v),
                Some(("hm", v)) => hm = Some(v),
                _ => {}
            }
        }
        let (Some(ex), Some(is), Some(hm)) = (ex, is, hm) else { return false };
        let Ok(hm) = hex::decode(hm) else { return false };
        // The signature first (constant time), then the expiry it vouches for.
        self.mac(path, ex, is).verify_slice(&hm).is_ok() && u64::from_str_radix(ex, 16).is_ok_and(|ex| ex > now_s)
    }
}

/// Now, in unix seconds (what URL signatures count in).
pub fn now_s() -> u64 {
    crate::auth::now_ms() / 1000
}

/// An upload being written: its temporary file is removed unless published.
pub struct TempUpload {
    path: Option<PathBuf>,
    file: tokio::fs::File,
    hasher: Sha256,
    pub size: u64,
    /// The file's first bytes (for an image's size).
    pub head: Vec<u8>,
}

impl TempUpload {
    pub async fn write(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.hasher.update(chunk);
        if self.head.len() < HEAD_BYTES {
            let take = chunk.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.size += chunk.len() as u64;
        self.file.write_all(chunk).await
    }

    /// Flushes the file to disk; the content's hash (lowercase hex).
    pub async fn finish(&mut self) -> std::io::Result<String> {
        self.file.flush().await?;
        self.file.sync_data().await?;
        Ok(hex::encode(std::mem::take(&mut self.hasher).finalize()))
    }
}

impl Drop for TempUpload {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether a message's stored `extra` carries attachments.
pub fn has_files(extra: &serde_json::Value) -> bool {
    extra.get("attachments").and_then(|a| a.as_array()).is_some_and(|a| !a.is_empty())
}

/// Width and height of a PNG, GIF, JPEG or WebP from its first bytes.
pub fn image_size(head: &[u8]) -> Option<(u32, u32)> {
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let le16 = |b: &[u8]| u32::from(u16::from_le_bytes([b[0], b[1]]));
    if head.len() >= 24 && head.starts_with(b"\x89PNG\r\n\x1a\n") && &head[12..16] == b"IHDR" {
        return Some((be32(&head[16..]), be32(&head[20..])));
    }
    if head.len() >= 10 && (head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a")) {
        return Some((le16(&head[6..]), le16(&head[8..])));
    }
    if head.len() >= 30 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        let le24 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], 0]);
        return match &head[12..16] {
            b"VP8X" => Some((le24(&head[24..]) + 1, le24(&head[27..]) + 1)),
            b"VP8 " => Some((le16(&head[26..]) & 0x3fff, le16(&head[28..]) & 0x3fff)),
            b"VP8L" if head.len() >= 25 => {
                let b = u32::from_le_bytes([head[21], head[22], head[23], head[24]]);
                Some(((b & 0x3fff) + 1, ((b >> 14) & 0x3fff) + 1))
            }
            _ => None,
        };
    }
    if head.starts_with(&[0xff, 0xd8]) {
        return jpeg_size(head);
    }
    None
}

/// Walks a JPEG's segments to its frame header (SOFn).
fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xff {
            return None;
        }
        let marker = b[i + 1];
        if marker == 0xff {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if sof {
            let h = u32::from(u16::from_be_bytes([b[i + 5], b[i + 6]]));
            let w = u32::from(u16::from_be_bytes([b[i + 7], b[i + 8]]));
            return Some((w, h));
        }
        i += 2 + len;
    }
    None
}

/// An upload's content type: what its first bytes show it to be, else the
/// type its part declared, else one from its name, else a declared
/// `application/octet-stream`; `None` (left out of the attachment, as
/// Discord does) when nothing says.
pub fn content_type_of(filename: &str, head: &[u8], declared: Option<String>) -> Option<String> {
    const OPAQUE: &str = "application/octet-stream";
    let declared = declared.filter(|t| !t.trim().is_empty());
    if let Some(t) = sniff(head) {
        return Some(t.to_string());
    }
    match declared {
        Some(t) if !t.eq_ignore_ascii_case(OPAQUE) => Some(t),
        d => by_name(filename).map(str::to_string).or(d),
    }
}

/// The type a file's first bytes prove (images only).
fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG") {
        return Some("image/png");
    }
    if head.starts_with(b"GIF8") {
        return Some("image/gif");
    }
    if head.starts_with(&[0xff, 0xd8, 0xff]) {
        return Some("image/jpeg");
    }
    if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    None
}

/// A content type from a file's name (its extension).
fn by_name(filename: &str) -> Option<&'static str> {
    let ext = filename.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "txt" | "log" | "md" => "text/plain; charset=utf-8",
        "json" => "application/json; charset=utf-8",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "wav" => "audio/wav",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// A filename as Discord keeps it: the last path component, characters
/// outside `[A-Za-z0-9._-]` as `_`, at most `MAX_FILENAME` bytes.
pub fn clean_filename(name: &str) -> String {
    const MAX_FILENAME: usize = 255;
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut out: String =
        base.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).take(MAX_FILENAME).collect();
    if out.trim_matches('.').is_empty() {
        out = "unknown".into();
    }
    out
}

/// The attachment object of a stored upload, as Discord documents it, its
/// URL signed now.
pub fn attachment_json(a: &AttachmentRecord, base: &str, signer: &UrlSigner) -> serde_json::Value {
    attachment_json_at(a, base, signer, &url_path(a.channel_id, a.id, &a.filename))
}

/// An interaction's pending upload, served at [`ephemeral_url_path`].
pub fn ephemeral_attachment_json(a: &AttachmentRecord, base: &str, signer: &UrlSigner) -> serde_json::Value {
    attachment_json_at(a, base, signer, &ephemeral_url_path(a.channel_id, a.id, &a.filename))
}

fn attachment_json_at(a: &AttachmentRecord, base: &str, signer: &UrlSigner, path: &str) -> serde_json::Value {
    let url = format!("{base}{}", signer.sign(path, now_s()));
    let mut v = serde_json::json!({
        "id": a.id, "filename": a.filename, "size": a.size, "url": url, "proxy_url": url,
    });
    if let Some(t) = &a.content_type {
        v["content_type"] = t.as_str().into();
    }
    if let (Some(w), Some(h)) = (a.width, a.height) {
        v["width"] = w.into();
        v["height"] = h.into();
    }
    if let Some(d) = &a.description {
        v["description"] = d.as_str().into();
    }
    v
}

/// The HTTP origin clients reach this server at, from the gateway URL
/// (`ws://host:port/...` → `http://host:port`).
pub fn http_base(config: &Config) -> String {
    let g = config.gateway_url();
    let (scheme, rest) = match g.split_once("://") {
        Some(("wss", r)) => ("https", r),
        Some((_, r)) => ("http", r),
        None => ("http", g.as_str()),
    };
    format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest))
}

/// An attachment's channel, for the path a file is served at.
pub fn url_path(channel: ChannelId, id: Snowflake, filename: &str) -> String {
    format!("/attachments/{channel}/{id}/{filename}")
}

/// Where a file not (yet) in a message is served: an interaction's
/// attachment option, for the bot, while the upload is pending. A message's
/// files are never served here, nor these at [`url_path`].
pub fn ephemeral_url_path(channel: ChannelId, id: Snowflake, filename: &str) -> String {
    format!("/ephemeral-attachments/{channel}/{id}/{filename}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_from_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(image_size(&png), Some((640, 480)));
        assert_eq!(image_size(b"GIF89a\x20\x03\x58\x02rest"), Some((800, 600)));
        let jpeg = [0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0, 50, 0, 100, 3, 0, 0, 0, 0];
        assert_eq!(image_size(&jpeg), Some((100, 50)));
        assert_eq!(image_size(b"plain text, not an image at all"), None);
    }

    #[test]
    fn filenames_are_cleaned() {
        assert_eq!(clean_filename("../../etc/passwd"), "passwd");
        assert_eq!(clean_filename("my photo (1).png"), "my_photo__1_.png");
        assert_eq!(clean_filename(".."), "unknown");
        assert_eq!(clean_filename("C:\\x\\y.txt"), "y.txt");
    }

    #[test]
    fn signed_urls_hold_until_they_expire_and_only_as_signed() {
        let s = UrlSigner::new(b"k", 100);
        let path = "/attachments/1/2/a.png";
        let signed = s.sign(path, 1_000);
        let (p, q) = signed.split_once('?').unwrap();
        assert_eq!(p, path);
        assert!(q.starts_with("ex=44c&is=3e8&hm="), "{q}");
        assert!(s.verify(path, Some(q), 1_000) && s.verify(path, Some(q), 1_099));
        assert!(!s.verify(path, Some(q), 1_100), "expired");
        assert!(!s.verify("/attachments/1/2/b.png", Some(q), 1_000), "another path");
        assert!(!s.verify(path, Some(&q.replace("ex=44c", "ex=44d")), 1_000), "a moved expiry");
        assert!(!s.verify(path, None, 1_000) && !s.verify(path, Some("ex=44c&is=3e8"), 1_000), "unsigned");
        assert!(!UrlSigner::new(b"other", 100).verify(path, Some(q), 1_000), "another key");
        // Signed afresh: origin and path kept, the query replaced.
        let url = format!("http://h:1{signed}");
        assert_eq!(s.resign(&url, 2_000), format!("http://h:1{}", s.sign(path, 2_000)));
        assert_eq!(s.resign(path, 2_000), s.sign(path, 2_000));
    }

    #[test]
    fn http_base_from_the_gateway_url() {
        let mut c = Config::default();
        assert_eq!(http_base(&c), "http://127.0.0.1:8080");
        c.public_url = Some("wss://chat.example.com/gateway".into());
        assert_eq!(http_base(&c), "https://chat.example.com");
    }
}
