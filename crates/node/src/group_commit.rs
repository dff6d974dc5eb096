//! Group commit of new messages: one task takes every message queued while
//! the previous transaction ran and commits them together, then tells each
//! one's author (a guild actor) how it went. The same task commits guild
//! actors' other changes ([`store::Change`]), each in a transaction of its
//! own, in the order they were queued among the messages. With SQLite every statement is
//! a hand-off to the connection's thread; one transaction per message made
//! those hand-offs (futex wake-ups) the cost of the write path.
//!
//! The queue is bounded: a full queue refuses at once (the REST caller gets
//! 503 and `Retry-After`). A batch that a constraint refuses is retried one
//! message at a time, so one bad row (its channel deleted meanwhile) fails
//! alone. A batch that fails for the database's sake (locked past the busy
//! timeout, disk full, I/O) fails as a whole at once: every request in it
//! gets an error, and none was acknowledged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use protocol::ActorKey;
use store::{Change, MessageRecord, Store, StoreError};
use tokio::sync::mpsc;

/// How a queued message went.
#[derive(Debug)]
pub enum Outcome {
    Committed,
    /// Changes committed: the rows each touched, in order.
    Applied(Vec<u64>),
    /// Its guild has a newer owner: the actor that sent it is stale.
    Fenced,
    /// Not committed; every job of a failed transaction shares its error.
    Failed(Arc<StoreError>),
}

type Done = Box<dyn FnOnce(Outcome) + Send>;

struct Job {
    epoch: u64,
    work: Work,
    done: Done,
}

enum Work {
    Message(MessageRecord),
    Changes(ActorKey, Vec<Change>),
}

/// Counters for `/_throng/admin/stats` and the ingest benchmark.
#[derive(Default)]
pub struct WriterStats {
    /// Group commits of new messages, and the messages in them.
    pub commits: AtomicU64,
    pub rows: AtomicU64,
    /// Other guild changes committed (a transaction each).
    pub changes: AtomicU64,
    pub fenced: AtomicU64,
    pub failed: AtomicU64,
    /// How long each store transaction took (group commits and changes).
    pub commit_seconds: Latency,
}

/// Upper bounds (seconds) of the commit latency histogram's buckets: from
/// a group commit on a warm SQLite file (~1 ms) to a store in trouble
/// (the SQLite busy timeout is 20 s by default).
pub const COMMIT_BUCKETS: [f64; 12] = [0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 20.0];

