//! Interactions in a guild (see `node::route::interactions`): the actor
//! checks the invoker (a member who sees the channel, may use application
//! commands and holds the command's `default_member_permissions`), sends
//! INTERACTION_CREATE to the bot's sessions and the invoker's, and holds the
//! interaction while its token lives: one initial response within
//! `interactions.response_timeout_ms`, then edits and followups until
//! `interactions.token_ttl_ms`. Ephemeral messages are never committed:
//! they live here and go only to the invoker's sessions.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use protocol::model::{self, permission};
use protocol::{ApplicationId, ChannelId, ErrorCode, MessageId, UserId};
use serde_json::{json, Value};
use store::{Change, MessageRecord, UserRecord};

use super::{Decided, Plan};
use crate::actor::{GuildActor, State};
use fanout::{encode, FanEvent, Filter};
use node::convert;
use node::route::interactions::{callback, flags, kind, InteractionAction, Invoke};
use node::route::{GuildEvent, OpReply};

/// Message types of interaction responses.
const CHAT_INPUT_COMMAND: u8 = 20;
const CONTEXT_MENU_COMMAND: u8 = 23;
/// Flags a response may set: SUPPRESS_EMBEDS, EPHEMERAL, SUPPRESS_NOTIFICATIONS.
const SETTABLE_FLAGS: u64 = (1 << 2) | flags::EPHEMERAL | (1 << 12);
const MAX_CONTENT: usize = 2000;
const MAX_EMBEDS: usize = 10;

/// A message an interaction sent: committed, or ephemeral (here only).
enum Sent {
    Public(Box<MessageRecord>),
    Ephemeral(Box<MessageRecord>),
}

impl Sent {
    fn record(&self) -> &MessageRecord {
        match self {
            Sent::Public(r) | Sent::Ephemeral(r) => r,
        }
    }
}

pub(crate) struct Pending {
    app: ApplicationId,
    bot: Arc<UserRecord>,
    user: UserId,
    channel: ChannelId,
    kind: u8,
    nonce: Option<String>,
    created: Instant,
    /// `interaction_metadata` of its messages.
    metadata: Value,
    message_kind: u8,
    /// The initial response's type, once given; or no response in time.
    responded: Option<u8>,
    failed: bool,
    /// Components: the message the component is on (UPDATE_MESSAGE edits it).
    component_message: Option<Box<MessageRecord>>,
    original: Option<Sent>,
    followups: Vec<Sent>,
}

/// The interactions a guild's actor holds, oldest first.
#[derive(Default)]
pub(crate) struct Interactions {
    by_id: HashMap<u64, Pending>,
    order: VecDeque<(Instant, u64)>,
    /// Interactions that may still need an initial response, oldest first
    /// (the same timeout for all, so also by deadline), and whether an
    /// `Expire` is on its way for the oldest.
    waiting: VecDeque<(Instant, u64)>,
    timer: bool,
    /// Modals open on a person's screen, by (person, application, the
    /// modal's `custom_id`): their fields, for checking a submission.
    modals: HashMap<(UserId, ApplicationId, String), OpenModal>,
}

struct OpenModal {
    at: Instant,
    fields: Vec<Field>,
    /// `interaction_metadata` of the interaction that showed it (a
    /// submission's `triggering_interaction_metadata`).
    trigger: Value,
}

/// A field of an open modal: a text input, or a select in a label.
struct Field {
    custom_id: String,
    /// A text input (4), else a select (its `values`).
    text: bool,
    required: bool,
    min: usize,
    max: usize,
}

/// Modals one actor keeps open at once; the oldest go first.
const MAX_OPEN_MODALS: usize = 10_000;
const MAX_TEXT_INPUT: usize = 4000;

/// The inputs of a modal's `components` (or of a submission's): inside
/// labels (`component`) or rows (`components`), each with its `custom_id`.
fn modal_inputs(components: &Value) -> impl Iterator<Item = (&str, &Value)> {
    components
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.get("component").into_iter().chain(row.get("components").and_then(Value::as_array).into_iter().flatten()))
        .filter_map(|c| Some((c.get("custom_id")?.as_str()?, c)))
}

