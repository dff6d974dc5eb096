//! The one ordered stream of everything a node publishes, batched per
//! subject.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use node::Node;

use crate::ClusterRouter;

/// Most messages one pass of the publisher takes from its queue.
pub(crate) const OUT_BATCH_MESSAGES: usize = 1024;
/// Most bytes one NATS message of a batch holds (nats-server's default
/// payload limit is 1 MiB); a larger single message still goes alone.
pub(crate) const OUT_BATCH_BYTES: usize = 256 * 1024;

/// Messages queued for one subject, to leave as one NATS message.
pub(crate) struct Batch {
    subject: String,
    parts: Vec<Bytes>,
    bytes: usize,
}

impl Batch {
    /// The subject and the one NATS payload (separators included in `bytes`).
    fn into_message(mut self) -> (String, Bytes) {
        if self.parts.len() == 1 {
            return (self.subject, self.parts.pop().expect("one part"));
        }
        let mut out = Vec::with_capacity(self.bytes);
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(p);
        }
        (self.subject, out.into())
    }
}

/// Adds one message to the newest batch of its subject (a new batch when
/// that one is full, so each subject's order holds).
pub(crate) fn add_to_batches(batches: &mut Vec<Batch>, subject: String, payload: Bytes) {
    if let Some(b) = batches.iter_mut().rev().find(|b| b.subject == subject) {
        if b.bytes + payload.len() < OUT_BATCH_BYTES {
            b.bytes += payload.len() + 1;
            b.parts.push(payload);
            return;
        }
    }
    batches.push(Batch { subject, bytes: payload.len(), parts: vec![payload] });
}

/// The one ordered stream of everything this node publishes: whatever is
/// queued when it wakes leaves batched per subject (see the module doc). A
/// message found alone waits `linger` (`cluster.publish_linger_ms`) for
/// others to leave in the same write.
pub(crate) async fn outbound(
    node: Arc<Node>,
    r: Arc<ClusterRouter>,
    client: async_nats::Client,
    mut rx: mpsc::Receiver<(String, Bytes)>,
    linger: std::time::Duration,
) {
    let shutdown = node.shutdown.clone();
    let mut taken: Vec<(String, Bytes)> = Vec::new();
    let mut batches: Vec<Batch> = Vec::new();
    loop {
        let more = tokio::select! {
            _ = shutdown.cancelled() => break,
            more = node::linger::gather(&mut rx, &mut taken, OUT_BATCH_MESSAGES, linger, |_| true) => more,
        };
        if !more {
            break;
        }
        for (subject, payload) in taken.drain(..) {
            add_to_batches(&mut batches, subject, payload);
        }
        for b in batches.drain(..) {
            r.published.fetch_add(1, Ordering::Relaxed);
            let (subject, payload) = b.into_message();
            if let Err(e) = client.publish(subject, payload).await {
                tracing::warn!(error = %e, "NATS publish failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::wire::messages;

    fn msg(n: usize, len: usize) -> Bytes {
        let v = serde_json::to_vec(&(n, "x".repeat(len))).unwrap();
        Bytes::from(v)
    }

    /// What the publisher sends for a queue of (subject, message): each
    /// subject's messages in their order, split where a batch would pass
    /// `OUT_BATCH_BYTES`, and every NATS message readable as a stream.
    #[test]
    fn batches_keep_each_subjects_order_and_stay_under_the_byte_bound() {
        let mut batches = Vec::new();
        let big = OUT_BATCH_BYTES / 3;
        for (i, subject) in ["a", "b", "a", "a", "b", "a", "a"].into_iter().enumerate() {
            add_to_batches(&mut batches, subject.to_owned(), msg(i, if subject == "a" { big } else { 10 }));
        }
        let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
        for b in batches {
            let (subject, payload) = b.into_message();
            assert!(payload.len() <= OUT_BATCH_BYTES, "{} bytes", payload.len());
            for m in messages::<(usize, String)>(&payload) {
                seen.entry(subject.clone()).or_default().push(m.unwrap().0);
            }
        }
        assert_eq!(seen["a"], vec![0, 2, 3, 5, 6]);
        assert_eq!(seen["b"], vec![1, 4]);
    }

    #[test]
    fn one_message_leaves_as_it_was_queued() {
        let mut batches = Vec::new();
        let m = msg(7, 3);
        add_to_batches(&mut batches, "s".into(), m.clone());
        assert_eq!(batches.len(), 1);
        assert_eq!(batches.pop().unwrap().into_message(), ("s".to_owned(), m));
    }
}
