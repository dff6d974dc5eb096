//! Conformance of attachments (pending uploads, linking on commit, counts
//! per file, cascade with their message) and webhooks.

use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};

use crate::*;

fn upload(id: u64, hash: &str, created_at: u64) -> AttachmentRecord {
    AttachmentRecord {
        id: Snowflake(id),
        channel_id: ChannelId(101),
        message_id: None,
        hash: hash.into(),
        filename: "f.png".into(),
        size: 3,
        content_type: Some("image/png".into()),
        width: Some(4),
        height: Some(5),
        description: Some("d".into()),
        created_at,
        uploader_id: Some(UserId(1)),
    }
}

fn with_files(id: u64, files: &[u64]) -> MessageRecord {
    let ids: Vec<String> = files.iter().map(u64::to_string).collect();
    MessageRecord {
        id: MessageId(id),
        channel_id: ChannelId(101),
        guild_id: Some(GuildId(100)),
        author_id: UserId(1),
        content: String::new(),
        edited_at: None,
        kind: 0,
        flags: 0,
        tts: false,
        mention_everyone: false,
        mentions: vec![],
        reference: None,
        extra: serde_json::json!({"attachments": ids.iter().map(|i| serde_json::json!({"id": i})).collect::<Vec<_>>()}),
    }
}

