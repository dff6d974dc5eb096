//! Taking a queue's items in batches, where an item found alone waits a
//! little for company: the store's batched reads (`batch`), the group
//! commit (`group_commit`) and a cluster node's NATS publisher share it.
//! Each batch costs a fixed price (a statement's hand-off, a transaction,
//! a wake-up of nats-server and of the receiving node) that a quiet node
//! would otherwise pay for every item; a busy queue never waits.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;

/// A tokio channel's receiving end, bounded or not.
pub trait Queue<T> {
    /// Waits for at least one item, then takes up to `limit` into `buf`;
    /// 0 once the channel is closed and empty.
    fn recv_many(&mut self, buf: &mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send;
    /// An item already queued, if any.
    fn try_take(&mut self) -> Option<T>;
}

impl<T: Send> Queue<T> for mpsc::Receiver<T> {
    fn recv_many(&mut self, buf: &mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send {
        mpsc::Receiver::recv_many(self, buf, limit)
    }
    fn try_take(&mut self) -> Option<T> {
        self.try_recv().ok()
    }
}

impl<T: Send> Queue<T> for mpsc::UnboundedReceiver<T> {
    fn recv_many(&mut self, buf: &mut Vec<T>, limit: usize) -> impl Future<Output = usize> + Send {
        mpsc::UnboundedReceiver::recv_many(self, buf, limit)
    }
    fn try_take(&mut self) -> Option<T> {
        self.try_recv().ok()
    }
}

/// The next batch into `batch` (false once every sender is gone and the
/// queue is empty): what is queued, up to `max`. A batch of one item for
/// which `lone_waits` holds first waits `linger`, then takes what arrived
/// meanwhile. Cancel-safe only between batches: cancelled during the
/// linger, the item taken stays in `batch`.
pub async fn gather<T, Q: Queue<T>>(rx: &mut Q, batch: &mut Vec<T>, max: usize, linger: Duration, lone_waits: impl Fn(&T) -> bool) -> bool {
    if rx.recv_many(batch, max).await == 0 {
        return false;
    }
    if batch.len() == 1 && max > 1 && !linger.is_zero() && lone_waits(&batch[0]) {
        tokio::time::sleep(linger).await;
        while batch.len() < max {
            let Some(more) = rx.try_take() else { break };
            batch.push(more);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batch sizes when 1 is queued first and 2 and 3 arrive once it was
    /// taken; `lone_waits` holds for odd items.
    async fn sizes_with(linger: Duration, first: u32) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel::<u32>(16);
        tx.try_send(first).unwrap();
        let mut batch = Vec::new();
        let odd = |x: &u32| x % 2 == 1;
        // `join!` polls the first batch first: it takes `first` at once, so
        // 2 and 3 are sent after it was taken.
        let first = async {
            assert!(gather(&mut rx, &mut batch, 64, linger, odd).await);
            batch.drain(..).count()
        };
        let later = async {
            tx.try_send(2).unwrap();
            tx.try_send(3).unwrap();
        };
        let (n, ()) = tokio::join!(first, later);
        let mut sizes = vec![n];
        drop(tx);
        while gather(&mut rx, &mut batch, 64, linger, odd).await {
            sizes.push(batch.drain(..).count());
        }
        sizes
    }

    #[tokio::test]
    async fn a_lone_item_waits_the_linger_for_company_and_a_queue_of_several_does_not() {
        assert_eq!(sizes_with(Duration::from_millis(50), 1).await, vec![3]);
        assert_eq!(sizes_with(Duration::ZERO, 1).await, vec![1, 2], "without a linger the first goes alone");
        assert_eq!(sizes_with(Duration::from_secs(3600), 4).await, vec![1, 2], "an item lone_waits refuses goes at once");
        // Two already queued: taken at once, however long the linger.
        let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
        tx.send(1).unwrap();
        tx.send(3).unwrap();
        let mut batch = Vec::new();
        let took =
            tokio::time::timeout(Duration::from_secs(30), gather(&mut rx, &mut batch, 64, Duration::from_secs(3600), |_| true)).await;
        assert_eq!(took.ok(), Some(true), "a queue of several does not wait");
        assert_eq!(batch, [1, 3]);
        drop(tx);
        assert!(!gather(&mut rx, &mut batch, 64, Duration::ZERO, |_| true).await, "closed and empty");
    }
}
