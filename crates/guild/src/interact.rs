//! Interactions (see `node::route::interactions`), in the actor of the place
//! they happen: a guild's or a DM's. The actor checks the invoker (through
//! its [`Venue`]: a member who may run the command there, or a recipient of
//! the bot's DM), sends INTERACTION_CREATE to the bot's sessions and the
//! invoker's, and holds the interaction while its token lives: one initial
//! response within `interactions.response_timeout_ms`, then edits and
//! followups until `interactions.token_ttl_ms`. Ephemeral messages are
//! never committed: they live here and go only to the invoker's sessions.
//!
//! What differs between a guild and a DM (who may invoke, the payload's
//! `member` or `user`, how a message is committed and fanned out) is the
//! [`Venue`]; everything else is written once, here.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use bytes::Bytes;
use protocol::model;
use protocol::{ActorKey, ApplicationId, ChannelId, ErrorCode, GuildId, MessageId, UserId};
use serde_json::{json, Map, Value};
use store::{Change, MessageRecord, UserRecord};

use crate::fenced::Plan;
use crate::GuildMsg;
use fanout::encode;
use node::convert;
use node::route::interactions::{callback, flags, kind, InteractionAction, Invoke};
use node::route::OpReply;
use node::Node;

/// The place an interaction happens in, as its actor `Self` with state
/// [`Venue::St`] sees it.
pub(crate) trait Venue: Sized + Send + 'static {
    type St: Send + 'static;
    fn ix(st: &Self::St) -> &Interactions;
    fn ix_mut(st: &mut Self::St) -> &mut Interactions;
    fn node(&self) -> &Arc<Node>;
    fn key(&self) -> ActorKey;
    /// The guild, if any (messages carry its id).
    fn guild_id(st: &Self::St) -> Option<GuildId>;
    /// May `user` invoke `inv` here? Then the bot, the invoker, and the
    /// payload's fields of this place.
    fn admit(&self, st: &Self::St, user: UserId, inv: &Invoke) -> Result<Admitted, OpReply>;
    /// `data.resolved` for what the options name (users, channels, roles).
    fn resolve(st: &Self::St, inv: &Invoke) -> Map<String, Value>;
    /// The bot as a member of this place, for its messages' `member`.
    fn bot_member(st: &Self::St, bot: UserId) -> Option<model::Member>;
    /// One dispatch, gated by no intent, to every session of `user` here.
    fn to_user(&mut self, user: UserId, name: &'static str, body: Bytes);
    /// The change that commits a new message of an interaction.
    fn create_change(rec: MessageRecord) -> Change;
    /// A committed message, created, edited or deleted: fanned out.
    fn created(&mut self, st: &mut Self::St, message: Arc<model::Message>, body: Bytes);
    fn updated(&mut self, st: &mut Self::St, message: Arc<model::Message>, body: Bytes);
    fn deleted(&mut self, st: &mut Self::St, id: MessageId, channel: ChannelId);

    /// Sends this actor `Expire` after `after` (the next interaction's
    /// initial response deadline), through the router: it reaches the
    /// actor wherever it runs by then. A full mailbox is tried again (the
    /// actor arms no other timer while this one is out).
    fn expire_after(&self, after: Duration) {
        let (node, key) = (self.node().clone(), self.key());
        self.node().tasks.spawn(async move {
            tokio::time::sleep(after).await;
            loop {
                let action = node::route::Action::Interaction(InteractionAction::Expire);
                let op = node::route::Op { user: UserId(0), action, reply: node::route::ReplyTo { node: node.id, id: 0 }, reason: None };
                match node.guilds.send(key, GuildMsg::Op(Box::new(op))) {
                    Err(node::route::RouteError::Busy(_)) if !node.shutdown.is_cancelled() => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return tracing::debug!(actor = %key, error = %e, "interaction expiry not delivered"),
                    Ok(()) => return,
                }
            }
        });
    }
}

/// An invocation a [`Venue`] admitted.
pub(crate) struct Admitted {
    pub bot: Arc<UserRecord>,
    pub invoker: UserRecord,
    /// The payload's fields of this place (`guild_id` and `member`, or
    /// `user`; `channel`, `app_permissions`, `context`, ...), and its
    /// `authorizing_integration_owners`.
    pub fields: Map<String, Value>,
    pub owners: Value,
}

