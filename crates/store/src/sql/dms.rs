//! DMs (migration 0006): a `channels` row of kind 1, its recipients, and
//! the pair of users it belongs to (`dm_pairs`: one DM per pair); group
//! DMs are rows of kind 3 with their recipients and no pair.

use std::collections::HashMap;

use protocol::{ChannelId, UserId};
use sqlx::FromRow;

use super::rows::*;
use super::{i, query, Pool};
use crate::{ChannelRecord, DmChannel, Result, StoreError, UserRecord};

#[derive(FromRow)]
struct RecipientRow {
    channel_id: i64,
    #[sqlx(flatten)]
    user: UserRow,
}

#[derive(FromRow)]
struct OwnedChannelRow {
    owner: i64,
    #[sqlx(flatten)]
    channel: ChannelRow,
}

pub(super) async fn open(db: Pool<'_>, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId> {
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let existing = || async {
        let q = query("SELECT channel_id FROM dm_pairs WHERE low = $1 AND high = $2").bind(low).bind(high);
        Result::Ok(q.fetch_optional::<(i64,)>(db).await?.map(|(id,)| ChannelId(id as u64)))
    };
    if let Some(id) = existing().await? {
        return Ok(id);
    }
    // The pair's row decides: a concurrent open of the same pair waits on
    // it, then inserts nothing, and this one's channel is undone.
    let mut tx = db.begin().await?;
    tx.insert_channels(&[channel]).await?;
    query("INSERT INTO dm_recipients (channel_id, user_id) VALUES ($1, $2), ($1, $3) ON CONFLICT DO NOTHING")
        .bind(channel.id)
        .bind(low)
        .bind(high)
        .execute(&mut tx)
        .await?;
    let won = query("INSERT INTO dm_pairs (low, high, channel_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
        .bind(low)
        .bind(high)
        .bind(channel.id)
        .execute(&mut tx)
        .await?
        == 1;
    if !won {
        tx.rollback().await?;
        return existing().await?.ok_or(StoreError::Conflict);
    }
    tx.commit().await?;
    Ok(channel.id)
}

pub(super) async fn create_group(db: Pool<'_>, channel: &ChannelRecord, recipients: &[UserId]) -> Result<()> {
    let mut tx = db.begin().await?;
    tx.insert_channels(&[channel]).await?;
    for &u in recipients {
        query("INSERT INTO dm_recipients (channel_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(channel.id)
            .bind(u)
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The recipients of the DMs `which` selects (a condition on `r`, their
/// `dm_recipients` row), by user id.
fn recipients_sql(which: &str) -> String {
    format!(
        "SELECT r.channel_id, {} FROM dm_recipients r JOIN users u ON u.id = r.user_id WHERE {which} ORDER BY u.id",
        qualified("u", USER_COLS)
    )
}

fn by_channel(rows: Vec<RecipientRow>) -> HashMap<ChannelId, Vec<UserRecord>> {
    let mut out: HashMap<ChannelId, Vec<UserRecord>> = HashMap::new();
    for r in rows {
        out.entry(ChannelId(r.channel_id as u64)).or_default().push(r.user.into());
    }
    out
}

pub(super) async fn get(db: Pool<'_>, id: ChannelId) -> Result<Option<DmChannel>> {
    let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = $1 AND kind IN (1, 3)");
    let Some(row) = query(q).bind(id).fetch_optional::<ChannelRow>(db).await? else { return Ok(None) };
    let rows = query(recipients_sql("r.channel_id = $1")).bind(id).fetch_all(db).await?;
    let recipients = by_channel(rows).remove(&id).unwrap_or_default();
    Ok(Some(DmChannel { channel: row.try_into()?, recipients }))
}

pub(super) async fn of_users(db: Pool<'_>, users: &[UserId]) -> Result<Vec<(UserId, Vec<DmChannel>)>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = users.iter().map(|&u| i(u)).collect();
    let in_ids = db.dialect().in_ids("$1");
    let q = format!(
        "SELECT r.user_id AS owner, {} FROM dm_recipients r JOIN channels c ON c.id = r.channel_id
         WHERE r.user_id {in_ids} ORDER BY r.user_id, c.id",
        qualified("c", CHANNEL_COLS)
    );
    let channels: Vec<OwnedChannelRow> = query(q).bind(&ids[..]).fetch_all(db).await?;
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let which = format!("r.channel_id IN (SELECT channel_id FROM dm_recipients WHERE user_id {in_ids})");
    let recipients = by_channel(query(recipients_sql(&which)).bind(&ids[..]).fetch_all(db).await?);
    let mut out: Vec<(UserId, Vec<DmChannel>)> = Vec::new();
    for r in channels {
        let owner = UserId(r.owner as u64);
        let channel: ChannelRecord = r.channel.try_into()?;
        let dm = DmChannel { recipients: recipients.get(&channel.id).cloned().unwrap_or_default(), channel };
        match out.last_mut() {
            Some((u, v)) if *u == owner => v.push(dm),
            _ => out.push((owner, vec![dm])),
        }
    }
    Ok(out)
}
