//! Conformance of the audit log: entries written in a change's transaction,
//! filtered by user and action, paged both ways, pruned by age, and gone
//! with their guild.

use protocol::{GuildId, Snowflake, UserId};

use super::reactions::rows;
use crate::*;

const G: GuildId = GuildId(100);

fn entry(id: u64, guild: GuildId, user: u64, action: u16) -> AuditRecord {
    AuditRecord {
        id: Snowflake(id),
        guild_id: guild,
        user_id: Some(UserId(user)).filter(|u| u.0 != 0),
        action_type: action,
        entry: format!(r#"{{"id":"{id}","action_type":{action}}}"#),
    }
}

pub(super) async fn audit_log(s: &dyn Store) {
    let all = [entry(1_001, G, 1, 30), entry(1_002, G, 2, 31), entry(1_003, G, 1, 31), entry(1_004, G, 0, 72)];
    let other = entry(1_005, GuildId(9_999), 1, 30);
    let changes: Vec<Change> = all.iter().chain([&other]).cloned().map(Change::AddAuditEntry).collect();
    assert_eq!(rows(s, changes).await, vec![1; 5]);
    let ids = |v: Vec<AuditRecord>| v.into_iter().map(|e| e.id.0).collect::<Vec<_>>();
    let q = |f: fn(&mut AuditQuery)| {
        let mut q = AuditQuery { limit: 50, ..Default::default() };
        f(&mut q);
        q
    };
    let read = |q: AuditQuery| async move { ids(s.audit_log(G, &q).await.unwrap()) };
    assert_eq!(read(q(|_| {})).await, vec![1_004, 1_003, 1_002, 1_001], "newest first, this guild's only");
    assert_eq!(s.audit_log(G, &q(|_| {})).await.unwrap()[3], all[0], "read back as written");
    assert_eq!(read(q(|q| q.user_id = Some(UserId(1)))).await, vec![1_003, 1_001]);
    assert_eq!(read(q(|q| q.action_type = Some(31))).await, vec![1_003, 1_002]);
    assert_eq!(read(q(|q| (q.user_id, q.action_type) = (Some(UserId(1)), Some(31)))).await, vec![1_003]);
    assert_eq!(read(q(|q| q.before = Some(Snowflake(1_003)))).await, vec![1_002, 1_001]);
    assert_eq!(read(q(|q| q.after = Some(Snowflake(1_001)))).await, vec![1_002, 1_003, 1_004], "after: oldest first");
    assert_eq!(read(q(|q| (q.after, q.before) = (Some(Snowflake(1_001)), Some(Snowflake(1_004))))).await, vec![1_003, 1_002]);
    assert_eq!(read(q(|q| q.limit = 2)).await, vec![1_004, 1_003]);
    // Retention: older entries go, in every guild.
    assert_eq!(s.prune_audit_log(Snowflake(1_003)).await.unwrap(), 2);
    assert_eq!(read(q(|_| {})).await, vec![1_004, 1_003]);
    assert_eq!(ids(s.audit_log(GuildId(9_999), &q(|_| {})).await.unwrap()), vec![1_005]);
}
