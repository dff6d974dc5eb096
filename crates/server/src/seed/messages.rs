//! `throng seed --messages N`: N messages in one guild, for the search
//! benchmark (`throng-bench search`).
//!
//! Content is reproducible (from `--rng-seed`): 5-20 words each, drawn from
//! a vocabulary of [`VOCABULARY`] made-up words (consonant-vowel syllables,
//! so none is `https`, `com` or a number) with a Zipf distribution of
//! exponent 1: the most common word is in most messages, the rarest in a
//! few hundred of 10 million. Authors are uniform among the guild's
//! members, channels uniform among its channels; [`MENTION_PERCENT`] of the
//! messages start with a member's `<@id>` (stored in `mentions`, as a posted
//! message's are), [`LINK_PERCENT`] end with a link. Ids are snowflakes
//! spread evenly over the [`DAYS`] days before now, so date filters
//! (`min_id`) select a share of them.
//!
//! The rows are the ones a posted message makes (`guild::actor`'s post:
//! kind 0, no flags, `extra` with empty embeds, attachments and components,
//! a null nonce) and go through the store's message insert (search index
//! and `last_message_id` included) in batches of [`BATCH`], one transaction
//! each.
//!
//! While generating, the seeder counts how many messages each benchmark
//! query matches; the fixture gets the queries with those counts
//! (`"search": {"guild_id", "messages", "queries": [{"kind", "params",
//! "expected"}]}`), so the benchmark needs no vocabulary of its own and
//! checks each answer's `total_results`.

use std::collections::BTreeMap;

use protocol::id::DISCORD_EPOCH_MS;
use protocol::{ChannelId, GuildId, MessageId, UserId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use store::{BulkLoad, MessageRecord, Store};

/// Words in the vocabulary.
pub const VOCABULARY: usize = 5_000;
pub const MENTION_PERCENT: u32 = 3;
pub const LINK_PERCENT: u32 = 5;
/// The messages' ids cover this many days before now.
pub const DAYS: u64 = 365;
/// Messages per transaction.
pub const BATCH: usize = 50_000;
/// Variants of each query kind (the benchmark cycles through them).
const VARIANTS: usize = 8;

const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
const VOWELS: &[u8] = b"aeiou";

/// The word of rank `r` (0: the most common): the shortest words first.
pub fn word(r: usize) -> String {
    let n = CONSONANTS.len() * VOWELS.len();
    let (mut r, mut len) = (r, 1);
    while r >= n.pow(len) {
        r -= n.pow(len);
        len += 1;
    }
    let mut w = String::with_capacity(2 * len as usize);
    for _ in 0..len {
        let s = r % n;
        r /= n;
        w.push(CONSONANTS[s / VOWELS.len()] as char);
        w.push(VOWELS[s % VOWELS.len()] as char);
    }
    w
}

/// One benchmark query: its kind, its URL parameters, and how many seeded
/// messages it matches (`total_results` must say so).
#[derive(Clone, Debug, Serialize)]
pub struct SearchQuery {
    pub kind: &'static str,
    pub params: BTreeMap<&'static str, String>,
    pub expected: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SearchFixture {
    pub guild_id: GuildId,
    pub messages: u64,
    pub queries: Vec<SearchQuery>,
}

/// A query kind's name, URL parameters and what it asks, for one variant.
type Kind = (&'static str, Vec<(&'static str, String)>, Want);

/// What a query asks of a message, for counting.
#[derive(Clone, Debug)]
struct Want {
    /// Every word (ranks), or one phrase of two adjacent words.
    words: Vec<u16>,
    phrase: Option<(u16, u16)>,
    author: Option<UserId>,
    channel: Option<ChannelId>,
    link: bool,
    min_id: Option<u64>,
}

/// A generated message, as the counting sees it.
struct Draft<'a> {
    /// The body's words (ranks), in order.
    body: &'a [u16],
    link_word: Option<u16>,
    author: UserId,
    channel: ChannelId,
    id: u64,
}

impl Want {
    fn matches(&self, d: &Draft) -> bool {
        let has = |w: u16| d.body.contains(&w) || d.link_word == Some(w);
        self.words.iter().all(|&w| has(w))
            && self.phrase.is_none_or(|(a, b)| d.body.windows(2).any(|p| p[0] == a && p[1] == b))
            && self.author.is_none_or(|a| a == d.author)
            && self.channel.is_none_or(|c| c == d.channel)
            && (!self.link || d.link_word.is_some())
            && self.min_id.is_none_or(|m| d.id > m)
    }
}