/// The fields of a modal's `components` (rows of inputs, or labels).
fn modal_fields(components: &Value) -> Vec<Field> {
    modal_inputs(components)
        .map(|(id, c)| {
            let n = |k: &str| c.get(k).and_then(Value::as_u64).map(|v| v as usize);
            let text = c.get("type").and_then(Value::as_u64) == Some(4);
            Field {
                custom_id: id.to_string(),
                text,
                required: c.get("required").and_then(Value::as_bool).unwrap_or(true),
                min: if text { n("min_length").unwrap_or(0) } else { n("min_values").unwrap_or(1) },
                max: if text { n("max_length").unwrap_or(MAX_TEXT_INPUT) } else { n("max_values").unwrap_or(1) },
            }
        })
        .collect()
}

/// A modal submission checked against the modal that was shown: only its
/// fields, each required one given, values within their lengths and counts.
fn check_submission(fields: &[Field], data: &Value) -> Result<(), OpReply> {
    let bad = |path: &str, code: &str, msg: &str| Err(OpReply::field(path, code, msg));
    let given: Vec<(&str, &Value)> = modal_inputs(data.get("components").unwrap_or(&Value::Null)).collect();
    for (id, c) in &given {
        let Some(f) = fields.iter().find(|f| f.custom_id == *id) else {
            return bad("data.components", "INTERACTION_MODAL_COMPONENT_UNKNOWN", &format!("The modal has no field \"{id}\"."));
        };
        let n = if f.text {
            c.get("value").and_then(Value::as_str).map(|v| v.chars().count())
        } else {
            c.get("values").and_then(Value::as_array).map(Vec::len)
        };
        let Some(n) = n else { return bad("data.components", "BASE_TYPE_REQUIRED", &format!("\"{id}\" has no value.")) };
        if (n > 0 || f.required) && (n < f.min.max(usize::from(f.required)) || n > f.max) {
            return bad("data.components", "BASE_TYPE_BAD_LENGTH", &format!("\"{id}\" is out of its length."));
        }
    }
    if let Some(f) = fields.iter().find(|f| f.required && !given.iter().any(|(id, _)| *id == f.custom_id)) {
        return bad("data.components", "BASE_TYPE_REQUIRED", &format!("\"{}\" is required.", f.custom_id));
    }
    Ok(())
}

impl Interactions {
    /// Forgets interactions whose token has expired.
    fn sweep(&mut self, now: Instant, ttl: Duration) {
        while let Some(&(at, id)) = self.order.front() {
            if now.duration_since(at) < ttl {
                break;
            }
            self.order.pop_front();
            self.by_id.remove(&id);
        }
    }
}

fn unknown() -> OpReply {
    OpReply::not_found(ErrorCode::UnknownInteraction)
}

fn bad_token() -> OpReply {
    OpReply::error(StatusCode::UNAUTHORIZED, ErrorCode::InvalidWebhookToken)
}

/// The interaction `token` names, if it is a real token of this actor.
fn token_id(a: &GuildActor, token: &str) -> Option<u64> {
    node::route::interactions::check_token(&a.node().blobs.signer, token).filter(|(key, _)| *key == a.key()).map(|(_, id)| id)
}

