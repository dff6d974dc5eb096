//! Snowflake ids of `protocol::id` from strings and integers, as they
//! arrive in paths (`FromStr`) and JSON bodies (string or integer).
//!
//! Checks: no panic; a parsed id prints back to a string that parses to the
//! same id; JSON accepts exactly the non-negative integers and the strings
//! `u64` parses, and serialises as a string that reads back equal.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};

#[derive(Arbitrary, Debug)]
enum Input {
    Text(String),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Json(Vec<u8>),
}

fn round_trip(s: Snowflake) {
    let text = serde_json::to_string(&s).unwrap();
    assert_eq!(text, format!("\"{}\"", s.0));
    assert_eq!(serde_json::from_str::<Snowflake>(&text).unwrap(), s);
}

fuzz_target!(|input: Input| {
    match input {
        Input::Text(s) => {
            let path = s.parse::<UserId>();
            assert_eq!(path.as_ref().ok().map(|u| u.0), s.parse::<u64>().ok());
            if let Ok(u) = path {
                assert_eq!(u.to_string().parse::<UserId>().unwrap(), u);
                assert_eq!(s.parse::<GuildId>().unwrap().0, u.0);
                assert_eq!(s.parse::<ChannelId>().unwrap().0, u.0);
                assert_eq!(s.parse::<MessageId>().unwrap().0, u.0);
            }
            let json = serde_json::to_string(&s).unwrap();
            let from_json = serde_json::from_str::<Snowflake>(&json);
            assert_eq!(from_json.as_ref().ok().map(|f| f.0), s.parse::<u64>().ok());
            if let Ok(f) = from_json {
                round_trip(f);
            }
        }
        Input::Unsigned(n) => {
            let s = serde_json::from_str::<Snowflake>(&n.to_string()).unwrap();
            assert_eq!(s.0, n);
            round_trip(s);
            let _ = s.timestamp_ms();
        }
        Input::Signed(n) => {
            let r = serde_json::from_str::<GuildId>(&n.to_string());
            assert_eq!(r.ok().map(|g| g.0), u64::try_from(n).ok());
        }
        Input::Float(f) => {
            if let Some(n) = serde_json::Number::from_f64(f) {
                // Floats are not ids.
                assert!(serde_json::from_value::<Snowflake>(serde_json::Value::Number(n)).is_err());
            }
        }
        Input::Json(bytes) => {
            if let Ok(s) = serde_json::from_slice::<Snowflake>(&bytes) {
                round_trip(s);
            }
            let _ = serde_json::from_slice::<Vec<UserId>>(&bytes);
        }
    }
});