/// Generates the messages of one guild, batch by batch, counting matches.
pub struct MessageGen {
    rng: StdRng,
    words: Vec<String>,
    /// Cumulative Zipf weights, the last one 1.
    cdf: Vec<f64>,
    guild: GuildId,
    channels: Vec<ChannelId>,
    members: Vec<UserId>,
    total: u64,
    made: u64,
    /// Ms since the Discord epoch of the first message, and between two.
    start: u64,
    step: f64,
    node_bits: u64,
    queries: Vec<(SearchQuery, Want)>,
}

impl MessageGen {
    /// `total` messages in `guild`'s `channels` by its `members`, ids
    /// ending at `now_ms`; `worker` as the seeder's snowflakes have it.
    pub fn new(
        guild: GuildId,
        channels: Vec<ChannelId>,
        members: Vec<UserId>,
        total: u64,
        now_ms: u64,
        worker: u8,
        rng_seed: u64,
    ) -> MessageGen {
        assert!(!channels.is_empty() && !members.is_empty(), "messages need a channel and a member");
        let weights: Vec<f64> = (0..VOCABULARY).map(|r| 1.0 / (r + 1) as f64).collect();
        let sum: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / sum;
                acc
            })
            .collect();
        *cdf.last_mut().expect("a vocabulary") = 1.0;
        let span = DAYS * 86_400_000;
        let end = now_ms.saturating_sub(DISCORD_EPOCH_MS);
        let start = end.saturating_sub(span);
        let step = span as f64 / total.max(1) as f64;
        // Ids of the last 30 days: `min_id` of the "recent" queries.
        let recent = (end.saturating_sub(30 * 86_400_000)) << 22;
        let mut g = MessageGen {
            rng: StdRng::seed_from_u64(rng_seed ^ 0x5eed_3e55),
            words: (0..VOCABULARY).map(word).collect(),
            cdf,
            guild,
            channels,
            members,
            total,
            made: 0,
            start,
            step,
            // Process 29: apart from the seeder's other ids (30) and a server's.
            node_bits: (u64::from(worker & 0x1f) << 17) | (29 << 12),
            queries: Vec::new(),
        };
        let plain = Want { words: vec![], phrase: None, author: None, channel: None, link: false, min_id: None };
        for v in 0..VARIANTS {
            let (common, medium, rare) = (10 + v as u16, 300 + v as u16, 3_000 + v as u16);
            let (pa, pb) = (20 + v as u16, 40 + v as u16);
            let author = g.members[(v * 37) % g.members.len()];
            let channel = g.channels[v % g.channels.len()];
            let linked = 100 + v as u16;
            let w = |r: u16| g.words[r as usize].clone();
            let kinds: [Kind; 7] = [
                ("common_word", vec![("content", w(common))], Want { words: vec![common], ..plain.clone() }),
                ("medium_word", vec![("content", w(medium))], Want { words: vec![medium], ..plain.clone() }),
                ("rare_word", vec![("content", w(rare))], Want { words: vec![rare], ..plain.clone() }),
                ("phrase", vec![("content", format!("\"{} {}\"", w(pa), w(pb)))], Want { phrase: Some((pa, pb)), ..plain.clone() }),
                (
                    "word_author",
                    vec![("content", w(common)), ("author_id", author.to_string())],
                    Want { words: vec![common], author: Some(author), ..plain.clone() },
                ),
                (
                    "word_channel_link",
                    vec![("content", w(linked)), ("channel_id", channel.to_string()), ("has", "link".into())],
                    Want { words: vec![linked], channel: Some(channel), link: true, ..plain.clone() },
                ),
                (
                    "word_recent",
                    vec![("content", w(medium)), ("min_id", recent.to_string())],
                    Want { words: vec![medium], min_id: Some(recent), ..plain.clone() },
                ),
            ];
            for (kind, params, want) in kinds {
                g.queries.push((SearchQuery { kind, params: params.into_iter().collect(), expected: 0 }, want));
            }
        }
        g.queries.sort_by_key(|(q, _)| q.kind);
        g
    }

    fn pick_word(&mut self) -> u16 {
        let x: f64 = self.rng.gen();
        self.cdf.partition_point(|&c| c < x).min(VOCABULARY - 1) as u16
    }

    /// The next `n` messages (fewer at the end; none when done).
    pub fn batch(&mut self, n: usize) -> Vec<MessageRecord> {
        let n = n.min((self.total - self.made) as usize);
        let mut out = Vec::with_capacity(n);
        let mut body: Vec<u16> = Vec::with_capacity(20);
        for _ in 0..n {
            let k = self.made;
            self.made += 1;
            let ts = self.start + (k as f64 * self.step) as u64;
            let id = (ts << 22) | self.node_bits | (k & 0xfff);
            let author = self.members[self.rng.gen_range(0..self.members.len())];
            let channel = self.channels[self.rng.gen_range(0..self.channels.len())];
            let len = self.rng.gen_range(5..=20);
            body.clear();
            for _ in 0..len {
                let w = self.pick_word();
                body.push(w);
            }
            let mention = (self.rng.gen_range(0..100) < MENTION_PERCENT).then(|| self.members[self.rng.gen_range(0..self.members.len())]);
            let link_word = (self.rng.gen_range(0..100) < LINK_PERCENT).then(|| self.pick_word());
            let mut content = String::with_capacity(len * 6 + 48);
            if let Some(u) = mention {
                content.push_str(&format!("<@{u}> "));
            }
            for (j, &w) in body.iter().enumerate() {
                if j > 0 {
                    content.push(' ');
                }
                content.push_str(&self.words[w as usize]);
            }
            if let Some(w) = link_word {
                content.push_str(" https://example.com/");
                content.push_str(&self.words[w as usize]);
            }
            let draft = Draft { body: &body, link_word, author, channel, id };
            for (q, want) in &mut self.queries {
                if want.matches(&draft) {
                    q.expected += 1;
                }
            }
            out.push(MessageRecord {
                id: MessageId(id),
                channel_id: channel,
                guild_id: Some(self.guild),
                author_id: author,
                content,
                edited_at: None,
                kind: 0,
                flags: 0,
                tts: false,
                mention_everyone: false,
                mentions: mention.into_iter().collect(),
                reference: None,
                extra: serde_json::json!({"embeds": [], "attachments": [], "components": [], "nonce": null}),
            });
        }
        out
    }

    /// The queries with their counts (complete once every batch is made).
    pub fn fixture(&self) -> SearchFixture {
        SearchFixture { guild_id: self.guild, messages: self.made, queries: self.queries.iter().map(|(q, _)| q.clone()).collect() }
    }
}

