//! [`CommunityStore`] for every [`Backend`]: the audit log and message
//! search.

use async_trait::async_trait;
use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};

use super::query::Arg;
use super::rows::{qualified, MessageRow, MESSAGE_COLS};
use super::{i, query, Backend, Dialect, Tx};
use crate::community::{AuditQuery, AuditRecord, CommunityStore, Has, ReadState, ReadStateWrite, SearchQuery};
use crate::{MessageRecord, Result};

/// Writes one entry (inside the transaction of the change it records).
pub(super) async fn add_entry(tx: &mut Tx, e: &AuditRecord) -> Result<u64> {
    query("INSERT INTO audit_log (id, guild_id, user_id, action_type, entry) VALUES ($1, $2, $3, $4, $5)")
        .bind(e.id)
        .bind(e.guild_id)
        .bind(e.user_id)
        .bind(i(e.action_type as u32))
        .bind(&e.entry)
        .execute(tx)
        .await
}

#[async_trait]
impl<B: Backend> CommunityStore for B {
    async fn search_messages(&self, q: &SearchQuery) -> Result<(u64, Vec<MessageRecord>)> {
        if q.channels.is_empty() || q.limit == 0 {
            return Ok((0, Vec::new()));
        }
        let db = self.reader();
        let d = db.dialect();
        let (cond, args) = search_where(d, q);
        // SQLite reads the index first, in id order, and each match's row
        // only as it goes: a page or a capped count stops early.
        let (from, id) = match d {
            Dialect::Sqlite => ("messages_fts f JOIN messages m ON m.id = f.rowid", "f.rowid"),
            Dialect::Postgres => ("messages m", "m.id"),
        };
        // Count no further than needed: `count_max`, or one past this page.
        let cap = i64::from(q.count_max.max(q.offset.saturating_add(q.limit).saturating_add(1)));
        let n = args.len();
        let count_sql = match d {
            // Everything but a row-only filter is in the index: count there,
            // without reading a message row.
            Dialect::Sqlite if index_only(q) => {
                format!("SELECT COUNT(*) FROM (SELECT 1 FROM messages_fts WHERE {} LIMIT ${})", fts_where(q, "messages_fts", "$1"), n + 1)
            }
            _ => format!("SELECT COUNT(*) FROM (SELECT 1 FROM {from} WHERE {cond} LIMIT ${}) c", n + 1),
        };
        let mut count = query(count_sql).planned_each_time();
        for a in args.iter().cloned() {
            count = count.bind(a);
        }
        let (by_id, best_first) = if q.ascending { ("ASC", "DESC") } else { ("DESC", "ASC") };
        let order = if q.by_relevance && !q.terms.is_empty() {
            format!("{} {best_first}, {id} {by_id}", relevance(d))
        } else {
            format!("{id} {by_id}")
        };
        let sql =
            format!("SELECT {} FROM {from} WHERE {cond} ORDER BY {order} LIMIT ${} OFFSET ${}", qualified("m", MESSAGE_COLS), n + 1, n + 2);
        // PostgreSQL: the page among the first rows of the channels first.
        let window = (d == Dialect::Postgres).then(|| window(q)).flatten().map(|rows| {
            let sql = format!(
                "SELECT {} FROM {rows} m WHERE {cond} ORDER BY m.id {by_id} LIMIT ${} OFFSET ${}",
                qualified("m", MESSAGE_COLS),
                n + 1,
                n + 2
            );
            let mut page = query(sql).planned_each_time();
            for a in args.iter().cloned() {
                page = page.bind(a);
            }
            page
        });
        let mut page = query(sql).planned_each_time();
        for a in args {
            page = page.bind(a);
        }
        // PostgreSQL: the count and the page are independent reads, on two
        // of the pool's connections at once, so a search waits for the
        // longer one rather than both (a word in a date range: 22 and
        // 41 ms). Each sees its own snapshot; a message committed between
        // them can be in one and not the other, as with any paging.
        // SQLite one after the other: its page is ~1 ms, and at once
        // measured no better.
        let count = async { count.bind(cap).fetch_one(db).await.map(|(total,): (i64,)| total) };
        let page = async {
            if let Some(w) = window {
                let rows: Vec<MessageRow> = w.bind(q.limit).bind(q.offset).fetch_all(db).await?;
                // A whole page there is the whole index's first page too.
                if rows.len() == q.limit as usize {
                    return Ok(rows);
                }
            }
            page.bind(q.limit).bind(q.offset).fetch_all(db).await
        };
        let (total, rows): (i64, Vec<MessageRow>) = match d {
            Dialect::Postgres => tokio::try_join!(count, page)?,
            Dialect::Sqlite => (count.await?, page.await?),
        };
        Ok((total as u64, rows.into_iter().map(TryInto::try_into).collect::<Result<_>>()?))
    }

