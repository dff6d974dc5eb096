//! The audit log's entries, derived in one place from what an accepted
//! action commits: each [`Change`] of a plan, compared with the actor's
//! state before it, says what was done to what. The entries join the plan's
//! changes (one transaction), and once committed go out as
//! GUILD_AUDIT_LOG_ENTRY_CREATE to members who may read the log.
//!
//! What the changes alone cannot say (whose message was deleted or pinned,
//! that a member was a bot being added) comes from the action, as a
//! [`Hint`] taken before the action is planned.

use protocol::model::permission;
use protocol::{GuildId, Snowflake, UserId};
use serde_json::{json, Map, Value};
use store::{AuditRecord, Change, ChannelRecord, MemberRecord, OverwriteRecord, RoleRecord};

use crate::actor::State;

use node::route::ops::audit_kind as kind;
use node::route::ops::{AuditNote, GuildAction, MemberAction, MessageAction, PinAction};
use node::route::Action;

/// What the action says that its changes do not.
#[derive(Clone, Debug)]
pub(crate) enum Hint {
    None,
    /// An entry the REST handler wrote out (a change made outside the actor).
    Noted(Box<AuditNote>),
    /// A message of `author` deleted.
    MessageBy(UserId),
    /// A bot authorized into the guild.
    BotAdd,
}

impl Hint {
    pub(crate) fn of(action: &Action) -> Hint {
        match action {
            Action::Message(MessageAction::Delete { author, .. }) => Hint::MessageBy(*author),
            Action::Pin(PinAction::Pin { author, .. } | PinAction::Unpin { author, .. }) => Hint::MessageBy(*author),
            Action::Member(MemberAction::AuthorizeBot { .. }) => Hint::BotAdd,
            Action::Guild(GuildAction::Record(note)) => Hint::Noted(note.clone()),
            _ => Hint::None,
        }
    }
}

/// The stored record of `e`: `id` new, by `user` (0: the system).
pub(crate) fn record(e: AuditNote, id: Snowflake, guild: GuildId, user: UserId, reason: Option<&str>) -> AuditRecord {
    let mut m = Map::new();
    m.insert("id".into(), id.0.to_string().into());
    m.insert("user_id".into(), if user.0 == 0 { Value::Null } else { user.0.to_string().into() });
    m.insert("target_id".into(), e.target.map_or(Value::Null, |t| t.to_string().into()));
    m.insert("action_type".into(), e.action.into());
    if !e.changes.is_empty() {
        m.insert("changes".into(), Value::Array(e.changes));
    }
    if let Some(o) = e.options {
        m.insert("options".into(), o);
    }
    if let Some(r) = reason {
        m.insert("reason".into(), r.into());
    }
    AuditRecord { id, guild_id: guild, user_id: (user.0 != 0).then_some(user), action_type: e.action, entry: Value::Object(m).to_string() }
}

fn id_str(v: Option<impl ToString>) -> Value {
    v.map_or(Value::Null, |v| v.to_string().into())
}

fn channel_fields(c: &ChannelRecord) -> Vec<(&'static str, Value)> {
    vec![
        ("name", c.name.clone().into()),
        ("type", c.kind.into()),
        ("position", c.position.into()),
        ("topic", c.topic.clone().into()),
        ("nsfw", c.nsfw.into()),
        ("rate_limit_per_user", c.rate_limit_per_user.into()),
        ("parent_id", id_str(c.parent_id.map(|p| p.0))),
    ]
}

fn thread_fields(c: &ChannelRecord, t: &store::ThreadRecord) -> Vec<(&'static str, Value)> {
    vec![
        ("name", c.name.clone().into()),
        ("archived", t.archived.into()),
        ("locked", t.locked.into()),
        ("auto_archive_duration", t.auto_archive_duration.into()),
        ("rate_limit_per_user", c.rate_limit_per_user.into()),
        ("invitable", t.invitable.into()),
    ]
}

fn overwrite_json(o: &OverwriteRecord) -> Value {
    json!({"id": o.id.to_string(), "type": o.kind, "allow": o.allow.to_string(), "deny": o.deny.to_string()})
}

