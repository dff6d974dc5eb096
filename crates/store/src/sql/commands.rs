//! Application commands (migration 0006). The writes of one application's
//! commands are serialised: on SQLite by the write lock every transaction
//! takes, on PostgreSQL by a transaction-scoped advisory lock on its id, so
//! nodes sharing the database never interleave a read and a write of a
//! scope.

use protocol::{ApplicationId, GuildId};

use super::rows::{CommandRow, COMMAND_COLS};
use super::{conflict, i, query, Dialect, Pool, Tx};
use crate::{overwrite_plan, CommandPermissions, CommandRecord, Result};

/// A scope's rows: `application_id = $1`, and `guild_id` equal to `$2`
/// (NULL too: a global command's scope).
const SCOPE: &str = "application_id = $1 AND guild_id IS NOT DISTINCT FROM $2";

/// Begins a transaction that holds `app`'s command writes until it ends.
async fn begin_for(db: Pool<'_>, app: ApplicationId) -> Result<Tx> {
    let mut tx = db.begin().await?;
    if tx.dialect() == Dialect::Postgres {
        query("SELECT pg_advisory_xact_lock($1)").bind(app).execute(&mut tx).await?;
    }
    Ok(tx)
}

async fn insert(tx: &mut Tx, c: &CommandRecord) -> Result<()> {
    query(format!("INSERT INTO application_commands ({COMMAND_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
        .bind(c.id)
        .bind(c.application_id)
        .bind(c.guild_id)
        .bind(c.kind)
        .bind(&c.name)
        .bind(c.version)
        .bind(serde_json::to_string(&c.body)?)
        .execute(tx)
        .await
        .map_err(conflict)?;
    Ok(())
}

/// Writes `c` over the scope's command of its id (name, body, version).
async fn replace(tx: &mut Tx, c: &CommandRecord) -> Result<u64> {
    query(
        "UPDATE application_commands SET kind = $1, name = $2, version = $3, body = $4
         WHERE id = $5 AND application_id = $6 AND guild_id IS NOT DISTINCT FROM $7",
    )
    .bind(c.kind)
    .bind(&c.name)
    .bind(c.version)
    .bind(serde_json::to_string(&c.body)?)
    .bind(c.id)
    .bind(c.application_id)
    .bind(c.guild_id)
    .execute(tx)
    .await
    .map_err(conflict)
}

pub(super) async fn list(db: Pool<'_>, app: ApplicationId, guild: Option<GuildId>) -> Result<Vec<CommandRecord>> {
    let q = format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE} ORDER BY id");
    query(q).bind(app).bind(guild).fetch_all::<CommandRow>(db).await?.into_iter().map(TryInto::try_into).collect()
}

pub(super) async fn get(db: Pool<'_>, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<Option<CommandRecord>> {
    let q = format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE} AND id = $3");
    query(q).bind(app).bind(guild).bind(id).fetch_optional::<CommandRow>(db).await?.map(TryInto::try_into).transpose()
}

pub(super) async fn upsert(db: Pool<'_>, c: &CommandRecord) -> Result<CommandRecord> {
    let mut tx = begin_for(db, c.application_id).await?;
    let q = format!("SELECT id FROM application_commands WHERE {SCOPE} AND kind = $3 AND name = $4");
    let named: Option<(i64,)> = query(q).bind(c.application_id).bind(c.guild_id).bind(c.kind).bind(&c.name).fetch_optional(&mut tx).await?;
    let mut out = c.clone();
    match named {
        Some((id,)) => {
            out.id = id as u64;
            replace(&mut tx, &out).await?;
        }
        None => insert(&mut tx, c).await?,
    }
    tx.commit().await?;
    Ok(out)
}

pub(super) async fn update(db: Pool<'_>, c: &CommandRecord) -> Result<bool> {
    let mut tx = begin_for(db, c.application_id).await?;
    let n = replace(&mut tx, c).await?;
    tx.commit().await?;
    Ok(n > 0)
}

pub(super) async fn delete(db: Pool<'_>, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<bool> {
    let q = format!("DELETE FROM application_commands WHERE {SCOPE} AND id = $3");
    Ok(query(q).bind(app).bind(guild).bind(id).execute(db).await? > 0)
}

pub(super) async fn overwrite(
    db: Pool<'_>,
    app: ApplicationId,
    guild: Option<GuildId>,
    cmds: &[CommandRecord],
) -> Result<Vec<CommandRecord>> {
    let mut tx = begin_for(db, app).await?;
    let q = format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE}");
    let old: Vec<CommandRow> = query(q).bind(app).bind(guild).fetch_all(&mut tx).await?;
    let old = old.into_iter().map(TryInto::try_into).collect::<Result<Vec<CommandRecord>>>()?;
    let plan = overwrite_plan(&old, cmds);
    if !plan.removed.is_empty() {
        let q = format!("DELETE FROM application_commands WHERE id {}", tx.dialect().in_ids("$1"));
        query(q).bind(plan.removed.iter().map(|&id| i(id)).collect::<Vec<_>>()).execute(&mut tx).await?;
    }
    for c in &plan.kept {
        replace(&mut tx, c).await?;
    }
    for c in &plan.added {
        insert(&mut tx, c).await?;
    }
    tx.commit().await?;
    Ok(plan.result)
}

/// An application's permission overrides in a guild, by command id.
pub(super) async fn permissions(db: Pool<'_>, app: ApplicationId, guild: GuildId) -> Result<Vec<CommandPermissions>> {
    let q =
        query("SELECT command_id, permissions FROM command_permissions WHERE guild_id = $1 AND application_id = $2 ORDER BY command_id")
            .bind(guild)
            .bind(app);
    let rows: Vec<(i64, String)> = q.fetch_all(db).await?;
    rows.into_iter().map(|(id, p)| Ok(CommandPermissions { command_id: id as u64, permissions: serde_json::from_str(&p)? })).collect()
}

pub(super) async fn set_permissions(db: Pool<'_>, app: ApplicationId, guild: GuildId, p: &CommandPermissions) -> Result<()> {
    let mut tx = db.begin().await?;
    query("DELETE FROM command_permissions WHERE guild_id = $1 AND application_id = $2 AND command_id = $3")
        .bind(guild)
        .bind(app)
        .bind(i(p.command_id))
        .execute(&mut tx)
        .await?;
    if !p.permissions.is_empty() {
        query("INSERT INTO command_permissions (application_id, guild_id, command_id, permissions) VALUES ($1, $2, $3, $4)")
            .bind(app)
            .bind(guild)
            .bind(i(p.command_id))
            .bind(serde_json::to_string(&p.permissions)?)
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}
