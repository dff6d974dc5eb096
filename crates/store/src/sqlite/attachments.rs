//! Attachments and webhooks on SQLite.

use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};
use sqlx::{FromRow, SqliteConnection, SqlitePool};

use super::i;
use crate::attachments::attachment_ids;
use crate::{AttachmentRecord, MessageRecord, Result, WebhookRecord};

const ATTACHMENT_COLS: &str =
    "id, channel_id, message_id, hash, filename, size, content_type, width, height, description, created_at, uploader_id";
const WEBHOOK_COLS: &str = "id, guild_id, channel_id, kind, name, avatar, token, creator_id, application_id, created_at";

#[derive(FromRow)]
struct AttachmentRow {
    id: i64,
    channel_id: i64,
    message_id: Option<i64>,
    hash: String,
    filename: String,
    size: i64,
    content_type: Option<String>,
    width: Option<i64>,
    height: Option<i64>,
    description: Option<String>,
    created_at: i64,
    uploader_id: Option<i64>,
}

impl From<AttachmentRow> for AttachmentRecord {
    fn from(r: AttachmentRow) -> Self {
        AttachmentRecord {
            id: Snowflake(r.id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            message_id: r.message_id.map(|m| MessageId(m as u64)),
            hash: r.hash,
            filename: r.filename,
            size: r.size as u64,
            content_type: r.content_type,
            width: r.width.map(|v| v as u32),
            height: r.height.map(|v| v as u32),
            description: r.description,
            created_at: r.created_at as u64,
            uploader_id: r.uploader_id.map(|u| UserId(u as u64)),
        }
    }
}

#[derive(FromRow)]
struct WebhookRow {
    id: i64,
    guild_id: i64,
    channel_id: i64,
    kind: i64,
    name: String,
    avatar: Option<String>,
    token: String,
    creator_id: Option<i64>,
    application_id: Option<i64>,
    created_at: i64,
}

impl From<WebhookRow> for WebhookRecord {
    fn from(r: WebhookRow) -> Self {
        WebhookRecord {
            id: Snowflake(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            kind: r.kind as u8,
            name: r.name,
            avatar: r.avatar,
            token: r.token,
            creator_id: r.creator_id.map(|u| UserId(u as u64)),
            application_id: r.application_id.map(|a| a as u64),
            created_at: r.created_at as u64,
        }
    }
}

pub(super) async fn create_attachment(w: &SqlitePool, a: &AttachmentRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO attachments (id, channel_id, message_id, hash, filename, size, content_type, width, height, description, created_at, uploader_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(a.id.0 as i64)
    .bind(i(a.channel_id))
    .bind(a.message_id.map(i))
    .bind(&a.hash)
    .bind(&a.filename)
    .bind(a.size as i64)
    .bind(&a.content_type)
    .bind(a.width.map(i64::from))
    .bind(a.height.map(i64::from))
    .bind(&a.description)
    .bind(a.created_at as i64)
    .bind(a.uploader_id.map(i))
    .execute(w)
    .await?;
    Ok(())
}

pub(super) async fn get_attachment(r: &SqlitePool, id: Snowflake) -> Result<Option<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE id = ?");
    Ok(sqlx::query_as::<_, AttachmentRow>(&q).bind(id.0 as i64).fetch_optional(r).await?.map(Into::into))
}

pub(super) async fn attachments_of_message(r: &SqlitePool, m: MessageId) -> Result<Vec<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE message_id = ? ORDER BY id");
    Ok(sqlx::query_as::<_, AttachmentRow>(&q).bind(i(m)).fetch_all(r).await?.into_iter().map(Into::into).collect())
}

pub(super) async fn delete_pending_attachments(w: &SqlitePool, ids: &[Snowflake]) -> Result<Vec<String>> {
    let mut hashes = Vec::new();
    for id in ids {
        let h: Option<String> = sqlx::query_scalar("DELETE FROM attachments WHERE id = ? AND message_id IS NULL RETURNING hash")
            .bind(id.0 as i64)
            .fetch_optional(w)
            .await?;
        hashes.extend(h);
    }
    Ok(hashes)
}

pub(super) async fn expire_pending_attachments(w: &SqlitePool, before_ms: u64) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar("DELETE FROM attachments WHERE message_id IS NULL AND created_at < ? RETURNING hash")
        .bind(before_ms as i64)
        .fetch_all(w)
        .await?)
}

pub(super) async fn blob_refs(r: &SqlitePool, hash: &str) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM attachments WHERE hash = ?").bind(hash).fetch_one(r).await?;
    Ok(n as u64)
}