pub(super) fn plan(a: &GuildActor, st: &State, user: UserId, action: InteractionAction) -> Decided {
    let cfg = &a.node().config.interactions;
    let (timeout, ttl) = (Duration::from_millis(cfg.response_timeout_ms), Duration::from_millis(cfg.token_ttl_ms));
    match action {
        InteractionAction::Invoke(inv) => invoke(a, st, user, *inv),
        InteractionAction::Callback { id, token, kind: k, data, with_response } => {
            if token_id(a, &token) != Some(id) {
                return Err(unknown());
            }
            let p = st.interactions.by_id.get(&id).ok_or_else(unknown)?;
            if p.responded.is_some() {
                return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::InteractionAlreadyAcknowledged));
            }
            if p.failed || p.created.elapsed() > timeout {
                return Err(unknown());
            }
            respond(a, st, p, id, k, data, with_response)
        }
        InteractionAction::Message { app, token, message, edit, delete } => {
            let (id, p) = by_token(a, st, app, &token, ttl)?;
            let sent = match message {
                None => p.original.as_ref(),
                Some(m) => p.followups.iter().find(|s| s.record().id == m),
            };
            let Some(sent) = sent else { return Err(OpReply::not_found(ErrorCode::UnknownMessage)) };
            let rec = sent.record().clone();
            let ephemeral = matches!(sent, Sent::Ephemeral(_));
            if delete {
                return Ok(delete_sent(id, rec, ephemeral, message));
            }
            match edit {
                None => {
                    let m = render(st, p, &rec);
                    Ok(Plan::now(move |_, _| OpReply::ok(StatusCode::OK, &m)))
                }
                Some(patch) => edit_sent(st, id, p, rec, ephemeral, message, &patch),
            }
        }
        InteractionAction::Followup { app, token, data } => {
            let (id, p) = by_token(a, st, app, &token, ttl)?;
            if p.responded.is_none() {
                return Err(unknown());
            }
            // The first followup after a deferred answer replaces its "thinking" message.
            if let Some(Sent::Public(r) | Sent::Ephemeral(r)) = &p.original {
                if r.flags & flags::LOADING != 0 {
                    let ephemeral = r.flags & flags::EPHEMERAL != 0;
                    return edit_sent(st, id, p, (**r).clone(), ephemeral, None, &data);
                }
            }
            let rec = response_record(p, &data, false)?;
            Ok(send(a, st, id, rec, false))
        }
        InteractionAction::PermissionsChanged { bot, body } => Ok(Plan::now(move |a, _| {
            to_user(a, bot, "APPLICATION_COMMAND_PERMISSIONS_UPDATE", encode(&body));
            OpReply::no_content()
        })),
        InteractionAction::Expire => Ok(Plan::now(move |a, st| {
            // Every interaction past its deadline without an answer fails.
            let now = Instant::now();
            let mut failed = Vec::new();
            while let Some(&(at, id)) = st.interactions.waiting.front() {
                if now.duration_since(at) < timeout {
                    break;
                }
                st.interactions.waiting.pop_front();
                if let Some(p) = st.interactions.by_id.get_mut(&id).filter(|p| p.responded.is_none() && !p.failed) {
                    p.failed = true;
                    failed.push((p.user, json!({"id": id.to_string(), "nonce": p.nonce})));
                }
            }
            for (user, body) in failed {
                to_user(a, user, "INTERACTION_FAILURE", encode(&body));
            }
            // Then the next deadline, if any.
            st.interactions.timer = match st.interactions.waiting.front() {
                Some(&(at, _)) => {
                    a.expire_after((at + timeout).saturating_duration_since(now));
                    true
                }
                None => false,
            };
            OpReply::no_content()
        })),
    }
}

/// The interaction `token` names, if it is `app`'s and still alive: 401 50027 otherwise.
fn by_token<'a>(a: &GuildActor, st: &'a State, app: ApplicationId, token: &str, ttl: Duration) -> Result<(u64, &'a Pending), OpReply> {
    let id = token_id(a, token).ok_or_else(bad_token)?;
    let p = st.interactions.by_id.get(&id).ok_or_else(bad_token)?;
    if p.app != app || p.created.elapsed() > ttl {
        return Err(bad_token());
    }
    Ok((id, p))
}

/// The latest copy of the invoker's ephemeral message `mid` of `app`, and
/// the interaction it belongs to.
fn ephemeral_message(st: &State, user: UserId, app: ApplicationId, mid: MessageId) -> Option<(&Pending, &MessageRecord)> {
    let mut best: Option<(&Pending, &MessageRecord)> = None;
    for p in st.interactions.by_id.values().filter(|p| p.user == user && p.app == app) {
        for s in p.original.iter().chain(&p.followups) {
            if let Sent::Ephemeral(r) = s {
                if r.id == mid && best.is_none_or(|(_, b)| r.edited_at.unwrap_or(0) > b.edited_at.unwrap_or(0)) {
                    best = Some((p, r));
                }
            }
        }
    }
    best
}

