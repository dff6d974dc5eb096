//! Conformance of message search: words and phrases, authors, mentions,
//! links, id ranges, pins, pages and relevance, only in the channels asked
//! for; an edit changes what finds a message and a delete removes it.

use protocol::{ChannelId, GuildId, MessageId, UserId};

use super::reactions::rows;
use super::{channel, message};
use crate::*;

fn words(s: &str) -> Vec<Vec<String>> {
    s.split(' ').map(|w| vec![w.to_string()]).collect()
}

pub(super) async fn search(s: &dyn Store) {
    assert_eq!(
        rows(s, vec![Change::CreateChannel(channel(150, Some(100), 0, None)), Change::CreateChannel(channel(151, Some(100), 0, None))])
            .await,
        vec![1, 1]
    );
    let texts = [
        (9_001, 150, 1, "Hello brave new world", vec![2]),
        (9_002, 150, 2, "the world is brave", vec![]),
        (9_003, 151, 1, "hello from another channel", vec![]),
        (9_004, 150, 3, "see https://example.com/brave", vec![2, 3]),
    ];
    for (id, c, author, text, mentioned) in &texts {
        let mut m = message(*id, *c, *author, text);
        m.mentions = mentioned.iter().map(|&u| UserId(u)).collect();
        // The last through the group commit's batch (SQLite indexes each
        // insert path on its own).
        if *id == 9_004 {
            assert_eq!(s.create_messages(&[(0, m)]).await.unwrap(), vec![true]);
        } else {
            s.create_message(&m).await.unwrap();
        }
    }
    let both = vec![ChannelId(150), ChannelId(151)];
    let q = |f: &dyn Fn(&mut SearchQuery)| {
        let mut q = SearchQuery { channels: both.clone(), guild: Some(GuildId(100)), limit: 25, ..Default::default() };
        f(&mut q);
        q
    };
    // Every query also with PostgreSQL's window (`SearchQuery::window`)
    // of each size from none to more than every message, and with short
    // pages (which a small window can hold): the same answers.
    let found = |q: SearchQuery| async move {
        let mut first = None;
        for (limit, offset) in [(q.limit, q.offset), (1, 0), (2, 0), (1, 1)] {
            let mut answers = Vec::new();
            for window in [0, 1, 2, 3, 8_192] {
                let (total, ms) = s.search_messages(&SearchQuery { window, limit, offset, ..q.clone() }).await.unwrap();
                answers.push((total, ms.into_iter().map(|m| m.id.0).collect::<Vec<_>>()));
            }
            assert!(answers.windows(2).all(|w| w[0] == w[1]), "{q:?}, limit {limit}, offset {offset}: the window changed it: {answers:?}");
            first.get_or_insert(answers.swap_remove(0));
        }
        first.unwrap()
    };
    assert_eq!(found(q(&|q| q.terms = words("brave"))).await, (3, vec![9_004, 9_002, 9_001]), "a word, newest first");
    assert_eq!(found(q(&|q| q.terms = words("BRAVE world"))).await, (2, vec![9_002, 9_001]), "every word, any case");
    assert_eq!(found(q(&|q| q.terms = vec![vec!["brave".into(), "new".into()]])).await, (1, vec![9_001]), "a phrase");
    assert_eq!(found(q(&|q| q.terms = vec![vec!["world".into(), "brave".into()]])).await.0, 0, "a phrase's order counts");
    assert_eq!(
        found(q(&|q| (q.terms, q.channels) = (words("hello"), vec![ChannelId(150)]))).await,
        (1, vec![9_001]),
        "only the channels asked"
    );
    assert_eq!(found(q(&|q| q.channels = vec![])).await, (0, vec![]), "no channels, nothing");
    assert_eq!(found(q(&|q| q.authors = vec![UserId(1)])).await, (2, vec![9_003, 9_001]));
    assert_eq!(found(q(&|q| q.mentions = vec![UserId(2)])).await, (2, vec![9_004, 9_001]));
    assert_eq!(found(q(&|q| q.mentions = vec![UserId(2), UserId(3)])).await, (1, vec![9_004]), "every mention asked");
    assert_eq!(found(q(&|q| q.has = vec![Has::Link])).await, (1, vec![9_004]));
    assert_eq!(found(q(&|q| (q.min_id, q.max_id) = (Some(MessageId(9_001)), Some(MessageId(9_004))))).await, (2, vec![9_003, 9_002]));
    assert_eq!(found(q(&|q| (q.terms, q.ascending) = (words("hello"), true))).await, (2, vec![9_001, 9_003]));
    assert_eq!(found(q(&|q| (q.terms, q.limit, q.offset) = (words("brave"), 1, 1))).await, (3, vec![9_002]), "a page, the total of all");
    assert_eq!(
        found(q(&|q| (q.terms, q.limit, q.count_max) = (words("brave"), 1, 1))).await,
        (2, vec![9_004]),
        "the count stops at count_max, but one past the page"
    );
    assert_eq!(found(q(&|q| (q.terms, q.count_max) = (words("brave"), 2))).await.0, 3, "never below the page");
    assert_eq!(found(q(&|q| (q.terms, q.authors) = (words("brave"), vec![UserId(2), UserId(3)]))).await, (2, vec![9_004, 9_002]));
    assert_eq!(found(q(&|q| (q.terms, q.has) = (words("brave"), vec![Has::Link]))).await, (1, vec![9_004]));

    // A guild searched as the API does: the guild less its hidden
    // channels (as index scope). A same-word message in another guild,
    // and one in the hidden channel, are not found or counted.
    guild_with_message(s, (9_160, 9_161), message(9_005, 9_161, 1, "hello brave world")).await;
    let all: Vec<ChannelId> = s.channels_of_guild(GuildId(100)).await.unwrap().into_iter().map(|c| c.id).collect();
    let scoped = |hidden: Vec<ChannelId>, f: &dyn Fn(&mut SearchQuery)| {
        q(&|q| {
            q.channels = all.iter().copied().filter(|c| !hidden.contains(c)).collect();
            q.hidden = Some(hidden.clone());
            f(q)
        })
    };
    assert_eq!(found(scoped(vec![], &|q| q.terms = words("brave"))).await, (3, vec![9_004, 9_002, 9_001]), "the whole guild");
    assert_eq!(found(scoped(vec![ChannelId(150)], &|q| q.terms = words("hello"))).await, (1, vec![9_003]), "less a hidden channel");
    assert_eq!(
        found(scoped(vec![], &|q| (q.authors, q.min_id, q.max_id) = (vec![UserId(1)], Some(MessageId(9_000)), Some(MessageId(9_010)))))
            .await,
        (2, vec![9_003, 9_001]),
        "scope alone, no words"
    );
    let there = |f: &dyn Fn(&mut SearchQuery)| q(&|q| ((q.guild, q.channels) = (Some(GuildId(9_160)), vec![ChannelId(9_161)]), f(q)).1);
    assert_eq!(found(there(&|q| q.terms = words("brave"))).await, (1, vec![9_005]));
    assert_eq!(found(there(&|q| q.authors = vec![UserId(1)])).await, (1, vec![9_005]));
    assert_eq!(
        found(scoped(vec![], &|q| (q.terms, q.has) = (words("brave"), vec![Has::Link]))).await,
        (1, vec![9_004]),
        "a link, whole guild"
    );
    assert_eq!(
        found(scoped(vec![ChannelId(150)], &|q| (q.terms, q.authors) = (words("hello"), vec![UserId(1)]))).await,
        (1, vec![9_003]),
        "an author, less a hidden channel"
    );
    assert_eq!(
        found(scoped(vec![], &|q| (q.terms, q.authors) = (words("brave"), vec![UserId(1)]))).await,
        (1, vec![9_001]),
        "an author's messages in another guild are not this guild's"
    );
    // A DM (`dms::run`'s): the author within the channel.
    let dm =
        |author: UserId| q(&|q| (q.guild, q.channels, q.terms, q.authors) = (None, vec![ChannelId(70_100)], words("hi"), vec![author]));
    assert_eq!(found(dm(super::dms::A)).await, (1, vec![70_110]));
    assert_eq!(found(dm(super::dms::B)).await.0, 0);

    let (_, by_relevance) = found(q(&|q| (q.terms, q.by_relevance) = (words("brave"), true))).await;
    assert_eq!(by_relevance.len(), 3);
    assert_eq!(rows(s, vec![Change::PinMessage { channel: ChannelId(150), message: MessageId(9_002), at: 1, max: 50 }]).await, vec![1]);
    assert_eq!(found(q(&|q| q.pinned = Some(true))).await, (1, vec![9_002]));
    assert_eq!(found(q(&|q| q.pinned = Some(false))).await.0, 3);

    // Phrases of short words (one index token each pair, as
    // `word_pairs`): adjacency and order count, across punctuation and
    // case as for any phrase; a longer phrase is its pairs and positions.
    let phrase = |p: &str| vec![p.split(' ').map(str::to_string).collect::<Vec<_>>()];
    s.create_message(&message(9_006, 150, 3, "so it is. Is it SO?")).await.unwrap();
    assert_eq!(found(q(&|q| q.terms = phrase("it is"))).await, (1, vec![9_006]), "a pair");
    assert_eq!(found(q(&|q| q.terms = phrase("is is"))).await, (1, vec![9_006]), "a pair across a full stop, any case");
    assert_eq!(found(q(&|q| q.terms = phrase("so is"))).await.0, 0, "a pair's words must be adjacent");
    assert_eq!(found(q(&|q| q.terms = phrase("is so"))).await.0, 0);
    assert_eq!(found(q(&|q| q.terms = phrase("it is is it"))).await, (1, vec![9_006]), "a longer phrase");
    assert_eq!(found(q(&|q| q.terms = phrase("it is it"))).await.0, 0, "every pair there, not in a row");
    assert_eq!(found(q(&|q| q.terms = phrase("the world is"))).await, (1, vec![9_002]), "a phrase with a long word");
    assert_eq!(found(q(&|q| (q.terms, q.by_relevance) = (phrase("it is"), true))).await, (1, vec![9_006]), "by relevance");
    assert_eq!(found(scoped(vec![], &|q| q.terms = phrase("it is"))).await, (1, vec![9_006]), "a pair over the whole guild");
    assert_eq!(found(scoped(vec![ChannelId(150)], &|q| q.terms = phrase("it is"))).await.0, 0, "less a hidden channel");
    assert_eq!(found(q(&|q| (q.terms, q.channels) = (phrase("it is"), vec![ChannelId(151)]))).await.0, 0, "another channel");
    let mut edited = message(9_006, 150, 3, "so it was");
    edited.mentions = vec![];
    assert_eq!(rows(s, vec![Change::UpdateMessage(edited)]).await, vec![1]);
    assert_eq!(found(q(&|q| q.terms = phrase("it is"))).await.0, 0, "an edit drops its old pairs");
    assert_eq!(found(q(&|q| q.terms = phrase("it was"))).await, (1, vec![9_006]), "and has its new ones");
    assert_eq!(rows(s, vec![Change::DeleteMessage { channel: ChannelId(150), id: MessageId(9_006) }]).await, vec![1]);
    assert_eq!(found(q(&|q| q.terms = phrase("it was"))).await.0, 0);

    // An edit: found by its new words only. A delete: found no more.
    let mut edited = message(9_002, 150, 2, "rewritten entirely");
    edited.mentions = vec![];
    assert_eq!(rows(s, vec![Change::UpdateMessage(edited)]).await, vec![1]);
    assert_eq!(found(q(&|q| q.terms = words("rewritten"))).await, (1, vec![9_002]));
    // The edit's scope tokens match the insert's: author, guild, and a
    // link the edit adds.
    assert_eq!(found(q(&|q| (q.terms, q.authors) = (words("rewritten"), vec![UserId(2)]))).await, (1, vec![9_002]));
    assert_eq!(found(scoped(vec![], &|q| q.terms = words("rewritten"))).await, (1, vec![9_002]));
    let mut linked = message(9_003, 151, 1, "hello from HTTPS://example.org");
    linked.mentions = vec![];
    assert_eq!(rows(s, vec![Change::UpdateMessage(linked)]).await, vec![1]);
    assert_eq!(found(q(&|q| (q.terms, q.has) = (words("hello"), vec![Has::Link]))).await, (1, vec![9_003]));
    assert_eq!(found(q(&|q| q.terms = words("brave"))).await, (2, vec![9_004, 9_001]));
    assert_eq!(rows(s, vec![Change::DeleteMessage { channel: ChannelId(150), id: MessageId(9_001) }]).await, vec![1]);
    assert_eq!(found(q(&|q| q.terms = words("brave"))).await, (1, vec![9_004]));
    assert_eq!(found(q(&|q| q.terms = words("hello"))).await, (1, vec![9_003]));
}