/// A latency histogram of atomics (Prometheus' cumulative buckets are
/// summed when rendered): one `fetch_add` per bucket hit, no lock.
#[derive(Default)]
pub struct Latency {
    /// Observations per bucket of [`COMMIT_BUCKETS`], the last one above all.
    counts: [AtomicU64; COMMIT_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Latency {
    pub fn observe(&self, took: std::time::Duration) {
        let secs = took.as_secs_f64();
        let i = COMMIT_BUCKETS.iter().position(|&le| secs <= le).unwrap_or(COMMIT_BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(took.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Cumulative counts per bucket of [`COMMIT_BUCKETS`] then `+Inf`, and
    /// the sum in seconds.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut total = 0;
        let cumulative = self.counts.iter().map(|c| {
            total += c.load(Ordering::Relaxed);
            total
        });
        (cumulative.collect(), self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

pub struct Writer {
    tx: mpsc::Sender<Job>,
    pub stats: Arc<WriterStats>,
}

/// The queue is full: the caller refuses the write (503).
#[derive(Debug)]
pub struct Full;

impl Writer {
    /// Starts the writer task on the current runtime; it ends when the
    /// `Writer` is dropped and its queue is drained.
    /// A batch is what is queued when the previous transaction ends; a
    /// message queued alone waits `linger` for others to join it (up to
    /// `max_batch`).
    pub fn start(store: Arc<dyn Store>, capacity: usize, max_batch: usize, linger: std::time::Duration) -> Writer {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let stats = Arc::new(WriterStats::default());
        tokio::spawn(run(store, rx, max_batch.max(1), linger, stats.clone()));
        Writer { tx, stats }
    }

    /// Queues `message`, fenced by `epoch` (0: not fenced). `done` runs on
    /// the writer task once the batch holding it is committed or failed:
    /// it must not block.
    pub fn submit(&self, epoch: u64, message: MessageRecord, done: impl FnOnce(Outcome) + Send + 'static) -> Result<(), Full> {
        self.tx.try_send(Job { epoch, work: Work::Message(message), done: Box::new(done) }).map_err(|_| Full)
    }

    /// Queues `changes` of `guild`, fenced by `epoch`, to commit in one
    /// transaction after everything queued before them. `done` as in `submit`.
    pub fn submit_changes(
        &self,
        epoch: u64,
        key: ActorKey,
        changes: Vec<Change>,
        done: impl FnOnce(Outcome) + Send + 'static,
    ) -> Result<(), Full> {
        self.tx.try_send(Job { epoch, work: Work::Changes(key, changes), done: Box::new(done) }).map_err(|_| Full)
    }

    /// Messages waiting for a transaction.
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }
}

async fn run(store: Arc<dyn Store>, mut rx: mpsc::Receiver<Job>, max_batch: usize, linger: std::time::Duration, stats: Arc<WriterStats>) {
    let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
    while next_batch(&mut rx, &mut jobs, max_batch, linger).await {
        let mut queue = jobs.drain(..).peekable();
        while let Some(job) = queue.next() {
            match job.work {
                Work::Changes(guild, changes) => {
                    let outcome = match timed(&stats, store.apply_changes(job.epoch, guild, &changes)).await {
                        Ok(Some(rows)) => Outcome::Applied(rows),
                        Ok(None) => Outcome::Fenced,
                        Err(e) => {
                            tracing::error!(error = &e as &dyn std::error::Error, guild = %guild, "guild change not committed");
                            Outcome::Failed(Arc::new(e))
                        }
                    };
                    finish(&stats, job.done, outcome);
                }
                Work::Message(first) => {
                    // This message and the messages queued right after it.
                    let mut batch = vec![(job.epoch, first)];
                    let mut dones = vec![job.done];
                    while let Some(Job { work: Work::Message(_), .. }) = queue.peek() {
                        let Some(Job { epoch, work: Work::Message(m), done }) = queue.next() else { unreachable!("peeked a message") };
                        batch.push((epoch, m));
                        dones.push(done);
                    }
                    let outcomes = commit_messages(&*store, &batch, &stats).await;
                    for (done, outcome) in dones.into_iter().zip(outcomes) {
                        finish(&stats, done, outcome);
                    }
                }
            }
        }
    }
}

/// Waits for the next batch's jobs (false: the queue is closed). A lone
/// message waits `linger` for company; a queue that held more, or a lone
/// guild change, goes at once.
async fn next_batch(rx: &mut mpsc::Receiver<Job>, jobs: &mut Vec<Job>, max_batch: usize, linger: std::time::Duration) -> bool {
    crate::linger::gather(rx, jobs, max_batch, linger, |j| matches!(j.work, Work::Message(_))).await
}

/// Runs one store transaction, its time in `stats.commit_seconds`.
async fn timed<T>(stats: &WriterStats, transaction: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let done = transaction.await;
    stats.commit_seconds.observe(started.elapsed());
    done
}

/// One transaction for `batch`; one by one if a row spoils it.
async fn commit_messages(store: &dyn Store, batch: &[(u64, MessageRecord)], stats: &WriterStats) -> Vec<Outcome> {
    match timed(stats, store.create_messages(batch)).await {
        Ok(ok) => {
            stats.commits.fetch_add(1, Ordering::Relaxed);
            ok.into_iter().map(|ok| if ok { Outcome::Committed } else { Outcome::Fenced }).collect()
        }
        Err(e) if batch.len() == 1 || !e.is_row_error() => {
            tracing::error!(error = &e as &dyn std::error::Error, rows = batch.len(), "batch commit failed");
            let e = Arc::new(e);
            batch.iter().map(|_| Outcome::Failed(e.clone())).collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, rows = batch.len(), "batch commit failed; retrying one by one");
            let mut v = Vec::with_capacity(batch.len());
            for one in batch.chunks(1) {
                v.push(match timed(stats, store.create_messages(one)).await {
                    Ok(ok) if ok.first() == Some(&true) => Outcome::Committed,
                    Ok(_) => Outcome::Fenced,
                    Err(e) => Outcome::Failed(Arc::new(e)),
                });
            }
            stats.commits.fetch_add(v.len() as u64, Ordering::Relaxed);
            v
        }
    }
}

fn finish(stats: &WriterStats, done: Done, outcome: Outcome) {
    let counter = match outcome {
        Outcome::Committed => &stats.rows,
        Outcome::Applied(_) => &stats.changes,
        Outcome::Fenced => &stats.fenced,
        Outcome::Failed(_) => &stats.failed,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    done(outcome);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn message(id: u64) -> Job {
        let m = store::conformance::message(id, 1, 1, "");
        Job { epoch: 0, work: Work::Message(m), done: Box::new(|_| ()) }
    }

    /// Queues `first`; once the writer has taken it, two more messages.
    /// Returns the sizes of the batches `next_batch` makes of them.
    async fn batches(first: Job, linger: Duration) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel(16);
        tx.try_send(first).ok().unwrap();
        let mut sizes = Vec::new();
        let mut jobs = Vec::new();
        let later = async {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while tx.capacity() < tx.max_capacity() {
                assert!(std::time::Instant::now() < deadline, "the writer never took the first job");
                tokio::task::yield_now().await;
            }
            tx.try_send(message(2)).ok().unwrap();
            tx.try_send(message(3)).ok().unwrap();
        };
        let first_batch = async {
            assert!(next_batch(&mut rx, &mut jobs, 1024, linger).await);
            jobs.drain(..).count()
        };
        let (n, ()) = tokio::join!(first_batch, later);
        sizes.push(n);
        drop(tx);
        while next_batch(&mut rx, &mut jobs, 1024, linger).await {
            sizes.push(jobs.drain(..).count());
        }
        sizes
    }

    #[tokio::test]
    async fn a_lone_message_waits_the_linger_for_company() {
        assert_eq!(batches(message(1), Duration::from_secs(1)).await, vec![3]);
        assert_eq!(batches(message(1), Duration::ZERO).await, vec![1, 2], "without a linger the first goes alone");
        let change = Job { epoch: 0, work: Work::Changes(ActorKey::guild(protocol::GuildId(1)), Vec::new()), done: Box::new(|_| ()) };
        assert_eq!(batches(change, Duration::from_secs(1)).await, vec![1, 2], "a guild change does not wait");
    }

    #[test]
    fn latency_buckets_are_cumulative_with_the_sum_in_seconds() {
        let l = Latency::default();
        l.observe(Duration::from_micros(300)); // <= 0.5 ms
        l.observe(Duration::from_millis(3)); // <= 5 ms
        l.observe(Duration::from_millis(3));
        l.observe(Duration::from_secs(30)); // above every bound
        let (counts, sum) = l.snapshot();
        assert_eq!(counts.len(), COMMIT_BUCKETS.len() + 1);
        assert_eq!(&counts[..5], &[1, 1, 1, 3, 3]);
        assert_eq!(counts[COMMIT_BUCKETS.len() - 1], 3, "30 s is above 20 s");
        assert_eq!(counts[COMMIT_BUCKETS.len()], 4, "+Inf holds every observation");
        assert!((sum - 30.0063).abs() < 1e-6, "{sum}");
    }
}
