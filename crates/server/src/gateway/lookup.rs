//! IDENTIFY's database lookup, batched: IDENTIFYs that arrive while a
//! lookup is running are answered by the next one, in one statement. Each
//! statement costs round trips to the SQLite connection's worker thread
//! (wake-ups on both sides); under an identify ramp that hand-off, not the
//! query, was the cost.

use std::sync::Arc;

use store::{IdentifyRecord, Store};
use tokio::sync::{mpsc, oneshot};

/// Most tokens one statement looks up.
const BATCH: usize = 256;

type Reply = oneshot::Sender<Result<Option<IdentifyRecord>, String>>;

pub struct IdentifyLookups {
    tx: mpsc::UnboundedSender<([u8; 32], Reply)>,
}

impl IdentifyLookups {
    /// Starts the batching task on the current runtime; it ends when the
    /// `IdentifyLookups` is dropped.
    pub fn start(store: Arc<dyn Store>) -> IdentifyLookups {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(store, rx));
        IdentifyLookups { tx }
    }

    /// The token's user, guilds and application (`None`: no such token).
    /// Callers are bounded by `gateway.identify_concurrency`.
    pub async fn lookup(&self, hash: [u8; 32]) -> Result<Option<IdentifyRecord>, String> {
        let (reply, rx) = oneshot::channel();
        self.tx.send((hash, reply)).map_err(|_| "identify lookups stopped".to_string())?;
        rx.await.map_err(|_| "identify lookup dropped".to_string())?
    }
}

async fn run(store: Arc<dyn Store>, mut rx: mpsc::UnboundedReceiver<([u8; 32], Reply)>) {
    let mut batch: Vec<([u8; 32], Reply)> = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let hashes: Vec<[u8; 32]> = batch.iter().map(|(h, _)| *h).collect();
        match store.identify_lookup(&hashes).await {
            Ok(found) => {
                for (hash, reply) in batch.drain(..) {
                    // The same token may be in a batch twice (two sockets).
                    let rec = found.iter().find(|(h, _)| *h == hash).map(|(_, r)| r.clone());
                    let _gone_is_fine = reply.send(Ok(rec));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for (_, reply) in batch.drain(..) {
                    let _gone_is_fine = reply.send(Err(msg.clone()));
                }
            }
        }
    }
}