/// The bytes of every attachment row `user` uploaded (pending or linked).
pub(super) async fn uploaded_bytes(r: &SqlitePool, user: UserId) -> Result<u64> {
    let n: Option<i64> = sqlx::query_scalar("SELECT sum(size) FROM attachments WHERE uploader_id = ?").bind(i(user)).fetch_one(r).await?;
    Ok(n.unwrap_or(0) as u64)
}

/// The setting `name`, inserted as `value` first if absent (the first
/// writer wins; every caller reads the same value).
pub(super) async fn setting_or_init(w: &SqlitePool, name: &str, value: &str) -> Result<String> {
    sqlx::query("INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING").bind(name).bind(value).execute(w).await?;
    Ok(sqlx::query_scalar("SELECT value FROM settings WHERE name = ?").bind(name).fetch_one(w).await?)
}

pub(super) async fn get_webhook(r: &SqlitePool, id: Snowflake) -> Result<Option<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE id = ?");
    Ok(sqlx::query_as::<_, WebhookRow>(&q).bind(id.0 as i64).fetch_optional(r).await?.map(Into::into))
}

pub(super) async fn webhooks_where(r: &SqlitePool, column: &str, id: i64) -> Result<Vec<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE {column} = ? ORDER BY id");
    Ok(sqlx::query_as::<_, WebhookRow>(&q).bind(id).fetch_all(r).await?.into_iter().map(Into::into).collect())
}

/// Links a committed message's uploads to it (inside its transaction).
pub(super) async fn link(conn: &mut SqliteConnection, m: &MessageRecord) -> Result<()> {
    for a in attachment_ids(m) {
        sqlx::query("UPDATE attachments SET message_id = ? WHERE id = ? AND message_id IS NULL")
            .bind(i(m.id))
            .bind(a)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// `link` on the batch writer's own connection.
pub(super) fn link_batch(tx: &rusqlite::Transaction<'_>, m: &MessageRecord) -> Result<()> {
    let mut ids = attachment_ids(m).peekable();
    if ids.peek().is_none() {
        return Ok(());
    }
    let mut update = tx.prepare_cached("UPDATE attachments SET message_id = ?1 WHERE id = ?2 AND message_id IS NULL")?;
    for a in ids {
        update.execute(rusqlite::params![m.id.0 as i64, a])?;
    }
    Ok(())
}

/// Webhook changes of `apply_changes`; the rows touched.
pub(super) async fn apply(conn: &mut SqliteConnection, change: &crate::Change) -> Result<u64> {
    use crate::Change;
    Ok(match change {
        Change::CreateWebhook(w) => sqlx::query(
            "INSERT INTO webhooks (id, guild_id, channel_id, kind, name, avatar, token, creator_id, application_id, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(w.id.0 as i64)
        .bind(i(w.guild_id))
        .bind(i(w.channel_id))
        .bind(i64::from(w.kind))
        .bind(&w.name)
        .bind(&w.avatar)
        .bind(&w.token)
        .bind(w.creator_id.map(i))
        .bind(w.application_id.map(|a| a as i64))
        .bind(w.created_at as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UpdateWebhook(w) => sqlx::query("UPDATE webhooks SET name = ?, avatar = ?, channel_id = ? WHERE id = ?")
            .bind(&w.name)
            .bind(&w.avatar)
            .bind(i(w.channel_id))
            .bind(w.id.0 as i64)
            .execute(conn)
            .await?
            .rows_affected(),
        Change::DeleteWebhook(id) => {
            sqlx::query("DELETE FROM webhooks WHERE id = ?").bind(id.0 as i64).execute(conn).await?.rows_affected()
        }
        Change::WebhookMessage(m) => {
            sqlx::query(
                "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(i(m.id))
            .bind(i(m.channel_id))
            .bind(m.guild_id.map(i))
            .bind(i(m.author_id))
            .bind(&m.content)
            .bind(m.edited_at.map(|v| v as i64))
            .bind(i64::from(m.kind))
            .bind(m.flags as i64)
            .bind(m.tts)
            .bind(m.mention_everyone)
            .bind(super::ids_json(&m.mentions.iter().map(|u| u.0).collect::<Vec<_>>()))
            .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
            .bind(serde_json::to_string(&m.extra)?)
            .execute(&mut *conn)
            .await?;
            sqlx::query("UPDATE channels SET last_message_id = max(coalesce(last_message_id, 0), ?) WHERE id = ?")
                .bind(i(m.id))
                .bind(i(m.channel_id))
                .execute(&mut *conn)
                .await?;
            link(conn, m).await?;
            1
        }
        _ => 0,
    })
}
