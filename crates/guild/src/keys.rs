//! Posts' deduplication keys an actor has seen (Discord's `nonce` with
//! `enforce_nonce`, and the keys a cluster node gives the posts it may send
//! again): a repeat of a post still being committed waits for its answer;
//! a repeat of a committed one is answered with that message. The keys
//! its previous owner committed are read back from the store when an actor
//! starts, so a post sent again after a failover is not committed twice.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use protocol::id::DISCORD_EPOCH_MS;
use protocol::{MessageId, UserId};

use node::route::ReplyTo;

enum Seen {
    /// Handed to the writer: repeats wait for its answer.
    Pending(Vec<ReplyTo>),
    Committed(MessageId),
}

/// What to do with a post that has a key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// First seen: commit it.
    New,
    /// The same post is being committed: its answer goes to this one too.
    Waiting,
    /// Already committed: answer with this message.
    Committed(MessageId),
}

pub(crate) struct Keys {
    /// Each key, when it was seen, and what became of its post.
    seen: HashMap<(UserId, Box<str>), (Instant, Seen)>,
    /// When each key was seen, oldest first (a key sent again after its
    /// post failed appears twice: the older entry forgets nothing).
    order: VecDeque<(Instant, UserId, Box<str>)>,
    window: Duration,
    max: usize,
}

impl Keys {
    pub(crate) fn new(window_ms: u64, max: usize) -> Keys {
        Keys { seen: HashMap::new(), order: VecDeque::new(), window: Duration::from_millis(window_ms), max: max.max(1) }
    }

    /// The oldest message id a key read back at start may have.
    pub(crate) fn since(&self, now_ms: u64) -> MessageId {
        let from = now_ms.saturating_sub(self.window.as_millis() as u64).saturating_sub(DISCORD_EPOCH_MS);
        MessageId(from << 22)
    }

    /// Keys committed before this actor started: (id, author, key), newest first.
    pub(crate) fn load(&mut self, rows: Vec<(MessageId, UserId, String)>) {
        let now = Instant::now();
        let now_ms = node::auth::now_ms();
        for (id, author, key) in rows.into_iter().rev() {
            // Their age is the message's: they leave when they would have.
            let age = Duration::from_millis(now_ms.saturating_sub(id.timestamp_ms()));
            let at = now.checked_sub(age).unwrap_or(now);
            let key: Box<str> = key.into();
            self.seen.insert((author, key.clone()), (at, Seen::Committed(id)));
            self.order.push_back((at, author, key));
        }
        self.prune(now);
    }

    /// A post of `author` with `key`, answered at `reply`.
    pub(crate) fn check(&mut self, author: UserId, key: &str, reply: ReplyTo) -> Check {
        let now = Instant::now();
        self.prune(now);
        match self.seen.get_mut(&(author, Box::from(key))) {
            Some((_, Seen::Committed(id))) => Check::Committed(*id),
            Some((_, Seen::Pending(waiting))) => {
                waiting.push(reply);
                Check::Waiting
            }
            None => {
                let key: Box<str> = key.into();
                self.seen.insert((author, key.clone()), (now, Seen::Pending(Vec::new())));
                self.order.push_back((now, author, key));
                self.prune(now);
                Check::New
            }
        }
    }

    /// The post with `key` was committed as `id`: the repeats waiting for it.
    pub(crate) fn committed(&mut self, author: UserId, key: &str, id: MessageId) -> Vec<ReplyTo> {
        let now = Instant::now();
        let key: Box<str> = key.into();
        // Its window starts again here (it may have been pruned from
        // `order` while pending: it is back in it).
        let before = self.seen.insert((author, key.clone()), (now, Seen::Committed(id)));
        self.order.push_back((now, author, key));
        self.prune(now);
        match before {
            Some((_, Seen::Pending(waiting))) => waiting,
            _ => Vec::new(),
        }
    }

    /// The post with `key` was not committed: forgotten (it may be sent
    /// again); the repeats waiting for it get the same answer.
    pub(crate) fn failed(&mut self, author: UserId, key: &str) -> Vec<ReplyTo> {
        let k = (author, Box::from(key));
        match self.seen.get(&k) {
            Some((_, Seen::Pending(_))) => match self.seen.remove(&k) {
                Some((_, Seen::Pending(waiting))) => waiting,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Forgets keys older than the window, and the oldest beyond `max`.
    fn prune(&mut self, now: Instant) {
        while let Some((at, ..)) = self.order.front() {
            if now.duration_since(*at) <= self.window && self.order.len() <= self.max {
                break;
            }
            let Some((at, author, key)) = self.order.pop_front() else { break };
            let k = (author, key);
            // Only the entry that is this key's latest sighting, and not
            // while its post is pending (its waiters need the answer).
            if self.seen.get(&k).is_some_and(|(seen_at, s)| *seen_at == at && matches!(s, Seen::Committed(_))) {
                self.seen.remove(&k);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fanout::NodeId;

    fn reply(id: u64) -> ReplyTo {
        ReplyTo { node: NodeId(1), id }
    }

    #[test]
    fn a_repeat_waits_for_the_first_then_gets_its_message() {
        let mut k = Keys::new(60_000, 100);
        let (a, b) = (UserId(1), UserId(2));
        assert_eq!(k.check(a, "n", reply(1)), Check::New);
        assert_eq!(k.check(a, "n", reply(2)), Check::Waiting);
        // Another author's key is another key.
        assert_eq!(k.check(b, "n", reply(3)), Check::New);
        assert_eq!(k.committed(a, "n", MessageId(9)), vec![reply(2)]);
        assert_eq!(k.check(a, "n", reply(4)), Check::Committed(MessageId(9)));
    }

    #[test]
    fn a_failed_post_may_be_sent_again() {
        let mut k = Keys::new(60_000, 100);
        let a = UserId(1);
        assert_eq!(k.check(a, "n", reply(1)), Check::New);
        assert_eq!(k.check(a, "n", reply(2)), Check::Waiting);
        assert_eq!(k.failed(a, "n"), vec![reply(2)]);
        assert_eq!(k.check(a, "n", reply(3)), Check::New);
    }

    #[test]
    fn keys_read_back_are_committed_and_the_oldest_leave_first() {
        let mut k = Keys::new(60_000, 2);
        let now = node::auth::now_ms();
        let id = |ago: u64| MessageId((now - ago - DISCORD_EPOCH_MS) << 22);
        // Newest first, as the store returns them; one is past the window.
        k.load(vec![(id(10), UserId(1), "c".into()), (id(20), UserId(1), "b".into()), (id(120_000), UserId(1), "a".into())]);
        assert_eq!(k.check(UserId(1), "c", reply(1)), Check::Committed(id(10)));
        assert_eq!(k.check(UserId(1), "a", reply(2)), Check::New, "older than the window");
        // At most 2: "a" (now pending) pushed "b", the oldest, out.
        assert_eq!(k.len(), 2);
        assert_eq!(k.check(UserId(1), "b", reply(3)), Check::New);
        assert!(k.since(now) < id(10));
    }
}
