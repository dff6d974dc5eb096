//! Read states: where each person is in each channel (issue #29). Acks
//! (`POST /channels/{c}/messages/{m}/ack`) and mention counts (after a
//! message that mentions people commits) are written by one task per node
//! in batches: one transaction for whatever arrived while the last one
//! ran, up to `read_states.batch_max` writes. An ack is answered once its
//! batch has committed; a mention count is not waited for.
//!
//! Mentions are counted apart from the message's own transaction, so a
//! count may land after an ack of a later message: the store counts a
//! mention only for those who have not read past it.

use std::sync::Arc;

use protocol::{ChannelId, MessageId, UserId};
use store::{ReadStateWrite, Store};
use tokio::sync::{mpsc, oneshot};

use crate::batch::BatchError;

type Done = oneshot::Sender<Result<(), BatchError>>;

/// The node's read-state writer.
pub struct ReadStates {
    tx: mpsc::Sender<(ReadStateWrite, Option<Done>)>,
}

/// Why an ack was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AckError {
    /// `read_states.queue` writes are waiting: try again (503).
    #[error("read-state writer busy")]
    Busy,
    #[error(transparent)]
    Failed(#[from] BatchError),
}

impl ReadStates {
    /// Starts the writer task on the current runtime; it ends when the
    /// `ReadStates` is dropped.
    pub fn start(store: Arc<dyn Store>, queue: usize, batch_max: usize) -> ReadStates {
        let (tx, rx) = mpsc::channel(queue.max(1));
        tokio::spawn(run(store, batch_max.max(1), rx));
        ReadStates { tx }
    }

    /// Records an ack; returns once it is committed.
    pub async fn ack(
        &self,
        user: UserId,
        channel: ChannelId,
        message: MessageId,
        mention_count: u32,
        manual: bool,
    ) -> Result<(), AckError> {
        let (done, rx) = oneshot::channel();
        let w = ReadStateWrite::Ack { user, channel, message, mention_count, manual };
        self.tx.try_send((w, Some(done))).map_err(|_| AckError::Busy)?;
        rx.await.map_err(|_| AckError::Failed(BatchError::Stopped))??;
        Ok(())
    }

    /// One more mention for each of `users` in `channel` (those who have
    /// not read past `message`). Not waited for; dropped (and logged) when
    /// the queue is full.
    pub fn mentioned(&self, channel: ChannelId, message: MessageId, users: Vec<UserId>) {
        if users.is_empty() {
            return;
        }
        if self.tx.try_send((ReadStateWrite::Mention { channel, message, users }, None)).is_err() {
            tracing::warn!(channel = %channel, message = %message, "read-state queue full: a mention count was dropped");
        }
    }
}

async fn run(store: Arc<dyn Store>, max: usize, mut rx: mpsc::Receiver<(ReadStateWrite, Option<Done>)>) {
    let mut batch = Vec::with_capacity(max);
    while rx.recv_many(&mut batch, max).await > 0 {
        let (writes, waiting): (Vec<ReadStateWrite>, Vec<Option<Done>>) = batch.drain(..).unzip();
        let outcome = store.write_read_states(&writes).await.map_err(BatchError::from);
        if let Err(e) = &outcome {
            tracing::error!(error = %e, writes = writes.len(), "read states not written");
        }
        for done in waiting.into_iter().flatten() {
            let _gone_is_fine = done.send(outcome.clone());
        }
    }
}

/// READY's `read_state`: every entry of the user, as the official client
/// reads it (`version` is when it was read, in milliseconds).
pub fn ready_json(states: &[store::ReadState], now_ms: u64) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = states
        .iter()
        .map(|r| {
            serde_json::json!({
                "id": r.channel_id,
                "last_message_id": r.last_message_id,
                "mention_count": r.mention_count,
                "last_pin_timestamp": protocol::model::iso8601(r.last_pin_timestamp.unwrap_or(0)),
                "flags": 0,
            })
        })
        .collect();
    serde_json::json!({ "entries": entries, "partial": false, "version": now_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_entries_are_in_the_clients_shape() {
        let states =
            [store::ReadState { channel_id: ChannelId(5), last_message_id: MessageId(7), mention_count: 2, last_pin_timestamp: None }];
        let v = ready_json(&states, 42);
        assert_eq!(v["partial"], false);
        assert_eq!(v["version"], 42);
        let e = &v["entries"][0];
        assert_eq!((e["id"].as_str(), e["last_message_id"].as_str(), e["mention_count"].as_u64()), (Some("5"), Some("7"), Some(2)));
        assert_eq!(e["last_pin_timestamp"], "1970-01-01T00:00:00.000000+00:00");
    }
}
