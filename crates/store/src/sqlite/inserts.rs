//! Inserts of any number of rows on SQLite: multi-row `VALUES`, up to
//! 2,000 rows a statement (well under SQLite's 32,766 bound values for the
//! widest table, messages' 13 columns).

use sqlx::query_builder::Separated;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::attachments::attachment_ids;
use crate::sql::rows::{ids_json, CHANNEL_COLS, GUILD_COLS, MEMBER_COLS, MESSAGE_COLS, ROLE_COLS, USER_COLS};
use crate::sql::{i, On};
use crate::*;

const ROWS: usize = 2_000;

/// `head` (`INSERT INTO table (columns) `), the `VALUES` of `rows` as
/// `push` binds each, and `tail`; the rows inserted.
async fn insert<'r, T>(
    conn: &mut SqliteConnection,
    head: &str,
    tail: &str,
    rows: &'r [T],
    mut push: impl FnMut(Separated<'_, 'r, Sqlite, &'static str>, &'r T),
) -> Result<u64> {
    let mut n = 0;
    for chunk in rows.chunks(ROWS) {
        let mut q = QueryBuilder::<Sqlite>::new(head);
        q.push_values(chunk, &mut push);
        q.push(tail);
        n += q.build().execute(&mut *conn).await?.rows_affected();
    }
    Ok(n)
}

pub(crate) async fn users(conn: &mut SqliteConnection, rows: &[UserRecord]) -> Result<()> {
    insert(conn, &format!("INSERT INTO users ({USER_COLS}) "), "", rows, |mut b, u| {
        b.push_bind(i(u.id))
            .push_bind(&u.username)
            .push_bind(&u.global_name)
            .push_bind(&u.avatar)
            .push_bind(u.bot)
            .push_bind(i(u.flags))
            .push_bind(i(u.created_at));
    })
    .await?;
    Ok(())
}

pub(crate) async fn tokens(conn: &mut SqliteConnection, rows: &[([u8; 32], UserId)]) -> Result<()> {
    insert(conn, "INSERT INTO tokens (hash, user_id, created_at) ", "", rows, |mut b, (h, u)| {
        b.push_bind(&h[..]).push_bind(i(*u)).push_bind(0i64);
    })
    .await?;
    Ok(())
}

pub(crate) async fn guilds(conn: &mut SqliteConnection, rows: &[&GuildRecord]) -> Result<()> {
    insert(conn, &format!("INSERT INTO guilds ({GUILD_COLS}) "), "", rows, |mut b, g| {
        b.push_bind(i(g.id))
            .push_bind(&g.name)
            .push_bind(&g.icon)
            .push_bind(&g.description)
            .push_bind(i(g.owner_id))
            .push_bind(g.system_channel_id.map(i))
            .push_bind(i(g.created_at));
    })
    .await?;
    Ok(())
}

pub(crate) async fn roles(conn: &mut SqliteConnection, rows: &[&RoleRecord]) -> Result<()> {
    insert(conn, &format!("INSERT INTO roles ({ROLE_COLS}) "), "", rows, |mut b, r| {
        b.push_bind(i(r.id))
            .push_bind(i(r.guild_id))
            .push_bind(&r.name)
            .push_bind(i(r.color))
            .push_bind(r.hoist)
            .push_bind(i(r.position))
            .push_bind(i(r.permissions))
            .push_bind(r.mentionable)
            .push_bind(r.bot_id.map(i));
    })
    .await?;
    Ok(())
}

pub(crate) async fn channels(conn: &mut SqliteConnection, rows: &[&ChannelRecord]) -> Result<()> {
    let overwrites = rows.iter().map(|c| serde_json::to_string(&c.overwrites)).collect::<serde_json::Result<Vec<_>>>()?;
    let rows: Vec<_> = rows.iter().zip(overwrites).collect();
    insert(conn, &format!("INSERT INTO channels ({CHANNEL_COLS}) "), "", &rows, |mut b, (c, overwrites)| {
        b.push_bind(i(c.id))
            .push_bind(c.guild_id.map(i))
            .push_bind(i(c.kind))
            .push_bind(&c.name)
            .push_bind(i(c.position))
            .push_bind(&c.topic)
            .push_bind(c.nsfw)
            .push_bind(c.parent_id.map(i))
            .push_bind(i(c.rate_limit_per_user))
            .push_bind(overwrites)
            .push_bind(c.last_message_id.map(i));
    })
    .await?;
    Ok(())
}

pub(crate) async fn members(conn: &mut SqliteConnection, rows: &[&MemberRecord]) -> Result<u64> {
    let head = format!("INSERT INTO members ({MEMBER_COLS}) ");
    insert(conn, &head, " ON CONFLICT (guild_id, user_id) DO NOTHING", rows, |mut b, m| {
        b.push_bind(i(m.guild_id))
            .push_bind(i(m.user_id))
            .push_bind(&m.nick)
            .push_bind(ids_json(m.roles.iter().map(|r| r.0)))
            .push_bind(i(m.joined_at))
            .push_bind(i(m.flags))
            .push_bind(m.communication_disabled_until.map(i));
    })
    .await
}

pub(crate) async fn messages(conn: &mut SqliteConnection, rows: &[&MessageRecord]) -> Result<()> {
    let mut json = Vec::with_capacity(rows.len());
    for m in rows {
        json.push((m, m.reference.as_ref().map(serde_json::to_string).transpose()?, serde_json::to_string(&m.extra)?));
    }
    insert(conn, &format!("INSERT INTO messages ({MESSAGE_COLS}) "), "", &json, |mut b, (m, reference, extra)| {
        b.push_bind(i(m.id))
            .push_bind(i(m.channel_id))
            .push_bind(m.guild_id.map(i))
            .push_bind(i(m.author_id))
            .push_bind(&m.content)
            .push_bind(m.edited_at.map(i))
            .push_bind(i(m.kind))
            .push_bind(i(m.flags))
            .push_bind(m.tts)
            .push_bind(m.mention_everyone)
            .push_bind(ids_json(m.mentions.iter().map(|u| u.0)))
            .push_bind(reference)
            .push_bind(extra);
    })
    .await?;
    // The search index, in the same transaction (see migrations 0012, 0014).
    insert(conn, "INSERT INTO messages_fts (rowid, content, scope) ", "", rows, |mut b, m| {
        b.push_bind(i(m.id)).push_bind(&m.content).push_bind(crate::index_scope(m));
    })
    .await?;
    for m in rows {
        let files: Vec<i64> = attachment_ids(m).collect();
        if !files.is_empty() {
            sqlx::query("UPDATE attachments SET message_id = $1 WHERE id IN (SELECT value FROM json_each($2)) AND message_id IS NULL")
                .bind(i(m.id))
                .bind(serde_json::to_string(&files)?)
                .execute(&mut *conn)
                .await?;
        }
    }
    // Each channel's newest id once (a seeded batch holds thousands of one channel's).
    let mut newest: std::collections::BTreeMap<ChannelId, MessageId> = std::collections::BTreeMap::new();
    for m in rows {
        let id = newest.entry(m.channel_id).or_insert(m.id);
        *id = (*id).max(m.id);
    }
    for (channel, id) in newest {
        crate::sql::raise_last_message_id(On::Sqlite(&mut *conn), channel, id).await?;
    }
    Ok(())
}
