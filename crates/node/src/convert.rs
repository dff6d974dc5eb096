//! Store records -> wire models.

use protocol::model::iso8601;
use protocol::model::{self, Channel, Member, Overwrite, Role, User};
use protocol::{ChannelId, GuildId, RoleId, Snowflake, UserId};
use serde_json::{json, Value};
use store::{ChannelRecord, DmChannel, GuildRecord, MemberRecord, MessageRecord, OverwriteRecord, RoleRecord, UserRecord};

pub fn user(u: &UserRecord) -> User {
    User {
        id: u.id,
        username: u.username.clone(),
        global_name: u.global_name.clone(),
        discriminator: "0".into(),
        avatar: u.avatar.clone(),
        bot: u.bot,
        flags: u.flags,
        public_flags: u.flags,
        member: None,
    }
}

/// Gives each mentioned user of `m` its partial member, as Discord does in
/// MESSAGE_CREATE/UPDATE of a guild: `members` pairs with `m.mentions`.
pub fn attach_mention_members(m: &mut model::Message, members: Vec<Member>) {
    for (u, member) in m.mentions.iter_mut().zip(members) {
        u.member = Some(Box::new(member));
    }
}

pub fn current_user(u: &UserRecord) -> model::CurrentUser {
    model::CurrentUser { user: user(u), verified: true, mfa_enabled: false, email: None, locale: "en-US", premium_type: 0 }
}

pub fn role(r: &RoleRecord) -> Role {
    Role {
        id: r.id,
        name: r.name.clone(),
        color: r.color,
        colors: model::RoleColors::solid(r.color),
        hoist: r.hoist,
        icon: None,
        unicode_emoji: None,
        position: r.position,
        permissions: r.permissions.to_string(),
        managed: r.bot_id.is_some(),
        mentionable: r.mentionable,
        flags: 0,
        tags: r.bot_id.map(|bot_id| model::RoleTags { bot_id }),
    }
}

pub fn overwrite(o: &OverwriteRecord) -> Overwrite {
    Overwrite { id: Snowflake(o.id), kind: o.kind, allow: o.allow.to_string(), deny: o.deny.to_string() }
}

pub fn channel(c: &ChannelRecord) -> Channel {
    let voice = c.kind == model::channel_type::GUILD_VOICE;
    let texty = c.kind == model::channel_type::GUILD_TEXT || c.kind == model::channel_type::GUILD_ANNOUNCEMENT;
    Channel {
        id: c.id,
        kind: c.kind,
        guild_id: c.guild_id,
        name: c.name.clone(),
        position: c.position,
        permission_overwrites: c.overwrites.iter().map(overwrite).collect(),
        topic: c.topic.clone(),
        nsfw: c.nsfw,
        last_message_id: c.last_message_id,
        parent_id: c.parent_id,
        rate_limit_per_user: c.rate_limit_per_user,
        flags: 0,
        bitrate: voice.then_some(64_000),
        user_limit: voice.then_some(0),
        rtc_region: voice.then_some(None),
        video_quality_mode: voice.then_some(1),
        default_auto_archive_duration: texty.then_some(1440),
        default_thread_rate_limit_per_user: texty.then_some(0),
    }
}

/// A member's timeout as Discord shows it: the time it ends, while it lasts.
pub fn timeout(m: &MemberRecord) -> Option<String> {
    m.communication_disabled_until.filter(|_| crate::perm::timed_out(m)).map(iso8601)
}

/// A member; `with_user` adds the nested user object.
pub fn member(m: &MemberRecord, u: Option<&UserRecord>) -> Member {
    Member {
        user: u.map(user),
        nick: m.nick.clone(),
        avatar: None,
        roles: m.roles.iter().copied().filter(|r| r.0 != m.guild_id.0).collect::<Vec<RoleId>>(),
        joined_at: iso8601(m.joined_at),
        premium_since: None,
        deaf: false,
        mute: false,
        flags: m.flags,
        pending: false,
        communication_disabled_until: timeout(m),
        banner: None,
        guild_id: None,
    }
}

