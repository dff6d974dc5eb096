//! The audit log's retention: entries older than `audit.retention_days`
//! are deleted every `audit.prune_interval_ms` (by id: ids are snowflakes,
//! so an id dates its entry).

use std::sync::Arc;
use std::time::Duration;

use protocol::id::DISCORD_EPOCH_MS;
use protocol::Snowflake;

/// The smallest id of an entry made at `ms` (Unix time).
pub fn first_id_at(ms: u64) -> Snowflake {
    Snowflake(ms.saturating_sub(DISCORD_EPOCH_MS) << 22)
}

/// Deletes expired entries until shutdown (nothing with retention 0).
pub async fn pruner(node: Arc<crate::Node>) {
    let cfg = node.config.audit.clone();
    if cfg.retention_days == 0 {
        return;
    }
    let every = Duration::from_millis(cfg.prune_interval_ms.max(1_000));
    loop {
        let cutoff = crate::auth::now_ms().saturating_sub(u64::from(cfg.retention_days) * 86_400_000);
        match node.store.prune_audit_log(first_id_at(cutoff)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(entries = n, "audit log entries past retention deleted"),
            Err(e) => tracing::warn!(error = %e, "audit log prune failed"),
        }
        tokio::select! {
            _ = node.shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_id_dates_its_entry() {
        let id = super::first_id_at(1_700_000_000_000);
        assert_eq!(id.timestamp_ms(), 1_700_000_000_000);
    }
}
