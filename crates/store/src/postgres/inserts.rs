//! Inserts of any number of rows on PostgreSQL: `INSERT … SELECT * FROM
//! UNNEST($1::BIGINT[], …)`, one array a column, so one statement for any
//! number of rows with no bound-parameter limit (up to 50,000 rows a
//! statement, which bounds the arrays held in memory at once).

use std::collections::HashMap;

use sqlx::PgConnection;

use crate::attachments::attachment_ids;
use crate::sql::i;
use crate::sql::rows::{ids_json, CHANNEL_COLS, GUILD_COLS, MEMBER_COLS, MESSAGE_COLS, ROLE_COLS, USER_COLS};
use crate::*;

const ROWS: usize = 50_000;

/// One column of `rows`, as an array to bind.
fn col<'a, T, V>(rows: &'a [T], f: impl FnMut(&'a T) -> V) -> Vec<V> {
    rows.iter().map(f).collect()
}

pub(crate) async fn users(conn: &mut PgConnection, rows: &[UserRecord]) -> Result<()> {
    for rows in rows.chunks(ROWS) {
        sqlx::query(&format!(
            "INSERT INTO users ({USER_COLS})
             SELECT * FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::BIGINT[], $7::BIGINT[])"
        ))
        .bind(col(rows, |u| i(u.id)))
        .bind(col(rows, |u| u.username.as_str()))
        .bind(col(rows, |u| u.global_name.as_deref()))
        .bind(col(rows, |u| u.avatar.as_deref()))
        .bind(col(rows, |u| u.bot))
        .bind(col(rows, |u| i(u.flags)))
        .bind(col(rows, |u| i(u.created_at)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn tokens(conn: &mut PgConnection, rows: &[([u8; 32], UserId)]) -> Result<()> {
    for rows in rows.chunks(ROWS) {
        sqlx::query("INSERT INTO tokens (hash, user_id, created_at) SELECT h, u, 0 FROM UNNEST($1::BYTEA[], $2::BIGINT[]) AS t (h, u)")
            .bind(col(rows, |(h, _)| &h[..]))
            .bind(col(rows, |(_, u)| i(*u)))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

pub(crate) async fn guilds(conn: &mut PgConnection, rows: &[&GuildRecord]) -> Result<()> {
    for rows in rows.chunks(ROWS) {
        sqlx::query(&format!(
            "INSERT INTO guilds ({GUILD_COLS})
             SELECT * FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[])"
        ))
        .bind(col(rows, |g| i(g.id)))
        .bind(col(rows, |g| g.name.as_str()))
        .bind(col(rows, |g| g.icon.as_deref()))
        .bind(col(rows, |g| g.description.as_deref()))
        .bind(col(rows, |g| i(g.owner_id)))
        .bind(col(rows, |g| g.system_channel_id.map(i)))
        .bind(col(rows, |g| i(g.created_at)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn roles(conn: &mut PgConnection, rows: &[&RoleRecord]) -> Result<()> {
    for rows in rows.chunks(ROWS) {
        sqlx::query(&format!(
            "INSERT INTO roles ({ROLE_COLS})
             SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::BIGINT[], $5::BOOLEAN[], $6::BIGINT[], $7::BIGINT[],
                                  $8::BOOLEAN[], $9::BIGINT[])"
        ))
        .bind(col(rows, |r| i(r.id)))
        .bind(col(rows, |r| i(r.guild_id)))
        .bind(col(rows, |r| r.name.as_str()))
        .bind(col(rows, |r| i(r.color)))
        .bind(col(rows, |r| r.hoist))
        .bind(col(rows, |r| i(r.position)))
        .bind(col(rows, |r| i(r.permissions)))
        .bind(col(rows, |r| r.mentionable))
        .bind(col(rows, |r| r.bot_id.map(i)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn channels(conn: &mut PgConnection, rows: &[&ChannelRecord]) -> Result<()> {
    for rows in rows.chunks(ROWS) {
        sqlx::query(&format!(
            "INSERT INTO channels ({CHANNEL_COLS})
             SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::TEXT[], $7::BOOLEAN[],
                                  $8::BIGINT[], $9::BIGINT[], $10::TEXT[], $11::BIGINT[])"
        ))
        .bind(col(rows, |c| i(c.id)))
        .bind(col(rows, |c| c.guild_id.map(i)))
        .bind(col(rows, |c| i(c.kind)))
        .bind(col(rows, |c| c.name.as_str()))
        .bind(col(rows, |c| i(c.position)))
        .bind(col(rows, |c| c.topic.as_deref()))
        .bind(col(rows, |c| c.nsfw))
        .bind(col(rows, |c| c.parent_id.map(i)))
        .bind(col(rows, |c| i(c.rate_limit_per_user)))
        .bind(rows.iter().map(|c| serde_json::to_string(&c.overwrites)).collect::<serde_json::Result<Vec<_>>>()?)
        .bind(col(rows, |c| c.last_message_id.map(i)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn members(conn: &mut PgConnection, rows: &[&MemberRecord]) -> Result<u64> {
    let mut n = 0;
    for rows in rows.chunks(ROWS) {
        n += sqlx::query(&format!(
            "INSERT INTO members ({MEMBER_COLS})
             SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[])
             ON CONFLICT (guild_id, user_id) DO NOTHING"
        ))
        .bind(col(rows, |m| i(m.guild_id)))
        .bind(col(rows, |m| i(m.user_id)))
        .bind(col(rows, |m| m.nick.as_deref()))
        .bind(col(rows, |m| ids_json(m.roles.iter().map(|r| r.0))))
        .bind(col(rows, |m| i(m.joined_at)))
        .bind(col(rows, |m| i(m.flags)))
        .bind(col(rows, |m| m.communication_disabled_until.map(i)))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(n)
}

/// Messages in one statement, their uploads linked to them in another, and
/// each channel's newest id in a third.
pub(crate) async fn messages(conn: &mut PgConnection, rows: &[&MessageRecord]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    sqlx::query(&format!(
        "INSERT INTO messages ({MESSAGE_COLS})
         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::TEXT[], $6::BIGINT[], $7::BIGINT[],
                              $8::BIGINT[], $9::BOOLEAN[], $10::BOOLEAN[], $11::TEXT[], $12::TEXT[], $13::TEXT[])"
    ))
    .bind(col(rows, |m| i(m.id)))
    .bind(col(rows, |m| i(m.channel_id)))
    .bind(col(rows, |m| m.guild_id.map(i)))
    .bind(col(rows, |m| i(m.author_id)))
    .bind(col(rows, |m| m.content.as_str()))
    .bind(col(rows, |m| m.edited_at.map(i)))
    .bind(col(rows, |m| i(m.kind)))
    .bind(col(rows, |m| i(m.flags)))
    .bind(col(rows, |m| m.tts))
    .bind(col(rows, |m| m.mention_everyone))
    .bind(col(rows, |m| ids_json(m.mentions.iter().map(|u| u.0))))
    .bind(rows.iter().map(|m| m.reference.as_ref().map(serde_json::to_string).transpose()).collect::<serde_json::Result<Vec<_>>>()?)
    .bind(rows.iter().map(|m| serde_json::to_string(&m.extra)).collect::<serde_json::Result<Vec<_>>>()?)
    .execute(&mut *conn)
    .await?;
    let (mut files, mut of) = (Vec::new(), Vec::new());
    for m in rows {
        for a in attachment_ids(m) {
            files.push(a);
            of.push(i(m.id));
        }
    }
    if !files.is_empty() {
        sqlx::query(
            "UPDATE attachments a SET message_id = v.m FROM UNNEST($1::BIGINT[], $2::BIGINT[]) AS v (id, m)
             WHERE a.id = v.id AND a.message_id IS NULL",
        )
        .bind(files)
        .bind(of)
        .execute(&mut *conn)
        .await?;
    }
    // Each channel's newest id; GREATEST keeps it from going back if an
    // older id commits later. A channel's messages come from its guild's
    // one owner, so two batches rarely touch the same channel; if they ever
    // deadlock, PostgreSQL fails one of them whole, and nothing of it is
    // acknowledged.
    let mut last: HashMap<i64, i64> = HashMap::new();
    for m in rows {
        let v = last.entry(i(m.channel_id)).or_insert(i64::MIN);
        *v = (*v).max(i(m.id));
    }
    let (channels, newest): (Vec<i64>, Vec<i64>) = last.into_iter().unzip();
    sqlx::query(
        "UPDATE channels c SET last_message_id = GREATEST(c.last_message_id, v.last)
         FROM UNNEST($1::BIGINT[], $2::BIGINT[]) AS v (id, last) WHERE c.id = v.id",
    )
    .bind(channels)
    .bind(newest)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
