//! [`CommunityStore`] for every [`Backend`]: the audit log.

use async_trait::async_trait;
use protocol::{GuildId, Snowflake, UserId};

use super::{i, query, Backend, Tx};
use crate::community::{AuditQuery, AuditRecord, CommunityStore};
use crate::Result;

/// Writes one entry (inside the transaction of the change it records).
pub(super) async fn add_entry(tx: &mut Tx, e: &AuditRecord) -> Result<u64> {
    query("INSERT INTO audit_log (id, guild_id, user_id, action_type, entry) VALUES ($1, $2, $3, $4, $5)")
        .bind(e.id)
        .bind(e.guild_id)
        .bind(e.user_id)
        .bind(i(e.action_type as u32))
        .bind(&e.entry)
        .execute(tx)
        .await
}

#[async_trait]
impl<B: Backend> CommunityStore for B {
    async fn audit_log(&self, guild: GuildId, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        // With only `after`: oldest first from it; otherwise newest first.
        let ascending = q.after.is_some() && q.before.is_none();
        let sql = format!(
            "SELECT id, guild_id, user_id, action_type, entry FROM audit_log
             WHERE guild_id = $1 AND ($2 IS NULL OR user_id = $2) AND ($3 IS NULL OR action_type = $3)
               AND ($4 IS NULL OR id < $4) AND ($5 IS NULL OR id > $5)
             ORDER BY id {} LIMIT $6",
            if ascending { "ASC" } else { "DESC" }
        );
        let rows: Vec<(i64, i64, Option<i64>, i64, String)> = query(sql)
            .bind(guild)
            .bind(q.user_id)
            .bind(q.action_type.map(|t| t as u32))
            .bind(q.before)
            .bind(q.after)
            .bind(q.limit)
            .fetch_all(self.reader())
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, g, u, t, entry)| AuditRecord {
                id: Snowflake(id as u64),
                guild_id: GuildId(g as u64),
                user_id: u.map(|u| UserId(u as u64)),
                action_type: t as u16,
                entry,
            })
            .collect())
    }

    async fn prune_audit_log(&self, before: Snowflake) -> Result<u64> {
        query("DELETE FROM audit_log WHERE id < $1").bind(before).execute(self.writer()).await
    }
}