fn invoke(a: &GuildActor, st: &State, user: UserId, mut inv: Invoke) -> Decided {
    let caller = st.caller(user)?;
    let c = st.channel(inv.channel)?;
    // A component on an ephemeral message: only its invoker has it.
    if let Some(mid) = inv.ephemeral_message {
        let Some((p, rec)) = ephemeral_message(st, user, inv.application_id, mid).filter(|(_, r)| r.channel_id == inv.channel) else {
            return Err(OpReply::not_found(ErrorCode::UnknownMessage));
        };
        let components = rec.extra.get("components").unwrap_or(&Value::Null);
        inv.data = node::components::check_use(components, &inv.data, &mut inv.mentions)
            .map_err(|e| OpReply::field(&e.path, e.code, &e.message))?;
        inv.message = serde_json::to_value(render(st, p, rec)).ok();
        inv.component_message = Some(rec.clone());
    }
    let bits = caller.view(st, c)?;
    let admin = caller.owner || bits & permission::ADMINISTRATOR != 0;
    if !admin && bits & permission::USE_APPLICATION_COMMANDS == 0 {
        return Err(super::missing_permissions());
    }
    // The guild's overrides first (a command's, then the application's);
    // where they say nothing, the command's default_member_permissions.
    let (cmd_over, app_over) = &inv.overrides;
    let said = node::route::interactions::overrides_allow(cmd_over, app_over, st.guild.id, user, &caller.member.roles, Some(c.id), admin);
    let default = inv.command.as_ref().and_then(|c| c.default_member_permissions);
    if said == Some(false) || (said.is_none() && !node::route::interactions::may_run(bits, admin, default)) {
        return Err(super::missing_permissions());
    }
    // A modal's submission: the modal this person has open, and its fields.
    let modal = if inv.kind == kind::MODAL_SUBMIT {
        let custom_id = inv.data["custom_id"].as_str().unwrap_or_default().to_string();
        let key = (user, inv.application_id, custom_id);
        let ttl = Duration::from_millis(a.node().config.interactions.token_ttl_ms);
        let Some(open) = st.interactions.modals.get(&key).filter(|m| m.at.elapsed() < ttl) else {
            return Err(OpReply::field("data.custom_id", "INTERACTION_MODAL_UNKNOWN", "No such modal is open."));
        };
        check_submission(&open.fields, &inv.data)?;
        Some((key, open.trigger.clone()))
    } else {
        None
    };
    // The bot must be in the guild to be asked.
    let Some((bot_member, bot_user)) = st.members.get(&inv.bot) else {
        return Err(OpReply::not_found(ErrorCode::UnknownApplication));
    };
    let app_bits = {
        let base = node::perm::base(st.guild.id, st.guild.owner_id, &st.roles, bot_member);
        node::perm::in_channel(base, st.guild.id, bot_member, c)
    };
    if st.interactions.by_id.len() >= a.node().config.interactions.max_pending_per_actor {
        return Err(OpReply::error(StatusCode::TOO_MANY_REQUESTS, ErrorCode::General));
    }
    let (member, member_user) = (caller.member.clone(), (**caller.user).clone());
    let channel_json = serde_json::to_value(convert::channel(c)).unwrap_or(Value::Null);
    let resolved = resolve(st, &inv);
    let bot = bot_user.clone();
    Ok(Plan::now(move |a, st| {
        let now = Instant::now();
        let cfg = a.node().config.interactions.clone();
        st.interactions.sweep(now, Duration::from_millis(cfg.token_ttl_ms));
        // A modal is submitted once.
        if let Some((k, _)) = &modal {
            st.interactions.modals.remove(k);
        }
        let id: u64 = a.node().ids.next().0;
        let token = node::route::interactions::token(&a.node().blobs.signer, a.key(), id);
        let gid = st.guild.id;
        let mut data = inv.data;
        if let Some(Value::Object(r)) = resolved {
            // Added to what REST resolved already (the attachments).
            match data.get_mut("resolved").and_then(Value::as_object_mut) {
                Some(have) => have.extend(r),
                None => data["resolved"] = Value::Object(r),
            }
        }
        let mut m = serde_json::to_value(convert::member(&member, Some(&member_user))).unwrap_or(Value::Null);
        m["permissions"] = json!(bits.to_string());
        let mut payload = json!({
            "id": id.to_string(),
            "application_id": inv.application_id,
            "type": inv.kind,
            "data": data,
            "guild_id": gid,
            "guild": {"id": gid, "locale": "en-US", "features": []},
            "channel_id": inv.channel,
            "channel": channel_json,
            "member": m,
            "token": token,
            "version": 1,
            "app_permissions": app_bits.to_string(),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": gid},
            "context": 0,
            "attachment_size_limit": a.node().config.attachments.max_file_bytes,
        });
        if let Some(msg) = inv.message {
            payload["message"] = msg;
        }
        let user_json = serde_json::to_value(convert::user(&member_user)).unwrap_or(Value::Null);
        let message_kind = match inv.command.as_ref().map(|c| c.kind) {
            Some(1) => CHAT_INPUT_COMMAND,
            Some(_) => CONTEXT_MENU_COMMAND,
            None => 0,
        };
        let mut metadata = json!({
            "id": id.to_string(),
            "type": inv.kind,
            "user": user_json,
            "authorizing_integration_owners": {"0": gid},
        });
        if let Some(c) = &inv.command {
            metadata["name"] = json!(c.name);
            metadata["command_type"] = json!(c.kind);
        }
        // Components: the message used; modals: the interaction that showed it.
        if let Some(m) = &inv.component_message {
            metadata["interacted_message_id"] = json!(m.id);
        }
        if let Some((_, trigger)) = modal {
            metadata["triggering_interaction_metadata"] = trigger;
        }
        st.interactions.by_id.insert(
            id,
            Pending {
                app: inv.application_id,
                bot,
                user,
                channel: inv.channel,
                kind: inv.kind,
                nonce: inv.nonce.clone(),
                created: now,
                metadata,
                message_kind,
                responded: None,
                failed: false,
                component_message: inv.component_message.clone().map(Box::new),
                original: None,
                followups: Vec::new(),
            },
        );
        st.interactions.order.push_back((now, id));
        let reply = if inv.http {
            OpReply::ok(StatusCode::ACCEPTED, &payload)
        } else {
            to_user(a, inv.bot, "INTERACTION_CREATE", encode(&payload));
            OpReply::no_content()
        };
        to_user(a, user, "INTERACTION_CREATE", encode(&json!({"id": id.to_string(), "nonce": inv.nonce})));
        // Autocomplete has no failure to report; the rest fail after the timeout.
        if inv.kind != kind::AUTOCOMPLETE {
            st.interactions.waiting.push_back((now, id));
            if !st.interactions.timer {
                st.interactions.timer = true;
                a.expire_after(Duration::from_millis(cfg.response_timeout_ms));
            }
        }
        reply
    }))
}