    async fn audit_log(&self, guild: GuildId, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        // With only `after`: oldest first from it; otherwise newest first.
        let ascending = q.after.is_some() && q.before.is_none();
        let sql = format!(
            "SELECT id, guild_id, user_id, action_type, entry FROM audit_log
             WHERE guild_id = $1 AND ($2 IS NULL OR user_id = $2) AND ($3 IS NULL OR action_type = $3)
               AND ($4 IS NULL OR id < $4) AND ($5 IS NULL OR id > $5)
             ORDER BY id {} LIMIT $6",
            if ascending { "ASC" } else { "DESC" }
        );
        let rows: Vec<(i64, i64, Option<i64>, i64, String)> = query(sql)
            .bind(guild)
            .bind(q.user_id)
            .bind(q.action_type.map(|t| t as u32))
            .bind(q.before)
            .bind(q.after)
            .bind(q.limit)
            .fetch_all(self.reader())
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, g, u, t, entry)| AuditRecord {
                id: Snowflake(id as u64),
                guild_id: GuildId(g as u64),
                user_id: u.map(|u| UserId(u as u64)),
                action_type: t as u16,
                entry,
            })
            .collect())
    }

    async fn prune_audit_log(&self, before: Snowflake) -> Result<u64> {
        query("DELETE FROM audit_log WHERE id < $1").bind(before).execute(self.writer()).await
    }

    async fn read_states_of(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<ReadState>)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        // READY's reads: IDENTIFY's own reader.
        let db = self.lookup();
        let ids: Vec<i64> = users.iter().map(|&u| i(u)).collect();
        let sql = format!(
            "SELECT user_id, channel_id, last_message_id, mention_count, last_pin_timestamp FROM read_states
             WHERE user_id {} ORDER BY user_id, channel_id",
            db.dialect().in_ids("$1")
        );
        let rows: Vec<(i64, i64, i64, i64, Option<i64>)> = query(sql).bind(&ids[..]).fetch_all(db).await?;
        let mut out: Vec<(UserId, Vec<ReadState>)> = Vec::new();
        for (u, c, m, n, pin) in rows {
            let (user, state) = (
                UserId(u as u64),
                ReadState {
                    channel_id: ChannelId(c as u64),
                    last_message_id: MessageId(m as u64),
                    mention_count: n.clamp(0, u32::MAX as i64) as u32,
                    last_pin_timestamp: pin.map(|p| p as u64),
                },
            );
            match out.last_mut() {
                Some((x, v)) if *x == user => v.push(state),
                _ => out.push((user, vec![state])),
            }
        }
        Ok(out)
    }

    async fn write_read_states(&self, writes: &[ReadStateWrite]) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer().begin().await?;
        let each = tx.dialect().each_id("$1");
        for w in writes {
            match w {
                // The channel must still exist (a row of a deleted channel
                // would fail the batch on its foreign key). An older
                // message moves the mark back only when asked to.
                ReadStateWrite::Ack { user, channel, message, mention_count, manual } => {
                    query(
                        "INSERT INTO read_states (user_id, channel_id, last_message_id, mention_count)
                         SELECT $1, id, $3, $4 FROM channels WHERE id = $2
                         ON CONFLICT (user_id, channel_id) DO UPDATE
                           SET last_message_id = excluded.last_message_id, mention_count = excluded.mention_count
                           WHERE $5 OR read_states.last_message_id <= excluded.last_message_id",
                    )
                    .bind(*user)
                    .bind(*channel)
                    .bind(*message)
                    .bind(*mention_count)
                    .bind(*manual)
                    .execute(&mut tx)
                    .await?;
                }
                // One statement for every person mentioned (an @everyone
                // of a large guild is one statement, not one per member).
                ReadStateWrite::Mention { channel, message, users } => {
                    let ids: Vec<i64> = users.iter().map(|&u| i(u)).collect();
                    query(format!(
                        "INSERT INTO read_states (user_id, channel_id, last_message_id, mention_count)
                         SELECT u.id, $2, 0, 1 FROM ({each}) AS u WHERE EXISTS (SELECT 1 FROM channels WHERE id = $2)
                         ON CONFLICT (user_id, channel_id) DO UPDATE
                           SET mention_count = read_states.mention_count + 1
                           WHERE read_states.last_message_id < $3"
                    ))
                    .bind(&ids[..])
                    .bind(*channel)
                    .bind(*message)
                    .execute(&mut tx)
                    .await?;
                }
            }
        }
        tx.commit().await
    }
}