type Decided<V> = Result<Plan<V, <V as Venue>::St>, OpReply>;

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
fn token_id<V: Venue>(a: &V, token: &str) -> Option<u64> {
    node::route::interactions::check_token(&a.node().blobs.signer, token).filter(|(key, _)| *key == a.key()).map(|(_, id)| id)
}

pub(crate) fn plan<V: Venue>(a: &V, st: &V::St, user: UserId, action: InteractionAction) -> Decided<V> {
    let cfg = &a.node().config.interactions;
    let (timeout, ttl) = (Duration::from_millis(cfg.response_timeout_ms), Duration::from_millis(cfg.token_ttl_ms));
    match action {
        InteractionAction::Invoke(inv) => invoke(a, st, user, *inv),
        InteractionAction::Callback { id, token, kind: k, data, with_response } => {
            if token_id(a, &token) != Some(id) {
                return Err(unknown());
            }
            let p = V::ix(st).by_id.get(&id).ok_or_else(unknown)?;
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
                    let m = render::<V>(st, p, &rec);
                    Ok(Plan::now(move |_, _| OpReply::ok(StatusCode::OK, &m)))
                }
                Some(patch) => edit_sent::<V>(st, id, p, rec, ephemeral, message, &patch),
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
                    return edit_sent::<V>(st, id, p, (**r).clone(), ephemeral, None, &data);
                }
            }
            let rec = response_record(p, data, false)?;
            Ok(send(a, st, id, rec, false))
        }
        InteractionAction::PermissionsChanged { bot, body } => Ok(Plan::now(move |a: &mut V, _| {
            a.to_user(bot, "APPLICATION_COMMAND_PERMISSIONS_UPDATE", encode(&body));
            OpReply::no_content()
        })),
        InteractionAction::Expire => Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
            // Every interaction past its deadline without an answer fails.
            let now = Instant::now();
            let mut failed = Vec::new();
            let ix = V::ix_mut(st);
            while let Some(&(at, id)) = ix.waiting.front() {
                if now.duration_since(at) < timeout {
                    break;
                }
                ix.waiting.pop_front();
                if let Some(p) = ix.by_id.get_mut(&id).filter(|p| p.responded.is_none() && !p.failed) {
                    p.failed = true;
                    failed.push((p.user, json!({"id": id.to_string(), "nonce": p.nonce})));
                }
            }
            // Then the next deadline, if any.
            let next = ix.waiting.front().map(|&(at, _)| (at + timeout).saturating_duration_since(now));
            ix.timer = next.is_some();
            if let Some(after) = next {
                a.expire_after(after);
            }
            for (user, body) in failed {
                a.to_user(user, "INTERACTION_FAILURE", encode(&body));
            }
            OpReply::no_content()
        })),
    }
}

/// The interaction `token` names, if it is `app`'s and still alive: 401 50027 otherwise.
fn by_token<'a, V: Venue>(a: &V, st: &'a V::St, app: ApplicationId, token: &str, ttl: Duration) -> Result<(u64, &'a Pending), OpReply> {
    let id = token_id(a, token).ok_or_else(bad_token)?;
    let p = V::ix(st).by_id.get(&id).ok_or_else(bad_token)?;
    if p.app != app || p.created.elapsed() > ttl {
        return Err(bad_token());
    }
    Ok((id, p))
}

