//! Interactions (see `node::route::interactions` and docs/interactions.md):
//! what a person's client sends (`POST /interactions`, the command index)
//! and what a bot answers (`POST /interactions/{id}/{token}/callback`, and
//! through `/webhooks/{app}/{token}` its followups and edits).
//!
//! The REST side checks what needs the store (the application, the
//! command and its options, the component's message); the guild's actor
//! checks who may run it there, and holds the interaction.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::{ApplicationId, ChannelId, ErrorCode, GuildId, MessageId, UserId};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use store::CommandRecord;

use super::{ask_actor, json_bytes, parse_id, parse_json, ApiError, ApiResult, Caller, Query};
use node::route::interactions::{kind, CommandRef, InteractionAction, Invoke, Mentions};
use node::route::Action;
use node::Node;

/// Option types (application command option type).
mod opt {
    pub const SUB_COMMAND: u64 = 1;
    pub const SUB_COMMAND_GROUP: u64 = 2;
    pub const STRING: u64 = 3;
    pub const INTEGER: u64 = 4;
    pub const BOOLEAN: u64 = 5;
    pub const USER: u64 = 6;
    pub const CHANNEL: u64 = 7;
    pub const ROLE: u64 = 8;
    pub const MENTIONABLE: u64 = 9;
    pub const NUMBER: u64 = 10;
    pub const ATTACHMENT: u64 = 11;
}

/// `POST /interactions`: what Discord's client sends.
#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct InteractionBody {
    #[serde(rename = "type")]
    kind: u8,
    application_id: String,
    guild_id: Option<String>,
    channel_id: String,
    session_id: Option<String>,
    nonce: Option<String>,
    #[serde(default)]
    data: Value,
    /// Components: the message the component is on.
    message_id: Option<String>,
    #[allow(dead_code)]
    message_flags: Option<u64>,
}

fn form(path: &str, code: &str, message: &str) -> ApiError {
    ApiError::field(path, code, message)
}