/// What the index matches, in each backend's syntax: the words and
/// phrases (all required) in the content, and the scope tokens of
/// [`crate::index_scope`]. A whole guild is its guild token, or the
/// guild's author or link tokens when asked for (each implies the guild:
/// intersecting with the guild's token, as long as all its messages, would
/// cost more than the rest of the search), less the hidden channels; chosen
/// channels are their channel (or link) tokens. Tokens are letters, digits
/// and colons only, so they need no escaping.
fn index_query(d: Dialect, q: &SearchQuery) -> (Option<String>, String) {
    let (or, and, not) = match d {
        Dialect::Sqlite => (" OR ", " AND ", " NOT "),
        Dialect::Postgres => (" | ", " & ", " & !"),
    };
    let tok = |kind: &str, id: u64| match d {
        Dialect::Sqlite => format!("{kind}{id}"),
        Dialect::Postgres => format!("'{kind}:{id}'"),
    };
    let author = |a: u64, place: u64| match d {
        Dialect::Sqlite => format!("a{a}p{place}"),
        Dialect::Postgres => format!("'a:{a}:{place}'"),
    };
    let any = |v: Vec<String>| if v.len() == 1 { v.into_iter().next().unwrap_or_default() } else { format!("({})", v.join(or)) };
    let link = q.has.contains(&Has::Link);
    let mut scope = Vec::new();
    let mut hidden = &[][..];
    match (q.guild, &q.hidden) {
        (Some(g), Some(h)) if h.len() < q.channels.len() => {
            if !q.authors.is_empty() {
                scope.push(any(q.authors.iter().map(|a| author(a.0, g.0)).collect()));
            }
            if link {
                scope.push(tok("l", g.0));
            }
            // SQLite with a phrase: the words alone, and the channel checked
            // on each match's row (see `phrase_by_rows`).
            // PostgreSQL: never the guild's (see `search_where`).
            if scope.is_empty() && d == Dialect::Sqlite && !phrase_by_rows(q) {
                scope.push(tok("g", g.0));
            }
            if !scope.is_empty() {
                hidden = h;
            }
        }
        _ => {
            scope.push(any(q.channels.iter().map(|c| tok(if link { "l" } else { "c" }, c.0)).collect()));
            if !q.authors.is_empty() {
                // The place: the guild, or each DM's channel.
                let places: Vec<u64> = match q.guild {
                    Some(g) => vec![g.0],
                    None => q.channels.iter().map(|c| c.0).collect(),
                };
                scope.push(any(q.authors.iter().flat_map(|a| places.iter().map(|&p| author(a.0, p))).collect()));
            }
        }
    }
    let mut scope = scope.join(and);
    if !hidden.is_empty() && !scope.is_empty() {
        let h: Vec<String> = hidden.iter().map(|c| tok("c", c.0)).collect();
        scope = format!("({scope}){not}({})", h.join(or));
    }
    let (terms, pairs) = split_terms(q);
    if !pairs.is_empty() {
        let pairs = pairs.iter().map(|(a, b)| match d {
            Dialect::Sqlite => crate::pair_token(a, b),
            Dialect::Postgres => format!("'{a} {b}'"),
        });
        scope = [(!scope.is_empty()).then(|| format!("({scope})"))].into_iter().flatten().chain(pairs).collect::<Vec<_>>().join(and);
    }
    let text = (!terms.is_empty()).then(|| match d {
        Dialect::Sqlite => terms.iter().map(|p| format!("\"{}\"", p.join(" "))).collect::<Vec<_>>().join(" "),
        Dialect::Postgres => {
            terms.iter().map(|p| p.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(" <-> ")).collect::<Vec<_>>().join(" & ")
        }
    });
    match d {
        // One FTS5 expression: column filters keep a typed `g1` from
        // matching a scope token.
        Dialect::Sqlite => {
            let text = text.map(|t| format!("content : ({t})"));
            let scope = (!scope.is_empty()).then(|| format!("scope : ({scope})"));
            (None, [text, scope].into_iter().flatten().collect::<Vec<_>>().join(" AND "))
        }
        // The words go through the text's own parser (`to_tsquery`); the
        // scope lexemes are taken as they are (`::tsquery`).
        Dialect::Postgres => (text, scope),
    }
}