/// The latest copy of the invoker's ephemeral message `mid` of `app`, and
/// the interaction it belongs to.
fn ephemeral_message(ix: &Interactions, user: UserId, app: ApplicationId, mid: MessageId) -> Option<(&Pending, &MessageRecord)> {
    let mut best: Option<(&Pending, &MessageRecord)> = None;
    for p in ix.by_id.values().filter(|p| p.user == user && p.app == app) {
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

fn invoke<V: Venue>(a: &V, st: &V::St, user: UserId, mut inv: Invoke) -> Decided<V> {
    let Admitted { bot, invoker, fields, owners } = a.admit(st, user, &inv)?;
    let ix = V::ix(st);
    // A component on an ephemeral message: only its invoker has it.
    if let Some(mid) = inv.ephemeral_message {
        let Some((p, rec)) = ephemeral_message(ix, user, inv.application_id, mid).filter(|(_, r)| r.channel_id == inv.channel) else {
            return Err(OpReply::not_found(ErrorCode::UnknownMessage));
        };
        let components = rec.extra.get("components").unwrap_or(&Value::Null);
        inv.data = node::components::check_use(components, &inv.data, &mut inv.mentions)
            .map_err(|e| OpReply::field(&e.path, e.code, &e.message))?;
        inv.message = serde_json::to_value(render::<V>(st, p, rec)).ok();
        inv.component_message = Some(rec.clone());
    }
    // A modal's submission: the modal this person has open, and its fields.
    let modal = if inv.kind == kind::MODAL_SUBMIT {
        let custom_id = inv.data["custom_id"].as_str().unwrap_or_default().to_string();
        let key = (user, inv.application_id, custom_id);
        let ttl = Duration::from_millis(a.node().config.interactions.token_ttl_ms);
        let Some(open) = ix.modals.get(&key).filter(|m| m.at.elapsed() < ttl) else {
            return Err(OpReply::field("data.custom_id", "INTERACTION_MODAL_UNKNOWN", "No such modal is open."));
        };
        check_submission(&open.fields, &inv.data)?;
        Some((key, open.trigger.clone()))
    } else {
        None
    };
    if ix.by_id.len() >= a.node().config.interactions.max_pending_per_actor {
        return Err(OpReply::error(StatusCode::TOO_MANY_REQUESTS, ErrorCode::General));
    }
    let mut resolved = V::resolve(st, &inv);
    if let Some(msg) = &inv.target_message {
        // A message context menu's message, and its author as a resolved user too, as Discord sends it.
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(author) = msg.get("author").filter(|a| a.is_object()) {
            if let Some(aid) = author.get("id").and_then(Value::as_str) {
                resolved.entry("users").or_insert_with(|| json!({}))[aid] = author.clone();
            }
        }
        resolved.entry("messages").or_insert_with(|| json!({}))[id] = msg.clone();
    }
    Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
        let now = Instant::now();
        let cfg = &a.node().config.interactions;
        let (ttl, timeout) = (Duration::from_millis(cfg.token_ttl_ms), Duration::from_millis(cfg.response_timeout_ms));
        let ix = V::ix_mut(st);
        ix.sweep(now, ttl);
        // A modal is submitted once.
        if let Some((k, _)) = &modal {
            ix.modals.remove(k);
        }
        let id: u64 = a.node().ids.next().0;
        let token = node::route::interactions::token(&a.node().blobs.signer, a.key(), id);
        let mut data = inv.data;
        if !resolved.is_empty() {
            // Added to what REST resolved already (the attachments).
            match data.get_mut("resolved").and_then(Value::as_object_mut) {
                Some(have) => have.extend(resolved),
                None => data["resolved"] = Value::Object(resolved),
            }
        }
        // Built in place: `json!` would copy `data` and the place's fields.
        let mut payload = fields;
        payload.insert("id".into(), Value::String(id.to_string()));
        payload.insert("application_id".into(), json!(inv.application_id));
        payload.insert("type".into(), json!(inv.kind));
        payload.insert("data".into(), data);
        payload.insert("channel_id".into(), json!(inv.channel));
        payload.insert("token".into(), Value::String(token));
        payload.insert("version".into(), json!(1));
        payload.insert("locale".into(), json!("en-US"));
        payload.insert("entitlements".into(), json!([]));
        payload.insert("authorizing_integration_owners".into(), owners.clone());
        payload.insert("attachment_size_limit".into(), json!(a.node().config.attachments.max_file_bytes));
        if let Some(msg) = inv.message {
            payload.insert("message".into(), msg);
        }
        let user_json = serde_json::to_value(convert::user(&invoker)).unwrap_or(Value::Null);
        let message_kind = match inv.command.as_ref().map(|c| c.kind) {
            Some(1) => CHAT_INPUT_COMMAND,
            Some(_) => CONTEXT_MENU_COMMAND,
            None => 0,
        };
        let mut metadata = Map::new();
        metadata.insert("id".into(), Value::String(id.to_string()));
        metadata.insert("type".into(), json!(inv.kind));
        metadata.insert("user".into(), user_json);
        metadata.insert("authorizing_integration_owners".into(), owners);
        let mut metadata = Value::Object(metadata);
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
        let ix = V::ix_mut(st);
        ix.by_id.insert(
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
        ix.order.push_back((now, id));
        // Autocomplete has no failure to report; the rest fail after the timeout.
        let mut arm = false;
        if inv.kind != kind::AUTOCOMPLETE {
            ix.waiting.push_back((now, id));
            arm = !std::mem::replace(&mut ix.timer, true);
        }
        if arm {
            a.expire_after(timeout);
        }
        let reply = if inv.http {
            OpReply::ok(StatusCode::ACCEPTED, &payload)
        } else {
            a.to_user(inv.bot, "INTERACTION_CREATE", encode(&payload));
            OpReply::no_content()
        };
        a.to_user(user, "INTERACTION_CREATE", encode(&json!({"id": id.to_string(), "nonce": inv.nonce})));
        reply
    }))
}

