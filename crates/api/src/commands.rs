//! Application commands: register, list, change, delete and bulk-overwrite
//! an application's global commands and its commands in one guild (what
//! `tree.sync()` and `rest.put(Routes.applicationCommands(...))` do). Only
//! the application's own bot may read or write them; guild commands need
//! the bot in the guild. Commands carry no guild state and send no gateway
//! events, so they go to the store directly (one transaction each).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::{ApplicationId, ErrorCode, GuildId, UserId};
use serde_json::{json, Map, Value};
use store::{CommandRecord, StoreError};

use super::{json_bytes, parse_id, parse_json, ApiError, ApiResult, Caller};
use node::route::ops::AuditNote;
use node::Node;

/// Command types: slash commands, and the user and message context menus.
const CHAT_INPUT: u8 = 1;
const USER: u8 = 2;
const MESSAGE: u8 = 3;
/// Commands per type in one scope (global, or one guild), as Discord allows.
const MAX_CHAT_INPUT: usize = 100;
const MAX_CONTEXT_MENU: usize = 15;
/// Lengths Discord enforces, in characters.
const MAX_NAME: usize = 32;
const MAX_DESCRIPTION: usize = 100;
/// Options of a command or subcommand, and choices of an option.
const MAX_OPTIONS: usize = 25;
const MAX_CHOICES: usize = 25;
const MAX_CHOICE_NAME: usize = 100;
const MAX_CHOICE_STRING: usize = 100;
/// Option types: SUB_COMMAND, SUB_COMMAND_GROUP, then values up to ATTACHMENT.
const SUB_COMMAND: u64 = 1;
const SUB_COMMAND_GROUP: u64 = 2;
const LAST_OPTION_TYPE: u64 = 11;
/// Option types that may have choices: STRING, INTEGER, NUMBER.
const CHOICE_TYPES: [u64; 3] = [3, 4, 10];
/// Known installation contexts (guild, bot DM, private channel) and
/// integration types (guild install, user install).
const CONTEXTS: [u64; 3] = [0, 1, 2];
const INTEGRATION_TYPES: [u64; 2] = [0, 1];

/// The caller is the bot of application `app`: 403 50001 otherwise.
pub(crate) async fn own_app(node: &Node, caller: UserId, app: &str) -> ApiResult<ApplicationId> {
    let app: ApplicationId = parse_id(app, ErrorCode::UnknownApplication)?;
    match node.store.application_of_bot(caller).await? {
        Some(a) if a.id == app => Ok(app),
        _ => Err(ApiError::forbidden(ErrorCode::MissingAccess)),
    }
}

/// A guild the application's bot is in: 404 10004 / 403 50001 otherwise.
async fn bot_guild(node: &Node, bot: UserId, guild: &str) -> ApiResult<GuildId> {
    let g: GuildId = parse_id(guild, ErrorCode::UnknownGuild)?;
    node.store.get_guild(g).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownGuild))?;
    node.store.get_member(g, bot).await?.ok_or_else(|| ApiError::forbidden(ErrorCode::MissingAccess))?;
    Ok(g)
}

async fn scope(node: &Node, caller: UserId, app: &str, guild: Option<&str>) -> ApiResult<(ApplicationId, Option<GuildId>)> {
    let app = own_app(node, caller, app).await?;
    let guild = match guild {
        Some(g) => Some(bot_guild(node, caller, g).await?),
        None => None,
    };
    Ok((app, guild))
}

/// The command object as the API returns it.
pub(crate) fn render(c: &CommandRecord) -> Value {
    let mut v = match &c.body {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    v["id"] = json!(c.id.to_string());
    v["type"] = json!(c.kind);
    v["application_id"] = json!(c.application_id);
    v["name"] = json!(c.name);
    v["version"] = json!(c.version.to_string());
    match c.guild_id {
        Some(g) => v["guild_id"] = json!(g),
        // Guild commands have no DM setting.
        None => {
            if v.get("dm_permission").is_none_or(Value::is_null) {
                v["dm_permission"] = json!(true);
            }
        }
    }
    v
}

fn respond(status: StatusCode, v: &Value) -> Response {
    json_bytes(status, v.to_string())
}

/// Field errors collected at their paths (`options.0.name`), as Discord nests them.
#[derive(Default)]
struct Errors(Map<String, Value>);

impl Errors {
    fn add(&mut self, path: &[String], code: &str, message: &str) {
        let mut node = &mut self.0;
        for p in path {
            node = node.entry(p.clone()).or_insert_with(|| json!({})).as_object_mut().expect("error paths hold objects");
        }
        let list = node.entry("_errors").or_insert_with(|| json!([]));
        if let Some(a) = list.as_array_mut() {
            a.push(json!({ "code": code, "message": message }));
        }
    }

    fn into_result(self) -> ApiResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::InvalidForm(Value::Object(self.0)))
        }
    }
}