pub fn guild(g: &GuildRecord, roles: &[RoleRecord]) -> model::Guild {
    model::Guild {
        id: g.id,
        name: g.name.clone(),
        icon: g.icon.clone(),
        splash: None,
        discovery_splash: None,
        banner: None,
        description: g.description.clone(),
        owner_id: g.owner_id,
        afk_channel_id: None,
        afk_timeout: 300,
        verification_level: 0,
        default_message_notifications: 0,
        explicit_content_filter: 0,
        roles: roles.iter().map(role).collect(),
        emojis: Vec::new(),
        stickers: [],
        features: [],
        mfa_level: 0,
        application_id: None,
        system_channel_id: g.system_channel_id,
        system_channel_flags: 0,
        rules_channel_id: None,
        public_updates_channel_id: None,
        safety_alerts_channel_id: None,
        max_members: 500_000,
        vanity_url_code: None,
        premium_tier: 0,
        premium_subscription_count: 0,
        preferred_locale: "en-US",
        nsfw_level: 0,
        nsfw: false,
        premium_progress_bar_enabled: false,
        incidents_data: None,
        max_presences: None,
    }
}

/// A stored message as clients see it. `author` and `mentions` are resolved by the caller.
pub fn message(m: &MessageRecord, author: &UserRecord, mentions: &[UserRecord], member: Option<Member>) -> model::Message {
    let extra = |k: &str| m.extra.get(k).and_then(|v| v.as_array()).cloned().unwrap_or_default();
    model::Message {
        id: m.id,
        channel_id: m.channel_id,
        guild_id: m.guild_id,
        author: webhook_author(m).unwrap_or_else(|| user(author)),
        member,
        content: m.content.clone(),
        timestamp: iso8601(m.id.timestamp_ms()),
        edited_timestamp: m.edited_at.map(iso8601),
        tts: m.tts,
        mention_everyone: m.mention_everyone,
        mentions: mentions.iter().map(user).collect(),
        mention_roles: m.extra.get("mention_roles").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default(),
        attachments: extra("attachments"),
        embeds: extra("embeds"),
        components: extra("components"),
        pinned: false,
        kind: m.kind,
        flags: m.flags,
        nonce: m.extra.get("nonce").filter(|v| !v.is_null()).cloned(),
        message_reference: m.reference.as_ref().and_then(|r| serde_json::from_value(r.clone()).ok()),
        channel_type: None,
        referenced_message: None,
        webhook_id: m.extra.get("webhook_id").and_then(|v| serde_json::from_value(v.clone()).ok()),
        application_id: m.extra.get("application_id").and_then(|v| serde_json::from_value(v.clone()).ok()),
        interaction_metadata: m.extra.get("interaction_metadata").filter(|v| !v.is_null()).cloned(),
        interaction: m.extra.get("interaction").filter(|v| !v.is_null()).cloned(),
        reactions: Vec::new(),
    }
}

/// A webhook's message: its author as Discord shows it (the webhook's id,
/// the name and avatar it posted with, `bot: true`), from the message's
/// `extra.webhook_author`.
fn webhook_author(m: &MessageRecord) -> Option<model::User> {
    let a = m.extra.get("webhook_author")?;
    Some(model::User {
        id: m.author_id,
        username: a.get("username")?.as_str()?.to_string(),
        global_name: None,
        discriminator: "0000".into(),
        avatar: a.get("avatar").and_then(|v| v.as_str()).map(str::to_string),
        bot: true,
        flags: 0,
        public_flags: 0,
        member: None,
    })
}

/// The DM channel object as `viewer` sees it: `recipients` are the others.
pub fn dm_json(dm: &DmChannel, viewer: UserId) -> Value {
    let others: Vec<model::User> = dm.recipients.iter().filter(|u| u.id != viewer).map(user).collect();
    let mut v = json!({
        "id": dm.channel.id,
        "type": dm.channel.kind,
        "last_message_id": dm.channel.last_message_id,
        "flags": 0,
        "recipients": others,
    });
    if dm.channel.kind == model::channel_type::GROUP_DM {
        // A group DM's name (null: clients show the recipients' names) and icon.
        v["name"] = if dm.channel.name.is_empty() { Value::Null } else { Value::from(dm.channel.name.clone()) };
        v["icon"] = Value::Null;
    }
    v
}

/// The `@everyone` role of a new guild: it shares the guild's id, as on Discord.
pub fn everyone_role(guild: GuildId) -> store::RoleRecord {
    store::RoleRecord {
        id: protocol::RoleId(guild.0),
        guild_id: guild,
        name: "@everyone".into(),
        color: 0,
        hoist: false,
        position: 0,
        permissions: protocol::model::permission::DEFAULT_EVERYONE,
        mentionable: false,
        bot_id: None,
    }
}

/// A plain text channel of a new guild.
pub fn text_channel(id: ChannelId, guild: GuildId, name: String, position: i32) -> ChannelRecord {
    ChannelRecord {
        id,
        guild_id: Some(guild),
        kind: protocol::model::channel_type::GUILD_TEXT,
        name,
        position,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: 0,
        overwrites: Vec::new(),
        last_message_id: None,
    }
}
