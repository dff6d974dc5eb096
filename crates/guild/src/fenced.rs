//! The shell every actor on the ring shares, a guild's and a DM's: its key
//! and mailbox, the ownership epoch it claimed, the group-commit writer's
//! answers coming back to it, and when it stops.
//!
//! An actor is fenced: in a cluster it first claims its key in the store
//! (a new epoch), and the writer commits its jobs only while no other node
//! has claimed the key since. A job refused that way means another node
//! owns the actor now: this one takes nothing more, answers what is queued
//! "retry", and ends once every job it handed the writer is answered.

use std::sync::Arc;

use bytes::Bytes;
use protocol::{model, ActorKey, ChannelId, UserId};
use store::{Change, MessageRecord};
use tokio::sync::mpsc;

use super::keys::{Check, Keys};
use super::GuildMsg;
use fanout::encode;
use node::group_commit::{Full, Outcome};
use node::route::{OpReply, PostReply, ReplyTo};
use node::Node;

/// Stores a post's deduplication key in its message's `extra` (never shown).
pub(crate) fn keep_key(extra: &mut serde_json::Value, key: Option<&str>) {
    let Some(key) = key else { return };
    if extra.is_null() {
        *extra = serde_json::json!({});
    }
    if let Some(o) = extra.as_object_mut() {
        o.insert(store::DEDUP_FIELD.into(), key.into());
    }
}

/// What an actor handed the writer, and whom to answer.
pub(crate) enum Job<T> {
    /// A new message, encoded once, fanned out once committed; with its
    /// author and deduplication key, if it has one.
    Message { message: Arc<model::Message>, body: Bytes, reply: ReplyTo, key: Option<(UserId, String)> },
    /// Changes, and what to do in commit order once they are committed.
    Op { then: T, reply: ReplyTo },
}

/// A job the writer committed, back at its actor.
pub(crate) enum Done<T> {
    Message {
        message: Arc<model::Message>,
        body: Bytes,
        reply: ReplyTo,
    },
    /// `rows`: the rows each change touched, in order.
    Op {
        rows: Vec<u64>,
        then: T,
        reply: ReplyTo,
    },
}

impl<T> Job<T> {
    fn key(&self) -> Option<(UserId, String)> {
        match self {
            Job::Message { key, .. } => key.clone(),
            Job::Op { .. } => None,
        }
    }

    fn reply(&self) -> ReplyTo {
        match self {
            Job::Message { reply, .. } | Job::Op { reply, .. } => *reply,
        }
    }

    /// The answer to a job that was not committed: "retry" (fenced, or the
    /// writer's queue full) or the store's error.
    fn refusal(&self, error: Option<String>) -> Bytes {
        match (self, error) {
            (Job::Message { .. }, None) => encode(&PostReply::Retry),
            (Job::Message { .. }, Some(e)) => encode(&PostReply::Failed(e)),
            (Job::Op { .. }, None) => encode(&OpReply::Retry),
            (Job::Op { .. }, Some(e)) => encode(&OpReply::Failed(e)),
        }
    }
}

pub(crate) struct Core<T> {
    pub(crate) node: Arc<Node>,
    /// The actor's key on the router, the ring and the ownership table.
    pub(crate) key: ActorKey,
    pub(crate) rx: mpsc::Receiver<GuildMsg>,
    /// The ownership epoch this actor claimed (a cluster; 0 alone).
    pub(crate) epoch: u64,
    /// The writer's answers, one per job this actor handed it (`inflight`
    /// of them): bounded by the writer's own bounded queue
    /// (`limits.write_queue`), which refuses jobs beyond it.
    answers_tx: mpsc::UnboundedSender<(Outcome, Job<T>)>,
    answers_rx: mpsc::UnboundedReceiver<(Outcome, Job<T>)>,
    inflight: usize,
    /// Posts' deduplication keys (see `keys`).
    keys: Keys,
}

/// What an accepted action of actor `A` with state `S` does: `changes`
/// (none: nothing to commit) and, once they are committed, `then` with the
/// rows each touched: apply them to the state, fan the events out, answer.
pub(crate) struct Plan<A, S> {
    pub changes: Vec<Change>,
    pub then: Then<A, S>,
}

/// Runs on the actor after the commit.
pub(crate) type Then<A, S> = Box<dyn FnOnce(&mut A, &mut S, &[u64]) -> OpReply + Send>;

impl<A, S> Plan<A, S> {
    pub fn new(changes: Vec<Change>, then: impl FnOnce(&mut A, &mut S, &[u64]) -> OpReply + Send + 'static) -> Self {
        Plan { changes, then: Box::new(then) }
    }