/// The bot's initial response of type `k`.
fn respond<V: Venue>(a: &V, st: &V::St, p: &Pending, id: u64, k: u8, data: Value, with_response: bool) -> Decided<V> {
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
    let answered = move |a: &mut V, st: &mut V::St, message: Option<(MessageId, bool, bool)>| {
        if let Some(p) = V::ix_mut(st).by_id.get_mut(&id) {
            p.responded = Some(k);
        }
        a.to_user(user, "INTERACTION_SUCCESS", encode(&json!({"id": id.to_string(), "nonce": nonce})));
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
                let m = V::ix(st).by_id.get(&id).and_then(|p| p.original.as_ref().map(|s| render::<V>(st, p, s.record())));
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
            let rec = response_record(p, data, deferred)?;
            let ephemeral = rec.flags & flags::EPHEMERAL != 0;
            let loading = deferred;
            Ok(send(a, st, id, rec, true).and_then(move |a, st| {
                let mid = V::ix(st).by_id.get(&id).and_then(|p| p.original.as_ref()).map_or(MessageId(0), |s| s.record().id);
                answered(a, st, Some((mid, loading, ephemeral)))
            }))
        }
        callback::AUTOCOMPLETE_RESULT => {
            let choices = data.get("choices").cloned().unwrap_or(json!([]));
            if choices.as_array().is_none_or(|c| c.len() > 25) {
                return Err(OpReply::field("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."));
            }
            let (app, nonce) = (p.app, p.nonce.clone());
            Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
                let body = json!({"choices": choices, "nonce": nonce, "application_id": app});
                a.to_user(user, "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE", encode(&body));
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
            Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
                // Open until submitted, or for the token's lifetime.
                let ttl = Duration::from_millis(a.node().config.interactions.token_ttl_ms);
                let modals = &mut V::ix_mut(st).modals;
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
                a.to_user(user, "INTERACTION_MODAL_CREATE", encode(&body));
                answered(a, st, None)
            }))
        }
        callback::UPDATE_MESSAGE => {
            // The component's message, edited; later edits of `@original` change it too.
            let Some(rec) = p.component_message.as_deref().cloned() else { return Err(unknown()) };
            let ephemeral = rec.flags & flags::EPHEMERAL != 0;
            Ok(edit_sent::<V>(st, id, p, rec, ephemeral, None, &data)?.and_then(move |a, st| answered(a, st, None)))
        }
        // DEFERRED_UPDATE_MESSAGE: acknowledged, nothing shown now; a
        // component's message is `@original` from here on.
        _ => Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
            if let Some(p) = V::ix_mut(st).by_id.get_mut(&id) {
                if let Some(m) = p.component_message.clone() {
                    let ephemeral = m.flags & flags::EPHEMERAL != 0;
                    p.original = Some(if ephemeral { Sent::Ephemeral(m) } else { Sent::Public(m) });
                }
            }
            answered(a, st, None)
        })),
    }
}

fn response_record(p: &Pending, mut data: Value, deferred: bool) -> Result<MessageRecord, OpReply> {
    let mut take = |k: &str| data.get_mut(k).map(Value::take).filter(|v| !v.is_null()).unwrap_or(json!([]));
    let (embeds, components) = (take("embeds"), take("components"));
    let content = data.get("content").and_then(Value::as_str).unwrap_or("").to_string();
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
        extra: {
            // Built in place: `json!` would copy the metadata by serializing it.
            let meta = &p.metadata;
            let mut older = Map::new();
            for k in ["id", "type", "user"] {
                older.insert(k.into(), meta.get(k).cloned().unwrap_or(Value::Null));
            }
            older.insert("name".into(), meta.get("name").cloned().unwrap_or(json!("")));
            let mut extra = Map::new();
            extra.insert("embeds".into(), embeds);
            extra.insert("components".into(), components);
            extra.insert("attachments".into(), json!([]));
            extra.insert("webhook_id".into(), json!(p.app));
            extra.insert("application_id".into(), json!(p.app));
            extra.insert("interaction_metadata".into(), meta.clone());
            // The older `interaction`: the same facts, fewer of them.
            extra.insert("interaction".into(), Value::Object(older));
            Value::Object(extra)
        },
    })
}