fn at(path: &[String], more: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(more.to_string());
    p
}

/// A slash command's (or option's) name: 1-32 letters, digits, `-` or
/// `_`, lowercase where the letter has a lowercase form.
fn chat_name_ok(name: &str) -> bool {
    let n = name.chars().count();
    (1..=MAX_NAME).contains(&n) && name.chars().all(|c| (c.is_alphanumeric() || c == '-' || c == '_') && !c.is_uppercase())
}

fn check_length(e: &mut Errors, path: &[String], v: Option<&Value>, min: usize, max: usize) {
    match v.and_then(Value::as_str) {
        Some(s) if (min..=max).contains(&s.chars().count()) => {}
        Some(_) => e.add(path, "BASE_TYPE_BAD_LENGTH", &format!("Must be between {min} and {max} in length.")),
        None => e.add(path, "BASE_TYPE_REQUIRED", "This field is required"),
    }
}

fn check_localizations(e: &mut Errors, path: &[String], v: Option<&Value>, max: usize) {
    let Some(Value::Object(m)) = v else { return };
    for (locale, text) in m {
        if !text.as_str().is_some_and(|s| (1..=max).contains(&s.chars().count())) {
            e.add(&at(path, locale), "BASE_TYPE_BAD_LENGTH", &format!("Must be between 1 and {max} in length."));
        }
    }
}

