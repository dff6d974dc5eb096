//! Attachments and webhooks on PostgreSQL: one statement per write (no
//! read-modify-write), so nodes sharing the database cannot race.

use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};
use sqlx::{FromRow, PgConnection, PgPool};

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

pub(super) async fn create_attachment(w: &PgPool, a: &AttachmentRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO attachments (id, channel_id, message_id, hash, filename, size, content_type, width, height, description, created_at, uploader_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
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

pub(super) async fn get_attachment(r: &PgPool, id: Snowflake) -> Result<Option<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE id = $1");
    Ok(sqlx::query_as::<_, AttachmentRow>(&q).bind(id.0 as i64).fetch_optional(r).await?.map(Into::into))
}

pub(super) async fn attachments_of_message(r: &PgPool, m: MessageId) -> Result<Vec<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE message_id = $1 ORDER BY id");
    Ok(sqlx::query_as::<_, AttachmentRow>(&q).bind(i(m)).fetch_all(r).await?.into_iter().map(Into::into).collect())
}

pub(super) async fn delete_pending_attachments(w: &PgPool, ids: &[Snowflake]) -> Result<Vec<String>> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0 as i64).collect();
    Ok(sqlx::query_scalar("DELETE FROM attachments WHERE id = ANY($1) AND message_id IS NULL RETURNING hash")
        .bind(ids)
        .fetch_all(w)
        .await?)
}

pub(super) async fn expire_pending_attachments(w: &PgPool, before_ms: u64) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar("DELETE FROM attachments WHERE message_id IS NULL AND created_at < $1 RETURNING hash")
        .bind(before_ms as i64)
        .fetch_all(w)
        .await?)
}

pub(super) async fn blob_refs(r: &PgPool, hash: &str) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM attachments WHERE hash = $1").bind(hash).fetch_one(r).await?;
    Ok(n as u64)
}

/// The bytes of every attachment row `user` uploaded (pending or linked).
pub(super) async fn uploaded_bytes(r: &PgPool, user: UserId) -> Result<u64> {
    let n: Option<i64> =
        sqlx::query_scalar("SELECT sum(size)::BIGINT FROM attachments WHERE uploader_id = $1").bind(i(user)).fetch_one(r).await?;
    Ok(n.unwrap_or(0) as u64)
}

/// The setting `name`, inserted as `value` first if absent (the first
/// writer wins; every caller reads the same value).
pub(super) async fn setting_or_init(w: &PgPool, name: &str, value: &str) -> Result<String> {
    sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(value)
        .execute(w)
        .await?;
    Ok(sqlx::query_scalar("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(w).await?)
}

pub(super) async fn get_webhook(r: &PgPool, id: Snowflake) -> Result<Option<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE id = $1");
    Ok(sqlx::query_as::<_, WebhookRow>(&q).bind(id.0 as i64).fetch_optional(r).await?.map(Into::into))
}

pub(super) async fn webhooks_where(r: &PgPool, column: &str, id: i64) -> Result<Vec<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE {column} = $1 ORDER BY id");
    Ok(sqlx::query_as::<_, WebhookRow>(&q).bind(id).fetch_all(r).await?.into_iter().map(Into::into).collect())
}

/// Links committed messages' uploads to them (inside their transaction),
/// in one statement.
pub(super) async fn link(conn: &mut PgConnection, rows: &[&MessageRecord]) -> Result<()> {
    let (mut ids, mut msgs) = (Vec::new(), Vec::new());
    for m in rows {
        for a in attachment_ids(m) {
            ids.push(a);
            msgs.push(i(m.id));
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE attachments a SET message_id = v.m FROM UNNEST($1::BIGINT[], $2::BIGINT[]) AS v (id, m)
         WHERE a.id = v.id AND a.message_id IS NULL",
    )
    .bind(ids)
    .bind(msgs)
    .execute(conn)
    .await?;
    Ok(())
}

/// Webhook changes of `apply_changes`; the rows touched.
pub(super) async fn apply(conn: &mut PgConnection, change: &crate::Change) -> Result<u64> {
    use crate::Change;
    Ok(match change {
        Change::CreateWebhook(w) => sqlx::query(
            "INSERT INTO webhooks (id, guild_id, channel_id, kind, name, avatar, token, creator_id, application_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
        Change::UpdateWebhook(w) => sqlx::query("UPDATE webhooks SET name = $1, avatar = $2, channel_id = $3 WHERE id = $4")
            .bind(&w.name)
            .bind(&w.avatar)
            .bind(i(w.channel_id))
            .bind(w.id.0 as i64)
            .execute(conn)
            .await?
            .rows_affected(),
        Change::DeleteWebhook(id) => {
            sqlx::query("DELETE FROM webhooks WHERE id = $1").bind(id.0 as i64).execute(conn).await?.rows_affected()
        }
        Change::WebhookMessage(m) => {
            sqlx::query(
                "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
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
            .bind(super::ids_json(m.mentions.iter().map(|u| u.0)))
            .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
            .bind(serde_json::to_string(&m.extra)?)
            .execute(&mut *conn)
            .await?;
            sqlx::query("UPDATE channels SET last_message_id = GREATEST(coalesce(last_message_id, 0), $1) WHERE id = $2")
                .bind(i(m.id))
                .bind(i(m.channel_id))
                .execute(&mut *conn)
                .await?;
            link(conn, &[m]).await?;
            1
        }
        _ => 0,
    })
}
