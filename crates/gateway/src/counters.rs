//! Gateway event counters of this process, for `/metrics`: plain atomics
//! bumped where the event happens (no registry, no labels map).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Counters {
    /// READY sent (IDENTIFY accepted).
    pub identifies: AtomicU64,
    /// RESUMED sent.
    pub resumes: AtomicU64,
    /// op 9 sent (either `d`).
    pub invalid_sessions: AtomicU64,
    /// Close frames sent by the server, by code: 4000..=4014 at 0..=14,
    /// anything else at 15.
    pub closes: [AtomicU64; 16],
}

pub static COUNTERS: Counters = Counters {
    identifies: AtomicU64::new(0),
    resumes: AtomicU64::new(0),
    invalid_sessions: AtomicU64::new(0),
    closes: [const { AtomicU64::new(0) }; 16],
};

/// Counts one close frame the server sent.
pub fn closed(code: u16) {
    let i = code.checked_sub(4000).map_or(15, |i| usize::from(i).min(15));
    COUNTERS.closes[i].fetch_add(1, Ordering::Relaxed);
}

/// The close code counted at index `i` (`None`: other codes).
pub fn close_code(i: usize) -> Option<u16> {
    (i < 15).then(|| 4000 + i as u16)
}