fn check_options(e: &mut Errors, path: &[String], options: Option<&Value>, depth: u8) {
    let Some(v) = options.filter(|v| !v.is_null()) else { return };
    let Some(list) = v.as_array() else { return e.add(path, "BASE_TYPE_ARRAY", "Must be an array.") };
    if list.len() > MAX_OPTIONS {
        e.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.");
    }
    let mut names: Vec<&str> = Vec::new();
    let mut optional_seen = false;
    for (i, o) in list.iter().enumerate() {
        let p = at(path, &i.to_string());
        let kind = o.get("type").and_then(Value::as_u64).unwrap_or(0);
        if !(1..=LAST_OPTION_TYPE).contains(&kind) {
            e.add(&at(&p, "type"), "BASE_TYPE_CHOICES", "Value must be one of the option types.");
        }
        let name = o.get("name").and_then(Value::as_str).unwrap_or("");
        if !chat_name_ok(name) {
            e.add(&at(&p, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid");
        }
        if names.contains(&name) {
            e.add(&at(&p, "name"), "APPLICATION_COMMAND_OPTIONS_NAME_ALREADY_EXISTS", "Option names must be unique");
        }
        names.push(name);
        check_length(e, &at(&p, "description"), o.get("description"), 1, MAX_DESCRIPTION);
        check_localizations(e, &at(&p, "name_localizations"), o.get("name_localizations"), MAX_NAME);
        check_localizations(e, &at(&p, "description_localizations"), o.get("description_localizations"), MAX_DESCRIPTION);
        let nested = o.get("options").filter(|v| !v.is_null());
        match kind {
            SUB_COMMAND_GROUP if depth == 0 => {
                let subs = nested.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                if subs.iter().any(|s| s.get("type").and_then(Value::as_u64) != Some(SUB_COMMAND)) {
                    e.add(&at(&p, "options"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommand groups hold only subcommands.");
                }
                check_options(e, &at(&p, "options"), nested, depth + 1);
            }
            SUB_COMMAND if depth <= 1 => {
                if let Some(subs) = nested.and_then(Value::as_array) {
                    if subs.iter().any(|s| matches!(s.get("type").and_then(Value::as_u64), Some(SUB_COMMAND | SUB_COMMAND_GROUP))) {
                        e.add(&at(&p, "options"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands hold only values.");
                    }
                }
                check_options(e, &at(&p, "options"), nested, depth + 2);
            }
            SUB_COMMAND | SUB_COMMAND_GROUP => {
                e.add(&at(&p, "type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands cannot be nested this deep.")
            }
            _ => {
                let required = o.get("required").and_then(Value::as_bool).unwrap_or(false);
                if required && optional_seen {
                    e.add(
                        &at(&p, "required"),
                        "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                        "Required options must be placed before non-required options",
                    );
                }
                optional_seen |= !required;
                check_choices(e, &at(&p, "choices"), o.get("choices"), kind);
            }
        }
    }
}

fn check_choices(e: &mut Errors, path: &[String], choices: Option<&Value>, kind: u64) {
    let Some(list) = choices.filter(|v| !v.is_null()).and_then(Value::as_array) else { return };
    if !CHOICE_TYPES.contains(&kind) {
        return e.add(path, "APPLICATION_COMMAND_OPTION_CHOICES_INVALID", "Only string, integer and number options have choices.");
    }
    if list.len() > MAX_CHOICES {
        e.add(path, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.");
    }
    for (i, c) in list.iter().enumerate() {
        let p = at(path, &i.to_string());
        check_length(e, &at(&p, "name"), c.get("name"), 1, MAX_CHOICE_NAME);
        let ok = match c.get("value") {
            Some(Value::String(s)) => kind == 3 && (1..=MAX_CHOICE_STRING).contains(&s.chars().count()),
            Some(Value::Number(n)) => kind == 10 || (kind == 4 && (n.is_i64() || n.is_u64())),
            _ => false,
        };
        if !ok {
            e.add(&at(&p, "value"), "BASE_TYPE_INVALID", "Value does not fit the option's type.");
        }
    }
}

/// Checks one command as Discord does and turns it into a record (new id
/// and version; `guild`'s scope). Errors go under `path`.
fn parse_command(
    node: &Node,
    e: &mut Errors,
    path: &[String],
    v: &Value,
    app: ApplicationId,
    guild: Option<GuildId>,
) -> Option<CommandRecord> {
    let Some(obj) = v.as_object() else {
        e.add(path, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType");
        return None;
    };
    let kind = match obj.get("type") {
        None | Some(Value::Null) => CHAT_INPUT,
        Some(t) => match t.as_u64() {
            Some(k) if [CHAT_INPUT as u64, USER as u64, MESSAGE as u64].contains(&k) => k as u8,
            _ => {
                e.add(&at(path, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3}.");
                CHAT_INPUT
            }
        },
    };
    let name = obj.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let description = obj.get("description").and_then(Value::as_str).unwrap_or("");
    if kind == CHAT_INPUT {
        if !chat_name_ok(&name) {
            e.add(&at(path, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid");
        }
        check_length(e, &at(path, "description"), obj.get("description"), 1, MAX_DESCRIPTION);
        check_options(e, &at(path, "options"), obj.get("options"), 0);
    } else {
        if !(1..=MAX_NAME).contains(&name.chars().count()) {
            e.add(&at(path, "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.");
        }
        if !description.is_empty() {
            e.add(
                &at(path, "description"),
                "APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION",
                "Context menu commands cannot have a description",
            );
        }
        if obj.get("options").is_some_and(|o| o.as_array().is_some_and(|a| !a.is_empty())) {
            e.add(&at(path, "options"), "APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS", "Context menu commands cannot have options");
        }
    }
    check_localizations(e, &at(path, "name_localizations"), obj.get("name_localizations"), MAX_NAME);
    check_localizations(e, &at(path, "description_localizations"), obj.get("description_localizations"), MAX_DESCRIPTION);
    let permissions = match obj.get("default_member_permissions") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.parse::<u64>().is_ok() => json!(s),
        Some(Value::Number(n)) if n.is_u64() => json!(n.to_string()),
        Some(_) => {
            e.add(&at(path, "default_member_permissions"), "BASE_TYPE_INVALID", "Must be a permission bit set.");
            Value::Null
        }
    };
    let list_of = |e: &mut Errors, key: &str, known: &[u64]| -> Value {
        match obj.get(key) {
            None | Some(Value::Null) => Value::Null,
            Some(Value::Array(a)) if a.iter().all(|x| x.as_u64().is_some_and(|x| known.contains(&x))) => Value::Array(a.clone()),
            Some(_) => {
                e.add(&at(path, key), "BASE_TYPE_CHOICES", "Value must be one of the known values.");
                Value::Null
            }
        }
    };
    let contexts = list_of(e, "contexts", &CONTEXTS);
    let integration_types = match list_of(e, "integration_types", &INTEGRATION_TYPES) {
        Value::Null => json!([0]),
        v => v,
    };
    let get_or_null = |k: &str| obj.get(k).cloned().unwrap_or(Value::Null);
    let mut body = json!({
        "description": description,
        "name_localizations": get_or_null("name_localizations"),
        "description_localizations": get_or_null("description_localizations"),
        "default_member_permissions": permissions,
        "contexts": contexts,
        "integration_types": integration_types,
        "nsfw": obj.get("nsfw").and_then(Value::as_bool).unwrap_or(false),
    });
    if let Some(o) = obj.get("options").filter(|o| o.as_array().is_some_and(|a| !a.is_empty())) {
        body["options"] = o.clone();
    }
    if guild.is_none() {
        body["dm_permission"] = json!(obj.get("dm_permission").and_then(Value::as_bool).unwrap_or(true));
    }
    let id = node.ids.next().0;
    Some(CommandRecord { id, application_id: app, guild_id: guild, kind, name, version: id, body })
}

/// At most [`MAX_CHAT_INPUT`] slash commands and [`MAX_CONTEXT_MENU`] of
/// each context menu type in one scope.
fn within_limits(cmds: &[CommandRecord]) -> bool {
    let count = |k: u8| cmds.iter().filter(|c| c.kind == k).count();
    count(CHAT_INPUT) <= MAX_CHAT_INPUT && count(USER) <= MAX_CONTEXT_MENU && count(MESSAGE) <= MAX_CONTEXT_MENU
}

fn max_commands() -> ApiError {
    ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::MaxCommands)
}

async fn list(node: &Node, caller: UserId, app: &str, guild: Option<&str>) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let cmds = node.store.list_commands(app, guild).await?;
    Ok(respond(StatusCode::OK, &Value::Array(cmds.iter().map(render).collect())))
}

async fn create(node: &Node, caller: UserId, app: &str, guild: Option<&str>, body: &[u8]) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let v: Value = parse_json(body)?;
    let mut e = Errors::default();
    let c = parse_command(node, &mut e, &[], &v, app, guild);
    e.into_result()?;
    let c = c.ok_or_else(|| ApiError::internal("command not parsed"))?;
    let mut all = node.store.list_commands(app, guild).await?;
    let replaces = all.iter().any(|o| o.kind == c.kind && o.name == c.name);
    if !replaces {
        all.push(c.clone());
        if !within_limits(&all) {
            return Err(max_commands());
        }
    }
    let stored = node.store.upsert_command(&c).await?;
    node.lookups.forget_commands(c.application_id);
    // 201 for a new command, 200 when one of that name was overwritten.
    let status = if replaces { StatusCode::OK } else { StatusCode::CREATED };
    Ok(respond(status, &render(&stored)))
}

async fn get_one(node: &Node, caller: UserId, app: &str, guild: Option<&str>, id: &str) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let id: u64 = parse_id(id, ErrorCode::UnknownCommand)?;
    let c = node.store.get_command(app, guild, id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownCommand))?;
    Ok(respond(StatusCode::OK, &render(&c)))
}

/// PATCH: the fields given replace the command's; the rest stays.
async fn edit(node: &Node, caller: UserId, app: &str, guild: Option<&str>, id: &str, body: &[u8]) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let id: u64 = parse_id(id, ErrorCode::UnknownCommand)?;
    let old = node.store.get_command(app, guild, id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownCommand))?;
    let patch: Value = parse_json(body)?;
    let Value::Object(patch) = patch else {
        return Err(ApiError::field("_errors", "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType"));
    };
    let mut merged = render(&old);
    for (k, v) in patch {
        if !matches!(k.as_str(), "id" | "application_id" | "guild_id" | "version" | "type") {
            merged[k] = v;
        }
    }
    let mut e = Errors::default();
    let c = parse_command(node, &mut e, &[], &merged, app, guild);
    e.into_result()?;
    let mut c = c.ok_or_else(|| ApiError::internal("command not parsed"))?;
    c.id = old.id;
    node.lookups.forget_commands(c.application_id);
    match node.store.update_command(&c).await {
        Ok(true) => Ok(respond(StatusCode::OK, &render(&c))),
        Ok(false) => Err(ApiError::not_found(ErrorCode::UnknownCommand)),
        Err(StoreError::Conflict) => {
            Err(ApiError::field("name", "APPLICATION_COMMAND_ALREADY_EXISTS", "A command with that name already exists"))
        }
        Err(e) => Err(e.into()),
    }
}

async fn delete(node: &Node, caller: UserId, app: &str, guild: Option<&str>, id: &str) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let id: u64 = parse_id(id, ErrorCode::UnknownCommand)?;
    node.lookups.forget_commands(app);
    if node.store.delete_command(app, guild, id).await? {
        Ok(axum::response::IntoResponse::into_response(StatusCode::NO_CONTENT))
    } else {
        Err(ApiError::not_found(ErrorCode::UnknownCommand))
    }
}

/// PUT: the scope's commands become exactly these (ids kept by type and name).
async fn overwrite(node: &Node, caller: UserId, app: &str, guild: Option<&str>, body: &[u8]) -> ApiResult<Response> {
    let (app, guild) = scope(node, caller, app, guild).await?;
    let v: Value = parse_json(body)?;
    let Value::Array(list) = v else { return Err(ApiError::field("_errors", "BASE_TYPE_ARRAY", "Must be an array.")) };
    let mut e = Errors::default();
    let mut cmds = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let path = [i.to_string()];
        if let Some(c) = parse_command(node, &mut e, &path, c, app, guild) {
            if cmds.iter().any(|o: &CommandRecord| o.kind == c.kind && o.name == c.name) {
                e.add(&at(&path, "name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique");
            }
            cmds.push(c);
        }
    }
    e.into_result()?;
    if !within_limits(&cmds) {
        return Err(max_commands());
    }
    let stored = node.store.overwrite_commands(app, guild, &cmds).await?;
    node.lookups.forget_commands(app);
    Ok(respond(StatusCode::OK, &Value::Array(stored.iter().map(render).collect())))
}

type Body = axum::body::Bytes;

pub async fn global_list(State(n): State<Arc<Node>>, Caller(u): Caller, Path(app): Path<String>) -> ApiResult<Response> {
    list(&n, u.id, &app, None).await
}
pub async fn global_create(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path(app): Path<String>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    create(&n, u.id, &app, None, &b).await
}
pub async fn global_overwrite(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path(app): Path<String>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    overwrite(&n, u.id, &app, None, &b).await
}
pub async fn global_get(State(n): State<Arc<Node>>, Caller(u): Caller, Path((app, id)): Path<(String, String)>) -> ApiResult<Response> {
    get_one(&n, u.id, &app, None, &id).await
}
pub async fn global_edit(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, id)): Path<(String, String)>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    edit(&n, u.id, &app, None, &id, &b).await
}
pub async fn global_delete(State(n): State<Arc<Node>>, Caller(u): Caller, Path((app, id)): Path<(String, String)>) -> ApiResult<Response> {
    delete(&n, u.id, &app, None, &id).await
}
pub async fn guild_list(State(n): State<Arc<Node>>, Caller(u): Caller, Path((app, g)): Path<(String, String)>) -> ApiResult<Response> {
    list(&n, u.id, &app, Some(&g)).await
}
pub async fn guild_create(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g)): Path<(String, String)>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    create(&n, u.id, &app, Some(&g), &b).await
}
pub async fn guild_overwrite(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g)): Path<(String, String)>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    overwrite(&n, u.id, &app, Some(&g), &b).await
}
pub async fn guild_get(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    get_one(&n, u.id, &app, Some(&g), &id).await
}
pub async fn guild_edit(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g, id)): Path<(String, String, String)>,
    _: super::guard::OwnApp,
    b: Body,
) -> ApiResult<Response> {
    edit(&n, u.id, &app, Some(&g), &id, &b).await
}
pub async fn guild_delete(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    delete(&n, u.id, &app, Some(&g), &id).await
}

