//! Batched store reads: requests that arrive while a statement is running
//! are answered together by the next one. With SQLite each statement and
//! each row is a round trip to the connection's worker thread (wake-ups on
//! both sides); under an identify ramp or a cold start that hand-off, not
//! the query, was the cost:
//! - IDENTIFY's token lookup (user, guild ids, application) for up to 256
//!   tokens per statement;
//! - guild loads for up to 64 guilds per round of statements. Loading 1,000
//!   guilds of ~95 members one by one took ~930 ms of CPU (0.44 s wall);
//!   batched, ~250 ms (0.14 s);
//! - the deduplication keys every actor reads back when it starts, for up
//!   to 64 actors per statement (an IDENTIFY ramp into cold guilds starts
//!   an actor per session's guild).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use protocol::{ActorKey, ChannelId, GuildId, MessageId, UserId};
use store::{DmChannel, GuildSnapshot, IdentifyRecord, Store, StoreError};
use tokio::sync::{mpsc, oneshot};

type Reply<V> = oneshot::Sender<Result<Option<V>, BatchError>>;

/// Why a batched read has no answer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BatchError {
    /// The statement failed; every read of its batch gets the same error.
    #[error("batched store read failed")]
    Store(#[source] Arc<StoreError>),
    /// The batching task has ended (the node is shutting down).
    #[error("batched reads stopped")]
    Stopped,
}

impl From<StoreError> for BatchError {
    fn from(e: StoreError) -> Self {
        BatchError::Store(Arc::new(e))
    }
}

/// Most tokens one IDENTIFY lookup statement carries.
const IDENTIFY_BATCH: usize = 256;
/// Most guilds one load carries.
const GUILD_BATCH: usize = 64;

/// A queue of keyed reads answered in batches by one task.
pub struct Batcher<K, V> {
    /// Unbounded here because every caller is bounded where it starts:
    /// IDENTIFY and RESUME by their admission (op 9 beyond it), guild
    /// loads and claims by one per guild actor starting, DM lookups by
    /// IDENTIFY's admission.
    tx: mpsc::UnboundedSender<(K, Reply<V>)>,
}

impl<K, V> Batcher<K, V>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Starts the batching task on the current runtime; it ends when the
    /// `Batcher` is dropped. `read` gets distinct keys, at most `max` of
    /// them, and returns what it found; a key it leaves out is answered
    /// `None`. Callers bound how many reads wait (identify admission, one
    /// load per guild actor), so the queue needs no bound of its own.
    ///
    /// A read that finds the queue otherwise empty waits `linger` for
    /// others to share its statement (see `limits.read_linger_ms`); a
    /// queue that already holds several is read at once.
    pub fn start<F, Fut>(max: usize, linger: Duration, read: F) -> Self
    where
        F: Fn(Vec<K>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Vec<(K, V)>, BatchError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(max.max(1), linger, read, rx));
        Batcher { tx }
    }

    pub async fn get(&self, key: K) -> Result<Option<V>, BatchError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send((key, reply)).map_err(|_| BatchError::Stopped)?;
        rx.await.map_err(|_| BatchError::Stopped)?
    }
}

