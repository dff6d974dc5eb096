//! Attachments, webhooks and deployment-wide settings (webhooks change
//! through `changes`; uploads are linked to their messages as those commit).

use protocol::{MessageId, Snowflake, UserId};

use super::rows::*;
use super::{i, query, Pool};
use crate::{AttachmentRecord, Result, WebhookRecord};

pub(super) async fn create(db: Pool<'_>, a: &AttachmentRecord) -> Result<()> {
    query(format!("INSERT INTO attachments ({ATTACHMENT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"))
        .bind(a.id)
        .bind(a.channel_id)
        .bind(a.message_id)
        .bind(&a.hash)
        .bind(&a.filename)
        .bind(a.size)
        .bind(&a.content_type)
        .bind(a.width)
        .bind(a.height)
        .bind(&a.description)
        .bind(a.created_at)
        .bind(a.uploader_id)
        .execute(db)
        .await?;
    Ok(())
}

pub(super) async fn get(db: Pool<'_>, id: Snowflake) -> Result<Option<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE id = $1");
    Ok(query(q).bind(id).fetch_optional::<AttachmentRow>(db).await?.map(Into::into))
}

pub(super) async fn of_message(db: Pool<'_>, m: MessageId) -> Result<Vec<AttachmentRecord>> {
    let q = format!("SELECT {ATTACHMENT_COLS} FROM attachments WHERE message_id = $1 ORDER BY id");
    Ok(query(q).bind(m).fetch_all::<AttachmentRow>(db).await?.into_iter().map(Into::into).collect())
}

pub(super) async fn delete_pending(db: Pool<'_>, ids: &[Snowflake]) -> Result<Vec<String>> {
    let q = format!("DELETE FROM attachments WHERE id {} AND message_id IS NULL RETURNING hash", db.dialect().in_ids("$1"));
    let rows: Vec<(String,)> = query(q).bind(ids.iter().map(|&id| i(id)).collect::<Vec<_>>()).fetch_all(db).await?;
    Ok(rows.into_iter().map(|(h,)| h).collect())
}

pub(super) async fn expire_pending(db: Pool<'_>, before_ms: u64) -> Result<Vec<String>> {
    let q = query("DELETE FROM attachments WHERE message_id IS NULL AND created_at < $1 RETURNING hash").bind(before_ms);
    Ok(q.fetch_all::<(String,)>(db).await?.into_iter().map(|(h,)| h).collect())
}

pub(super) async fn blob_refs(db: Pool<'_>, hash: &str) -> Result<u64> {
    let (n,): (i64,) = query("SELECT count(*) FROM attachments WHERE hash = $1").bind(hash).fetch_one(db).await?;
    Ok(n as u64)
}

/// The bytes of every attachment row `user` uploaded (pending or linked).
pub(super) async fn uploaded_bytes(db: Pool<'_>, user: UserId) -> Result<u64> {
    let q = query("SELECT CAST(sum(size) AS BIGINT) FROM attachments WHERE uploader_id = $1").bind(user);
    let (n,): (Option<i64>,) = q.fetch_one(db).await?;
    Ok(n.unwrap_or(0) as u64)
}

/// The setting `name`, inserted as `value` first if absent (the first
/// writer wins; every caller reads the same value).
pub(super) async fn setting_or_init(db: Pool<'_>, name: &str, value: &str) -> Result<String> {
    query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING").bind(name).bind(value).execute(db).await?;
    let (v,): (String,) = query("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(db).await?;
    Ok(v)
}

pub(super) async fn get_webhook(db: Pool<'_>, id: Snowflake) -> Result<Option<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE id = $1");
    Ok(query(q).bind(id).fetch_optional::<WebhookRow>(db).await?.map(Into::into))
}

pub(super) async fn webhooks_where(db: Pool<'_>, column: &str, id: i64) -> Result<Vec<WebhookRecord>> {
    let q = format!("SELECT {WEBHOOK_COLS} FROM webhooks WHERE {column} = $1 ORDER BY id");
    Ok(query(q).bind(id).fetch_all::<WebhookRow>(db).await?.into_iter().map(Into::into).collect())
}