/// Sends `rec` (committed unless ephemeral) as the interaction's original
/// (`original`) or a followup; answers with the message.
fn send<V: Venue>(a: &V, st: &V::St, id: u64, mut rec: MessageRecord, original: bool) -> Plan<V, V::St> {
    rec.id = a.node().ids.next().into();
    rec.guild_id = V::guild_id(st);
    let ephemeral = rec.flags & flags::EPHEMERAL != 0;
    let finish = move |a: &mut V, st: &mut V::St, rec: MessageRecord| {
        let Some(p) = V::ix(st).by_id.get(&id) else { return unknown() };
        let m = render::<V>(st, p, &rec);
        let user = p.user;
        let body = encode(&m);
        if ephemeral {
            a.to_user(user, "MESSAGE_CREATE", body.clone());
        } else {
            a.created(st, Arc::new(m), body.clone());
        }
        let boxed = Box::new(rec);
        let s = if ephemeral { Sent::Ephemeral(boxed) } else { Sent::Public(boxed) };
        if let Some(p) = V::ix_mut(st).by_id.get_mut(&id) {
            if original {
                p.original = Some(s);
            } else {
                p.followups.push(s);
            }
        }
        // The original's answer is the callback's (see `respond`), not the message.
        if original {
            return OpReply::no_content();
        }
        OpReply::ok_bytes(StatusCode::OK, &body)
    };
    if ephemeral {
        return Plan::now(move |a, st| finish(a, st, rec));
    }
    Plan::new(vec![V::create_change(rec.clone())], move |a, st, _| finish(a, st, rec))
}

/// Edits a sent message (`message: None`: the original).
fn edit_sent<V: Venue>(
    st: &V::St,
    id: u64,
    p: &Pending,
    mut rec: MessageRecord,
    ephemeral: bool,
    message: Option<MessageId>,
    patch: &Value,
) -> Decided<V> {
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
    let rendered = render::<V>(st, p, &rec);
    let user = p.user;
    let store_back = move |st: &mut V::St, rec: MessageRecord| {
        if let Some(p) = V::ix_mut(st).by_id.get_mut(&id) {
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
        return Ok(Plan::now(move |a: &mut V, st: &mut V::St| {
            let body = encode(&rendered);
            a.to_user(user, "MESSAGE_UPDATE", body.clone());
            store_back(st, rec);
            OpReply::ok_bytes(StatusCode::OK, &body)
        }));
    }
    Ok(Plan::new(vec![Change::UpdateMessage(rec.clone())], move |a: &mut V, st: &mut V::St, _| {
        let body = encode(&rendered);
        a.updated(st, Arc::new(rendered), body.clone());
        store_back(st, rec);
        OpReply::ok_bytes(StatusCode::OK, &body)
    }))
}

fn delete_sent<V: Venue>(id: u64, rec: MessageRecord, ephemeral: bool, message: Option<MessageId>) -> Plan<V, V::St> {
    let forget = move |st: &mut V::St| {
        if let Some(p) = V::ix_mut(st).by_id.get_mut(&id) {
            match message {
                None => p.original = None,
                Some(m) => p.followups.retain(|s| s.record().id != m),
            }
        }
    };
    let (mid, channel) = (rec.id, rec.channel_id);
    if ephemeral {
        return Plan::now(move |a: &mut V, st: &mut V::St| {
            if let Some(p) = V::ix(st).by_id.get(&id) {
                let (user, gid) = (p.user, V::guild_id(st));
                a.to_user(user, "MESSAGE_DELETE", encode(&json!({"id": mid, "channel_id": channel, "guild_id": gid})));
            }
            forget(st);
            OpReply::no_content()
        });
    }
    Plan::new(vec![Change::DeleteMessage { channel, id: mid }], move |a: &mut V, st: &mut V::St, _| {
        a.deleted(st, mid, channel);
        forget(st);
        OpReply::no_content()
    })
}

/// The message as the API shows it: the bot as author, with the interaction's fields.
fn render<V: Venue>(st: &V::St, p: &Pending, rec: &MessageRecord) -> model::Message {
    let member = V::bot_member(st, p.bot.id);
    // `extra` carries `application_id`, `webhook_id` and the interaction fields.
    if rec.guild_id == V::guild_id(st) {
        return convert::message(rec, &p.bot, &[], member);
    }
    let mut rec = rec.clone();
    rec.guild_id = V::guild_id(st);
    convert::message(&rec, &p.bot, &[], member)
}