/// `POST /interactions`: a person runs a command, uses a component or submits
/// a modal. 204 once the bot has it; 400 (and the bot never sees it) when the
/// data does not fit the command or component.
///
/// A multipart body (`payload_json` first, then `files[n]`) carries the
/// files of attachment options. Files count against the caller's upload
/// quota and the `[attachments]` limits as a message's do; they stay
/// pending, for the bot to fetch, until the attachment sweeper's grace
/// ends, or are discarded at once if the interaction is refused.
pub async fn create(State(node): State<Arc<Node>>, Caller(u): Caller, req: axum::extract::Request) -> ApiResult<Response> {
    use super::attachments::{read_body, Sender, UploadChannel};
    let (b, uploads) =
        read_body::<InteractionBody>(req, &node, UploadChannel::InPayload, Sender { uploader: u.id, may_attach: true }).await?;
    if ![kind::APPLICATION_COMMAND, kind::MESSAGE_COMPONENT, kind::AUTOCOMPLETE, kind::MODAL_SUBMIT].contains(&b.kind) {
        return Err(form("type", "BASE_TYPE_CHOICES", "Value must be one of {2, 3, 4, 5}."));
    }
    let app_id: ApplicationId =
        b.application_id.parse().map_err(|_| form("application_id", "NUMBER_TYPE_COERCE", "Value is not snowflake."))?;
    let channel: ChannelId = b.channel_id.parse().map_err(|_| form("channel_id", "NUMBER_TYPE_COERCE", "Value is not snowflake."))?;
    let key = super::actor_of(&node, channel).await?;
    // A guild's channel, or a DM (the actor checks it is one with the bot).
    let guild = key.as_guild();
    if b.guild_id.as_deref().is_some_and(|g| g.parse::<GuildId>().ok() != guild) {
        return Err(form("guild_id", "INTERACTION_GUILD_MISMATCH", "The channel is not in this guild."));
    }
    let app = node.lookups.application(&*node.store, app_id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    // The bot's user: the guild's actor has it (a bot not in the guild: 10002 there).
    let bot = app.bot_user_id;
    if !b.data.is_object() {
        return Err(form("data", "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType"));
    }
    let mut mentions = Mentions::default();
    let (mut target_message, mut message, mut component_message, mut ephemeral_message) = (None, None, None, None);
    let (data, command) = match b.kind {
        kind::APPLICATION_COMMAND | kind::AUTOCOMPLETE => {
            let (mut data, c) =
                command_data(&node, app_id, guild, &b.data, b.kind == kind::AUTOCOMPLETE, &mut mentions, &uploads.list).await?;
            if !uploads.list.is_empty() {
                // Every file of the request, resolved (the attachment objects, URLs signed).
                let base = node::attachments::http_base(&node.config);
                let mut files = Map::new();
                for a in &uploads.list {
                    files.insert(a.id.to_string(), node::attachments::ephemeral_attachment_json(a, &base, &node.blobs.signer));
                }
                data["resolved"] = json!({"attachments": files});
            }
            if c.kind == 3 {
                // A message context menu: the message, as the bot gets it resolved.
                let id: MessageId = data["target_id"].as_str().and_then(|s| s.parse().ok()).unwrap_or(MessageId(0));
                target_message = Some(rendered_message(&node, channel, id).await?);
            }
            (data, Some(c))
        }
        kind::MESSAGE_COMPONENT => match component_data(&node, &app, channel, &b, &mut mentions).await? {
            ComponentOn::Stored(data, m, rec) => {
                message = Some(m);
                component_message = Some(*rec);
                (data, None)
            }
            ComponentOn::Ephemeral(mid) => {
                ephemeral_message = Some(mid);
                (b.data.clone(), None)
            }
        },
        _ => (modal_data(&b.data)?, None),
    };
    // The guild's permission overrides of a command, and of the whole application.
    let mut overrides = (Vec::new(), Vec::new());
    if let (Some(c), Some(guild)) = (&command, guild) {
        for p in node.lookups.permissions(&*node.store, app_id, guild).await?.iter() {
            if p.command_id == c.id {
                overrides.0 = p.permissions.clone();
            } else if p.command_id == app_id.0 {
                overrides.1 = p.permissions.clone();
            }
        }
    }
    let invoke = Invoke {
        kind: b.kind,
        application_id: app_id,
        bot,
        channel,
        session_id: b.session_id,
        nonce: b.nonce,
        data,
        command,
        message,
        component_message,
        target_message,
        mentions,
        http: app.interactions_endpoint_url.is_some(),
        overrides,
        ephemeral_message,
    };
    let action = Action::Interaction(InteractionAction::Invoke(Box::new(invoke)));
    let reply = super::ask_actor_reply(&node, key, u.id, action).await?;
    if matches!(reply, node::route::OpReply::Done { .. }) {
        // Taken: the files stay for the bot (refused: they go with `uploads`).
        uploads.keep();
    }
    match (reply, app.interactions_endpoint_url) {
        // The bot takes it over HTTP: the actor gave its payload to POST.
        (node::route::OpReply::Done { status: 202, body: Some(payload) }, Some(url)) => {
            super::interactions_http::deliver(node.clone(), key, app.id, url, payload.get().as_bytes().to_vec());
            Ok(axum::response::IntoResponse::into_response(StatusCode::NO_CONTENT))
        }
        (reply, _) => super::reply_response(reply),
    }
}

/// The command `data.id` names, for a command interaction in `guild` (or
/// in a DM with the bot: `None`), and `data` checked against it (names,
/// types, required, choices, ranges, where it may be used).
async fn command_data(
    node: &Node,
    app: ApplicationId,
    guild: Option<GuildId>,
    data: &Value,
    autocomplete: bool,
    mentions: &mut Mentions,
    files: &[store::AttachmentRecord],
) -> ApiResult<(Value, CommandRef)> {
    let id: u64 = data
        .get("id")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| form("data.id", "NUMBER_TYPE_COERCE", "Value is not snowflake."))?;
    let guild_command = match guild {
        Some(g) => node.lookups.command(&*node.store, app, Some(g), id).await?,
        None => None,
    };
    let c: Arc<CommandRecord> = match guild_command {
        Some(c) => c,
        None => node
            .lookups
            .command(&*node.store, app, None, id)
            .await?
            .ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplicationCommand))?,
    };
    if !usable_in(&c.body, if guild.is_some() { context::GUILD } else { context::BOT_DM }) {
        return Err(form("data.id", "APPLICATION_COMMAND_CONTEXT_INVALID", "This command cannot be used here."));
    }
    if data.get("name").and_then(Value::as_str) != Some(c.name.as_str()) {
        return Err(form("data.name", "APPLICATION_COMMAND_NAME_MISMATCH", "The name is not the command's."));
    }
    if let Some(v) = data.get("version").and_then(Value::as_str) {
        if v != c.version.to_string() {
            // The client's copy of the command is stale: it fetches the index again.
            return Err(form(
                "data.version",
                "APPLICATION_COMMAND_OUTDATED",
                "This command is outdated, please try again in a few minutes",
            ));
        }
    }
    let default_member_permissions = node::route::interactions::default_member_permissions(&c.body);
    let mut out = json!({"id": c.id.to_string(), "name": c.name, "type": c.kind});
    if let Some(g) = c.guild_id {
        out["guild_id"] = json!(g);
    }
    match c.kind {
        1 => {
            let defs = c.body.get("options").and_then(Value::as_array).cloned().unwrap_or_default();
            let given = data.get("options").cloned().unwrap_or(json!([]));
            let Some(given) = given.as_array() else {
                return Err(form("data.options", "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType"));
            };
            let mut focused = 0;
            let options = check_options(&defs, given, "data.options", autocomplete, &mut focused, mentions, files)?;
            if autocomplete && focused != 1 {
                return Err(form("data.options", "AUTOCOMPLETE_FOCUS", "Exactly one option must be focused."));
            }
            if !options.is_empty() {
                out["options"] = Value::Array(options);
            }
        }
        _ => {
            // Context menus: the user or message they were used on.
            let target: u64 = data
                .get("target_id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| form("data.target_id", "BASE_TYPE_REQUIRED", "This field is required"))?;
            if c.kind == 2 {
                mentions.users.push(UserId(target));
            }
            out["target_id"] = json!(target.to_string());
        }
    }
    let r = CommandRef { id: c.id, name: c.name.clone(), kind: c.kind, default_member_permissions };
    Ok((out, r))
}