/// The words and phrases the index matches by their positions, and the
/// pairs of short words it matches as one token each
/// ([`crate::word_pairs`]): a phrase of two such words is its pair alone;
/// a longer phrase keeps its words and adds its pairs, which narrow what
/// the positions are compared for. A relevance sort keeps every phrase (it
/// ranks by the words).
/// The terms' tokens are lowercase already ([`SearchQuery::terms`]), as
/// PostgreSQL's pair lexemes are.
fn split_terms(q: &SearchQuery) -> (Vec<&[String]>, Vec<(&str, &str)>) {
    let (mut terms, mut pairs) = (Vec::new(), Vec::new());
    for t in &q.terms {
        let before = pairs.len();
        if !q.by_relevance {
            pairs.extend(crate::word_pairs(t.iter().map(String::as_str)));
        }
        if !(t.len() == 2 && pairs.len() > before) {
            terms.push(&t[..]);
        }
    }
    (terms, pairs)
}

/// Channels beyond which a search reads no window (one index scan each).
const WINDOW_CHANNELS_MAX: usize = 64;

/// PostgreSQL: the first [`SearchQuery::window`] messages of the searched
/// channels in the id range, in the page's order, as a subquery with the
/// `messages` columns, or `None` when the page is not looked for there
/// (a relevance sort, no window, too many channels, an offset past it).
///
/// Each channel's messages in id order come from `messages_channel`
/// (`channel_id, id`), merged (PostgreSQL's Merge Append), so the window
/// costs about a microsecond a row and stops at the page. The whole
/// index's way, a bitmap of every match of the words (and, with an id
/// range, of BRIN's block ranges, lossy, each row rechecked) then a sort,
/// costs per match: for a word in 1 message of 200, in 10,000,000
/// messages, 28 ms, and 41-53 ms in the last 30 days, against 6-9 ms for
/// the window. The ids are numbers, written into the text.
fn window(q: &SearchQuery) -> Option<String> {
    let by_relevance = q.by_relevance && !q.terms.is_empty();
    let rows = q.window;
    let range = q.min_id.is_some() || q.max_id.is_some();
    if by_relevance || !range || rows == 0 || q.channels.is_empty() || q.channels.len() > WINDOW_CHANNELS_MAX {
        return None;
    }
    if u64::from(q.offset) + u64::from(q.limit) > u64::from(rows) {
        return None;
    }
    let dir = if q.ascending { "ASC" } else { "DESC" };
    let mut range = String::new();
    if let Some(min) = q.min_id {
        range.push_str(&format!(" AND id > {}", min.0 as i64));
    }
    if let Some(max) = q.max_id {
        range.push_str(&format!(" AND id < {}", max.0 as i64));
    }
    let each: Vec<String> = q
        .channels
        .iter()
        .map(|c| format!("(SELECT * FROM messages WHERE channel_id = {}{range} ORDER BY id {dir} LIMIT {rows})", c.0 as i64))
        .collect();
    Some(format!("(SELECT * FROM ({}) u ORDER BY id {dir} LIMIT {rows})", each.join(" UNION ALL ")))
}

/// SQLite: the `messages_fts` condition, its expression bound as `param`,
/// with the id range (`rowid`, which FTS5 applies while it reads).
/// `table` is `messages_fts` or its alias.
fn fts_where(q: &SearchQuery, table: &str, param: &str) -> String {
    let mut w = format!("{table}.messages_fts MATCH {param}");
    if let Some(min) = q.min_id {
        w.push_str(&format!(" AND {table}.rowid > {}", min.0 as i64));
    }
    if let Some(max) = q.max_id {
        w.push_str(&format!(" AND {table}.rowid < {}", max.0 as i64));
    }
    w
}

/// SQLite: whether the index alone answers `q` (no filter that needs the
/// message's row).
fn index_only(q: &SearchQuery) -> bool {
    q.mentions.is_empty() && q.pinned.is_none() && q.has.iter().all(|&h| has(h).is_none()) && !phrase_by_rows(q)
}

/// SQLite: a phrase over a whole guild is matched without the guild's
/// token, its matches' channels checked on their rows. FTS5 finds a
/// phrase's matches by their word positions whatever else is asked, and
/// each step into a token as long as a big guild's (every message of it,
/// spread over all the index's segments) cost more than reading the row:
/// in 10,000,000 messages, counting 1,000 matches of a two-word phrase took
/// 71-78 ms with the token and 29-39 ms with the rows.
fn phrase_by_rows(q: &SearchQuery) -> bool {
    q.guild.is_some()
        && q.hidden.as_ref().is_some_and(|h| h.len() < q.channels.len())
        && q.authors.is_empty()
        && !q.has.contains(&Has::Link)
        && split_terms(q).0.iter().any(|t| t.len() > 1)
}