// ---- permission overrides ----

/// Overrides one command (or, by the application's id, all) may have.
const MAX_PERMISSIONS: usize = 100;

/// The guild application command permissions object.
fn permissions_json(app: ApplicationId, guild: GuildId, p: &store::CommandPermissions) -> Value {
    let list: Vec<Value> =
        p.permissions.iter().map(|o| json!({"id": o.id.to_string(), "type": o.kind, "permission": o.permission})).collect();
    json!({"id": p.command_id.to_string(), "application_id": app, "guild_id": guild, "permissions": list})
}

/// Who may read an application's overrides in a guild: its bot (a member
/// there), or a member who may manage the guild.
async fn permissions_scope(node: &Node, caller: &store::UserRecord, app: &str, guild: &str) -> ApiResult<(ApplicationId, GuildId)> {
    if caller.bot {
        let app = own_app(node, caller.id, app).await?;
        return Ok((app, bot_guild(node, caller.id, guild).await?));
    }
    let app: ApplicationId = parse_id(app, ErrorCode::UnknownApplication)?;
    let g: GuildId = parse_id(guild, ErrorCode::UnknownGuild)?;
    super::guild_access(node, g, caller.id).await?.require(protocol::model::permission::MANAGE_GUILD)?;
    node.store.get_application(app).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    Ok((app, g))
}

