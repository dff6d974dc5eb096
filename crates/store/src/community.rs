//! What a community needs beyond chat: the audit log (migration 0011),
//! message search (0012, scope tokens 0014) and read states (0013).
//!
//! Both backends run the same SQL for them (`sql/community.rs`), but for
//! the full-text match: SQLite's FTS5 table, PostgreSQL's `tsvector`
//! column. Audit entries are written as [`crate::Change::AddAuditEntry`],
//! in the transaction of the change they record; the search index follows
//! edits and deletes by itself (triggers, a generated column), and SQLite's
//! takes new messages from the statements that insert them.

use async_trait::async_trait;
use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};

use crate::MessageRecord;

use crate::Result;

/// One audit log entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditRecord {
    /// A snowflake: entries order by it, and it dates them.
    pub id: Snowflake,
    pub guild_id: GuildId,
    /// Who did it (`None`: the system).
    pub user_id: Option<UserId>,
    pub action_type: u16,
    /// The entry as the API shows it: a JSON object with `id`, `user_id`,
    /// `target_id`, `action_type`, and `changes`, `options`, `reason` when
    /// it has them.
    pub entry: String,
}

/// Which entries a read wants (Discord's query parameters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub user_id: Option<UserId>,
    pub action_type: Option<u16>,
    /// Entries older than this id, newest first.
    pub before: Option<Snowflake>,
    /// Entries newer than this id, oldest first (when `before` is absent).
    pub after: Option<Snowflake>,
    pub limit: u32,
}

/// What a message must have (Discord's `has`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Has {
    Link,
    Embed,
    File,
    Image,
    Video,
    Sound,
    Sticker,
}

/// A message search. Every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// The channels searched (those the caller may read); none: no results.
    pub channels: Vec<ChannelId>,
    /// The guild `channels` belong to (`None`: a DM).
    pub guild: Option<GuildId>,
    /// When `channels` are all of the guild's channels but these (the ones
    /// the caller may not read): the index can then match the guild less
    /// these, when that list is the shorter one.
    pub hidden: Option<Vec<ChannelId>>,
    /// Words and phrases of the content, each a list of lowercase tokens
    /// (one token: a word), all required.
    pub terms: Vec<Vec<String>>,
    /// By any of these authors.
    pub authors: Vec<UserId>,
    /// Mentioning each of these users.
    pub mentions: Vec<UserId>,
    pub has: Vec<Has>,
    pub min_id: Option<MessageId>,
    pub max_id: Option<MessageId>,
    pub pinned: Option<bool>,
    /// Best match first (with terms); otherwise by id.
    pub by_relevance: bool,
    /// Oldest (or least relevant) first.
    pub ascending: bool,
    pub offset: u32,
    pub limit: u32,
    /// `total_results` counts at most this many matches (at least
    /// `offset + limit + 1`, so the next page is always announced).
    pub count_max: u32,
    /// PostgreSQL, sorted by id: look for the page in the first this many
    /// messages of `channels` (in the id range, in the page's order) before
    /// the whole index's matches; 0: never (`search.window_rows`). SQLite
    /// reads its index in id order anyway.
    pub window: u32,
}

/// The index's scope tokens of a message (SQLite's `messages_fts.scope`;
/// PostgreSQL's generated `search` column makes the same from the row, as
/// `c:<channel>` and so on, but for the guild's, which it finds by its
/// b-tree). Ids are snowflakes from one generator, so a guild's never
/// equals a channel's.
///
/// - `g<guild>` (guild messages) and `c<channel>`;
/// - `a<author>p<place>`: the author within the place, the guild or, for
///   a DM, the channel: an author's messages in one guild are one token,
///   not the author's everywhere intersected with a guild's (tens of
///   times faster for a big guild);
/// - `l<channel>` and `l<guild>` when the content holds `http://` or
///   `https://` (ASCII case ignored, as SQL's `LIKE`);
/// - a [`word_pairs`] token for each pair of adjacent short words
///   (`p<length of the first><first><second>`, e.g. `p2ofthe`).
///
/// With them a search narrows to a guild, channels, authors and links
/// inside the full-text index, without reading a message row, and finds a
/// phrase of two short words with one token. The conformance suite checks
/// what an insert, a migration's rebuild and an edit index.
pub fn index_scope(m: &MessageRecord) -> String {
    scope_tokens(m.guild_id.map(|g| g.0), m.channel_id.0, m.author_id.0, &m.content)
}

/// [`index_scope`] from a message's columns (for SQLite's rebuild, which
/// reads them from the table).
pub fn scope_tokens(guild: Option<u64>, channel: u64, author: u64, content: &str) -> String {
    use std::fmt::Write;
    let place = guild.unwrap_or(channel);
    let mut s = String::with_capacity(96);
    if let Some(g) = guild {
        let _ = write!(s, "g{g} ");
    }
    let _ = write!(s, "c{channel} a{author}p{place}");
    if has_link(content) {
        let _ = write!(s, " l{channel}");
        if let Some(g) = guild {
            let _ = write!(s, " l{g}");
        }
    }
    for (a, b) in word_pairs(search_words(content)) {
        s.push(' ');
        s.push_str(&pair_token(a, b));
    }
    s
}

