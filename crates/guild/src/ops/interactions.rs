//! Interactions in a guild: the guild's [`Venue`] (see `crate::interact`).
//! The invoker is a member who sees the channel, may use application
//! commands, and passes the guild's permission overrides of the command (or
//! else its `default_member_permissions`); the bot must be a member.

use std::sync::Arc;

use bytes::Bytes;
use protocol::model::{self, permission};
use protocol::{ActorKey, ChannelId, ErrorCode, GuildId, MessageId, UserId};
use serde_json::{json, Map, Value};
use store::{Change, MessageRecord};

use super::Decided;
use crate::actor::{GuildActor, State};
use crate::interact::{self, Admitted, Interactions, Venue};
use fanout::{FanEvent, Filter};
use node::convert;
use node::route::interactions::{InteractionAction, Invoke};
use node::route::{GuildEvent, OpReply};
use node::Node;

pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: InteractionAction) -> Decided {
    interact::plan(a, st, user, action)
}

impl Venue for GuildActor {
    type St = State;

    fn ix(st: &State) -> &Interactions {
        &st.interactions
    }

    fn ix_mut(st: &mut State) -> &mut Interactions {
        &mut st.interactions
    }

    fn node(&self) -> &Arc<Node> {
        GuildActor::node(self)
    }

    fn key(&self) -> ActorKey {
        GuildActor::key(self)
    }

    fn guild_id(st: &State) -> Option<GuildId> {
        Some(st.guild.id)
    }

    fn admit(&self, st: &State, user: UserId, inv: &Invoke) -> Result<Admitted, OpReply> {
        let caller = st.caller(user)?;
        let c = st.channel(inv.channel)?;
        let bits = caller.view(st, c)?;
        let admin = caller.owner || bits & permission::ADMINISTRATOR != 0;
        if !admin && bits & permission::USE_APPLICATION_COMMANDS == 0 {
            return Err(super::missing_permissions());
        }
        // The guild's overrides first (a command's, then the application's);
        // where they say nothing, the command's default_member_permissions.
        let (cmd_over, app_over) = &inv.overrides;
        let said =
            node::route::interactions::overrides_allow(cmd_over, app_over, st.guild.id, user, &caller.member.roles, Some(c.id), admin);
        let default = inv.command.as_ref().and_then(|c| c.default_member_permissions);
        if said == Some(false) || (said.is_none() && !node::route::interactions::may_run(bits, admin, default)) {
            return Err(super::missing_permissions());
        }
        // The bot must be in the guild to be asked.
        let Some(bot_member) = st.members.get(&inv.bot) else {
            return Err(OpReply::not_found(ErrorCode::UnknownApplication));
        };
        let app_bits = {
            let base = node::perm::base(st.guild.id, st.guild.owner_id, &st.roles, &bot_member);
            node::perm::in_channel(base, st.guild.id, &bot_member, c)
        };
        let gid = st.guild.id;
        let mut member = serde_json::to_value(convert::member(&caller.member, Some(&caller.user))).unwrap_or(Value::Null);
        member["permissions"] = json!(bits.to_string());
        // Built in place: `json!` would copy the member and channel values.
        let mut fields = Map::new();
        fields.insert("guild_id".into(), json!(gid));
        fields.insert("guild".into(), json!({"id": gid, "locale": "en-US", "features": []}));
        fields.insert("channel".into(), serde_json::to_value(convert::channel(c)).unwrap_or(Value::Null));
        fields.insert("member".into(), member);
        fields.insert("app_permissions".into(), json!(app_bits.to_string()));
        fields.insert("guild_locale".into(), json!("en-US"));
        // GUILD
        fields.insert("context".into(), json!(0));
        Ok(Admitted {
            bot: std::sync::Arc::new(bot_member.user()),
            invoker: (*caller.user).clone(),
            fields,
            // GUILD_INSTALL: this guild.
            owners: json!({"0": gid}),
        })
    }

    /// The users (with their members), channels and roles the options name.
    fn resolve(st: &State, inv: &Invoke) -> Map<String, Value> {
        let m = &inv.mentions;
        let (mut users, mut members, mut roles, mut channels) = (Map::new(), Map::new(), Map::new(), Map::new());
        let mut add_user = |id: UserId| {
            if let Some(mem) = st.members.get(&id) {
                users.insert(id.to_string(), serde_json::to_value(convert::user(&mem.user())).unwrap_or(Value::Null));
                let mut mv = serde_json::to_value(mem.model(false)).unwrap_or(Value::Null);
                if let Some(o) = mv.as_object_mut() {
                    o.remove("user");
                }
                members.insert(id.to_string(), mv);
                true
            } else {
                false
            }
        };
        for &u in &m.users {
            add_user(u);
        }
        let mut either_roles = Vec::new();
        for &x in &m.either {
            if !add_user(UserId(x)) {
                either_roles.push(protocol::RoleId(x));
            }
        }
        for r in m.roles.iter().chain(&either_roles) {
            if let Some(role) = st.roles.iter().find(|x| x.id == *r) {
                roles.insert(r.to_string(), serde_json::to_value(convert::role(role)).unwrap_or(Value::Null));
            }
        }
        for ch in &m.channels {
            if let Ok(c) = st.channel(*ch) {
                channels.insert(ch.to_string(), json!({"id": c.id, "name": c.name, "type": c.kind, "permissions": "0"}));
            }
        }
        let mut r = Map::new();
        for (k, v) in [("users", users), ("members", members), ("roles", roles), ("channels", channels)] {
            if !v.is_empty() {
                r.insert(k.to_string(), Value::Object(v));
            }
        }
        r
    }

    fn bot_member(st: &State, bot: UserId) -> Option<model::Member> {
        st.members.get(&bot).map(|m| m.model(false))
    }

    /// To every session of `user` subscribed to this guild, on any node.
    fn to_user(&mut self, user: UserId, name: &'static str, body: Bytes) {
        self.publish_direct(FanEvent::new(name, body, Filter::Intent(0)), user);
    }

    fn create_change(rec: MessageRecord) -> Change {
        Change::WebhookMessage(rec)
    }

    fn created(&mut self, st: &mut State, message: Arc<model::Message>, body: Bytes) {
        self.apply(st, GuildEvent::MessageCreate { message, body });
    }

    fn updated(&mut self, st: &mut State, message: Arc<model::Message>, body: Bytes) {
        self.apply(st, GuildEvent::MessageUpdate { message, body });
    }

    fn deleted(&mut self, st: &mut State, id: MessageId, channel: ChannelId) {
        self.apply(st, GuildEvent::MessageDelete { id, channel_id: channel });
    }
}
