//! Conformance of read states: an ack records where a person is; mentions
//! count only past it; an older ack moves the mark back only when manual;
//! a batch of writes applies in order; rows go with their channel; a write
//! for a channel that is gone is skipped, not a failed batch.

use protocol::{ChannelId, MessageId, UserId};

use super::channel;
use super::reactions::rows;
use crate::*;

const C: ChannelId = ChannelId(160);
const D: ChannelId = ChannelId(161);
const A: UserId = UserId(1);
const B: UserId = UserId(2);

fn ack(user: UserId, channel: ChannelId, message: u64, mention_count: u32, manual: bool) -> ReadStateWrite {
    ReadStateWrite::Ack { user, channel, message: MessageId(message), mention_count, manual }
}

fn mention(channel: ChannelId, message: u64, users: &[UserId]) -> ReadStateWrite {
    ReadStateWrite::Mention { channel, message: MessageId(message), users: users.to_vec() }
}

/// `user`'s states as (channel, last message, mentions).
async fn states(s: &dyn Store, user: UserId) -> Vec<(u64, u64, u32)> {
    let all = s.read_states_of(&[user]).await.unwrap();
    assert!(all.len() <= 1, "one entry per user");
    all.into_iter()
        .flat_map(|(u, v)| {
            assert_eq!(u, user);
            v
        })
        .map(|r| (r.channel_id.0, r.last_message_id.0, r.mention_count))
        .collect()
}

pub(super) async fn read_states(s: &dyn Store) {
    assert_eq!(
        rows(s, vec![Change::CreateChannel(channel(160, Some(100), 0, None)), Change::CreateChannel(channel(161, Some(100), 0, None))])
            .await,
        vec![1, 1]
    );
    assert!(states(s, A).await.is_empty(), "nobody has read anything yet");
    // Two mentions of A before any ack, one of B.
    s.write_read_states(&[mention(C, 10, &[A, B]), mention(C, 11, &[A])]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 0, 2)]);
    assert_eq!(states(s, B).await, vec![(160, 0, 1)]);
    // A reads up to 11: no mentions left; a later mention counts again,
    // an earlier one (a commit that lost the race with the ack) does not.
    s.write_read_states(&[ack(A, C, 11, 0, false)]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 11, 0)]);
    s.write_read_states(&[mention(C, 12, &[A]), mention(C, 9, &[A])]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 11, 1)], "only a mention past the mark counts");
    // An older ack changes nothing unless manual (marking unread).
    s.write_read_states(&[ack(A, C, 5, 0, false)]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 11, 1)]);
    s.write_read_states(&[ack(A, C, 5, 3, true)]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 5, 3)], "a manual ack sets the mark and the count given");
    // One batch, in order, over two channels; many users at once.
    s.write_read_states(&[ack(A, D, 20, 0, false), mention(D, 21, &[A, B]), ack(A, D, 21, 0, false), mention(D, 22, &[B])]).await.unwrap();
    assert_eq!(states(s, A).await, vec![(160, 5, 3), (161, 21, 0)]);
    assert_eq!(states(s, B).await, vec![(160, 0, 1), (161, 0, 2)]);
    let many: Vec<UserId> = (0..2_000u64).map(|n| UserId(50_000 + n)).collect();
    s.write_read_states(&[mention(D, 23, &many)]).await.unwrap();
    let read = s.read_states_of(&[UserId(50_000), UserId(51_999), A]).await.unwrap();
    assert_eq!(read.len(), 3, "every user asked for who has states");
    assert_eq!(read.iter().map(|(u, _)| u.0).collect::<Vec<_>>(), vec![1, 50_000, 51_999], "by user id");
    // A write for a channel that is gone is skipped; the batch still lands.
    s.write_read_states(&[ack(A, ChannelId(9_999_999), 1, 0, false), mention(ChannelId(9_999_998), 1, &[A]), ack(B, C, 30, 0, false)])
        .await
        .unwrap();
    assert_eq!(states(s, B).await, vec![(160, 30, 0), (161, 0, 2)]);
    // Rows go with their channel.
    assert_eq!(rows(s, vec![Change::DeleteChannel(D)]).await, vec![1]);
    assert_eq!(states(s, A).await, vec![(160, 5, 3)]);
    assert!(s.read_states_of(&[UserId(50_000)]).await.unwrap().is_empty(), "the mentions of the deleted channel went with it");
}