    /// Nothing to commit: `then` runs at once.
    pub fn now(then: impl FnOnce(&mut A, &mut S) -> OpReply + Send + 'static) -> Self {
        Plan::new(Vec::new(), move |a, st, _| then(a, st))
    }

    /// This plan, then, if it succeeded, `after` for the answer instead.
    pub fn and_then(self, after: impl FnOnce(&mut A, &mut S) -> OpReply + Send + 'static) -> Self
    where
        A: 'static,
        S: 'static,
    {
        let then = self.then;
        Plan::new(self.changes, move |a, st, rows| {
            let r = then(a, st, rows);
            if matches!(r, OpReply::Done { .. }) {
                after(a, st)
            } else {
                r
            }
        })
    }
}

/// An actor built on a [`Core`]: what it does with a message and with a
/// committed job. Either returns false when the actor must stop.
pub(crate) trait Fenced {
    type State;
    type Then: Send + 'static;
    fn core(&mut self) -> &mut Core<Self::Then>;
    fn handle(&mut self, st: &mut Self::State, msg: GuildMsg) -> bool;
    fn committed(&mut self, st: &mut Self::State, done: Done<Self::Then>) -> bool;
}

enum Next<T> {
    Stop,
    Answer(Outcome, Job<T>),
    Msg(Option<GuildMsg>),
}

impl<T: Send + 'static> Core<T> {
    pub(crate) fn new(node: Arc<Node>, key: ActorKey, rx: mpsc::Receiver<GuildMsg>) -> Self {
        let (answers_tx, answers_rx) = mpsc::unbounded_channel();
        let keys = Keys::new(node.config.limits.nonce_window_ms, node.config.limits.nonce_keys_max);
        Core { node, key, rx, epoch: 0, answers_tx, answers_rx, inflight: 0, keys }
    }

    /// Reads back the deduplication keys of the posts committed in
    /// `channels` within the window (by a previous owner, or before a
    /// restart). False if the store could not say: the actor does not
    /// start (a post could be committed twice).
    pub(crate) async fn load_keys(&mut self, channels: &[ChannelId]) -> bool {
        let limits = &self.node.config.limits;
        let since = self.keys.since(node::auth::now_ms());
        let max = u32::try_from(limits.nonce_keys_max).unwrap_or(u32::MAX);
        let ask = node::batch::KeysAsk { channels: channels.to_vec(), since, max };
        match self.node.message_keys.get(ask).await {
            Ok(rows) => {
                self.keys.load(rows.unwrap_or_default());
                true
            }
            Err(e) => {
                tracing::error!(actor = %self.key, error = %e, "deduplication keys not read; actor stops");
                false
            }
        }
    }

    /// Whether a post of `author` with `key` (answered at `reply`) is to
    /// be committed. If not, it is answered here: with the committed
    /// message's id, or with the first post's answer once it comes.
    pub(crate) fn first_post(&mut self, author: UserId, key: Option<&str>, reply: ReplyTo) -> bool {
        let Some(key) = key else { return true };
        match self.keys.check(author, key, reply) {
            Check::New => true,
            Check::Waiting => false,
            Check::Committed(id) => {
                self.node.guilds.reply(reply, encode(&PostReply::Duplicate(id)));
                false
            }
        }
    }

    /// A message committed: the repeats of its post waiting for it get its answer.
    fn message_committed(&mut self, key: Option<(UserId, String)>, message: &model::Message, body: &Bytes) {
        let Some((author, key)) = key else { return };
        let waiting = self.keys.committed(author, &key, message.id);
        if !waiting.is_empty() {
            let answer = PostReply::ok_bytes(body);
            for r in waiting {
                self.node.guilds.reply(r, answer.clone());
            }
        }
    }

    /// In a cluster, takes the key over in the store: from now on writes of
    /// any previous owner are refused. False if the claim failed (the actor
    /// does not start).
    pub(crate) async fn claim(&mut self) -> bool {
        if self.node.config.nats.is_none() {
            return true;
        }
        // Batched with other actors starting now (one transaction).
        match Box::pin(self.node.guild_claims.get(self.key)).await {
            Ok(Some(epoch)) => {
                self.epoch = epoch;
                true
            }
            Ok(None) => {
                tracing::error!(actor = %self.key, "claim returned no epoch");
                false
            }
            Err(e) => {
                tracing::error!(actor = %self.key, error = %e, "claim failed");
                false
            }
        }
    }

    /// Hands a new message to the writer, fenced by the epoch.
    pub(crate) fn submit_message(&mut self, rec: MessageRecord, job: Job<T>) {
        let (tx, reply, refusal, key) = (self.answers_tx.clone(), job.reply(), job.refusal(None), job.key());
        let done = move |outcome| {
            // The actor waits for every job it handed over before it ends.
            let _ = tx.send((outcome, job));
        };
        match self.node.writer.submit(self.epoch, rec, done) {
            Ok(()) => self.inflight += 1,
            Err(Full) => self.refused(reply, key, refusal),
        }
    }