async fn run<K, V, F, Fut>(max: usize, linger: Duration, read: F, mut rx: mpsc::UnboundedReceiver<(K, Reply<V>)>)
where
    K: Hash + Eq + Clone + Send,
    V: Clone + Send,
    F: Fn(Vec<K>) -> Fut,
    Fut: Future<Output = Result<Vec<(K, V)>, BatchError>>,
{
    let mut batch: Vec<(K, Reply<V>)> = Vec::with_capacity(max);
    while crate::linger::gather(&mut rx, &mut batch, max, linger, |_| true).await {
        // The same key may be asked twice (one token on two sockets): read
        // it once, hand a copy to all but the last asker.
        let mut wanted: HashMap<K, usize> = HashMap::with_capacity(batch.len());
        for (k, _) in &batch {
            *wanted.entry(k.clone()).or_default() += 1;
        }
        let keys: Vec<K> = wanted.keys().cloned().collect();
        match read(keys).await {
            Ok(found) => {
                let mut found: HashMap<K, V> = found.into_iter().collect();
                for (k, reply) in batch.drain(..) {
                    let left = wanted.get_mut(&k).expect("every key was counted");
                    *left -= 1;
                    let v = if *left == 0 { found.remove(&k) } else { found.get(&k).cloned() };
                    let _gone_is_fine = reply.send(Ok(v));
                }
            }
            Err(e) => {
                for (_, reply) in batch.drain(..) {
                    let _gone_is_fine = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// IDENTIFY's lookup: the token's user, guild ids and application.
pub fn identify_lookups(store: Arc<dyn Store>, linger: Duration) -> Batcher<[u8; 32], IdentifyRecord> {
    Batcher::start(IDENTIFY_BATCH, linger, move |hashes: Vec<[u8; 32]>| {
        let store = store.clone();
        async move { store.identify_lookup(&hashes).await.map_err(BatchError::from) }
    })
}

/// Guild actors' first read: everything the guild holds.
pub fn guild_loads(store: Arc<dyn Store>, linger: Duration) -> Batcher<GuildId, GuildSnapshot> {
    Batcher::start(GUILD_BATCH, linger, move |ids: Vec<GuildId>| {
        let store = store.clone();
        async move {
            let snaps = store.load_guilds(&ids).await.map_err(BatchError::from)?;
            Ok(snaps.into_iter().map(|s| (s.guild.id, s)).collect())
        }
    })
}

/// What a starting actor asks of [`message_keys`]: its channels, the
/// window's start and the most keys it keeps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeysAsk {
    pub channels: Vec<ChannelId>,
    pub since: MessageId,
    pub max: u32,
}

/// A post's deduplication key as an actor keeps it: (id, author, key).
pub type KeyRow = (MessageId, UserId, String);

/// Most actors one key read carries.
const KEYS_BATCH: usize = 64;

/// Actors' deduplication keys (see `Store::recent_message_keys`): the
/// channels of every actor starting together in one statement, from the
/// earliest window start; each actor gets its own channels' rows from its
/// own start on, newest first, at most its `max`.
pub fn message_keys(store: Arc<dyn Store>, linger: Duration) -> Batcher<KeysAsk, Vec<KeyRow>> {
    Batcher::start(KEYS_BATCH, linger, move |asks: Vec<KeysAsk>| {
        let store = store.clone();
        async move {
            let mut channels: Vec<ChannelId> = asks.iter().flat_map(|a| a.channels.iter().copied()).collect();
            channels.sort_unstable();
            channels.dedup();
            let since = asks.iter().map(|a| a.since).min().unwrap_or(MessageId(0));
            let limit = asks.iter().fold(0u32, |n, a| n.saturating_add(a.max));
            let rows = store.recent_message_keys(&channels, since, limit).await.map_err(BatchError::from)?;
            Ok(split_keys(asks, &rows))
        }
    })
}

/// Each ask's share of one read's rows (newest first).
fn split_keys(asks: Vec<KeysAsk>, rows: &[(ChannelId, MessageId, UserId, String)]) -> Vec<(KeysAsk, Vec<KeyRow>)> {
    asks.into_iter()
        .map(|a| {
            let mine = rows
                .iter()
                .filter(|(c, id, _, _)| *id >= a.since && a.channels.contains(c))
                .take(a.max as usize)
                .map(|(_, id, author, key)| (*id, *author, key.clone()))
                .collect();
            (a, mine)
        })
        .collect()
}

/// Guild actors' claims in a cluster (see `Store::claim_guilds`): one
/// write transaction for every actor starting at about the same time
/// (after an IDENTIFY burst or a ring change, thousands).
pub fn guild_claims(store: Arc<dyn Store>, node: u64, linger: Duration) -> Batcher<ActorKey, u64> {
    Batcher::start(CLAIM_BATCH, linger, move |ids: Vec<ActorKey>| {
        let store = store.clone();
        async move { store.claim_guilds(&ids, node).await.map_err(BatchError::from) }
    })
}

/// Most guilds one claim transaction carries.
const CLAIM_BATCH: usize = 1024;

/// What a new session's READY needs, read together (see
/// [`session_starts`]).
#[derive(Clone, Debug)]
pub struct SessionStart {
    /// The token's user, guild ids and application.
    pub who: IdentifyRecord,
    /// READY's `private_channels`; empty unless asked for.
    pub dms: Vec<DmChannel>,
    /// READY's `read_state`: people only, `None` for a bot.
    pub read_states: Option<Vec<store::ReadState>>,
}

/// What IDENTIFY asks of [`session_starts`]: a token's hash, and whether
/// the session gets DMs (shard 0, or no sharding).
pub type StartAsk = ([u8; 32], bool);

/// IDENTIFY's reads, for IDENTIFYs arriving together: the tokens in one
/// statement, then the DMs and read states of the users found. One batch
/// round instead of three, each of which was a hand-off to this node's
/// batching task and back for every IDENTIFY.
pub fn session_starts(store: Arc<dyn Store>, linger: Duration) -> Batcher<StartAsk, SessionStart> {
    Batcher::start(IDENTIFY_BATCH, linger, move |asks: Vec<StartAsk>| {
        let store = store.clone();
        async move {
            // One token may be asked with and without DMs (two shards).
            let mut hashes: Vec<[u8; 32]> = asks.iter().map(|(h, _)| *h).collect();
            hashes.sort_unstable();
            hashes.dedup();
            let found: HashMap<[u8; 32], IdentifyRecord> = store.identify_lookup(&hashes).await?.into_iter().collect();
            let mut dm_users: Vec<UserId> =
                asks.iter().filter(|(_, dms)| *dms).filter_map(|(h, _)| found.get(h)).map(|w| w.user.id).collect();
            let mut people: Vec<UserId> = found.values().filter(|w| !w.user.bot).map(|w| w.user.id).collect();
            dm_users.sort_unstable();
            dm_users.dedup();
            people.sort_unstable();
            people.dedup();
            let (dms, states) = tokio::try_join!(
                async {
                    if dm_users.is_empty() {
                        Ok(Vec::new())
                    } else {
                        store.dms_of_users(&dm_users).await
                    }
                },
                async {
                    if people.is_empty() {
                        Ok(Vec::new())
                    } else {
                        store.read_states_of(&people).await
                    }
                },
            )?;
            let dms: HashMap<UserId, Vec<DmChannel>> = dms.into_iter().collect();
            let states: HashMap<UserId, Vec<store::ReadState>> = states.into_iter().collect();
            Ok(asks
                .into_iter()
                .filter_map(|ask| {
                    let who = found.get(&ask.0)?.clone();
                    let dms = if ask.1 { dms.get(&who.user.id).cloned().unwrap_or_default() } else { Vec::new() };
                    let read_states = (!who.user.bot).then(|| states.get(&who.user.id).cloned().unwrap_or_default());
                    Some((ask, SessionStart { who, dms, read_states }))
                })
                .collect())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// One read for several actors: each gets its own channels' keys,
    /// from its own window's start, at most its own count, newest first.
    #[test]
    fn one_key_read_is_shared_out_by_channel_window_and_count() {
        let row = |c: u64, id: u64| (ChannelId(c), MessageId(id), UserId(id), format!("k{id}"));
        // As the store returns them: newest first.
        let rows = [row(1, 90), row(2, 80), row(1, 70), row(3, 60), row(1, 50)];
        let ask = |channels: &[u64], since: u64, max: u32| KeysAsk {
            channels: channels.iter().map(|&c| ChannelId(c)).collect(),
            since: MessageId(since),
            max,
        };
        let got = split_keys(vec![ask(&[1], 0, 10), ask(&[1], 0, 2), ask(&[2, 3], 65, 10), ask(&[4], 0, 10)], &rows);
        let ids = |v: &Vec<KeyRow>| v.iter().map(|(id, _, _)| id.0).collect::<Vec<_>>();
        assert_eq!(ids(&got[0].1), [90, 70, 50]);
        assert_eq!(ids(&got[1].1), [90, 70], "at most its max");
        assert_eq!(ids(&got[2].1), [80], "its channels, from its since");
        assert!(got[3].1.is_empty());
        assert_eq!(got[2].1[0], (MessageId(80), UserId(80), "k80".to_string()));
    }

    #[tokio::test]
    async fn concurrent_reads_share_statements_and_repeated_keys_all_get_answers() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let b = Arc::new(Batcher::start(4, Duration::ZERO, move |keys: Vec<u32>| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                assert!(keys.len() <= 4, "a batch holds at most max keys");
                let mut sorted = keys.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), keys.len(), "keys are distinct");
                // Odd keys exist, even keys do not.
                Ok(keys.into_iter().filter(|k| k % 2 == 1).map(|k| (k, format!("v{k}"))).collect())
            }
        }));
        let mut js = tokio::task::JoinSet::new();
        for k in [1u32, 2, 3, 3, 5, 6, 7, 1, 9, 11] {
            let b = b.clone();
            js.spawn(async move { (k, b.get(k).await) });
        }
        let mut answers = Vec::new();
        while let Some(r) = js.join_next().await {
            answers.push(r.unwrap());
        }
        assert_eq!(answers.len(), 10);
        for (k, v) in answers {
            let want = (k % 2 == 1).then(|| format!("v{k}"));
            assert_eq!(v.unwrap(), want, "key {k}");
        }
        let n = calls.load(Ordering::SeqCst);
        assert!((3..10).contains(&n), "10 reads of 8 keys, 4 per batch: {n} statements");
    }

    #[tokio::test]
    async fn a_failed_read_fails_every_waiter_and_the_next_batch_still_runs() {
        let b = Batcher::start(8, Duration::ZERO, |keys: Vec<u32>| async move {
            if keys.contains(&0) {
                Err(BatchError::from(StoreError::Conflict))
            } else {
                Ok(keys.into_iter().map(|k| (k, k)).collect())
            }
        });
        let e = b.get(0).await.expect_err("the statement failed");
        let cause = std::error::Error::source(&e).expect("the store's error is the cause").to_string();
        assert_eq!(cause, StoreError::Conflict.to_string());
        assert_eq!(b.get(7).await.ok(), Some(Some(7)));
    }
}