/// Interaction contexts (where a command may be used).
mod context {
    pub const GUILD: u64 = 0;
    pub const BOT_DM: u64 = 1;
}

/// Whether a guild-installed command may be used in `ctx`: its `contexts`
/// name it (none given: a guild, and the bot's DM unless `dm_permission`
/// is false), and its `integration_types` include guild installs.
fn usable_in(command: &Value, ctx: u64) -> bool {
    let listed = |k: &str, v: u64| command.get(k).and_then(Value::as_array).map(|a| a.iter().any(|x| x.as_u64() == Some(v)));
    if listed("integration_types", 0) == Some(false) {
        return false;
    }
    match listed("contexts", ctx) {
        Some(yes) => yes,
        None => ctx == context::GUILD || command.get("dm_permission").and_then(Value::as_bool) != Some(false),
    }
}

fn snowflake(v: &Value) -> Option<u64> {
    v.as_str().and_then(|s| s.parse().ok())
}

/// `given` options checked against the command's `defs`, at `path`.
fn check_options(
    defs: &[Value],
    given: &[Value],
    path: &str,
    autocomplete: bool,
    focused: &mut u32,
    mentions: &mut Mentions,
    files: &[store::AttachmentRecord],
) -> ApiResult<Vec<Value>> {
    let def_of = |name: &str| defs.iter().find(|d| d.get("name").and_then(Value::as_str) == Some(name));
    let mut out = Vec::with_capacity(given.len());
    let mut seen: Vec<&str> = Vec::new();
    for (i, g) in given.iter().enumerate() {
        let at = format!("{path}.{i}");
        let name = g
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| form(&format!("{at}.name"), "BASE_TYPE_REQUIRED", "This field is required"))?;
        let Some(def) = def_of(name) else {
            return Err(form(&format!("{at}.name"), "APPLICATION_COMMAND_OPTION_UNKNOWN", "Unknown option."));
        };
        if seen.contains(&name) {
            return Err(form(&format!("{at}.name"), "APPLICATION_COMMAND_OPTION_DUPLICATE", "Option given twice."));
        }
        seen.push(name);
        let want = def.get("type").and_then(Value::as_u64).unwrap_or(0);
        if g.get("type").and_then(Value::as_u64) != Some(want) {
            return Err(form(&format!("{at}.type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "The option's type is not the command's."));
        }
        let mut o = Map::new();
        o.insert("name".into(), json!(name));
        o.insert("type".into(), json!(want));
        if want == opt::SUB_COMMAND || want == opt::SUB_COMMAND_GROUP {
            if given.len() != 1 {
                return Err(form(path, "APPLICATION_COMMAND_SUBCOMMAND_ONE", "Exactly one subcommand."));
            }
            let sub_defs = def.get("options").and_then(Value::as_array).cloned().unwrap_or_default();
            let sub = g.get("options").and_then(Value::as_array).cloned().unwrap_or_default();
            if want == opt::SUB_COMMAND_GROUP && sub.len() != 1 {
                return Err(form(&format!("{at}.options"), "APPLICATION_COMMAND_SUBCOMMAND_ONE", "Exactly one subcommand."));
            }
            let inner = check_options(&sub_defs, &sub, &format!("{at}.options"), autocomplete, focused, mentions, files)?;
            o.insert("options".into(), Value::Array(inner));
            out.push(Value::Object(o));
            return Ok(out);
        }
        let is_focused = g.get("focused").and_then(Value::as_bool).unwrap_or(false);
        let value = g.get("value").cloned().unwrap_or(Value::Null);
        if autocomplete && is_focused {
            // The focused option is what the user is typing: a partial string.
            *focused += 1;
            o.insert("value".into(), json!(value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string())));
            o.insert("focused".into(), json!(true));
            out.push(Value::Object(o));
            continue;
        }
        let v = check_value(def, want, &value, &format!("{at}.value"), mentions, files)?;
        o.insert("value".into(), v);
        out.push(Value::Object(o));
    }
    if !autocomplete {
        for d in defs {
            let required = d.get("required").and_then(Value::as_bool).unwrap_or(false);
            let name = d.get("name").and_then(Value::as_str).unwrap_or("");
            if required && !seen.contains(&name) {
                return Err(form(path, "APPLICATION_COMMAND_OPTIONS_REQUIRED_MISSING", &format!("Required option \"{name}\" is missing.")));
            }
        }
    }
    Ok(out)
}

fn check_value(
    def: &Value,
    kind: u64,
    v: &Value,
    at: &str,
    mentions: &mut Mentions,
    files: &[store::AttachmentRecord],
) -> ApiResult<Value> {
    let num = |k: &str| def.get(k).and_then(Value::as_f64);
    let bad = |code: &str, msg: &str| Err(form(at, code, msg));
    let choices = def.get("choices").and_then(Value::as_array);
    let checked = match kind {
        opt::STRING => {
            let Some(s) = v.as_str() else { return bad("STRING_TYPE_CONVERT", "Must be a string.") };
            let n = s.chars().count() as f64;
            if num("min_length").is_some_and(|m| n < m) || num("max_length").is_some_and(|m| n > m) || n > 6000.0 {
                return bad("BASE_TYPE_BAD_LENGTH", "The value's length is out of range.");
            }
            json!(s)
        }
        opt::INTEGER => {
            let Some(i) = v.as_i64() else { return bad("NUMBER_TYPE_COERCE", "Must be an integer.") };
            let f = i as f64;
            if num("min_value").is_some_and(|m| f < m) || num("max_value").is_some_and(|m| f > m) {
                return bad("NUMBER_TYPE_OUT_OF_RANGE", "The value is out of range.");
            }
            json!(i)
        }
        opt::NUMBER => {
            let Some(f) = v.as_f64() else { return bad("NUMBER_TYPE_COERCE", "Must be a number.") };
            if num("min_value").is_some_and(|m| f < m) || num("max_value").is_some_and(|m| f > m) {
                return bad("NUMBER_TYPE_OUT_OF_RANGE", "The value is out of range.");
            }
            v.clone()
        }
        opt::BOOLEAN => {
            let Some(b) = v.as_bool() else { return bad("BOOLEAN_TYPE_CONVERT", "Must be a boolean.") };
            json!(b)
        }
        opt::USER | opt::CHANNEL | opt::ROLE | opt::MENTIONABLE => {
            let Some(id) = snowflake(v) else { return bad("NUMBER_TYPE_COERCE", "Value is not snowflake.") };
            match kind {
                opt::USER => mentions.users.push(UserId(id)),
                opt::CHANNEL => mentions.channels.push(ChannelId(id)),
                opt::ROLE => mentions.roles.push(protocol::RoleId(id)),
                _ => mentions.either.push(id),
            }
            json!(id.to_string())
        }
        opt::ATTACHMENT => {
            // The index of a file uploaded with the request (`data.attachments[].id`,
            // `files[n]`); the bot gets the attachment's id, resolved.
            let idx = match v {
                Value::String(s) => s.parse::<usize>().ok(),
                Value::Number(n) => n.as_u64().map(|n| n as usize),
                _ => None,
            };
            let Some(a) = idx.and_then(|i| files.get(i)) else {
                return bad("APPLICATION_COMMAND_OPTION_ATTACHMENT_UNKNOWN", "No file was uploaded for this option.");
            };
            json!(a.id.to_string())
        }
        _ => return bad("APPLICATION_COMMAND_OPTION_TYPE_INVALID", "This option type cannot be sent."),
    };
    if let Some(choices) = choices.filter(|c| !c.is_empty()) {
        if !choices.iter().any(|c| c.get("value") == Some(&checked) || c.get("value").and_then(Value::as_f64) == checked.as_f64()) {
            return bad("APPLICATION_COMMAND_OPTION_CHOICE_INVALID", "The value is not one of the choices.");
        }
    }
    Ok(checked)
}

/// A component interaction: the message exists in the channel, was sent by
/// the application, and has a component of that `custom_id` and type;
/// select values are among its options and within its counts.
async fn component_data(
    node: &Node,
    app: &store::ApplicationRecord,
    channel: ChannelId,
    b: &InteractionBody,
    mentions: &mut Mentions,
) -> ApiResult<ComponentOn> {
    let mid: MessageId = b
        .message_id
        .as_deref()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| form("message_id", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let rec = match node.store.get_message(channel, mid).await? {
        Some(rec) => rec,
        // An ephemeral message is in no store: its interaction's actor has it.
        None if b.message_flags.unwrap_or(0) & node::route::interactions::flags::EPHEMERAL != 0 => {
            return Ok(ComponentOn::Ephemeral(mid));
        }
        None => return Err(ApiError::not_found(ErrorCode::UnknownMessage)),
    };
    if rec.author_id != app.bot_user_id && rec.extra.get("application_id").and_then(snowflake) != Some(app.id.0) {
        return Err(form("message_id", "INTERACTION_COMPONENT_FOREIGN", "The message is not the application's."));
    }
    let components = rec.extra.get("components").unwrap_or(&Value::Null);
    let data = node::components::check_use(components, &b.data, mentions).map_err(|e| ApiError::field(&e.path, e.code, &e.message))?;
    Ok(ComponentOn::Stored(data, rendered_message(node, channel, mid).await?, Box::new(rec)))
}

/// Where a used component is: on a stored message (the bot's `data`, the
/// message as the bot gets it, and its record), or on an ephemeral one,
/// which the guild's actor checks.
enum ComponentOn {
    Stored(Value, Value, Box<store::MessageRecord>),
    Ephemeral(MessageId),
}

/// A message of `channel` as the API shows it: 404 10008 if there is none.
async fn rendered_message(node: &Node, channel: ChannelId, id: MessageId) -> ApiResult<Value> {
    let rec = node.store.get_message(channel, id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))?;
    let author = node.store.get_user(rec.author_id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))?;
    serde_json::to_value(node::convert::message(&rec, &author, &[], None)).map_err(ApiError::internal)
}