    /// Hands changes to the writer (in one transaction), fenced by the epoch.
    pub(crate) fn submit_changes(&mut self, changes: Vec<Change>, job: Job<T>) {
        let (tx, reply, refusal, key) = (self.answers_tx.clone(), job.reply(), job.refusal(None), job.key());
        let done = move |outcome| {
            let _ = tx.send((outcome, job));
        };
        match self.node.writer.submit_changes(self.epoch, self.key, changes, done) {
            Ok(()) => self.inflight += 1,
            Err(Full) => self.refused(reply, key, refusal),
        }
    }

    /// A job the writer did not take: answered, with the repeats of its post.
    fn refused(&mut self, reply: ReplyTo, key: Option<(UserId, String)>, refusal: Bytes) {
        if let Some((author, key)) = key {
            for r in self.keys.failed(author, &key) {
                self.node.guilds.reply(r, refusal.clone());
            }
        }
        self.node.guilds.reply(reply, refusal);
    }

    /// A job the writer did not commit: answered, and a fenced actor stops
    /// taking messages (what is queued still drains, refused the same way).
    fn not_committed(&mut self, outcome: Outcome, job: Job<T>) {
        let error = match outcome {
            Outcome::Fenced => {
                if self.epoch != 0 {
                    tracing::info!(actor = %self.key, epoch = self.epoch, "fenced off by a newer owner; actor stops");
                }
                self.rx.close();
                None
            }
            // A store that cannot commit just now (a lock held past the
            // busy timeout, a PostgreSQL restart, a lost connection): "retry",
            // which the client gets as 503 with `Retry-After`, as every
            // other route answers a transient store error.
            Outcome::Failed(e) if e.is_transient() => {
                tracing::warn!(actor = %self.key, error = &*e as &dyn std::error::Error, "change not committed; the client may retry");
                None
            }
            Outcome::Failed(e) => {
                tracing::error!(actor = %self.key, error = &*e as &dyn std::error::Error, "change not committed");
                Some(e.to_string())
            }
            Outcome::Committed | Outcome::Applied(_) => Some("writer answered the wrong kind of job".to_string()),
        };
        let body = job.refusal(error);
        self.refused(job.reply(), job.key(), body);
    }

    /// The key has no actor's state (a guild or DM that does not exist):
    /// whatever was sent to it is answered so, at once, until no sender has it.
    pub(crate) async fn refuse_all(&mut self, post: PostReply, op: OpReply) {
        self.rx.close();
        let (post, op) = (encode(&post), encode(&op));
        while let Some(msg) = self.rx.recv().await {
            match msg {
                GuildMsg::Post(p) => self.node.guilds.reply(p.reply, post.clone()),
                GuildMsg::Op(o) => self.node.guilds.reply(o.reply, op.clone()),
                _ => {}
            }
        }
    }
}

/// Runs `actor` on `st`: the writer's answers first (commit order), then
/// its mailbox; until shutdown, until the actor says stop, or until the
/// mailbox is closed and drained and every job it handed the writer is
/// answered.
pub(crate) async fn serve<A: Fenced>(actor: &mut A, st: &mut A::State) {
    let mut open = true;
    loop {
        let next = {
            let core = actor.core();
            tokio::select! {
                biased;
                _ = core.node.shutdown.cancelled() => Next::Stop,
                Some((outcome, job)) = core.answers_rx.recv() => Next::Answer(outcome, job),
                m = core.rx.recv(), if open => Next::Msg(m),
            }
        };
        let go = match next {
            Next::Stop => false,
            Next::Answer(outcome, job) => {
                actor.core().inflight -= 1;
                match (outcome, job) {
                    (Outcome::Committed | Outcome::Applied(_), Job::Message { message, body, reply, key }) => {
                        actor.core().message_committed(key, &message, &body);
                        actor.committed(st, Done::Message { message, body, reply })
                    }
                    (Outcome::Applied(rows), Job::Op { then, reply }) => actor.committed(st, Done::Op { rows, then, reply }),
                    // A change that was one new message, committed with the
                    // group commit's batch: its one row.
                    (Outcome::Committed, Job::Op { then, reply }) => actor.committed(st, Done::Op { rows: vec![1], then, reply }),
                    (outcome, job) => {
                        actor.core().not_committed(outcome, job);
                        true
                    }
                }
            }
            Next::Msg(Some(msg)) => actor.handle(st, msg),
            Next::Msg(None) => {
                open = false;
                true
            }
        };
        if !go || (!open && actor.core().inflight == 0) {
            return;
        }
    }
}