pub(super) async fn attachments_and_webhooks(s: &dyn Store) {
    let h = "a".repeat(64);
    let h2 = "b".repeat(64);
    s.create_attachment(&upload(900_001, &h, 10)).await.unwrap();
    assert_eq!(s.get_attachment(Snowflake(900_001)).await.unwrap(), Some(upload(900_001, &h, 10)), "a pending upload reads back");
    assert_eq!(s.blob_refs(&h).await.unwrap(), 1, "a pending upload counts as a reference");
    // Its message's group commit links it.
    assert_eq!(s.create_messages(&[(0, with_files(900_100, &[900_001]))]).await.unwrap(), vec![true]);
    assert_eq!(s.get_attachment(Snowflake(900_001)).await.unwrap().unwrap().message_id, Some(MessageId(900_100)), "linked on commit");
    assert_eq!(s.attachments_of_message(MessageId(900_100)).await.unwrap().len(), 1);
    // Discarding takes only pending rows; expiry only old pending rows.
    s.create_attachment(&upload(900_002, &h, 10)).await.unwrap();
    s.create_attachment(&upload(900_003, &h2, 5)).await.unwrap();
    assert_eq!(s.delete_pending_attachments(&[Snowflake(900_001), Snowflake(900_002)]).await.unwrap(), vec![h.clone()]);
    assert_eq!(s.blob_refs(&h).await.unwrap(), 1, "the linked row stays");
    assert_eq!(s.expire_pending_attachments(5).await.unwrap(), Vec::<String>::new(), "created at 5 is not before 5");
    assert_eq!(s.expire_pending_attachments(6).await.unwrap(), vec![h2.clone()]);
    assert!(s.get_attachment(Snowflake(900_003)).await.unwrap().is_none());
    // Deleting the message takes its rows with it.
    assert!(s.delete_message(ChannelId(101), MessageId(900_100)).await.unwrap());
    assert_eq!(s.blob_refs(&h).await.unwrap(), 0, "the rows went with their message");

    // Storage per uploader: every row counts, pending or linked, once per
    // row even when rows share a file; rows without an uploader count for
    // nobody; a message's deletion gives its bytes back.
    assert_eq!(s.uploaded_bytes(UserId(1)).await.unwrap(), 0);
    let sized =
        |id: u64, hash: &str, size: u64, by: Option<u64>| AttachmentRecord { size, uploader_id: by.map(UserId), ..upload(id, hash, 10) };
    s.create_attachment(&sized(900_010, &h, 1_000, Some(1))).await.unwrap();
    s.create_attachment(&sized(900_011, &h, 1_000, Some(1))).await.unwrap();
    s.create_attachment(&sized(900_012, &h2, 5_000_000_000, Some(1))).await.unwrap();
    s.create_attachment(&sized(900_013, &h2, 7, Some(2))).await.unwrap();
    s.create_attachment(&sized(900_014, &h2, 9, None)).await.unwrap();
    assert_eq!(s.get_attachment(Snowflake(900_014)).await.unwrap().unwrap().uploader_id, None);
    assert_eq!(s.uploaded_bytes(UserId(1)).await.unwrap(), 5_000_002_000, "past 32 bits");
    assert_eq!(s.uploaded_bytes(UserId(2)).await.unwrap(), 7);
    assert_eq!(s.create_messages(&[(0, with_files(900_102, &[900_010, 900_012]))]).await.unwrap(), vec![true]);
    assert_eq!(s.uploaded_bytes(UserId(1)).await.unwrap(), 5_000_002_000, "linked rows still count");
    assert!(s.delete_message(ChannelId(101), MessageId(900_102)).await.unwrap());
    assert_eq!(s.uploaded_bytes(UserId(1)).await.unwrap(), 1_000, "a deleted message gives its bytes back");
    let ids = [900_011, 900_013, 900_014].map(Snowflake);
    assert_eq!(s.delete_pending_attachments(&ids).await.unwrap().len(), 3);
    assert_eq!(s.uploaded_bytes(UserId(1)).await.unwrap(), 0);

    // Settings: the first value inserted stays; later callers read it.
    assert_eq!(s.setting_or_init("conformance.key", "first").await.unwrap(), "first");
    assert_eq!(s.setting_or_init("conformance.key", "second").await.unwrap(), "first", "insert-if-absent");
    assert_eq!(s.setting_or_init("conformance.other", "x").await.unwrap(), "x");

    let hook = WebhookRecord {
        id: Snowflake(900_200),
        guild_id: GuildId(100),
        channel_id: ChannelId(101),
        kind: 1,
        name: "hook".into(),
        avatar: None,
        token: "t0k3n".into(),
        creator_id: Some(UserId(1)),
        application_id: None,
        created_at: 7,
    };
    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(100)), &[Change::CreateWebhook(hook.clone())]).await.unwrap(), Some(vec![1]));
    assert_eq!(s.get_webhook(hook.id).await.unwrap(), Some(hook.clone()));
    assert_eq!(s.webhooks_of_channel(ChannelId(101)).await.unwrap(), vec![hook.clone()]);
    assert_eq!(s.webhooks_of_guild(GuildId(100)).await.unwrap(), vec![hook.clone()]);
    assert!(s.webhooks_of_channel(ChannelId(999)).await.unwrap().is_empty());
    let renamed = WebhookRecord { name: "renamed".into(), avatar: Some("abc".into()), ..hook.clone() };
    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(100)), &[Change::UpdateWebhook(renamed.clone())]).await.unwrap(), Some(vec![1]));
    assert_eq!(s.get_webhook(hook.id).await.unwrap(), Some(renamed));
    // A webhook's message, with a file, in one change.
    s.create_attachment(&upload(900_004, &h, 10)).await.unwrap();
    let m = with_files(900_101, &[900_004]);
    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(100)), &[Change::WebhookMessage(m.clone())]).await.unwrap(), Some(vec![1]));
    assert_eq!(s.get_message(ChannelId(101), MessageId(900_101)).await.unwrap(), Some(m));
    assert_eq!(s.get_attachment(Snowflake(900_004)).await.unwrap().unwrap().message_id, Some(MessageId(900_101)));
    assert!(s.delete_message(ChannelId(101), MessageId(900_101)).await.unwrap());
    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(100)), &[Change::DeleteWebhook(hook.id)]).await.unwrap(), Some(vec![1]));
    assert_eq!(
        s.apply_changes(0, ActorKey::from(GuildId(100)), &[Change::DeleteWebhook(hook.id)]).await.unwrap(),
        Some(vec![0]),
        "already gone"
    );
    assert!(s.get_webhook(hook.id).await.unwrap().is_none());
}
