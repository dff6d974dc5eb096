//! Whole guilds: created with everything in them, and loaded in batches for
//! their actors.

use std::collections::HashMap;

use protocol::{GuildId, UserId};

use super::rows::*;
use super::{i, query, threads, Dialect, Pool, Tx};
use crate::{GuildSnapshot, NewGuild, Result};

/// Guild rows, then their roles, channels and members.
pub(super) async fn insert(tx: &mut Tx, guilds: &[&NewGuild]) -> Result<()> {
    tx.insert_guilds(&guilds.iter().map(|g| &g.guild).collect::<Vec<_>>()).await?;
    tx.insert_roles(&guilds.iter().flat_map(|g| &g.roles).collect::<Vec<_>>()).await?;
    tx.insert_channels(&guilds.iter().flat_map(|g| &g.channels).collect::<Vec<_>>()).await?;
    tx.insert_members(&guilds.iter().flat_map(|g| &g.members).collect::<Vec<_>>()).await?;
    Ok(())
}

/// `Store::load_guilds`: a few statements for the whole batch (guilds,
/// roles, channels, members, emojis, bans, threads and their members), each
/// guild's members one row of JSON. Every statement and every row is a
/// round trip to SQLite's connection thread, which cost more than the
/// queries when 1,000 guilds loaded one by one with a row per member (~10 µs
/// of CPU per member, half of it in the kernel).
pub(super) async fn load(db: Pool<'_>, ids: &[GuildId]) -> Result<Vec<GuildSnapshot>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = ids.iter().map(|&g| i(g)).collect();
    let in_ids = db.dialect().in_ids("$1");
    let guilds: Vec<GuildRow> = query(format!("SELECT {GUILD_COLS} FROM guilds WHERE id {in_ids}")).bind(&ids[..]).fetch_all(db).await?;
    if guilds.is_empty() {
        return Ok(Vec::new());
    }
    let mut snaps: Vec<GuildSnapshot> = guilds
        .into_iter()
        .map(|g| GuildSnapshot {
            guild: g.into(),
            roles: Vec::new(),
            channels: Vec::new(),
            members: Vec::new(),
            emojis: Vec::new(),
            bans: Vec::new(),
            threads: Vec::new(),
        })
        .collect();
    let q = format!("SELECT {ROLE_COLS} FROM roles WHERE guild_id {in_ids} ORDER BY guild_id, position, id");
    let roles: Vec<RoleRow> = query(q).bind(&ids[..]).fetch_all(db).await?;
    let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id {in_ids} ORDER BY guild_id, position, id");
    let channels: Vec<ChannelRow> = query(q).bind(&ids[..]).fetch_all(db).await?;
    // SQLite aggregates in the order it reads the members' primary key
    // (guild, user); an ORDER BY in the aggregate sorted them again in a
    // temporary b-tree. The order is checked below, free when it holds.
    // Most members have no roles: `json_array()` for those skips parsing
    // `'[]'` again (the aggregate of a million members 0.90 -> 0.75 s).
    let members = match db.dialect() {
        Dialect::Sqlite => {
            "json_group_array(json_array(m.user_id, m.nick,
                                         CASE m.roles WHEN '[]' THEN json_array() ELSE json(m.roles) END, m.joined_at, m.flags,
                                         u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at,
                                         m.communication_disabled_until))"
        }
        Dialect::Postgres => {
            "json_agg(json_build_array(m.user_id, m.nick, m.roles::json, m.joined_at, m.flags,
                                       u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at,
                                       m.communication_disabled_until) ORDER BY m.user_id)::text"
        }
    };
    let q = format!(
        "SELECT m.guild_id, {members} AS members FROM members m JOIN users u ON u.id = m.user_id
         WHERE m.guild_id {in_ids} GROUP BY m.guild_id"
    );
    let members: Vec<(i64, String)> = query(q).bind(&ids[..]).fetch_all(db).await?;
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id {in_ids} ORDER BY guild_id, id");
    let emojis: Vec<EmojiRow> = query(q).bind(&ids[..]).fetch_all(db).await?;
    let q = format!("SELECT guild_id, user_id FROM bans WHERE guild_id {in_ids} ORDER BY guild_id, user_id");
    let bans: Vec<(i64, i64)> = query(q).bind(&ids[..]).fetch_all(db).await?;

    let index: HashMap<i64, usize> = snaps.iter().enumerate().map(|(n, s)| (i(s.guild.id), n)).collect();
    for r in roles {
        if let Some(&n) = index.get(&r.guild_id) {
            snaps[n].roles.push(r.into());
        }
    }
    for c in channels {
        if let Some(&n) = c.guild_id.and_then(|g| index.get(&g)) {
            snaps[n].channels.push(c.try_into()?);
        }
    }
    for (g, json) in members {
        let Some(&n) = index.get(&g) else { continue };
        let rows: Vec<MemberJson> = serde_json::from_str(&json)?;
        let guild_id = snaps[n].guild.id;
        let mut members: Vec<_> = rows.into_iter().map(|m| m.into_records(guild_id)).collect();
        if !members.is_sorted_by_key(|(m, _)| m.user_id) {
            members.sort_unstable_by_key(|(m, _)| m.user_id);
        }
        snaps[n].members = members;
    }
    for e in emojis {
        if let Some(&n) = index.get(&e.guild_id) {
            snaps[n].emojis.push(e.try_into()?);
        }
    }
    for (g, u) in bans {
        if let Some(&n) = index.get(&g) {
            snaps[n].bans.push(UserId(u as u64));
        }
    }
    for t in threads::of_guilds(db, &ids).await? {
        if let Some(&n) = index.get(&i(t.thread.guild_id)) {
            snaps[n].threads.push(t);
        }
    }
    Ok(snaps)
}
