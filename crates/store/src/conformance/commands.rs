//! Conformance of application commands (migration 0006): global and guild
//! scopes apart, upserts by name keeping the id, updates refused on a name
//! clash, and bulk overwrites.

use protocol::{ApplicationId, GuildId};

use crate::*;

pub(super) async fn commands(s: &dyn Store) {
    let app = ApplicationId(70_300);
    let cmd = |id: u64, guild: Option<u64>, name: &str, desc: &str| CommandRecord {
        id,
        application_id: app,
        guild_id: guild.map(GuildId),
        kind: 1,
        name: name.into(),
        version: id,
        body: serde_json::json!({"description": desc}),
    };
    let a = s.upsert_command(&cmd(70_301, None, "a", "first")).await.unwrap();
    assert_eq!(a.id, 70_301);
    // The same name again overwrites, keeping the id.
    let again = s.upsert_command(&cmd(70_302, None, "a", "second")).await.unwrap();
    assert_eq!(again.id, 70_301);
    assert_eq!(s.get_command(app, None, 70_301).await.unwrap().unwrap().body["description"], "second");
    s.upsert_command(&cmd(70_303, None, "b", "b")).await.unwrap();
    s.upsert_command(&cmd(70_304, Some(70_200), "a", "guild")).await.unwrap();
    assert_eq!(s.list_commands(app, None).await.unwrap().len(), 2, "global and guild scopes are apart");
    assert_eq!(s.list_commands(app, Some(GuildId(70_200))).await.unwrap().len(), 1);
    assert!(s.get_command(app, None, 70_304).await.unwrap().is_none());
    assert!(matches!(s.update_command(&cmd(70_303, None, "a", "clash")).await, Err(StoreError::Conflict)));
    assert!(!s.update_command(&cmd(70_399, None, "zz", "none")).await.unwrap());
    assert!(s.update_command(&cmd(70_303, None, "bb", "renamed")).await.unwrap());

    let result = s.overwrite_commands(app, None, &[cmd(70_310, None, "a", "second"), cmd(70_311, None, "c", "new")]).await.unwrap();
    assert_eq!(result.iter().map(|c| c.id).collect::<Vec<_>>(), vec![70_301, 70_311], "a keeps its id");
    assert_eq!(result[0].version, 70_302, "unchanged since the second upsert: same version");
    let listed: Vec<String> = s.list_commands(app, None).await.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(listed, vec!["a", "c"]);
    assert_eq!(s.list_commands(app, Some(GuildId(70_200))).await.unwrap().len(), 1, "the guild's stay");
    assert!(s.delete_command(app, None, 70_311).await.unwrap());
    assert!(!s.delete_command(app, None, 70_311).await.unwrap());
    assert!(s.overwrite_commands(app, None, &[]).await.unwrap().is_empty());
    assert!(s.list_commands(app, None).await.unwrap().is_empty());

    // Permission overrides: per guild, per command, replaced whole.
    let g = GuildId(70_200);
    assert!(s.command_permissions(app, g).await.unwrap().is_empty());
    let deny_role = CommandPermission { id: 5, kind: 1, permission: false };
    let allow_user = CommandPermission { id: 6, kind: 2, permission: true };
    let one = CommandPermissions { command_id: 70_304, permissions: vec![deny_role, allow_user] };
    let all = CommandPermissions { command_id: app.0, permissions: vec![CommandPermission { id: g.0 - 1, kind: 3, permission: false }] };
    s.set_command_permissions(app, g, &one).await.unwrap();
    s.set_command_permissions(app, g, &all).await.unwrap();
    assert_eq!(s.command_permissions(app, g).await.unwrap(), vec![all.clone(), one.clone()], "by command id");
    assert!(s.command_permissions(app, GuildId(1)).await.unwrap().is_empty(), "another guild's are apart");
    let fewer = CommandPermissions { command_id: 70_304, permissions: vec![allow_user] };
    s.set_command_permissions(app, g, &fewer).await.unwrap();
    s.set_command_permissions(app, g, &CommandPermissions { command_id: app.0, permissions: vec![] }).await.unwrap();
    assert_eq!(s.command_permissions(app, g).await.unwrap(), vec![fewer], "replaced; none removes them");
}