/// `GET /applications/{app}/guilds/{guild}/commands/permissions`.
pub async fn guild_permissions(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g)): Path<(String, String)>,
) -> ApiResult<Response> {
    let (app, g) = permissions_scope(&n, &u, &app, &g).await?;
    let all = n.store.command_permissions(app, g).await?;
    Ok(respond(StatusCode::OK, &Value::Array(all.iter().map(|p| permissions_json(app, g, p)).collect())))
}

/// `GET /applications/{app}/guilds/{guild}/commands/{command}/permissions`.
pub async fn command_permissions(
    State(n): State<Arc<Node>>,
    Caller(u): Caller,
    Path((app, g, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let (app, g) = permissions_scope(&n, &u, &app, &g).await?;
    let id: u64 = parse_id(&id, ErrorCode::UnknownCommandPermissions)?;
    let all = n.store.command_permissions(app, g).await?;
    let p = all.iter().find(|p| p.command_id == id).ok_or_else(|| ApiError::not_found(ErrorCode::UnknownCommandPermissions))?;
    Ok(respond(StatusCode::OK, &permissions_json(app, g, p)))
}

#[derive(schemars::JsonSchema, serde::Deserialize)]
pub struct PermissionsBody {
    /// Role (1), user (2) or channel (3) overrides; at most 100.
    pub permissions: Vec<PermissionBody>,
}

#[derive(schemars::JsonSchema, serde::Deserialize)]
pub struct PermissionBody {
    /// A role (the guild's id: @everyone), user or channel (the guild's id minus one: all channels).
    #[schemars(with = "String")]
    pub id: Value,
    #[serde(rename = "type")]
    pub kind: u8,
    pub permission: bool,
}

/// `PUT /applications/{app}/guilds/{guild}/commands/{command}/permissions`:
/// a person who manages the guild and its roles (their own token, or an
/// OAuth2 token with `applications.commands.permissions.update`) replaces a
/// command's overrides, or with the application's id as the command, the
/// application's. Bots cannot (20001), as on Discord.
pub async fn edit_command_permissions(
    State(n): State<Arc<Node>>,
    caller: super::MeCaller,
    Path((app, g, id)): Path<(String, String, String)>,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    use protocol::model::permission;
    let u = caller.with_scope("applications.commands.permissions.update")?;
    if u.bot {
        return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
    }
    let app: ApplicationId = parse_id(&app, ErrorCode::UnknownApplication)?;
    let g: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    super::guild_access(&n, g, u.id).await?.require(permission::MANAGE_GUILD | permission::MANAGE_ROLES)?;
    let record = n.store.get_application(app).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownApplication))?;
    let id: u64 = parse_id(&id, ErrorCode::UnknownApplicationCommand)?;
    if id != app.0 && n.store.get_command(app, Some(g), id).await?.is_none() && n.store.get_command(app, None, id).await?.is_none() {
        return Err(ApiError::not_found(ErrorCode::UnknownApplicationCommand));
    }
    let b: PermissionsBody = parse_json(&super::interactions::read_body(&n, req).await?)?;
    if b.permissions.len() > MAX_PERMISSIONS {
        return Err(ApiError::field("permissions", "BASE_TYPE_MAX_LENGTH", &format!("Must be {MAX_PERMISSIONS} or fewer in length.")));
    }
    let mut list = Vec::with_capacity(b.permissions.len());
    for (k, p) in b.permissions.iter().enumerate() {
        let target = match &p.id {
            Value::String(s) => s.parse().ok(),
            Value::Number(x) => x.as_u64(),
            _ => None,
        };
        let Some(target) = target else {
            return Err(ApiError::field(&format!("permissions.{k}.id"), "NUMBER_TYPE_COERCE", "Value is not snowflake."));
        };
        if !(1..=3).contains(&p.kind) {
            return Err(ApiError::field(&format!("permissions.{k}.type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3}."));
        }
        list.retain(|o: &store::CommandPermission| !(o.id == target && o.kind == p.kind));
        list.push(store::CommandPermission { id: target, kind: p.kind, permission: p.permission });
    }
    let p = store::CommandPermissions { command_id: id, permissions: list };
    let before = n.store.command_permissions(record.id, g).await?.into_iter().find(|c| c.command_id == id).map(|c| c.permissions);
    n.store.set_command_permissions(record.id, g, &p).await?;
    super::audit::note(&n, g, u.id, permissions_note(app, &p, before.unwrap_or_default())).await;
    n.lookups.forget_permissions(record.id, g);
    let body = permissions_json(app, g, &p);
    // The bot hears of it through the guild's actor (its sessions there).
    let event = node::route::interactions::InteractionAction::PermissionsChanged { bot: record.bot_user_id, body: body.clone() };
    if let Err(e) = super::ask_actor_reply(&n, protocol::ActorKey::guild(g), u.id, node::route::Action::Interaction(event)).await {
        tracing::debug!(guild = g.0, error = ?e, "APPLICATION_COMMAND_PERMISSIONS_UPDATE not sent");
    }
    Ok(respond(StatusCode::OK, &body))
}

/// APPLICATION_COMMAND_PERMISSION_UPDATE: one change per override target,
/// its old and new override.
fn permissions_note(app: ApplicationId, p: &store::CommandPermissions, before: Vec<store::CommandPermission>) -> AuditNote {
    let json = |o: &store::CommandPermission| json!({"id": o.id.to_string(), "type": o.kind, "permission": o.permission});
    let mut changes = Vec::new();
    for o in &p.permissions {
        let old = before.iter().find(|b| b.id == o.id && b.kind == o.kind);
        if old != Some(o) {
            changes.push(AuditNote::change(&o.id.to_string(), old.map(json), Some(json(o))));
        }
    }
    for b in before.iter().filter(|b| !p.permissions.iter().any(|o| o.id == b.id && o.kind == b.kind)) {
        changes.push(AuditNote::change(&b.id.to_string(), Some(json(b)), None));
    }
    AuditNote::new(node::route::ops::audit_kind::APPLICATION_COMMAND_PERMISSION_UPDATE, p.command_id)
        .with(changes)
        .options(json!({"application_id": app.0.to_string()}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_command_names_follow_discords_rule() {
        for ok in ["ping", "user-info", "my_cmd", "ä", "日本語", "x1"] {
            assert!(chat_name_ok(ok), "{ok}");
        }
        for bad in ["", "Ping", "has space", "a".repeat(33).as_str(), "emoji😀", "dot."] {
            assert!(!chat_name_ok(bad), "{bad}");
        }
    }

    #[test]
    fn errors_nest_by_path() {
        let mut e = Errors::default();
        e.add(&["0".into(), "options".into(), "1".into(), "name".into()], "X", "m");
        let Err(ApiError::InvalidForm(v)) = e.into_result() else { panic!() };
        assert_eq!(v["0"]["options"]["1"]["name"]["_errors"][0]["code"], "X");
    }
}
