//! The REST rate limiter: a fixed window per (caller, route bucket). The
//! HTTP middleware that applies it and writes Discord's headers is in
//! `http::ratelimit`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries beyond which stale windows are swept.
const SWEEP_AT: usize = 100_000;

pub struct RateLimiter {
    limit: u32,
    window: Duration,
    /// (caller, bucket) -> (window start, requests in it). Guards only the
    /// map; never held across an await.
    windows: Mutex<HashMap<(u64, u64), (Instant, u32)>>,
}

/// The outcome of counting one request.
pub struct Verdict {
    pub allowed: bool,
    pub remaining: u32,
    pub reset_after: f64,
    pub bucket: u64,
}

impl RateLimiter {
    pub fn new(limit: u32, window_ms: u64) -> Self {
        Self { limit: limit.max(1), window: Duration::from_millis(window_ms.max(1)), windows: Mutex::new(HashMap::new()) }
    }

    pub fn check(&self, caller: u64, bucket: u64) -> Verdict {
        let now = Instant::now();
        let mut w = self.windows.lock().expect("rate limit map poisoned");
        if w.len() >= SWEEP_AT {
            let window = self.window;
            w.retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let e = w.entry((caller, bucket)).or_insert((now, 0));
        if now.duration_since(e.0) >= self.window {
            *e = (now, 0);
        }
        let reset_after = (self.window.saturating_sub(now.duration_since(e.0))).as_secs_f64();
        if e.1 >= self.limit {
            return Verdict { allowed: false, remaining: 0, reset_after, bucket };
        }
        e.1 += 1;
        Verdict { allowed: true, remaining: self.limit - e.1, reset_after, bucket }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
}

/// The budgets of logins and registrations (`[auth]`), apart from the
/// per-route limits: per client address, and per account for logins.
pub struct LoginLimits {
    pub login_by_address: RateLimiter,
    pub login_by_account: RateLimiter,
    pub register_by_address: RateLimiter,
}

impl LoginLimits {
    pub fn new(a: &config::AuthConfig) -> Self {
        Self {
            login_by_address: RateLimiter::new(a.login_per_address, a.login_window_ms),
            login_by_account: RateLimiter::new(a.login_per_account, a.login_window_ms),
            register_by_address: RateLimiter::new(a.register_per_address, a.register_window_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_allows_limit_then_refuses_then_resets() {
        let rl = RateLimiter::new(3, 50);
        for left in [2, 1, 0] {
            let v = rl.check(1, 9);
            assert!(v.allowed);
            assert_eq!(v.remaining, left);
        }
        let v = rl.check(1, 9);
        assert!(!v.allowed);
        assert!(v.reset_after > 0.0 && v.reset_after <= 0.05);
        assert!(rl.check(2, 9).allowed, "other callers have their own bucket");
        std::thread::sleep(Duration::from_millis(60));
        assert!(rl.check(1, 9).allowed);
    }
}
