//! [`Change`]s as SQLite statements, inside the transaction of
//! `apply_changes`.

use sqlx::SqliteConnection;

use super::{expressions, i, ids_json, insert_channel, insert_member};
use crate::{Change, Result};

/// Applies one change; the rows it touched.
pub(super) async fn apply(conn: &mut SqliteConnection, change: &Change) -> Result<u64> {
    let r = match change {
        Change::UpdateGuild(g) => sqlx::query(
            "UPDATE guilds SET name = ?, icon = ?, description = ?, owner_id = ?, system_channel_id = ? WHERE id = ?",
        )
        .bind(&g.name)
        .bind(&g.icon)
        .bind(&g.description)
        .bind(i(g.owner_id))
        .bind(g.system_channel_id.map(i))
        .bind(i(g.id))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteGuild(id) => {
            sqlx::query("DELETE FROM messages WHERE guild_id = ?").bind(i(*id)).execute(&mut *conn).await?;
            sqlx::query("DELETE FROM guilds WHERE id = ?").bind(i(*id)).execute(conn).await?.rows_affected()
        }
        Change::CreateChannel(c) => {
            insert_channel(conn, c).await?;
            1
        }
        Change::UpdateChannel(c) => sqlx::query(
            "UPDATE channels SET name = ?, position = ?, topic = ?, nsfw = ?, parent_id = ?, rate_limit_per_user = ?, overwrites = ? WHERE id = ?",
        )
        .bind(&c.name)
        .bind(i64::from(c.position))
        .bind(&c.topic)
        .bind(c.nsfw)
        .bind(c.parent_id.map(i))
        .bind(i64::from(c.rate_limit_per_user))
        .bind(serde_json::to_string(&c.overwrites)?)
        .bind(i(c.id))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteChannel(id) => sqlx::query("DELETE FROM channels WHERE id = ?").bind(i(*id)).execute(conn).await?.rows_affected(),
        Change::AddMember(m) => u64::from(insert_member(conn, m).await?),
        Change::UpdateMember(m) => sqlx::query("UPDATE members SET nick = ?, roles = ?, flags = ? WHERE guild_id = ? AND user_id = ?")
            .bind(&m.nick)
            .bind(ids_json(&m.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
            .bind(m.flags as i64)
            .bind(i(m.guild_id))
            .bind(i(m.user_id))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::RemoveMember { guild, user } => sqlx::query("DELETE FROM members WHERE guild_id = ? AND user_id = ?")
            .bind(i(*guild))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::UpdateMessage(m) => sqlx::query(
            "UPDATE messages SET content = ?, edited_at = ?, flags = ?, mention_everyone = ?, mentions = ?, extra = ? WHERE id = ?",
        )
        .bind(&m.content)
        .bind(m.edited_at.map(|v| v as i64))
        .bind(m.flags as i64)
        .bind(m.mention_everyone)
        .bind(ids_json(&m.mentions.iter().map(|u| u.0).collect::<Vec<_>>()))
        .bind(serde_json::to_string(&m.extra)?)
        .bind(i(m.id))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteMessage { channel, id } => sqlx::query("DELETE FROM messages WHERE id = ? AND channel_id = ?")
            .bind(i(*id))
            .bind(i(*channel))
            .execute(conn)
            .await?
            .rows_affected(),
        // Roles, overwrites, bans:
        Change::AddMemberUnlessBanned(_)
        | Change::CreateRole(_)
        | Change::UpdateRole(_)
        | Change::DeleteRole { .. }
        | Change::AddBan(_)
        | Change::RemoveBan { .. }
        | Change::PurgeMessages { .. } => super::roles::apply(conn, change).await?.unwrap_or(0),

        // Reactions, emojis, pins, bulk delete:
        Change::AddReaction { .. }
        | Change::RemoveReactions { .. }
        | Change::PinMessage { .. }
        | Change::UnpinMessage { .. }
        | Change::PinNotice { .. }
        | Change::DeleteMessages { .. }
        | Change::CreateEmoji(_)
        | Change::UpdateEmoji(_)
        | Change::DeleteEmoji { .. } => expressions::apply(conn, change).await?,

        // Attachments, webhooks:
        Change::CreateWebhook(_) | Change::UpdateWebhook(_) | Change::DeleteWebhook(_) | Change::WebhookMessage(_) => {
            super::attachments::apply(conn, change).await?
        }

        // DMs, threads, application commands:
        Change::CreateDmMessage(_)
        | Change::CreateThread { .. }
        | Change::UpdateThread { .. }
        | Change::AddThreadMember(_)
        | Change::RemoveThreadMember { .. } => super::dms_threads_commands::apply(conn, change).await?,
    };
    Ok(r)
}