/// `data.resolved` for the users, members, channels and roles the options name.
fn resolve(st: &State, inv: &Invoke) -> Option<Value> {
    let m = &inv.mentions;
    if m.users.is_empty() && m.channels.is_empty() && m.roles.is_empty() && m.either.is_empty() && inv.target_message.is_none() {
        return None;
    }
    let (mut users, mut members, mut roles, mut channels) = (json!({}), json!({}), json!({}), json!({}));
    let mut add_user = |id: UserId| {
        if let Some((mem, u)) = st.members.get(&id) {
            users[id.to_string()] = serde_json::to_value(convert::user(u)).unwrap_or(Value::Null);
            let mut mv = serde_json::to_value(convert::member(mem, None)).unwrap_or(Value::Null);
            if let Some(o) = mv.as_object_mut() {
                o.remove("user");
            }
            members[id.to_string()] = mv;
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
            roles[r.to_string()] = serde_json::to_value(convert::role(role)).unwrap_or(Value::Null);
        }
    }
    for ch in &m.channels {
        if let Ok(c) = st.channel(*ch) {
            channels[ch.to_string()] = json!({"id": c.id, "name": c.name, "type": c.kind, "permissions": "0"});
        }
    }
    let mut messages = json!({});
    if let Some(msg) = &inv.target_message {
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        // Its author as a resolved user too, as Discord sends it.
        if let Some(a) = msg.get("author").filter(|a| a.is_object()) {
            if let Some(aid) = a.get("id").and_then(Value::as_str) {
                users[aid] = a.clone();
            }
        }
        messages[id] = msg.clone();
    }
    let mut r = json!({});
    for (k, v) in [("users", users), ("members", members), ("roles", roles), ("channels", channels), ("messages", messages)] {
        if v.as_object().is_some_and(|o| !o.is_empty()) {
            r[k] = v;
        }
    }
    Some(r)
}

