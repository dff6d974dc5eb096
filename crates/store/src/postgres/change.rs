//! [`Change`]s as PostgreSQL statements, inside the transaction of
//! `apply_changes`. Each is one statement on the rows it names: no read
//! followed by a write, so nodes sharing the database cannot race.

use sqlx::PgConnection;

use super::{expressions, i, ids_json, insert_channels, insert_members};
use crate::{Change, Result};

/// Applies one change; the rows it touched.
pub(super) async fn apply(conn: &mut PgConnection, change: &Change) -> Result<u64> {
    let r = match change {
        Change::UpdateGuild(g) => {
            sqlx::query("UPDATE guilds SET name = $1, icon = $2, description = $3, owner_id = $4, system_channel_id = $5 WHERE id = $6")
                .bind(&g.name)
                .bind(&g.icon)
                .bind(&g.description)
                .bind(i(g.owner_id))
                .bind(g.system_channel_id.map(i))
                .bind(i(g.id))
                .execute(conn)
                .await?
                .rows_affected()
        }
        Change::DeleteGuild(id) => {
            sqlx::query("DELETE FROM messages WHERE guild_id = $1").bind(i(*id)).execute(&mut *conn).await?;
            sqlx::query("DELETE FROM guilds WHERE id = $1").bind(i(*id)).execute(conn).await?.rows_affected()
        }
        Change::CreateChannel(c) => {
            insert_channels(conn, &[c]).await?;
            1
        }
        Change::UpdateChannel(c) => sqlx::query(
            "UPDATE channels SET name = $1, position = $2, topic = $3, nsfw = $4, parent_id = $5, rate_limit_per_user = $6, overwrites = $7
             WHERE id = $8",
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
        Change::DeleteChannel(id) => sqlx::query("DELETE FROM channels WHERE id = $1").bind(i(*id)).execute(conn).await?.rows_affected(),
        Change::AddMember(m) => insert_members(conn, &[m]).await?,
        Change::UpdateMember(m) => sqlx::query("UPDATE members SET nick = $1, roles = $2, flags = $3 WHERE guild_id = $4 AND user_id = $5")
            .bind(&m.nick)
            .bind(ids_json(m.roles.iter().map(|r| r.0)))
            .bind(m.flags as i64)
            .bind(i(m.guild_id))
            .bind(i(m.user_id))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::RemoveMember { guild, user } => sqlx::query("DELETE FROM members WHERE guild_id = $1 AND user_id = $2")
            .bind(i(*guild))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::UpdateMessage(m) => sqlx::query(
            "UPDATE messages SET content = $1, edited_at = $2, flags = $3, mention_everyone = $4, mentions = $5, extra = $6 WHERE id = $7",
        )
        .bind(&m.content)
        .bind(m.edited_at.map(|v| v as i64))
        .bind(m.flags as i64)
        .bind(m.mention_everyone)
        .bind(ids_json(m.mentions.iter().map(|u| u.0)))
        .bind(serde_json::to_string(&m.extra)?)
        .bind(i(m.id))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteMessage { channel, id } => sqlx::query("DELETE FROM messages WHERE id = $1 AND channel_id = $2")
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
