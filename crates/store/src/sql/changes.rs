//! [`Change`]s as statements, inside the transaction of `apply_changes`.
//! Each is one statement on the rows it names, its conditions (a ban, a
//! limit, a pin that took) checked in that statement: no read followed by a
//! write, so nodes sharing a PostgreSQL database cannot race.

use super::rows::{ids_json, MESSAGE_COLS};
use super::{i, query, raise_last_message_id, Dialect, Tx};
use crate::{Change, MessageRecord, Result, ThreadMemberRecord};

/// Applies one change; the rows it touched.
pub(super) async fn apply(tx: &mut Tx, change: &Change) -> Result<u64> {
    Ok(match change {
        Change::UpdateGuild(g) => {
            query("UPDATE guilds SET name = $1, icon = $2, description = $3, owner_id = $4, system_channel_id = $5 WHERE id = $6")
                .bind(&g.name)
                .bind(&g.icon)
                .bind(&g.description)
                .bind(g.owner_id)
                .bind(g.system_channel_id)
                .bind(g.id)
                .execute(tx)
                .await?
        }
        Change::DeleteGuild(id) => {
            query("DELETE FROM messages WHERE guild_id = $1").bind(*id).execute(&mut *tx).await?;
            query("DELETE FROM audit_log WHERE guild_id = $1").bind(*id).execute(&mut *tx).await?;
            query("DELETE FROM guilds WHERE id = $1").bind(*id).execute(tx).await?
        }
        Change::CreateChannel(c) => {
            tx.insert_channels(&[c]).await?;
            1
        }
        Change::UpdateChannel(c) => query(
            "UPDATE channels SET name = $1, position = $2, topic = $3, nsfw = $4, parent_id = $5, rate_limit_per_user = $6, overwrites = $7
             WHERE id = $8",
        )
        .bind(&c.name)
        .bind(c.position)
        .bind(&c.topic)
        .bind(c.nsfw)
        .bind(c.parent_id)
        .bind(c.rate_limit_per_user)
        .bind(serde_json::to_string(&c.overwrites)?)
        .bind(c.id)
        .execute(tx)
        .await?,
        Change::DeleteChannel(id) => query("DELETE FROM channels WHERE id = $1").bind(*id).execute(tx).await?,
        Change::AddMember(m) => tx.insert_members(&[m]).await?,
        Change::UpdateMember(m) => {
            query(
                "UPDATE members SET nick = $1, roles = $2, flags = $3, communication_disabled_until = $4
                 WHERE guild_id = $5 AND user_id = $6",
            )
            .bind(&m.nick)
            .bind(ids_json(m.roles.iter().map(|r| r.0)))
            .bind(m.flags)
            .bind(m.communication_disabled_until)
            .bind(m.guild_id)
            .bind(m.user_id)
            .execute(tx)
            .await?
        }
        Change::RemoveMember { guild, user } => {
            query("DELETE FROM members WHERE guild_id = $1 AND user_id = $2").bind(*guild).bind(*user).execute(tx).await?
        }
        Change::UpdateMessage(m) => {
            let n = query(
                "UPDATE messages SET content = $1, edited_at = $2, flags = $3, mention_everyone = $4, mentions = $5, extra = $6 WHERE id = $7",
            )
            .bind(&m.content)
            .bind(m.edited_at)
            .bind(m.flags)
            .bind(m.mention_everyone)
            .bind(ids_json(m.mentions.iter().map(|u| u.0)))
            .bind(serde_json::to_string(&m.extra)?)
            .bind(m.id)
            .execute(&mut *tx)
            .await?;
            // SQLite re-indexes an edited message here, as it indexes a new
            // one (migration 0015: its word pairs are made in Rust).
            if n > 0 && tx.dialect() == super::Dialect::Sqlite {
                query("DELETE FROM messages_fts WHERE rowid = $1").bind(m.id).execute(&mut *tx).await?;
                index_message(tx, m).await?;
            }
            n
        }
        Change::DeleteMessage { channel, id } => {
            query("DELETE FROM messages WHERE id = $1 AND channel_id = $2").bind(*id).bind(*channel).execute(tx).await?
        }

        // Roles, overwrites, bans:
        Change::AddMemberUnlessBanned(m) => {
            query(
                "INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags)
                 SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM bans WHERE guild_id = $1 AND user_id = $2)
                 ON CONFLICT (guild_id, user_id) DO NOTHING",
            )
            .bind(m.guild_id)
            .bind(m.user_id)
            .bind(&m.nick)
            .bind(ids_json(m.roles.iter().map(|r| r.0)))
            .bind(m.joined_at)
            .bind(m.flags)
            .execute(tx)
            .await?
        }
        Change::CreateRole(r) => {
            tx.insert_roles(&[r]).await?;
            1
        }
        Change::UpdateRole(r) => {
            query("UPDATE roles SET name = $1, color = $2, hoist = $3, position = $4, permissions = $5, mentionable = $6 WHERE id = $7")
                .bind(&r.name)
                .bind(r.color)
                .bind(r.hoist)
                .bind(r.position)
                .bind(r.permissions)
                .bind(r.mentionable)
                .bind(r.id)
                .execute(tx)
                .await?
        }
        Change::DeleteRole { guild, role } => {
            // Only the members who hold it are rewritten, keeping the order
            // of their other roles: JSON functions, each backend's own.
            let without_role = match tx.dialect() {
                Dialect::Sqlite => {
                    "UPDATE members SET roles = (SELECT json_group_array(j.value) FROM json_each(members.roles) j WHERE j.value != $1)
                     WHERE guild_id = $2 AND EXISTS (SELECT 1 FROM json_each(members.roles) j WHERE j.value = $1)"
                }
                Dialect::Postgres => {
                    "UPDATE members SET roles = (
                         SELECT COALESCE(jsonb_agg(e ORDER BY n), '[]'::jsonb)::text
                         FROM jsonb_array_elements(members.roles::jsonb) WITH ORDINALITY AS x(e, n)
                         WHERE e <> to_jsonb($1::BIGINT))
                     WHERE guild_id = $2 AND members.roles::jsonb @> jsonb_build_array($1::BIGINT)"
                }
            };
            query(without_role).bind(*role).bind(*guild).execute(&mut *tx).await?;
            query("DELETE FROM roles WHERE id = $1 AND guild_id = $2").bind(*role).bind(*guild).execute(tx).await?
        }
        Change::AddBan(b) => query(
            "INSERT INTO bans (guild_id, user_id, reason, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (guild_id, user_id) DO NOTHING",
        )
        .bind(b.guild_id)
        .bind(b.user_id)
        .bind(&b.reason)
        .bind(b.created_at)
        .execute(tx)
        .await?,
        Change::RemoveBan { guild, user } => {
            query("DELETE FROM bans WHERE guild_id = $1 AND user_id = $2").bind(*guild).bind(*user).execute(tx).await?
        }
        Change::PurgeMessages { guild, author, ids } => {
            let q = format!("DELETE FROM messages WHERE id {} AND author_id = $2 AND guild_id = $3", tx.dialect().in_ids("$1"));
            query(q).bind(ids.iter().map(|&m| i(m)).collect::<Vec<_>>()).bind(*author).bind(*guild).execute(tx).await?
        }

        // Reactions, emojis, pins, bulk delete:
        Change::AddReaction { reaction: r, max_emojis } => {
            query(
                "INSERT INTO reactions (message_id, emoji, user_id, emoji_id, emoji_name, animated, created_at)
                 SELECT $1, $2, $3, $4, $5, $6, $7
                 WHERE EXISTS (SELECT 1 FROM messages WHERE id = $1)
                   AND (EXISTS (SELECT 1 FROM reactions WHERE message_id = $1 AND emoji = $2)
                        OR (SELECT count(DISTINCT emoji) FROM reactions WHERE message_id = $1) < $8)
                 ON CONFLICT DO NOTHING",
            )
            .bind(r.message_id)
            .bind(r.emoji.key())
            .bind(r.user_id)
            .bind(r.emoji.id())
            .bind(r.emoji.name())
            .bind(r.emoji.animated())
            .bind(r.created_at)
            .bind(*max_emojis)
            .execute(tx)
            .await?
        }
        Change::RemoveReactions { message, emoji, user } => {
            query("DELETE FROM reactions WHERE message_id = $1 AND ($2 IS NULL OR emoji = $2) AND ($3 IS NULL OR user_id = $3)")
                .bind(*message)
                .bind(emoji.as_deref())
                .bind(*user)
                .execute(tx)
                .await?
        }
        Change::PinMessage { channel, message, at, max } => {
            query(
                "INSERT INTO pins (message_id, channel_id, pinned_at)
                 SELECT $1, $2, $3
                 WHERE EXISTS (SELECT 1 FROM messages WHERE id = $1 AND channel_id = $2)
                   AND (SELECT count(*) FROM pins WHERE channel_id = $2) < $4
                 ON CONFLICT DO NOTHING",
            )
            .bind(*message)
            .bind(*channel)
            .bind(*at)
            .bind(*max)
            .execute(tx)
            .await?
        }
        Change::UnpinMessage { channel, message } => {
            query("DELETE FROM pins WHERE message_id = $1 AND channel_id = $2").bind(*message).bind(*channel).execute(tx).await?
        }
        Change::PinNotice { message: m, pinned, at } => {
            let n = query(format!(
                "INSERT INTO messages ({MESSAGE_COLS})
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
                 WHERE EXISTS (SELECT 1 FROM pins WHERE message_id = $14 AND pinned_at = $15)"
            ))
            .bind(m.id)
            .bind(m.channel_id)
            .bind(m.guild_id)
            .bind(m.author_id)
            .bind(&m.content)
            .bind(m.edited_at)
            .bind(m.kind)
            .bind(m.flags)
            .bind(m.tts)
            .bind(m.mention_everyone)
            .bind(ids_json(m.mentions.iter().map(|u| u.0)))
            .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
            .bind(serde_json::to_string(&m.extra)?)
            .bind(*pinned)
            .bind(*at)
            .execute(&mut *tx)
            .await?;
            if n > 0 {
                // SQLite's search index takes new messages from the
                // statement that inserts them (migrations 0012, 0014).
                if tx.dialect() == super::Dialect::Sqlite {
                    index_message(tx, m).await?;
                }
                raise_last_message_id(tx, m.channel_id, m.id).await?;
            }
            n
        }
        Change::DeleteMessages { channel, ids } => {
            let q = format!("DELETE FROM messages WHERE channel_id = $1 AND id {}", tx.dialect().in_ids("$2"));
            query(q).bind(*channel).bind(ids.iter().map(|&m| i(m)).collect::<Vec<_>>()).execute(tx).await?
        }
        Change::CreateEmoji(e) => query(
            "INSERT INTO emojis (id, guild_id, name, animated, roles, creator_id) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(e.id)
        .bind(e.guild_id)
        .bind(&e.name)
        .bind(e.animated)
        .bind(ids_json(e.roles.iter().map(|r| r.0)))
        .bind(e.creator_id)
        .execute(tx)
        .await?,
        Change::UpdateEmoji(e) => {
            query("UPDATE emojis SET name = $1, roles = $2 WHERE id = $3 AND guild_id = $4")
                .bind(&e.name)
                .bind(ids_json(e.roles.iter().map(|r| r.0)))
                .bind(e.id)
                .bind(e.guild_id)
                .execute(tx)
                .await?
        }
        Change::DeleteEmoji { guild, id } => {
            query("DELETE FROM emojis WHERE id = $1 AND guild_id = $2").bind(*id).bind(*guild).execute(tx).await?
        }

        // Attachments, webhooks:
        Change::CreateWebhook(w) => {
            query(
                "INSERT INTO webhooks (id, guild_id, channel_id, kind, name, avatar, token, creator_id, application_id, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(w.id)
            .bind(w.guild_id)
            .bind(w.channel_id)
            .bind(w.kind)
            .bind(&w.name)
            .bind(&w.avatar)
            .bind(&w.token)
            .bind(w.creator_id)
            .bind(w.application_id)
            .bind(w.created_at)
            .execute(tx)
            .await?
        }
        Change::UpdateWebhook(w) => {
            query("UPDATE webhooks SET name = $1, avatar = $2, channel_id = $3 WHERE id = $4")
                .bind(&w.name)
                .bind(&w.avatar)
                .bind(w.channel_id)
                .bind(w.id)
                .execute(tx)
                .await?
        }
        Change::DeleteWebhook(id) => query("DELETE FROM webhooks WHERE id = $1").bind(*id).execute(tx).await?,
        // A webhook's message, or a DM's (its actor's own fence key).
        Change::WebhookMessage(m) | Change::CreateDmMessage(m) => {
            tx.insert_messages(&[m]).await?;
            1
        }

        // DMs, threads, application commands:
        Change::CreateThread { channel, thread, members } => {
            tx.insert_channels(&[channel]).await?;
            query(
                "INSERT INTO threads (channel_id, guild_id, owner_id, archived, archive_timestamp, auto_archive_duration, locked, invitable, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(thread.channel_id)
            .bind(thread.guild_id)
            .bind(thread.owner_id)
            .bind(thread.archived)
            .bind(thread.archive_timestamp)
            .bind(thread.auto_archive_duration)
            .bind(thread.locked)
            .bind(thread.invitable)
            .bind(thread.created_at)
            .execute(&mut *tx)
            .await?;
            for m in members {
                add_thread_member(tx, m).await?;
            }
            1
        }
        Change::UpdateThread { channel, thread } => {
            query("UPDATE channels SET name = $1, rate_limit_per_user = $2 WHERE id = $3")
                .bind(&channel.name)
                .bind(channel.rate_limit_per_user)
                .bind(channel.id)
                .execute(&mut *tx)
                .await?;
            query(
                "UPDATE threads SET archived = $1, archive_timestamp = $2, auto_archive_duration = $3, locked = $4, invitable = $5
                 WHERE channel_id = $6",
            )
            .bind(thread.archived)
            .bind(thread.archive_timestamp)
            .bind(thread.auto_archive_duration)
            .bind(thread.locked)
            .bind(thread.invitable)
            .bind(thread.channel_id)
            .execute(tx)
            .await?
        }
        Change::AddThreadMember(m) => add_thread_member(tx, m).await?,
        Change::RemoveThreadMember { thread, user } => {
            query("DELETE FROM thread_members WHERE thread_id = $1 AND user_id = $2").bind(*thread).bind(*user).execute(tx).await?
        }
        // The audit log:
        Change::AddAuditEntry(e) => super::community::add_entry(tx, e).await?,
    })
}

async fn add_thread_member(tx: &mut Tx, m: &ThreadMemberRecord) -> Result<u64> {
    query(
        "INSERT INTO thread_members (thread_id, user_id, join_timestamp, flags) VALUES ($1, $2, $3, $4)
         ON CONFLICT (thread_id, user_id) DO NOTHING",
    )
    .bind(m.thread_id)
    .bind(m.user_id)
    .bind(m.join_timestamp)
    .bind(m.flags)
    .execute(tx)
    .await
}

/// SQLite: `m` into the search index (its words and `index_scope`), in
/// `tx` with the statement that wrote it (migrations 0012, 0014, 0015).
async fn index_message(tx: &mut Tx, m: &MessageRecord) -> Result<u64> {
    query("INSERT INTO messages_fts (rowid, content, scope) VALUES ($1, $2, $3)")
        .bind(m.id)
        .bind(&m.content)
        .bind(crate::index_scope(m))
        .execute(tx)
        .await
}