fn role_fields(r: &RoleRecord) -> Vec<(&'static str, Value)> {
    vec![
        ("name", r.name.clone().into()),
        ("permissions", r.permissions.to_string().into()),
        ("color", r.color.into()),
        ("hoist", r.hoist.into()),
        ("mentionable", r.mentionable.into()),
    ]
}

/// The entries `user`'s `changes` make, judged against `st` as it is
/// before they apply.
pub(crate) fn entries(st: &State, user: UserId, hint: Hint, changes: &[Change]) -> Vec<AuditNote> {
    if user.0 == 0 {
        return Vec::new();
    }
    if let Hint::Noted(note) = hint {
        return vec![*note];
    }
    let banning: Vec<UserId> = changes.iter().filter_map(|c| if let Change::AddBan(b) = c { Some(b.user_id) } else { None }).collect();
    let mut out = Vec::new();
    for c in changes {
        match c {
            Change::UpdateGuild(g) => {
                let fields = |g: &store::GuildRecord| {
                    vec![
                        ("name", g.name.clone().into()),
                        ("description", g.description.clone().into()),
                        ("icon_hash", g.icon.clone().into()),
                        ("owner_id", g.owner_id.0.to_string().into()),
                        ("system_channel_id", id_str(g.system_channel_id.map(|c| c.0))),
                    ]
                };
                let d = AuditNote::diff(Some(&fields(&st.guild)), Some(&fields(g)));
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::GUILD_UPDATE, g.id.0).with(d));
                }
            }
            Change::CreateChannel(ch) => {
                let mut d = AuditNote::diff(None, Some(&channel_fields(ch)));
                d.push(AuditNote::change("permission_overwrites", None, Some(ch.overwrites.iter().map(overwrite_json).collect())));
                out.push(AuditNote::new(kind::CHANNEL_CREATE, ch.id.0).with(d));
            }
            Change::UpdateChannel(ch) => {
                let Some(old) = st.channels.iter().find(|o| o.id == ch.id) else { continue };
                let d = AuditNote::diff(Some(&channel_fields(old)), Some(&channel_fields(ch)));
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::CHANNEL_UPDATE, ch.id.0).with(d));
                }
                overwrites(st, old, ch, &mut out);
            }
            Change::DeleteChannel(id) => {
                if let Some(old) = st.channels.iter().find(|o| o.id == *id) {
                    let mut d = AuditNote::diff(Some(&channel_fields(old)), None);
                    d.push(AuditNote::change("permission_overwrites", Some(old.overwrites.iter().map(overwrite_json).collect()), None));
                    out.push(AuditNote::new(kind::CHANNEL_DELETE, id.0).with(d));
                } else if let Some(t) = st.threads.map.get(id) {
                    let d = vec![
                        AuditNote::change("name", Some(t.channel.name.clone().into()), None),
                        AuditNote::change("type", Some(t.channel.kind.into()), None),
                    ];
                    out.push(AuditNote::new(kind::THREAD_DELETE, id.0).with(d));
                }
            }
            Change::AddMember(m) | Change::AddMemberUnlessBanned(m) if matches!(hint, Hint::BotAdd) => {
                out.push(AuditNote::new(kind::BOT_ADD, m.user_id.0));
            }
            Change::UpdateMember(m) => {
                let Some(old) = st.members.get(&m.user_id).map(|o| o.record()) else { continue };
                let mut d = Vec::new();
                if old.nick != m.nick {
                    d.push(AuditNote::change("nick", old.nick.clone().map(Into::into), m.nick.clone().map(Into::into)));
                }
                if old.communication_disabled_until != m.communication_disabled_until {
                    let t =
                        |r: &MemberRecord| -> Option<Value> { r.communication_disabled_until.map(|t| protocol::model::iso8601(t).into()) };
                    d.push(AuditNote::change("communication_disabled_until", t(&old), t(m)));
                }
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::MEMBER_UPDATE, m.user_id.0).with(d));
                }
                let partial = |ids: Vec<&protocol::RoleId>| -> Value {
                    ids.iter()
                        .map(|id| {
                            let name = st.roles.iter().find(|r| r.id == **id).map(|r| r.name.clone()).unwrap_or_default();
                            json!({"id": id.0.to_string(), "name": name})
                        })
                        .collect()
                };
                let added: Vec<_> = m.roles.iter().filter(|r| !old.roles.contains(r)).collect();
                let removed: Vec<_> = old.roles.iter().filter(|r| !m.roles.contains(r)).collect();
                let mut d = Vec::new();
                if !added.is_empty() {
                    d.push(AuditNote::change("$add", None, Some(partial(added))));
                }
                if !removed.is_empty() {
                    d.push(AuditNote::change("$remove", None, Some(partial(removed))));
                }
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::MEMBER_ROLE_UPDATE, m.user_id.0).with(d));
                }
            }
            Change::RemoveMember { user: target, .. } if *target != user && !banning.contains(target) => {
                out.push(AuditNote::new(kind::MEMBER_KICK, target.0));
            }
            Change::CreateRole(r) => out.push(AuditNote::new(kind::ROLE_CREATE, r.id.0).with(AuditNote::diff(None, Some(&role_fields(r))))),
            Change::UpdateRole(r) => {
                let Some(old) = st.roles.iter().find(|o| o.id == r.id) else { continue };
                let d = AuditNote::diff(Some(&role_fields(old)), Some(&role_fields(r)));
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::ROLE_UPDATE, r.id.0).with(d));
                }
            }
            Change::DeleteRole { role, .. } => {
                if let Some(old) = st.roles.iter().find(|o| o.id == *role) {
                    out.push(AuditNote::new(kind::ROLE_DELETE, role.0).with(AuditNote::diff(Some(&role_fields(old)), None)));
                }
            }
            Change::AddBan(b) => out.push(AuditNote::new(kind::MEMBER_BAN_ADD, b.user_id.0)),
            Change::RemoveBan { user: target, .. } => out.push(AuditNote::new(kind::MEMBER_BAN_REMOVE, target.0)),
            Change::DeleteMessage { channel, .. } => {
                if let Hint::MessageBy(author) = hint {
                    if author != user {
                        let o = json!({"channel_id": channel.0.to_string(), "count": "1"});
                        out.push(AuditNote::new(kind::MESSAGE_DELETE, author.0).options(o));
                    }
                }
            }
            Change::DeleteMessages { channel, ids } => {
                out.push(AuditNote::new(kind::MESSAGE_BULK_DELETE, channel.0).options(json!({"count": ids.len().to_string()})));
            }
            Change::PinMessage { channel, message, .. } | Change::UnpinMessage { channel, message } => {
                let action = if matches!(c, Change::PinMessage { .. }) { kind::MESSAGE_PIN } else { kind::MESSAGE_UNPIN };
                let target = if let Hint::MessageBy(a) = hint { Some(a.0) } else { None };
                let o = json!({"channel_id": channel.0.to_string(), "message_id": message.0.to_string()});
                out.push(AuditNote::new(action, target).options(o));
            }
            Change::CreateEmoji(e) => {
                out.push(AuditNote::new(kind::EMOJI_CREATE, e.id.0).with(vec![AuditNote::change(
                    "name",
                    None,
                    Some(e.name.clone().into()),
                )]));
            }
            Change::UpdateEmoji(e) => {
                let old = st.emojis.iter().find(|o| o.id == e.id);
                if let Some(old) = old.filter(|o| o.name != e.name) {
                    let d = vec![AuditNote::change("name", Some(old.name.clone().into()), Some(e.name.clone().into()))];
                    out.push(AuditNote::new(kind::EMOJI_UPDATE, e.id.0).with(d));
                }
            }
            Change::DeleteEmoji { id, .. } => {
                let name = st.emojis.iter().find(|o| o.id == *id).map(|o| o.name.clone());
                out.push(AuditNote::new(kind::EMOJI_DELETE, id.0).with(vec![AuditNote::change("name", name.map(Into::into), None)]));
            }
            Change::CreateWebhook(w) => {
                let fields = [("name", w.name.clone().into()), ("type", w.kind.into()), ("channel_id", w.channel_id.0.to_string().into())];
                out.push(AuditNote::new(kind::WEBHOOK_CREATE, w.id.0).with(AuditNote::diff(None, Some(&fields))));
            }
            // The actor does not hold webhooks: the new values only.
            Change::UpdateWebhook(w) => {
                let fields = [("name", w.name.clone().into()), ("channel_id", w.channel_id.0.to_string().into())];
                out.push(AuditNote::new(kind::WEBHOOK_UPDATE, w.id.0).with(AuditNote::diff(None, Some(&fields))));
            }
            Change::DeleteWebhook(id) => out.push(AuditNote::new(kind::WEBHOOK_DELETE, id.0)),
            Change::CreateThread { channel, thread, .. } => {
                let mut fields = thread_fields(channel, thread);
                fields.insert(1, ("type", channel.kind.into()));
                out.push(AuditNote::new(kind::THREAD_CREATE, channel.id.0).with(AuditNote::diff(None, Some(&fields))));
            }
            Change::UpdateThread { channel, thread } => {
                let Some(old) = st.threads.map.get(&channel.id) else { continue };
                let d = AuditNote::diff(Some(&thread_fields(&old.channel, &old.meta)), Some(&thread_fields(channel, thread)));
                if !d.is_empty() {
                    out.push(AuditNote::new(kind::THREAD_UPDATE, channel.id.0).with(d));
                }
            }
            _ => {}
        }
    }
    out
}

