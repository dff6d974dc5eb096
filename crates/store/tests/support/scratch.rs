//! A fresh PostgreSQL database per test, for the store's and the server's
//! PostgreSQL tests (included by both with `#[path]`).

use std::future::Future;
use std::io::Write;

use store::postgres::ScratchDatabase;

/// The server URL; without one the test fails, unless this run opted out
/// with `THRONG_SKIP_POSTGRES=1` (then `None`, after saying so).
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var("THRONG_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("THRONG_SKIP_POSTGRES").as_deref() != Ok("1") {
                panic!(
                    "{test}: THRONG_TEST_POSTGRES_URL is not set: start a server with `scripts/postgres.sh start DIR PORT` and set THRONG_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DB (scripts/test.sh does both), or set THRONG_SKIP_POSTGRES=1 to skip the PostgreSQL tests"
                );
            }
            // Straight to stderr, past the test harness's capture, so the skip shows.
            let line = format!("{test}: NOT RUN (THRONG_SKIP_POSTGRES=1)\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

/// Runs `body` with a URL of a fresh database, dropped afterwards even if `body` panics.
pub async fn with_scratch<F, Fut>(test: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(url) = server_url(test) else { return };
    let db = ScratchDatabase::create(&url).await.expect("creating a scratch database");
    let outcome = tokio::spawn(body(db.url.clone())).await;
    db.drop_now().await.expect("dropping the scratch database");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}
