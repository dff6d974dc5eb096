//! Application commands (migration 0006), exchanged with a [`crate::Store`],
//! and how a bulk overwrite keeps the ids of commands that stay.

use protocol::{ApplicationId, GuildId};

/// An application command. `body` holds the rest of the command object
/// (description, options, localizations, permissions, contexts...) as the
/// API returns it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandRecord {
    pub id: u64,
    pub application_id: ApplicationId,
    /// `None`: a global command.
    pub guild_id: Option<GuildId>,
    pub kind: u8,
    pub name: String,
    pub version: u64,
    pub body: serde_json::Value,
}

/// One permission override of an application command in a guild.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandPermission {
    /// A role (the guild's id: @everyone), a user, or a channel (the
    /// guild's id minus one: every channel).
    pub id: u64,
    /// 1 role, 2 user, 3 channel.
    #[serde(rename = "type")]
    pub kind: u8,
    pub permission: bool,
}

/// The overrides of one command (or, `command_id` equal to the
/// application's id, of all of its commands) in a guild.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandPermissions {
    pub command_id: u64,
    pub permissions: Vec<CommandPermission>,
}

/// What a bulk overwrite of a scope's commands does: which rows go, which
/// stay (same type and name: same id, new contents) and which are new.
pub struct OverwritePlan {
    pub removed: Vec<u64>,
    pub kept: Vec<CommandRecord>,
    pub added: Vec<CommandRecord>,
    /// The scope's commands afterwards, in the order asked.
    pub result: Vec<CommandRecord>,
}

/// Plans a bulk overwrite of `old` with `new` (ids and versions of `new`
/// are fresh ones; a kept command takes its old id, and its old version
/// when nothing changed).
pub fn overwrite_plan(old: &[CommandRecord], new: &[CommandRecord]) -> OverwritePlan {
    let mut plan = OverwritePlan { removed: Vec::new(), kept: Vec::new(), added: Vec::new(), result: Vec::new() };
    for c in new {
        let mut c = c.clone();
        match old.iter().find(|o| o.kind == c.kind && o.name == c.name) {
            Some(o) => {
                c.id = o.id;
                if o.body == c.body {
                    c.version = o.version;
                }
                plan.kept.push(c.clone());
            }
            None => plan.added.push(c.clone()),
        }
        plan.result.push(c);
    }
    plan.removed = old.iter().filter(|o| !plan.kept.iter().any(|k| k.id == o.id)).map(|o| o.id).collect();
    plan
}
