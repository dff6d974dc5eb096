//! REST JSON bodies: every request body struct of `server::http` through
//! `http::parse_json`, the function the `JsonBody` extractor (and the
//! multipart `payload_json` field) uses. The first byte picks the struct.
//! Permission overwrites also go through `guilds::overwrites`.
//!
//! Checks: no panic; only valid JSON (UTF-8, or an all-whitespace body,
//! read as `{}`) is accepted; every rejection answers 400, never a 5xx.
#![no_main]

use axum::http::StatusCode;
use axum::response::IntoResponse;
use libfuzzer_sys::fuzz_target;
use server::http::{admin, channels, guilds, messages, parse_json, users, ApiResult};

fn check<T>(body: &[u8], r: ApiResult<T>) -> Option<T> {
    match r {
        Ok(v) => {
            let blank = body.iter().all(u8::is_ascii_whitespace);
            // Valid JSON text: UTF-8, and the grammar (numbers of any size:
            // `1E400` is JSON, only out of f64's range, so not `Value`).
            let valid = std::str::from_utf8(body).is_ok_and(|s| serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok());
            assert!(blank || valid, "accepted invalid JSON");
            Some(v)
        }
        Err(e) => {
            assert_eq!(e.into_response().status(), StatusCode::BAD_REQUEST);
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [which, body @ ..] = data else { return };
    match which % 14 {
        0 => drop(check(body, parse_json::<admin::DropSessions>(body))),
        1 => drop(check(body, parse_json::<channels::ModifyChannel>(body))),
        2 => drop(check(body, parse_json::<channels::CreateInvite>(body))),
        3 => drop(check(body, parse_json::<guilds::CreateGuild>(body))),
        4 => drop(check(body, parse_json::<guilds::ModifyGuild>(body))),
        5 => drop(check(body, parse_json::<guilds::CreateChannel>(body))),
        6 => drop(check(body, parse_json::<guilds::ModifyMember>(body))),
        7 => drop(check(body, parse_json::<messages::MessageBody>(body))),
        8 => drop(check(body, parse_json::<messages::EditBody>(body))),
        9 => drop(check(body, parse_json::<users::Register>(body))),
        10 => drop(check(body, parse_json::<users::Login>(body))),
        11 => drop(check(body, parse_json::<users::ModifyMe>(body))),
        12 => {
            if let Some(v) = check(body, parse_json::<Vec<guilds::OverwriteIn>>(body)) {
                let n = v.len();
                if let Some(records) = check(body, guilds::overwrites(v)) {
                    assert_eq!(records.len(), n);
                    assert!(records.iter().all(|o| o.kind <= 1));
                }
            }
        }
        _ => drop(check(body, parse_json::<serde_json::Value>(body))),
    }
});