/// The bot's initial response of type `k`.
fn respond(a: &GuildActor, st: &State, p: &Pending, id: u64, k: u8, data: Value, with_response: bool) -> Decided {
    let ok_kinds: &[u8] = match p.kind {
        kind::APPLICATION_COMMAND => &[callback::CHANNEL_MESSAGE, callback::DEFERRED_CHANNEL_MESSAGE, callback::MODAL],
        kind::MESSAGE_COMPONENT => &[
            callback::CHANNEL_MESSAGE,
            callback::DEFERRED_CHANNEL_MESSAGE,
            callback::DEFERRED_UPDATE_MESSAGE,
            callback::UPDATE_MESSAGE,
            callback::MODAL,
        ],
        kind::AUTOCOMPLETE => &[callback::AUTOCOMPLETE_RESULT],
        kind::MODAL_SUBMIT => &[callback::CHANNEL_MESSAGE, callback::DEFERRED_CHANNEL_MESSAGE, callback::DEFERRED_UPDATE_MESSAGE],
        _ => &[],
    };
    if !ok_kinds.contains(&k) {
        return Err(OpReply::field("type", "INTERACTION_RESPONSE_TYPE_INVALID", "Interaction response type is not valid here."));
    }
    let (user, nonce, ikind) = (p.user, p.nonce.clone(), p.kind);
    let answered = move |a: &mut GuildActor, st: &mut State, message: Option<(MessageId, bool, bool)>| {
        if let Some(p) = st.interactions.by_id.get_mut(&id) {
            p.responded = Some(k);
        }
        to_user(a, user, "INTERACTION_SUCCESS", encode(&json!({"id": id.to_string(), "nonce": nonce})));
        if !with_response {
            return OpReply::no_content();
        }
        let mut body = json!({"interaction": {"id": id.to_string(), "type": ikind}, "resource": {"type": k}});
        if let Some((mid, loading, ephemeral)) = message {
            body["interaction"]["response_message_id"] = json!(mid);
            body["interaction"]["response_message_loading"] = json!(loading);
            body["interaction"]["response_message_ephemeral"] = json!(ephemeral);
            // The message itself only for CHANNEL_MESSAGE_WITH_SOURCE, as on Discord.
            if k == callback::CHANNEL_MESSAGE {
                let m = st.interactions.by_id.get(&id).and_then(|p| p.original.as_ref().map(|s| render(st, p, s.record())));
                body["resource"]["message"] = json!(m);
            }
        }
        OpReply::ok(StatusCode::OK, &body)
    };
    match k {
        callback::CHANNEL_MESSAGE | callback::DEFERRED_CHANNEL_MESSAGE => {
            let deferred = k == callback::DEFERRED_CHANNEL_MESSAGE;
            let mut data = data;
            if deferred {
                // The "thinking" message: empty, LOADING, ephemeral if asked.
                let f = data.get("flags").and_then(Value::as_u64).unwrap_or(0) & flags::EPHEMERAL;
                data = json!({"content": "", "flags": f | flags::LOADING});
            }
            let rec = response_record(p, &data, deferred)?;
            let ephemeral = rec.flags & flags::EPHEMERAL != 0;
            let loading = deferred;
            let plan = send(a, st, id, rec, true);
            let then = plan.then;
            Ok(Plan {
                changes: plan.changes,
                then: Box::new(move |a, st, rows| {
                    let r = then(a, st, rows);
                    if !matches!(r, OpReply::Done { .. }) {
                        return r;
                    }
                    let mid = st.interactions.by_id.get(&id).and_then(|p| p.original.as_ref()).map_or(MessageId(0), |s| s.record().id);
                    answered(a, st, Some((mid, loading, ephemeral)))
                }),
            })
        }
        callback::AUTOCOMPLETE_RESULT => {
            let choices = data.get("choices").cloned().unwrap_or(json!([]));
            if choices.as_array().is_none_or(|c| c.len() > 25) {
                return Err(OpReply::field("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."));
            }
            let (app, nonce) = (p.app, p.nonce.clone());
            Ok(Plan::now(move |a, st| {
                let body = json!({"choices": choices, "nonce": nonce, "application_id": app});
                to_user(a, user, "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE", encode(&body));
                answered(a, st, None)
            }))
        }
        callback::MODAL => {
            for f in ["custom_id", "title", "components"] {
                if data.get(f).is_none() {
                    return Err(OpReply::field(&format!("data.{f}"), "BASE_TYPE_REQUIRED", "This field is required"));
                }
            }
            let (app, bot, nonce, channel) = (p.app, p.bot.clone(), p.nonce.clone(), p.channel);
            let key = (user, app, data["custom_id"].as_str().unwrap_or_default().to_string());
            let fields = modal_fields(&data["components"]);
            let trigger = p.metadata.clone();
            Ok(Plan::now(move |a, st| {
                // Open until submitted, or for the token's lifetime.
                let ttl = Duration::from_millis(a.node().config.interactions.token_ttl_ms);
                let modals = &mut st.interactions.modals;
                modals.retain(|_, m| m.at.elapsed() < ttl);
                if modals.len() >= MAX_OPEN_MODALS {
                    if let Some(oldest) = modals.iter().min_by_key(|(_, m)| m.at).map(|(k, _)| k.clone()) {
                        modals.remove(&oldest);
                    }
                }
                modals.insert(key, OpenModal { at: Instant::now(), fields, trigger });
                let body = json!({
                    "id": id.to_string(), "nonce": nonce, "channel_id": channel,
                    "custom_id": data["custom_id"], "title": data["title"], "components": data["components"],
                    "application": {"id": app, "name": bot.username, "icon": bot.avatar, "bot_id": bot.id},
                });
                to_user(a, user, "INTERACTION_MODAL_CREATE", encode(&body));
                answered(a, st, None)
            }))
        }
        callback::UPDATE_MESSAGE => {
            // The component's message, edited; later edits of `@original` change it too.
            let Some(rec) = p.component_message.as_deref().cloned() else { return Err(unknown()) };
            let ephemeral = rec.flags & flags::EPHEMERAL != 0;
            let plan = edit_sent(st, id, p, rec, ephemeral, None, &data)?;
            let then = plan.then;
            Ok(Plan {
                changes: plan.changes,
                then: Box::new(move |a, st, rows| {
                    let r = then(a, st, rows);
                    if !matches!(r, OpReply::Done { .. }) {
                        return r;
                    }
                    answered(a, st, None)
                }),
            })
        }
        // DEFERRED_UPDATE_MESSAGE: acknowledged, nothing shown now; a
        // component's message is `@original` from here on.
        _ => Ok(Plan::now(move |a, st| {
            if let Some(p) = st.interactions.by_id.get_mut(&id) {
                if let Some(m) = p.component_message.clone() {
                    let ephemeral = m.flags & flags::EPHEMERAL != 0;
                    p.original = Some(if ephemeral { Sent::Ephemeral(m) } else { Sent::Public(m) });
                }
            }
            answered(a, st, None)
        })),
    }
}

