//! What a community needs beyond chat (migration 0011): the audit log.
//!
//! Both backends run the same SQL for it (`sql/community.rs`). Entries are
//! written as [`crate::Change::AddAuditEntry`], in the transaction of the
//! change they record.

use async_trait::async_trait;
use protocol::{GuildId, Snowflake, UserId};

use crate::Result;

/// One audit log entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    /// A snowflake: entries order by it, and it dates them.
    pub id: Snowflake,
    pub guild_id: GuildId,
    /// Who did it (`None`: the system).
    pub user_id: Option<UserId>,
    pub action_type: u16,
    /// The entry as the API shows it: a JSON object with `id`, `user_id`,
    /// `target_id`, `action_type`, and `changes`, `options`, `reason` when
    /// it has them.
    pub entry: String,
}

/// Which entries a read wants (Discord's query parameters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub user_id: Option<UserId>,
    pub action_type: Option<u16>,
    /// Entries older than this id, newest first.
    pub before: Option<Snowflake>,
    /// Entries newer than this id, oldest first (when `before` is absent).
    pub after: Option<Snowflake>,
    pub limit: u32,
}

#[async_trait]
pub trait CommunityStore: Send + Sync {
    /// A guild's audit log entries: newest first, or with only `after`,
    /// oldest first from it (as Discord pages them).
    async fn audit_log(&self, guild: GuildId, q: &AuditQuery) -> Result<Vec<AuditRecord>>;
    /// Deletes entries with ids below `before` (older than the retention);
    /// how many went.
    async fn prune_audit_log(&self, before: Snowflake) -> Result<u64>;
}
