//! REST query strings: every query struct of `server::http` through
//! `http::Query`, the extractor the routes use (`?limit=&before=…`). The
//! first byte picks the struct; the rest is the query string.
//!
//! Checks: no panic; a query that is not a valid URI query is never seen
//! (the HTTP layer refuses it first); every rejection is Discord's 400
//! 50035 as JSON, never a 5xx or plain text.
#![no_main]

use std::future::Future;

use axum::extract::FromRequestParts;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use libfuzzer_sys::fuzz_target;
use server::http::{bans, guilds, messages, pins, reactions, threads, webhooks, Query};

fn check<T: serde::de::DeserializeOwned + Send>(query: &str) {
    let Ok(req) = Request::builder().uri(format!("/x?{query}")).body(()) else { return };
    let (mut parts, ()) = req.into_parts();
    let mut fut = std::pin::pin!(Query::<T>::from_request_parts(&mut parts, &()));
    // The extractor never waits: one poll finishes it.
    let waker = std::task::Waker::noop();
    let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut std::task::Context::from_waker(waker)) else {
        panic!("the query extractor waited");
    };
    if let Err(e) = r {
        let resp = e.into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert_eq!(resp.headers()["content-type"], "application/json");
    }
}

fuzz_target!(|data: &[u8]| {
    let [which, rest @ ..] = data else { return };
    let Ok(q) = std::str::from_utf8(rest) else { return };
    match which % 10 {
        0 => check::<messages::ListQuery>(q),
        1 => check::<bans::BanPage>(q),
        2 => check::<bans::Purge>(q),
        3 => check::<guilds::WithCounts>(q),
        4 => check::<guilds::ListMembers>(q),
        5 => check::<pins::PinsQuery>(q),
        6 => check::<reactions::UsersQuery>(q),
        7 => check::<threads::MembersQuery>(q),
        8 => check::<threads::ArchivedQuery>(q),
        _ => check::<webhooks::ExecuteQuery>(q),
    }
});