fn response_record(p: &Pending, data: &Value, deferred: bool) -> Result<MessageRecord, OpReply> {
    let content = data.get("content").and_then(Value::as_str).unwrap_or("").to_string();
    let embeds = data.get("embeds").cloned().unwrap_or(json!([]));
    let components = data.get("components").cloned().unwrap_or(json!([]));
    if content.chars().count() > MAX_CONTENT {
        return Err(OpReply::field("data.content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."));
    }
    if embeds.as_array().is_none_or(|e| e.len() > MAX_EMBEDS) {
        return Err(OpReply::field("data.embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length."));
    }
    let empty = content.trim().is_empty() && embeds.as_array().is_none_or(Vec::is_empty) && components.as_array().is_none_or(Vec::is_empty);
    if empty && !deferred {
        return Err(OpReply::error(StatusCode::BAD_REQUEST, ErrorCode::EmptyMessage));
    }
    let mut f = data.get("flags").and_then(Value::as_u64).unwrap_or(0) & SETTABLE_FLAGS;
    if deferred {
        f |= flags::LOADING | (data.get("flags").and_then(Value::as_u64).unwrap_or(0) & flags::EPHEMERAL);
    }
    Ok(MessageRecord {
        // Assigned by `send`.
        id: MessageId(0),
        channel_id: p.channel,
        guild_id: None,
        author_id: p.bot.id,
        content,
        edited_at: None,
        kind: p.message_kind,
        flags: f,
        tts: data.get("tts").and_then(Value::as_bool).unwrap_or(false),
        mention_everyone: false,
        mentions: Vec::new(),
        reference: None,
        extra: json!({
            "embeds": embeds,
            "components": components,
            "attachments": [],
            "webhook_id": p.app,
            "application_id": p.app,
            "interaction_metadata": p.metadata,
            // The older `interaction`: the same facts, fewer of them.
            "interaction": {"id": p.metadata["id"], "type": p.metadata["type"],
                "name": p.metadata.get("name").cloned().unwrap_or(json!("")), "user": p.metadata["user"]},
        }),
    })
}

/// Sends `rec` (committed unless ephemeral) as the interaction's original
/// (`original`) or a followup; answers with the message.
fn send(a: &GuildActor, st: &State, id: u64, mut rec: MessageRecord, original: bool) -> Plan {
    rec.id = a.node().ids.next().into();
    rec.guild_id = Some(st.guild.id);
    let ephemeral = rec.flags & flags::EPHEMERAL != 0;
    let finish = move |a: &mut GuildActor, st: &mut State, rec: MessageRecord| {
        let Some(p) = st.interactions.by_id.get(&id) else { return unknown() };
        let m = render(st, p, &rec);
        let user = p.user;
        let body = encode(&m);
        if ephemeral {
            to_user(a, user, "MESSAGE_CREATE", body.clone());
        } else {
            a.apply(st, GuildEvent::MessageCreate { message: Arc::new(m), body: body.clone() });
        }
        let boxed = Box::new(rec);
        let s = if ephemeral { Sent::Ephemeral(boxed) } else { Sent::Public(boxed) };
        if let Some(p) = st.interactions.by_id.get_mut(&id) {
            if original {
                p.original = Some(s);
            } else {
                p.followups.push(s);
            }
        }
        OpReply::ok_bytes(StatusCode::OK, &body)
    };
    if ephemeral {
        return Plan::now(move |a, st| finish(a, st, rec));
    }
    Plan::new(vec![Change::WebhookMessage(rec.clone())], move |a, st, _| finish(a, st, rec))
}

