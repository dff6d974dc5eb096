//! Whole guilds: created with everything in them, and loaded in batches for
//! their actors.

use std::collections::HashMap;

use protocol::{GuildId, UserId};

use super::rows::*;
use super::{i, query, threads, Dialect, Pool, Tx};
use crate::{GuildSnapshot, MemberRecord, NewGuild, Result, UserRecord};

/// Guild rows, then their roles, channels and members.
pub(super) async fn insert(tx: &mut Tx, guilds: &[&NewGuild]) -> Result<()> {
    tx.insert_guilds(&guilds.iter().map(|g| &g.guild).collect::<Vec<_>>()).await?;
    tx.insert_roles(&guilds.iter().flat_map(|g| &g.roles).collect::<Vec<_>>()).await?;
    tx.insert_channels(&guilds.iter().flat_map(|g| &g.channels).collect::<Vec<_>>()).await?;
    tx.insert_members(&guilds.iter().flat_map(|g| &g.members).collect::<Vec<_>>()).await?;
    Ok(())
}

/// `Store::load_guilds`: a few statements for the whole batch (guilds,
/// roles, channels, members, emojis, bans, threads and their members),
/// members as JSON ([`members`]).
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
    let members = members(db, &ids).await?;
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
    for (g, mut members) in members {
        let Some(&n) = index.get(&g) else { continue };
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

/// Members per statement of a large guild's load: its members are read in
/// ranges of user ids this long, each range's JSON parsed on another thread
/// while the next is read.
pub(crate) const MEMBER_RANGE: i64 = 16_384;

/// Each guild's members (in user id order, checked by the caller), as one
/// JSON array per guild: every statement and every row is a round trip to
/// SQLite's connection thread, which cost more than the queries when 1,000
/// guilds loaded with a row per member (~10 µs of CPU per member, half of
/// it in the kernel). Guilds of more than [`MEMBER_RANGE`] members are read
/// range by range, the parse of one beside the read of the next: a million
/// members took 0.75 s to aggregate and 0.6 s to parse, one after the other,
/// with a peak of ~4x the guild's memory in JSON and rows. All in one read
/// transaction: one snapshot, and one connection's page cache.
async fn members(db: Pool<'_>, ids: &[i64]) -> Result<Vec<(i64, Vec<(MemberRecord, UserRecord)>)>> {
    let mut tx = db.snapshot().await?;
    // Where each guild's first range ends; none for a guild of at most
    // `MEMBER_RANGE` members (at most that many steps of its primary key).
    let each = tx.dialect().each_id("$1");
    let q = format!("SELECT g.id, (SELECT user_id FROM members WHERE guild_id = g.id ORDER BY user_id LIMIT 1 OFFSET $2) FROM ({each}) g");
    let firsts: Vec<(i64, Option<i64>)> = query(q).bind(ids).bind(MEMBER_RANGE - 1).fetch_all(&mut tx).await?;
    let small: Vec<i64> = firsts.iter().filter(|(_, b)| b.is_none()).map(|&(g, _)| g).collect();
    let mut out = Vec::with_capacity(firsts.len());
    if !small.is_empty() {
        let in_ids = tx.dialect().in_ids("$1");
        let q = format!(
            "SELECT m.guild_id, {} AS members FROM members m JOIN users u ON u.id = m.user_id
             WHERE m.guild_id {in_ids} GROUP BY m.guild_id",
            member_json(tx.dialect())
        );
        let rows: Vec<(i64, String)> = query(q).bind(&small[..]).fetch_all(&mut tx).await?;
        for (g, json) in rows {
            out.push((g, parse_members(&json, GuildId(g as u64))?));
        }
    }
    for (g, first) in firsts {
        let Some(first) = first else { continue };
        out.push((g, large_members(&mut tx, g, first).await?));
    }
    tx.rollback().await?;
    Ok(out)
}

/// A guild's members range by range: the ranges' ends first (one short
/// index walk each), then each range's JSON read while the one before is
/// parsed.
async fn large_members(tx: &mut Tx, guild: i64, first: i64) -> Result<Vec<(MemberRecord, UserRecord)>> {
    let mut ends = vec![first];
    let mut last = first;
    while let Some((end,)) = query("SELECT user_id FROM members WHERE guild_id = $1 AND user_id > $2 ORDER BY user_id LIMIT 1 OFFSET $3")
        .bind(guild)
        .bind(last)
        .bind(MEMBER_RANGE - 1)
        .fetch_optional::<(i64,)>(&mut *tx)
        .await?
    {
        ends.push(end);
        last = end;
    }
    ends.push(i64::MAX);
    let q = format!(
        "SELECT coalesce({}, '[]') FROM members m JOIN users u ON u.id = m.user_id
         WHERE m.guild_id = $1 AND m.user_id > $2 AND m.user_id <= $3",
        member_json(tx.dialect())
    );
    let id = GuildId(guild as u64);
    let mut parts = Vec::with_capacity(ends.len());
    let mut parsing = None;
    let mut from = i64::MIN;
    for to in ends {
        let read = query(q.as_str()).bind(guild).bind(from).bind(to).fetch_one::<(String,)>(&mut *tx);
        let (json,) = match parsing.take() {
            Some(parse) => {
                let (json, parsed) = tokio::join!(read, parse);
                parts.push(parsed?);
                json?
            }
            None => read.await?,
        };
        parsing = Some(parse_elsewhere(json, id));
        from = to;
    }
    if let Some(parse) = parsing {
        parts.push(parse.await?);
    }
    let mut all = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for p in parts {
        all.extend(p);
    }
    Ok(all)
}

/// One member as a JSON array ([`MemberJson`]'s order), aggregated per
/// group. SQLite aggregates in the order it reads the members' primary key
/// (guild, user); an ORDER BY in the aggregate sorted them again in a
/// temporary b-tree, so the caller checks the order instead (free when it
/// holds). Most members have no roles: `json_array()` for those skips
/// parsing `'[]'` again (the aggregate of a million members 0.90 -> 0.75 s).
fn member_json(d: Dialect) -> &'static str {
    match d {
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
    }
}

fn parse_members(json: &str, guild: GuildId) -> Result<Vec<(MemberRecord, UserRecord)>> {
    let rows: Vec<MemberJson> = serde_json::from_str(json)?;
    Ok(rows.into_iter().map(|m| m.into_records(guild)).collect())
}

/// [`parse_members`] on tokio's blocking threads, beside the next read.
async fn parse_elsewhere(json: String, guild: GuildId) -> Result<Vec<(MemberRecord, UserRecord)>> {
    match tokio::task::spawn_blocking(move || parse_members(&json, guild)).await {
        Ok(parsed) => parsed,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
