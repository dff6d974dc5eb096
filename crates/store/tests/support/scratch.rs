//! A fresh PostgreSQL database per test, for the store's and the server's
//! PostgreSQL tests (included by both with `#[path]`).

use std::future::Future;
use std::io::Write;

use store::postgres::ScratchDatabase;

/// The server URL, or `None` (after saying so) when this run has none.
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var("THRONG_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("THRONG_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!("{test}: THRONG_REQUIRE_POSTGRES=1 but THRONG_TEST_POSTGRES_URL is not set (scripts/test.sh starts a server)");
            }
            // Straight to stderr, past the test harness's capture, so the skip shows.
            let line = format!(
                "{test}: NOT RUN: set THRONG_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DB (scripts/postgres.sh start DIR PORT)\n"
            );
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