/// Generates and inserts every message of `g`, a batch a transaction,
/// telling `progress` how many are in so far.
pub async fn load(store: &dyn Store, g: &mut MessageGen, mut progress: impl FnMut(u64)) -> store::Result<SearchFixture> {
    loop {
        let messages = g.batch(BATCH);
        if messages.is_empty() {
            return Ok(g.fixture());
        }
        store.bulk_load(&BulkLoad { messages, ..Default::default() }).await?;
        progress(g.made);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_distinct_syllables() {
        let words: Vec<String> = (0..VOCABULARY).map(word).collect();
        let set: std::collections::HashSet<&String> = words.iter().collect();
        assert_eq!(set.len(), VOCABULARY);
        assert_eq!(word(0), "ba");
        assert_eq!(word(70).len(), 4);
        assert!(words.iter().all(|w| w.bytes().all(|b| b.is_ascii_lowercase())));
    }

    #[test]
    fn generation_is_reproducible_and_counted() {
        let make = || {
            let mut g =
                MessageGen::new(GuildId(1), vec![ChannelId(2), ChannelId(3)], vec![UserId(4), UserId(5)], 3_000, 1_800_000_000_000, 0, 9);
            let a = g.batch(2_000);
            let b = g.batch(2_000);
            assert_eq!(b.len(), 1_000);
            assert!(g.batch(10).is_empty());
            (a.into_iter().chain(b).collect::<Vec<_>>(), g.fixture())
        };
        let (m1, f1) = make();
        let (m2, _) = make();
        assert_eq!(m1, m2);
        assert!(m1.windows(2).all(|p| p[0].id < p[1].id), "ids ascend");
        let common = f1.queries.iter().find(|q| q.kind == "common_word").unwrap();
        let w = &common.params["content"];
        let n = m1.iter().filter(|m| m.content.split(|c: char| !c.is_alphanumeric()).any(|t| t == w)).count();
        assert_eq!(common.expected, n as u64);
        assert!(n > 0);
        assert!(m1.iter().any(|m| !m.mentions.is_empty() && m.content.starts_with("<@")));
        assert!(m1.iter().any(|m| m.content.contains("https://example.com/")));
    }
}