/// A modal's submission: its `custom_id` and the text inputs' values.
fn modal_data(data: &Value) -> ApiResult<Value> {
    let custom_id = data
        .get("custom_id")
        .and_then(Value::as_str)
        .ok_or_else(|| form("data.custom_id", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let components = data.get("components").cloned().unwrap_or(json!([]));
    if !components.is_array() {
        return Err(form("data.components", "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType"));
    }
    Ok(json!({"custom_id": custom_id, "components": components}))
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct CallbackQuery {
    /// `true`: answer 200 with the interaction callback response.
    #[serde(default, deserialize_with = "protocol::de::flag")]
    with_response: Option<bool>,
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct CallbackBody {
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    data: Value,
}

/// `POST /interactions/{id}/{token}/callback`: the bot's one initial
/// response. No authorization header: the token is the credential.
pub async fn callback(
    State(node): State<Arc<Node>>,
    Path((id, token)): Path<(String, String)>,
    Query(q): Query<CallbackQuery>,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    // A made-up token is refused before the body is read; a real one names its actor.
    let (key, tid) = check_token(&node, &token).ok_or_else(|| ApiError::not_found(ErrorCode::UnknownInteraction))?;
    let id: u64 = parse_id(&id, ErrorCode::UnknownInteraction)?;
    if id != tid {
        return Err(ApiError::not_found(ErrorCode::UnknownInteraction));
    }
    let b: CallbackBody = parse_json(&read_body(&node, req).await?)?;
    let with_response = q.with_response.unwrap_or(false);
    respond(&node, key, id, token, b, with_response).await
}

/// An initial response, from the callback route or an HTTP endpoint's
/// answer: its components checked, then the actor takes it.
pub(crate) async fn respond(
    node: &Arc<Node>,
    key: protocol::ActorKey,
    id: u64,
    token: String,
    b: CallbackBody,
    with_response: bool,
) -> ApiResult<Response> {
    let data = if b.data.is_null() { json!({}) } else { b.data };
    if b.kind == node::route::interactions::callback::MODAL {
        let c = data.get("components").unwrap_or(&Value::Null);
        node::components::check_modal(c, "data.components").map_err(|e| ApiError::field(&e.path, e.code, &e.message))?;
    } else if let Some(c) = data.get("components") {
        super::check_components(c, "data.components")?;
    }
    let action = InteractionAction::Callback { id, token, kind: b.kind, data, with_response };
    ask_actor(node, key, UserId(0), Action::Interaction(action)).await
}

/// Whether `token` is shaped as an interaction's (its followups and edits
/// go to its actor), not a webhook's.
pub fn is_interaction_token(token: &str) -> bool {
    node::route::interactions::looks_like_token(token)
}

fn check_token(node: &Node, token: &str) -> Option<(protocol::ActorKey, u64)> {
    node::route::interactions::check_token(&node.blobs.signer, token)
}

/// The body of a request whose token was checked (read only then).
pub async fn read_body(node: &Node, req: axum::extract::Request) -> ApiResult<axum::body::Bytes> {
    axum::body::to_bytes(req.into_body(), node.config.limits.max_body_bytes)
        .await
        .map_err(|_| ApiError::Code(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::General))
}

/// `token` is a real interaction token: 401 50027 otherwise.
pub fn require_token(node: &Node, token: &str) -> ApiResult<()> {
    check_token(node, token).map(drop).ok_or_else(invalid_token)
}

fn invalid_token() -> ApiError {
    ApiError::Code(StatusCode::UNAUTHORIZED, ErrorCode::InvalidWebhookToken)
}

/// `POST /webhooks/{app}/{token}` with an interaction's token: a followup.
pub async fn followup(node: &Arc<Node>, app: &str, token: String, req: axum::extract::Request) -> ApiResult<Response> {
    let app: ApplicationId = parse_id(app, ErrorCode::UnknownWebhook)?;
    let (key, _) = check_token(node, &token).ok_or_else(invalid_token)?;
    let data: Value = parse_json(&read_body(node, req).await?)?;
    if let Some(c) = data.get("components") {
        super::check_components(c, "components")?;
    }
    ask_actor(node, key, UserId(0), Action::Interaction(InteractionAction::Followup { app, token, data })).await
}

/// `GET`/`PATCH`/`DELETE /webhooks/{app}/{token}/messages/{@original|id}`.
pub async fn message(node: &Arc<Node>, app: &str, token: String, message: &str, edit: Option<Value>, delete: bool) -> ApiResult<Response> {
    let app: ApplicationId = parse_id(app, ErrorCode::UnknownWebhook)?;
    let (key, _) = check_token(node, &token).ok_or_else(invalid_token)?;
    if let Some(c) = edit.as_ref().and_then(|e| e.get("components")).filter(|c| !c.is_null()) {
        super::check_components(c, "components")?;
    }
    let message = match message {
        "@original" => None,
        m => Some(parse_id::<MessageId>(m, ErrorCode::UnknownMessage)?),
    };
    ask_actor(node, key, UserId(0), Action::Interaction(InteractionAction::Message { app, token, message, edit, delete })).await
}

/// `GET /guilds/{guild_id}/application-command-index`: the commands the
/// caller may run in the guild, with their applications.
pub async fn guild_index(State(node): State<Arc<Node>>, Caller(u): Caller, Path(g): Path<String>) -> ApiResult<Response> {
    let g: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    index_of_guild(&node, u.id, g).await
}

/// `GET /channels/{channel_id}/application-command-index`: the commands the
/// caller may run in a channel: its guild's, or in a DM with a bot, the
/// bot's commands for its DMs.
pub async fn channel_index(State(node): State<Arc<Node>>, Caller(u): Caller, Path(c): Path<String>) -> ApiResult<Response> {
    let c: ChannelId = parse_id(&c, ErrorCode::UnknownChannel)?;
    let key = super::actor_of(&node, c).await?;
    if let Some(g) = key.as_guild() {
        return index_of_guild(&node, u.id, g).await;
    }
    let dm = node.store.get_dm(c).await?.filter(|d| d.recipients.iter().any(|r| r.id == u.id));
    let dm = dm.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    index_of_dms(&node, u.id, &[dm]).await
}

/// `GET /users/@me/application-command-index`: the commands the caller may
/// run outside guilds: those of the bots they have DMs with.
pub async fn user_index(State(node): State<Arc<Node>>, Caller(u): Caller) -> ApiResult<Response> {
    let dms = node.store.dms_of_users(&[u.id]).await?.into_iter().flat_map(|(_, d)| d).collect::<Vec<_>>();
    index_of_dms(&node, u.id, &dms).await
}

/// An application as the index lists it.
async fn index_application(node: &Node, app: &store::ApplicationRecord) -> ApiResult<Value> {
    let bot = node.store.get_user(app.bot_user_id).await?;
    Ok(json!({
        "id": app.id, "name": app.name, "description": "", "icon": bot.as_ref().and_then(|b| b.avatar.clone()),
        "bot_id": app.bot_user_id,
    }))
}

fn index_body(apps: Vec<Value>, commands: Vec<Value>, node: &Node) -> Response {
    let version = node.ids.next();
    json_bytes(StatusCode::OK, json!({"applications": apps, "application_commands": commands, "version": version}).to_string())
}

async fn index_of_dms(node: &Node, user: UserId, dms: &[store::DmChannel]) -> ApiResult<Response> {
    let mut commands = Vec::new();
    let mut apps = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for bot in dms.iter().flat_map(|d| &d.recipients).filter(|r| r.bot && r.id != user) {
        let Some(app) = node.store.application_of_bot(bot.id).await?.filter(|a| seen.insert(a.id)) else { continue };
        let before = commands.len();
        for c in node.store.list_commands(app.id, None).await? {
            if usable_in(&c.body, context::BOT_DM) {
                commands.push(super::commands::render(&c));
            }
        }
        if commands.len() > before {
            apps.push(index_application(node, &app).await?);
        }
    }
    Ok(index_body(apps, commands, node))
}

async fn index_of_guild(node: &Node, user: UserId, g: GuildId) -> ApiResult<Response> {
    let guild = node.store.get_guild(g).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownGuild))?;
    let me = node.store.get_member(g, user).await?.ok_or_else(|| ApiError::forbidden(ErrorCode::MissingAccess))?;
    let roles = node.store.roles_of_guild(g).await?;
    let bits = node::perm::base(g, guild.owner_id, &roles, &me);
    let admin = bits & protocol::model::permission::ADMINISTRATOR != 0;
    let mut commands = Vec::new();
    let mut apps = Vec::new();
    for app in node.store.guild_applications(g).await? {
        let mut cs = node.store.list_commands(app.id, None).await?;
        cs.extend(node.store.list_commands(app.id, Some(g)).await?);
        let overrides = node.lookups.permissions(&*node.store, app.id, g).await?;
        let of = |id: u64| overrides.iter().find(|p| p.command_id == id).map(|p| &p.permissions[..]).unwrap_or(&[]);
        let before = commands.len();
        for c in cs {
            let body = &c.body;
            let said = node::route::interactions::overrides_allow(of(c.id), of(app.id.0), g, user, &me.roles, None, admin);
            let default = node::route::interactions::default_member_permissions(body);
            if said == Some(false) || (said.is_none() && !node::route::interactions::may_run(bits, admin, default)) {
                continue;
            }
            // Contexts: a command limited to DMs is not offered in a guild.
            if usable_in(body, context::GUILD) {
                commands.push(super::commands::render(&c));
            }
        }
        if commands.len() > before {
            apps.push(index_application(node, &app).await?);
        }
    }
    Ok(index_body(apps, commands, node))
}