/// Edits a sent message (`message: None`: the original).
fn edit_sent(
    st: &State,
    id: u64,
    p: &Pending,
    mut rec: MessageRecord,
    ephemeral: bool,
    message: Option<MessageId>,
    patch: &Value,
) -> Decided {
    if let Some(c) = patch.get("content") {
        let c = c.as_str().unwrap_or("").to_string();
        if c.chars().count() > MAX_CONTENT {
            return Err(OpReply::field("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."));
        }
        rec.content = c;
    }
    for f in ["embeds", "components"] {
        if let Some(v) = patch.get(f) {
            rec.extra[f] = if v.is_null() { json!([]) } else { v.clone() };
        }
    }
    // An edit ends the "thinking" state; EPHEMERAL never changes.
    rec.flags &= !flags::LOADING;
    if let Some(f) = patch.get("flags").and_then(Value::as_u64) {
        rec.flags = (rec.flags & flags::EPHEMERAL) | (f & SETTABLE_FLAGS & !flags::EPHEMERAL);
    }
    rec.edited_at = Some(node::auth::now_ms());
    let rendered = render(st, p, &rec);
    let user = p.user;
    let store_back = move |st: &mut State, rec: MessageRecord| {
        if let Some(p) = st.interactions.by_id.get_mut(&id) {
            let new = if ephemeral { Sent::Ephemeral(Box::new(rec)) } else { Sent::Public(Box::new(rec)) };
            match message {
                // The original (or, after UPDATE_MESSAGE, the component's message).
                None => p.original = Some(new),
                Some(m) => {
                    if let Some(s) = p.followups.iter_mut().find(|s| s.record().id == m) {
                        *s = new;
                    }
                }
            }
        }
    };
    if ephemeral {
        return Ok(Plan::now(move |a, st| {
            let body = encode(&rendered);
            to_user(a, user, "MESSAGE_UPDATE", body.clone());
            store_back(st, rec);
            OpReply::ok_bytes(StatusCode::OK, &body)
        }));
    }
    Ok(Plan::new(vec![Change::UpdateMessage(rec.clone())], move |a, st, _| {
        let body = encode(&rendered);
        a.apply(st, GuildEvent::MessageUpdate { message: Arc::new(rendered), body: body.clone() });
        store_back(st, rec);
        OpReply::ok_bytes(StatusCode::OK, &body)
    }))
}

fn delete_sent(id: u64, rec: MessageRecord, ephemeral: bool, message: Option<MessageId>) -> Plan {
    let forget = move |st: &mut State| {
        if let Some(p) = st.interactions.by_id.get_mut(&id) {
            match message {
                None => p.original = None,
                Some(m) => p.followups.retain(|s| s.record().id != m),
            }
        }
    };
    let (mid, channel) = (rec.id, rec.channel_id);
    if ephemeral {
        return Plan::now(move |a, st| {
            if let Some(p) = st.interactions.by_id.get(&id) {
                let (user, gid) = (p.user, st.guild.id);
                to_user(a, user, "MESSAGE_DELETE", encode(&json!({"id": mid, "channel_id": channel, "guild_id": gid})));
            }
            forget(st);
            OpReply::no_content()
        });
    }
    Plan::new(vec![Change::DeleteMessage { channel, id: mid }], move |a, st, _| {
        a.apply(st, GuildEvent::MessageDelete { id: mid, channel_id: channel });
        forget(st);
        OpReply::no_content()
    })
}

/// The message as the API shows it: the bot as author, with the interaction's fields.
fn render(st: &State, p: &Pending, rec: &MessageRecord) -> model::Message {
    let mut rec = rec.clone();
    rec.guild_id = Some(st.guild.id);
    let member = st.members.get(&p.bot.id).map(|(m, _)| convert::member(m, None));
    // `extra` carries `application_id`, `webhook_id` and the interaction fields.
    convert::message(&rec, &p.bot, &[], member)
}

/// One dispatch to every session of `user` subscribed to this guild, on any node.
fn to_user(a: &mut GuildActor, user: UserId, name: &'static str, body: bytes::Bytes) {
    a.publish_direct(FanEvent::new(name, body, Filter::Intent(0)), user);
}
