//! Gateway payload decoding: a client frame as the server reads it
//! (`ClientFrame`, then `d` as the struct of its opcode, exactly as
//! `gateway/connection.rs` and `gateway/session.rs` do), and every per-op
//! struct on the raw input as well, so each one sees arbitrary JSON.
//!
//! Checks: no panic; what decodes is consistent (intents validity matches
//! the known bits; op 8 user ids flatten to a list; member-list ranges of
//! op 14/37 normalise within the server's bounds).
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::gateway::{
    op, ClientFrame, GuildSubscription, GuildSubscriptionsBulk, Identify, Intents, PresenceUpdate, RequestGuildMembers, Resume,
};
use server::guild::list::{requested_chunks, MAX_CHUNKS};

fn check_channels(channels: Option<std::collections::BTreeMap<protocol::ChannelId, Vec<(u64, u64)>>>) {
    for ranges in channels.into_iter().flat_map(|c| c.into_values()) {
        let chunks = requested_chunks(&ranges);
        assert!(chunks.len() <= MAX_CHUNKS);
        assert!(chunks.windows(2).all(|w| w[0].start < w[1].start));
    }
}

fn decode(op_code: u8, d: &str) {
    match op_code {
        op::HEARTBEAT => {
            let _ = serde_json::from_str::<Option<u64>>(d);
        }
        op::IDENTIFY => {
            if let Ok(i) = serde_json::from_str::<Identify>(d) {
                if let Some(bits) = i.intents {
                    assert_eq!(Intents(bits).is_valid(), bits & !Intents::KNOWN == 0);
                }
                let _ = i.token.strip_prefix("Bot ");
            }
        }
        op::RESUME => {
            let _ = serde_json::from_str::<Resume>(d);
        }
        op::PRESENCE_UPDATE => {
            if let Ok(p) = serde_json::from_str::<PresenceUpdate>(d) {
                let _ = p.status.visible().as_str();
                // What the server keeps re-encodes.
                serde_json::to_vec(&p).expect("presence encodes");
            }
        }
        op::REQUEST_GUILD_MEMBERS => {
            if let Ok(r) = serde_json::from_str::<RequestGuildMembers>(d) {
                let n = match &r.user_ids {
                    Some(protocol::gateway::UserIds::Many(v)) => v.len(),
                    Some(protocol::gateway::UserIds::One(_)) => 1,
                    None => 0,
                };
                assert_eq!(r.user_ids.map(|u| u.into_vec().len()).unwrap_or(0), n);
            }
        }
        op::GUILD_SUBSCRIPTIONS => {
            if let Ok(s) = serde_json::from_str::<GuildSubscription>(d) {
                check_channels(s.channels);
            }
        }
        op::GUILD_SUBSCRIPTIONS_BULK => {
            if let Ok(b) = serde_json::from_str::<GuildSubscriptionsBulk>(d) {
                for body in b.subscriptions.into_values() {
                    check_channels(body.channels);
                }
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = serde_json::from_slice::<ClientFrame>(data) {
        let d = frame.d.map(|d| d.get()).unwrap_or("null");
        decode(frame.op, d);
    }
    // Every op's body on the raw input too.
    if let Ok(s) = std::str::from_utf8(data) {
        for o in [
            op::HEARTBEAT,
            op::IDENTIFY,
            op::RESUME,
            op::PRESENCE_UPDATE,
            op::REQUEST_GUILD_MEMBERS,
            op::GUILD_SUBSCRIPTIONS,
            op::GUILD_SUBSCRIPTIONS_BULK,
        ] {
            decode(o, s);
        }
    }
});