/// CHANNEL_OVERWRITE_CREATE / UPDATE / DELETE between a channel's old and
/// new overwrites.
fn overwrites(st: &State, old: &ChannelRecord, new: &ChannelRecord, out: &mut Vec<AuditNote>) {
    let options = |o: &OverwriteRecord| {
        let mut v = json!({"id": o.id.to_string(), "type": o.kind.to_string()});
        if o.kind == 0 {
            if let Some(r) = st.roles.iter().find(|r| r.id.0 == o.id) {
                v["role_name"] = r.name.clone().into();
            }
        }
        v
    };
    let fields = |o: &OverwriteRecord| -> Vec<(&'static str, Value)> {
        vec![
            ("id", o.id.to_string().into()),
            ("type", o.kind.into()),
            ("allow", o.allow.to_string().into()),
            ("deny", o.deny.to_string().into()),
        ]
    };
    for n in &new.overwrites {
        match old.overwrites.iter().find(|o| o.id == n.id) {
            None => out.push(
                AuditNote::new(kind::CHANNEL_OVERWRITE_CREATE, new.id.0).with(AuditNote::diff(None, Some(&fields(n)))).options(options(n)),
            ),
            Some(o) if (o.allow, o.deny) != (n.allow, n.deny) => {
                let d = AuditNote::diff(Some(&fields(o)[2..]), Some(&fields(n)[2..]));
                out.push(AuditNote::new(kind::CHANNEL_OVERWRITE_UPDATE, new.id.0).with(d).options(options(n)));
            }
            Some(_) => {}
        }
    }
    for o in old.overwrites.iter().filter(|o| !new.overwrites.iter().any(|n| n.id == o.id)) {
        out.push(
            AuditNote::new(kind::CHANNEL_OVERWRITE_DELETE, new.id.0).with(AuditNote::diff(Some(&fields(o)), None)).options(options(o)),
        );
    }
}

/// Who receives GUILD_AUDIT_LOG_ENTRY_CREATE: members who may read the log.
pub(crate) fn reads_log(st: &State, user: UserId) -> bool {
    st.members.get(&user).is_some_and(|m| {
        let bits = node::perm::base(st.guild.id, st.guild.owner_id, &st.roles, &m);
        bits & (permission::VIEW_AUDIT_LOG | permission::ADMINISTRATOR) != 0
    })
}