/// Relevance, best first, for `ORDER BY` (the index query is `$1`).
fn relevance(d: Dialect) -> String {
    match d {
        // bm25: lower is better; the scope column weighs nothing.
        Dialect::Sqlite => "(SELECT bm25(messages_fts, 1.0, 0.0) FROM messages_fts WHERE messages_fts MATCH $1 AND rowid = m.id)".into(),
        Dialect::Postgres => "-ts_rank(m.search, to_tsquery('simple', $1))".into(),
    }
}
/// `m.mentions` (a JSON array of ids) holds the id bound as `param`.
fn mentions(d: Dialect, param: &str) -> String {
    match d {
        Dialect::Sqlite => format!("EXISTS (SELECT 1 FROM json_each(m.mentions) WHERE value = {param})"),
        Dialect::Postgres => format!("m.mentions::jsonb @> jsonb_build_array({param}::bigint)"),
    }
}

/// The row condition for `h`; none for a link, which the index's link
/// tokens match.
fn has(h: Has) -> Option<&'static str> {
    Some(match h {
        Has::Link => return None,
        // `extra` is compact JSON (serde_json): a non-empty list starts `[{`.
        Has::Embed => "m.extra LIKE '%\"embeds\":[{%'",
        Has::Sticker => "m.extra LIKE '%\"sticker_items\":[{%'",
        Has::File => "EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = m.id)",
        Has::Image => "EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = m.id AND a.content_type LIKE 'image/%')",
        Has::Video => "EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = m.id AND a.content_type LIKE 'video/%')",
        Has::Sound => "EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = m.id AND a.content_type LIKE 'audio/%')",
    })
}

/// The `WHERE` of a search and its bound values, in order: `$1` is the
/// index query (PostgreSQL: its words, then `$2` its scope, when there are
/// words). The channels are checked on the row as well: the guild's list
/// was read before the search, and a channel made since is not the
/// caller's to read until its permissions are known.
fn search_where<'q>(d: Dialect, q: &'q SearchQuery) -> (String, Vec<Arg<'q>>) {
    let mut args: Vec<Arg<'q>> = Vec::new();
    fn param<'q>(a: Arg<'q>, args: &mut Vec<Arg<'q>>) -> String {
        args.push(a);
        format!("${}", args.len())
    }
    let mut conds = Vec::new();
    let (text, scope) = index_query(d, q);
    match d {
        Dialect::Sqlite => {
            let p = param(scope.into(), &mut args);
            conds.push(fts_where(q, "f", &p));
        }
        Dialect::Postgres => {
            let mut query = Vec::new();
            if let Some(t) = text {
                query.push(format!("to_tsquery('simple', {})", param(t.into(), &mut args)));
            }
            if !scope.is_empty() {
                query.push(format!("{}::tsquery", param(scope.into(), &mut args)));
            }
            if !query.is_empty() {
                conds.push(format!("m.search @@ ({})", query.join(" && ")));
            }
            // The guild by its b-tree, not as a lexeme: GIN steps into a
            // lexeme as long as a big guild's once per match of the words
            // (56 ms for a word's 4,604 matches in 10,000,000 messages,
            // against 1 ms without), while the planner, knowing from its
            // statistics how much of the table a guild is, uses this index
            // only for a small one.
            if let Some(g) = q.guild {
                let p = param(g.into(), &mut args);
                conds.push(format!("m.guild_id = {p}"));
            }
        }
    }
    let p = param(q.channels.iter().map(|&c| i(c)).collect::<Vec<_>>().into(), &mut args);
    conds.push(match d {
        Dialect::Sqlite => format!("m.channel_id {}", d.in_ids(&p)),
        // A filter on the rows found, never an index condition: the planner
        // would otherwise AND in a bitmap of every message of the guild's
        // channels (821,917 rows and 71-110 ms for an id range).
        Dialect::Postgres => format!("(m.channel_id + 0) {}", d.in_ids(&p)),
    });
    for &u in &q.mentions {
        let p = param(u.into(), &mut args);
        conds.push(mentions(d, &p));
    }
    conds.extend(q.has.iter().filter_map(|&h| has(h)).map(str::to_string));
    if d == Dialect::Postgres {
        if let Some(min) = q.min_id {
            let p = param(min.into(), &mut args);
            conds.push(format!("m.id > {p}"));
        }
        if let Some(max) = q.max_id {
            let p = param(max.into(), &mut args);
            conds.push(format!("m.id < {p}"));
        }
    }
    match q.pinned {
        Some(true) => conds.push("EXISTS (SELECT 1 FROM pins p WHERE p.message_id = m.id)".into()),
        Some(false) => conds.push("NOT EXISTS (SELECT 1 FROM pins p WHERE p.message_id = m.id)".into()),
        None => {}
    }
    (conds.join(" AND "), args)
}
