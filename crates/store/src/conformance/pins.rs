//! Conformance of pins: at most `max` a channel, each once and in its own
//! channel, the pin's system message only for a pin that took, listed
//! latest first, and gone with their message. Uses the messages
//! `reactions::run` made.

use protocol::{ChannelId, MessageId};

use super::message;
use super::reactions::{rows, C};
use crate::*;

pub(super) async fn pins(s: &dyn Store) {
    let pin = |m: u64, at: u64| Change::PinMessage { channel: C, message: MessageId(m), at, max: 2 };
    let notice = MessageRecord { kind: 6, content: String::new(), ..message(5_010, 101, 2, "") };
    let got = rows(
        s,
        vec![
            pin(5_001, 100),
            pin(5_001, 101),
            Change::PinMessage { channel: ChannelId(999), message: MessageId(5_002), at: 102, max: 2 },
            pin(5_002, 103),
            pin(5_003, 104),
            Change::PinNotice { message: notice.clone(), pinned: MessageId(5_002), at: 103 },
            Change::PinNotice { message: MessageRecord { id: MessageId(5_011), ..notice.clone() }, pinned: MessageId(5_003), at: 104 },
        ],
    )
    .await;
    assert_eq!(got, vec![1, 0, 0, 1, 0, 1, 0], "once each, in its own channel, at most `max`; a notice only for a pin that took");
    assert_eq!(s.get_message(C, MessageId(5_010)).await.unwrap(), Some(notice));
    assert!(s.get_message(C, MessageId(5_011)).await.unwrap().is_none());
    assert_eq!(s.get_channel(C).await.unwrap().unwrap().last_message_id, Some(MessageId(5_010)), "the notice is the newest message");
    assert_eq!(s.count_pins(C).await.unwrap(), 2);
    let mut among = s.pins_among(&[MessageId(5_001), MessageId(5_002), MessageId(5_003)]).await.unwrap();
    among.sort();
    assert_eq!(among, vec![(MessageId(5_001), 100), (MessageId(5_002), 103)]);
    let listed = |before: Option<u64>, limit: u32| async move {
        s.pinned_messages(C, before, limit).await.unwrap().into_iter().map(|(m, at)| (m.id.0, at)).collect::<Vec<_>>()
    };
    assert_eq!(listed(None, 50).await, vec![(5_002, 103), (5_001, 100)], "latest pin first");
    assert_eq!(listed(Some(103), 50).await, vec![(5_001, 100)], "pinned before a time");
    assert_eq!(listed(None, 1).await, vec![(5_002, 103)]);
    let unpin = |m: u64| Change::UnpinMessage { channel: C, message: MessageId(m) };
    assert_eq!(
        rows(s, vec![unpin(5_002), unpin(5_002), Change::UnpinMessage { channel: ChannelId(999), message: MessageId(5_001) }]).await,
        vec![1, 0, 0]
    );
    // A pin goes with its message.
    s.delete_message(C, MessageId(5_001)).await.unwrap();
    assert_eq!(s.count_pins(C).await.unwrap(), 0);
    s.delete_message(C, MessageId(5_010)).await.unwrap();
}