/// The words of a text as search splits it: runs of letters and digits
/// (not lowercased).
pub fn search_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// Longest word, in ASCII letters and digits, that [`word_pairs`] pairs.
pub const PAIR_WORD_MAX: usize = 3;

/// Whether `w` pairs: 1 to [`PAIR_WORD_MAX`] ASCII letters and digits.
pub fn pairs_word(w: &str) -> bool {
    (1..=PAIR_WORD_MAX).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Each pair of adjacent words that both [`pairs_word`], in order, with
/// repeats. A phrase of two common words is the slow search for both
/// engines (every message holding either word is visited to compare
/// positions: 20-30 ms on SQLite and ~400 ms on PostgreSQL for a pair of
/// the 50 most common words in 10,000,000 messages), and common words are
/// short (in English, "of the", "in a", "it is"), so such pairs are indexed
/// as one token each; a phrase with a longer word is found through that
/// word's shorter list. Only ASCII, so that PostgreSQL's generated column
/// (migration 0015's `search_pairs`) makes the same pairs.
pub fn word_pairs<'a>(words: impl IntoIterator<Item = &'a str>) -> impl Iterator<Item = (&'a str, &'a str)> {
    let mut prev: Option<&'a str> = None;
    words.into_iter().filter_map(move |w| prev.replace(w).filter(|p| pairs_word(p) && pairs_word(w)).map(|p| (p, w)))
}

/// SQLite's token for the pair `a b`: `p`, the length of `a`, then both,
/// in any case (FTS5 folds ASCII case, in the index and in a query alike).
/// It starts with `p` and a digit, as no other scope token does, and the
/// length keeps `ab c` apart from `a bc`.
pub fn pair_token(a: &str, b: &str) -> String {
    format!("p{}{a}{b}", a.len())
}

/// `http://` or `https://` anywhere, ASCII case ignored (as SQL's `LIKE`).
fn has_link(content: &str) -> bool {
    let b = content.as_bytes();
    b.windows(7).any(|w| w.eq_ignore_ascii_case(b"http://")) || b.windows(8).any(|w| w.eq_ignore_ascii_case(b"https://"))
}

#[async_trait]
pub trait CommunityStore: Send + Sync {
    /// The messages `q` finds, in its order, from its offset; and how many
    /// it finds in all.
    async fn search_messages(&self, q: &SearchQuery) -> Result<(u64, Vec<MessageRecord>)>;
    /// A guild's audit log entries: newest first, or with only `after`,
    /// oldest first from it (as Discord pages them).
    async fn audit_log(&self, guild: GuildId, q: &AuditQuery) -> Result<Vec<AuditRecord>>;
    /// Deletes entries with ids below `before` (older than the retention);
    /// how many went.
    async fn prune_audit_log(&self, before: Snowflake) -> Result<u64>;
    /// Every read state of each of `users` (READY's `read_state`), from
    /// IDENTIFY's own reader; a user without any is left out.
    async fn read_states_of(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<ReadState>)>>;
    /// Applies `writes` in order, in one transaction. A write naming a
    /// channel that no longer exists is skipped.
    async fn write_read_states(&self, writes: &[ReadStateWrite]) -> Result<()>;
}

/// Where one person is in one channel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadState {
    pub channel_id: ChannelId,
    /// The last message read (0: none).
    pub last_message_id: MessageId,
    /// Mentions of the person after it.
    pub mention_count: u32,
    /// Milliseconds since the epoch of the last pin they saw, if any.
    pub last_pin_timestamp: Option<u64>,
}

/// A change to read states.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReadStateWrite {
    /// `user` read `channel` up to `message`, with `mention_count` mentions
    /// still unread after it (0 for a plain ack). An ack of an older message
    /// than the one recorded changes nothing unless `manual` (a person
    /// marking a message unread).
    Ack { user: UserId, channel: ChannelId, message: MessageId, mention_count: u32, manual: bool },
    /// `message` in `channel` mentions each of `users`: one more mention
    /// for each who has not read past it.
    Mention { channel: ChannelId, message: MessageId, users: Vec<UserId> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens_name_guild_channel_author_and_links() {
        assert_eq!(scope_tokens(Some(10), 20, 30, "see HTTPS://x.y"), "g10 c20 a30p10 l20 l10 p1xy");
        assert_eq!(scope_tokens(None, 20, 30, "http:/ not a link"), "c20 a30p20 p3nota");
        assert!(has_link("Http://a") && has_link("xhttps://") && !has_link("https:/") && !has_link("htt"));
    }

    #[test]
    fn pairs_are_adjacent_short_ascii_words() {
        let words: Vec<&str> = search_words("Of THE end, of 3 a-bc café ab cd  x").collect();
        assert_eq!(words, ["Of", "THE", "end", "of", "3", "a", "bc", "café", "ab", "cd", "x"]);
        // `café` is not ASCII and pairs with nothing; `a-bc` is two words.
        assert_eq!(
            word_pairs(words.iter().copied()).collect::<Vec<_>>(),
            [("Of", "THE"), ("THE", "end"), ("end", "of"), ("of", "3"), ("3", "a"), ("a", "bc"), ("ab", "cd"), ("cd", "x")]
        );
        assert!(!pairs_word("four") && !pairs_word("é") && !pairs_word(""));
        assert_eq!(pair_token("of", "the"), "p2ofthe");
        assert_ne!(pair_token("ab", "c"), pair_token("a", "bc"));
    }
}