/// A guild's message to search for after a rebuild of the index
/// ([`rebuilt_index_finds`]; SQLite rebuilds when a migration asks).
pub async fn rebuild_sample(s: &dyn Store) {
    guild_with_message(s, (9_170, 9_171), message(9_172, 9_171, 4, "and so it is, see http://x.y")).await;
}

/// `n` messages posted one at a time in a guild of their own, each in a
/// commit (a segment of SQLite's index) of its own.
pub async fn one_commit_each(s: &dyn Store, n: u64) {
    guild_with_message(s, (9_270, 9_271), message(9_272, 9_271, 4, "a first one")).await;
    for i in 1..n {
        let mut m = message(9_272 + i, 9_271, 4, "and so on");
        m.guild_id = Some(GuildId(9_270));
        s.create_message(&m).await.unwrap();
    }
}

/// A guild of its own with one channel, and `m` posted there.
async fn guild_with_message(s: &dyn Store, (guild, channel_id): (u64, u64), mut m: MessageRecord) {
    let g = GuildRecord {
        id: GuildId(guild),
        name: format!("g{guild}"),
        icon: None,
        description: None,
        owner_id: UserId(1),
        system_channel_id: None,
        created_at: 1,
    };
    s.create_guild(&NewGuild { guild: g, roles: vec![], channels: vec![channel(channel_id, Some(guild), 0, None)], members: vec![] })
        .await
        .unwrap();
    m.guild_id = Some(GuildId(guild));
    s.create_message(&m).await.unwrap();
}

/// [`rebuild_sample`]'s message is found by its words, a pair, its author
/// in its guild, its link and its guild's token.
pub async fn rebuilt_index_finds(s: &dyn Store) {
    let q = |f: &dyn Fn(&mut SearchQuery)| {
        let mut q = SearchQuery {
            channels: vec![ChannelId(9_171)],
            guild: Some(GuildId(9_170)),
            hidden: Some(vec![]),
            limit: 25,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    for (what, q) in [
        ("a word", q(&|q| q.terms = words("see"))),
        ("a pair", q(&|q| q.terms = vec![vec!["it".into(), "is".into()]])),
        ("an author", q(&|q| q.authors = vec![UserId(4)])),
        ("a link", q(&|q| q.has = vec![Has::Link])),
        ("the guild", q(&|q| q.terms = words("and"))),
    ] {
        let (total, ms) = s.search_messages(&q).await.unwrap();
        assert_eq!((total, ms.iter().map(|m| m.id.0).collect::<Vec<_>>()), (1, vec![9_172]), "{what}");
    }
}
