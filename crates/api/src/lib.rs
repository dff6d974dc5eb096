//! The REST API under `/api/v10`, `/api/v9` and `/api`, in Discord's shapes.
//!
//! One file per resource; this file holds the router, the extractors
//! (caller, JSON body) and the access checks they share.

pub mod absent;
pub mod admin;
pub mod attachments;
pub mod audit;
pub mod bans;
pub mod channels;
pub mod commands;
pub mod dms;
pub mod edge;
pub mod emojis;
pub mod error;
pub mod guard;
pub mod guilds;
pub mod interactions;
pub mod interactions_http;
pub mod listener;
pub mod messages;
pub mod metrics;
pub mod oauth2;
pub mod openapi;
pub mod pins;
pub mod ratelimit;
pub mod reactions;
pub mod read_states;
pub mod roles;
pub mod search;
pub mod shapes;
pub mod threads;
pub mod users;
pub mod web;
pub mod webhooks;

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use protocol::model::permission;
use protocol::{ActorKey, ErrorCode, GuildId, UserId};
use serde::de::DeserializeOwned;
use serde_json::Value;
use store::{ChannelRecord, GuildRecord, MemberRecord, UserRecord};

pub use error::{json_bytes, ApiError, ApiResult};
pub use openapi::{op, Api};

use node::Node;

pub use ratelimit::{ClientIp, Resolved};

/// The authenticated caller (`Authorization: Bot <token>` or a bare user
/// token; an OAuth2 `Bearer` token is not a caller here, see [`MeCaller`]).
/// The rate-limit middleware has resolved the token already.
pub struct Caller(pub Arc<UserRecord>);

impl FromRequestParts<Arc<Node>> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        match parts.extensions.get::<Resolved>() {
            Some(Resolved::User(u)) => Ok(Caller(u.clone())),
            Some(Resolved::Bearer(..) | Resolved::Invalid) => Err(ApiError::unauthorized()),
            None => {
                // Outside the API's middleware (or no header at all).
                let h = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                Ok(Caller(node.auth.user_for_header(h.ok_or_else(ApiError::unauthorized)?).await?))
            }
        }
    }
}

/// The caller of a route an OAuth2 access token may also use (Discord's
/// `identify` and `guilds` scopes: `/users/@me`, `/users/@me/guilds`):
/// the user, and the token's scopes if it is one.
pub struct MeCaller(pub Arc<UserRecord>, pub Option<Arc<[String]>>);

impl FromRequestParts<Arc<Node>> for MeCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        match parts.extensions.get::<Resolved>() {
            Some(Resolved::Bearer(u, scopes)) => Ok(MeCaller(u.clone(), Some(scopes.clone()))),
            _ => Caller::from_request_parts(parts, node).await.map(|c| MeCaller(c.0, None)),
        }
    }
}

impl MeCaller {
    /// The user, if the caller may use `scope` (a login token may do anything).
    pub fn with_scope(self, scope: &str) -> ApiResult<Arc<UserRecord>> {
        match &self.1 {
            Some(s) if !s.iter().any(|x| x == scope) => Err(ApiError::unauthorized()),
            _ => Ok(self.0),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        parts.extensions.get::<ClientIp>().copied().ok_or_else(|| ApiError::internal("no client address on the request"))
    }
}

/// A JSON request body with Discord's errors: 50109 for malformed JSON,
/// 50035 for a body of the wrong shape, 40005 when over the size limit.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::Code(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::EntityTooLarge)
            } else {
                ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Reads a JSON body as [`JsonBody`] does, for a route that decides who may
/// call it (see [`guard`]) in its own code before the body is read.
pub async fn read_json<T: DeserializeOwned>(req: Request) -> ApiResult<T> {
    JsonBody::<T>::from_request(req, &()).await.map(|b| b.0)
}

/// Query parameters, with Discord's error for a malformed one: 400 50035
/// naming the field (axum's own `Query` answers in plain text).
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        axum::extract::Query::try_from_uri(&parts.uri).map(|q| Query(q.0)).map_err(|e| {
            // "Failed to deserialize query string: limit: invalid digit found in string"
            let text = e.body_text();
            let detail = text.split_once("query string: ").map_or(text.as_str(), |(_, d)| d);
            match detail.split_once(": ") {
                Some((field, why)) if !field.is_empty() && !field.contains(' ') => ApiError::field(field, "BASE_TYPE_INVALID", why),
                _ => ApiError::InvalidForm(serde_json::json!({ "_errors": [{ "code": "BASE_TYPE_INVALID", "message": detail }] })),
            }
        })
    }
}

/// Parses a JSON body (an empty body counts as `{}`). JSON text is UTF-8
/// (RFC 8259): a body that is not is invalid JSON, also when the bad bytes
/// sit in a field we ignore (serde_json skips those without checking them).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let text: &str = if bytes.iter().all(u8::is_ascii_whitespace) {
        "{}"
    } else {
        std::str::from_utf8(bytes).map_err(|_| ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson))?
    };
    serde_json::from_str(text).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)
        } else {
            ApiError::InvalidForm(serde_json::json!({ "_errors": [{ "code": "BASE_TYPE_INVALID", "message": e.to_string() }] }))
        }
    })
}

/// A caller's standing in a guild.
pub struct Access {
    pub guild: GuildRecord,
    pub member: MemberRecord,
    /// Guild-level permission bits.
    pub perms: u64,
}

impl Access {
    pub fn is_owner(&self) -> bool {
        self.guild.owner_id == self.member.user_id
    }

    pub fn require(&self, bits: u64) -> ApiResult<()> {
        if self.perms & permission::ADMINISTRATOR != 0 || self.perms & bits == bits {
            Ok(())
        } else {
            Err(ApiError::forbidden(ErrorCode::MissingPermissions))
        }
    }

    /// Permission bits in a channel: guild bits with the channel's overwrites applied.
    pub fn in_channel(&self, c: &ChannelRecord) -> u64 {
        node::perm::in_channel(self.perms, self.guild.id, &self.member, c)
    }
}

/// The caller's membership and permissions in `guild`: 404 10004 if the guild
/// does not exist, 403 50001 if the caller is not a member.
pub async fn guild_access(node: &Node, guild: GuildId, user: UserId) -> ApiResult<Access> {
    let g = node.store.get_guild(guild).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownGuild))?;
    let member = node.store.get_member(guild, user).await?.ok_or_else(|| ApiError::forbidden(ErrorCode::MissingAccess))?;
    // The owner has every permission: no roles query on their (common) requests.
    let roles = if g.owner_id == user { Vec::new() } else { node.store.roles_of_guild(guild).await? };
    let perms = node::perm::base(guild, g.owner_id, &roles, &member);
    Ok(Access { guild: g, member, perms })
}

/// A guild channel the caller can see: 404 10003 if it does not exist (or is
/// not a guild channel), 403 50001 if the caller may not view it.
pub async fn channel_access(node: &Node, channel: protocol::ChannelId, user: UserId) -> ApiResult<(ChannelRecord, Access)> {
    let c = node.store.get_channel(channel).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    let guild = c.guild_id.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    let access = guild_access(node, guild, user).await?;
    // A thread: the parent's permissions (and private threads' membership).
    if store::is_thread(c.kind) {
        return threads::thread_access(node, c, access, user).await;
    }
    if access.in_channel(&c) & permission::VIEW_CHANNEL == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingAccess));
    }
    Ok((c, access))
}

async fn not_found() -> ApiError {
    ApiError::not_found(ErrorCode::UnknownRoute)
}

/// A known path with a method it does not have, as Discord answers it.
async fn method_not_allowed() -> ApiError {
    ApiError::Code(StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed)
}

/// The API under `/api/v10` (and `/v9`, `/api`): every route with what it
/// takes and answers, which is also the OpenAPI document (`openapi.rs`).
pub fn api_table() -> Api {
    use protocol::model::{Channel, CurrentUser, Emoji, Guild, Member, Message, Role, User};
    use shapes::*;
    type List<T> = Vec<T>;
    Api::default()
        // Gateway discovery, accounts, the current user.
        .get("/gateway", users::gateway, op("getGateway", "Gateway", "The gateway URL.").public().ok::<Gateway>())
        .get(
            "/gateway/bot",
            users::gateway_bot,
            op("getGatewayBot", "Gateway", "The gateway URL, shards and session start limits.").ok::<GatewayBot>(),
        )
        .post(
            "/auth/register",
            users::register,
            op("register", "Accounts", "Creates a user; answers its token.").public().body::<users::Register>().created::<Token>(),
        )
        .post(
            "/auth/login",
            users::login,
            op("login", "Accounts", "A user's token for a username and password.").public().body::<users::Login>().ok::<Token>(),
        )
        .post(
            "/auth/logout",
            users::logout,
            op("logout", "Accounts", "Revokes the calling token on every node (people only).").body::<Value>().no_content(),
        )
        .get(
            "/auth/sessions",
            users::sessions,
            op("listSessions", "Accounts", "The account's logged-in sessions, one per token.").ok::<Sessions>(),
        )
        .post(
            "/auth/sessions/logout",
            users::logout_sessions,
            op("logoutSessions", "Accounts", "Revokes the named sessions of the account.").body::<users::LogoutSessions>().no_content(),
        )
        .get(
            "/oauth2/authorize",
            oauth2::authorize_info,
            op(
                "getAuthorization",
                "OAuth2",
                "What a consent page shows: the application, its bot, the caller's guilds where they may add it.",
            )
            .query::<oauth2::AuthorizeQuery>()
            .ok::<Value>(),
        )
        .post(
            "/oauth2/authorize",
            oauth2::authorize,
            op("authorize", "OAuth2", "Consents: adds the bot to a guild (MANAGE_GUILD) and/or issues an authorization code.")
                .query::<oauth2::AuthorizeQuery>()
                .body::<oauth2::AuthorizeBody>()
                .ok::<Location>(),
        )
        .post(
            "/oauth2/token",
            oauth2::token,
            op("token", "OAuth2", "Exchanges a code or refresh token for an access token (client credentials, form-encoded).")
                .public()
                .form::<oauth2::TokenForm>()
                .ok::<OAuthToken>()
                .answer::<OAuthError>(400)
                .answer::<OAuthError>(401),
        )
        .get(
            "/users/@me",
            users::me,
            op("getCurrentUser", "Users", "The caller (or an OAuth2 token's user, `identify`).").ok::<CurrentUser>(),
        )
        .patch(
            "/users/@me",
            users::modify_me,
            op("modifyCurrentUser", "Users", "Changes the caller's username, display name, avatar or password.")
                .body::<users::ModifyMe>()
                .ok::<CurrentUser>(),
        )
        .get(
            "/users/@me/guilds",
            users::my_guilds,
            op("getCurrentUserGuilds", "Users", "The caller's guilds, with their permissions.").ok::<List<PartialGuild>>(),
        )
        .delete("/users/@me/guilds/{guild_id}", guilds::leave, op("leaveGuild", "Users", "Leaves a guild (its owner cannot).").no_content())
        .get("/users/{user_id}", users::get_user, op("getUser", "Users", "A user.").ok::<User>())
        .get(
            "/oauth2/applications/@me",
            users::application,
            op("getCurrentBotApplicationInformation", "Applications", "The bot's application.").ok::<Application>(),
        )
        .get(
            "/applications/@me",
            users::application,
            op("getCurrentApplication", "Applications", "The bot's application.").ok::<Application>(),
        )
        .patch(
            "/applications/@me",
            oauth2::modify_application,
            op("editCurrentApplication", "Applications", "Sets the application's OAuth2 redirect URIs.")
                .body::<oauth2::ModifyApplication>()
                .ok::<Application>(),
        )
        .post(
            "/applications/@me/secret",
            oauth2::reset_secret,
            op("resetApplicationSecret", "Applications", "A new OAuth2 client secret, shown once (throng's own route).").ok::<Value>(),
        )
        // Guilds, channels, members.
        .post(
            "/guilds",
            guilds::create,
            op("createGuild", "Guilds", "Creates a guild with `@everyone` and `#general`; the caller owns it.")
                .body::<guilds::CreateGuild>()
                .created::<Guild>(),
        )
        .get(
            "/guilds/{guild_id}",
            guilds::get,
            op("getGuild", "Guilds", "A guild, with counts if `with_counts=true`.").query::<guilds::WithCounts>().ok::<Guild>(),
        )
        .patch(
            "/guilds/{guild_id}",
            guilds::modify,
            op("modifyGuild", "Guilds", "Changes a guild (MANAGE_GUILD).").body::<guilds::ModifyGuild>().ok::<Guild>(),
        )
        .delete("/guilds/{guild_id}", guilds::delete, op("deleteGuild", "Guilds", "Deletes a guild (its owner).").no_content())
        .get(
            "/guilds/{guild_id}/channels",
            guilds::channels,
            op("getGuildChannels", "Channels", "The guild's channels the caller can see (threads apart).").ok::<List<Channel>>(),
        )
        .post(
            "/guilds/{guild_id}/channels",
            guilds::create_channel,
            op("createGuildChannel", "Channels", "Creates a channel (MANAGE_CHANNELS).")
                .body::<guilds::CreateChannel>()
                .created::<Channel>(),
        )
        .get(
            "/guilds/{guild_id}/members",
            guilds::members,
            op("listGuildMembers", "Members", "A page of members by ascending user id.")
                .query::<guilds::ListMembers>()
                .ok::<List<Member>>(),
        )
        .get(
            "/guilds/{guild_id}/messages/search",
            search::in_guild,
            op("searchGuildMessages", "Search", "Messages of the guild's channels the caller may read, found by content and filters.")
                .query::<search::SearchParams>()
                .ok::<shapes::SearchResults>(),
        )
        .get(
            "/channels/{channel_id}/messages/search",
            search::in_channel,
            op("searchChannelMessages", "Search", "Messages of one channel (a DM) found by content and filters.")
                .query::<search::SearchParams>()
                .ok::<shapes::SearchResults>(),
        )
        .get(
            "/guilds/{guild_id}/audit-logs",
            audit::list,
            op("getGuildAuditLog", "Audit log", "The guild's audit log (VIEW_AUDIT_LOG).")
                .query::<audit::AuditLogQuery>()
                .ok::<shapes::AuditLog>(),
        )
        .get(
            "/guilds/{guild_id}/members/search",
            guilds::search_members,
            op("searchGuildMembers", "Members", "Members whose username, global name or nickname starts with `query`.")
                .query::<guilds::SearchMembers>()
                .ok::<List<Member>>(),
        )
        .patch(
            "/guilds/{guild_id}/members/@me",
            guilds::modify_me,
            op("modifyCurrentMember", "Members", "Changes the caller's nickname.").body::<guilds::ModifyMember>().ok::<Member>(),
        )
        .get("/guilds/{guild_id}/members/{user_id}", guilds::member, op("getGuildMember", "Members", "A member.").ok::<Member>())
        .put(
            "/guilds/{guild_id}/members/{user_id}",
            guilds::add_member,
            op(
                "addGuildMember",
                "Members",
                "A bot adds a user who gave it a `guilds.join` token: 201 with the member, 204 if already one.",
            )
            .body::<guilds::AddMember>()
            .created::<Member>()
            .no_content(),
        )
        .patch(
            "/guilds/{guild_id}/members/{user_id}",
            guilds::modify_member,
            op("modifyGuildMember", "Members", "Changes a member's nickname (MANAGE_NICKNAMES) or roles (MANAGE_ROLES).")
                .body::<guilds::ModifyMember>()
                .ok::<Member>(),
        )
        .delete(
            "/guilds/{guild_id}/members/{user_id}",
            guilds::remove_member,
            op("removeGuildMember", "Members", "Kicks a member (KICK_MEMBERS).").no_content(),
        )
        .get("/channels/{channel_id}", channels::get, op("getChannel", "Channels", "A channel, thread or DM.").ok::<AnyChannel>())
        .patch(
            "/channels/{channel_id}",
            channels::modify,
            op("modifyChannel", "Channels", "Changes a channel (MANAGE_CHANNELS) or thread.")
                .body::<channels::ModifyChannel>()
                .ok::<AnyChannel>(),
        )
        .delete(
            "/channels/{channel_id}",
            channels::delete,
            op("deleteChannel", "Channels", "Deletes a channel or thread; answers it.").ok::<AnyChannel>(),
        )
        // Messages.
        .get(
            "/channels/{channel_id}/messages",
            messages::list,
            op("getChannelMessages", "Messages", "History: up to `limit` (1-100, default 50) before, after or around a message.")
                .query::<messages::ListQuery>()
                .ok::<List<Message>>(),
        )
        .post(
            "/channels/{channel_id}/messages",
            messages::create,
            op("createMessage", "Messages", "Sends a message (SEND_MESSAGES), with files as multipart.")
                .body::<messages::MessageBody>()
                .multipart()
                .ok::<Message>(),
        )
        .get(
            "/channels/{channel_id}/messages/{message_id}",
            messages::get,
            op("getChannelMessage", "Messages", "A message.").ok::<Message>(),
        )
        .patch(
            "/channels/{channel_id}/messages/{message_id}",
            messages::edit,
            op("editMessage", "Messages", "Edits one's own message.").body::<messages::EditBody>().ok::<Message>(),
        )
        .delete(
            "/channels/{channel_id}/messages/{message_id}",
            messages::delete,
            op("deleteMessage", "Messages", "Deletes a message (its author, or MANAGE_MESSAGES).").no_content(),
        )
        .post(
            "/channels/{channel_id}/messages/{message_id}/ack",
            read_states::ack,
            op("ackMessage", "Read states", "Marks the channel read up to the message (any channel the caller sees); MESSAGE_ACK to the caller's sessions.")
                .body::<read_states::AckBody>()
                .ok::<shapes::AckToken>(),
        )
        .post(
            "/channels/{channel_id}/typing",
            messages::typing,
            op("triggerTypingIndicator", "Messages", "TYPING_START for the channel.").no_content(),
        )
        .post(
            "/channels/{channel_id}/messages/bulk-delete",
            pins::bulk_delete,
            op("bulkDeleteMessages", "Messages", "Deletes 2-100 messages younger than two weeks (MANAGE_MESSAGES).")
                .body::<pins::BulkBody>()
                .no_content(),
        )
        // Invites.
        .post(
            "/channels/{channel_id}/invites",
            channels::create_invite,
            op("createChannelInvite", "Invites", "Creates an invite (CREATE_INSTANT_INVITE).")
                .body::<channels::CreateInvite>()
                .ok::<Invite>(),
        )
        .get(
            "/channels/{channel_id}/invites",
            channels::channel_invites,
            op("getChannelInvites", "Invites", "The channel's live invites, newest first (MANAGE_CHANNELS).").ok::<List<Invite>>(),
        )
        .get(
            "/guilds/{guild_id}/invites",
            channels::guild_invites,
            op("getGuildInvites", "Invites", "The guild's live invites, newest first (MANAGE_GUILD).").ok::<List<Invite>>(),
        )
        .get("/invites/{code}", channels::get_invite, op("getInvite", "Invites", "An invite.").public().ok::<Invite>())
        .post("/invites/{code}", channels::accept_invite, op("acceptInvite", "Invites", "Joins the invite's guild.").ok::<Invite>())
        .delete(
            "/invites/{code}",
            channels::delete_invite,
            op("deleteInvite", "Invites", "Revokes an invite (MANAGE_CHANNELS or MANAGE_GUILD).").ok::<Invite>(),
        )
        // Roles and overwrites.
        .get("/guilds/{guild_id}/roles", guilds::roles, op("getGuildRoles", "Roles", "The guild's roles.").ok::<List<Role>>())
        .post(
            "/guilds/{guild_id}/roles",
            roles::create,
            op("createGuildRole", "Roles", "Creates a role (MANAGE_ROLES).").body::<roles::RoleBody>().ok::<Role>(),
        )
        .patch(
            "/guilds/{guild_id}/roles",
            roles::reorder,
            op("modifyGuildRolePositions", "Roles", "Moves roles; answers every role.").body::<List<roles::Position>>().ok::<List<Role>>(),
        )
        .get("/guilds/{guild_id}/roles/{role_id}", roles::get, op("getGuildRole", "Roles", "A role.").ok::<Role>())
        .patch(
            "/guilds/{guild_id}/roles/{role_id}",
            roles::modify,
            op("modifyGuildRole", "Roles", "Changes a role below the caller's highest (MANAGE_ROLES).")
                .body::<roles::RoleBody>()
                .ok::<Role>(),
        )
        .delete(
            "/guilds/{guild_id}/roles/{role_id}",
            roles::delete,
            op("deleteGuildRole", "Roles", "Deletes a role (MANAGE_ROLES).").no_content(),
        )
        .put(
            "/guilds/{guild_id}/members/{user_id}/roles/{role_id}",
            roles::grant,
            op("addGuildMemberRole", "Roles", "Gives a member a role (MANAGE_ROLES).").no_content(),
        )
        .delete(
            "/guilds/{guild_id}/members/{user_id}/roles/{role_id}",
            roles::revoke,
            op("removeGuildMemberRole", "Roles", "Takes a role from a member (MANAGE_ROLES).").no_content(),
        )
        .put(
            "/channels/{channel_id}/permissions/{overwrite_id}",
            roles::put_overwrite,
            op("editChannelPermissions", "Channels", "Sets a role's or member's overwrite (MANAGE_ROLES).")
                .body::<roles::OverwriteBody>()
                .no_content(),
        )
        .delete(
            "/channels/{channel_id}/permissions/{overwrite_id}",
            roles::delete_overwrite,
            op("deleteChannelPermission", "Channels", "Removes an overwrite (MANAGE_ROLES).").no_content(),
        )
        // Bans.
        .get(
            "/guilds/{guild_id}/bans",
            bans::list,
            op("getGuildBans", "Bans", "Bans by ascending user id (BAN_MEMBERS).").query::<bans::BanPage>().ok::<List<Ban>>(),
        )
        .get("/guilds/{guild_id}/bans/{user_id}", bans::get, op("getGuildBan", "Bans", "A ban (BAN_MEMBERS).").ok::<Ban>())
        .put(
            "/guilds/{guild_id}/bans/{user_id}",
            bans::create,
            op("createGuildBan", "Bans", "Bans a user, deleting their recent messages if asked (BAN_MEMBERS).")
                .query::<bans::Purge>()
                .body::<bans::Purge>()
                .no_content(),
        )
        .delete("/guilds/{guild_id}/bans/{user_id}", bans::remove, op("removeGuildBan", "Bans", "Lifts a ban (BAN_MEMBERS).").no_content())
        // Reactions.
        .put(
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user_id}",
            reactions::add,
            op("createReaction", "Reactions", "Reacts (`@me` only: 405 for anyone else; ADD_REACTIONS for a new emoji).")
                .refuses(405)
                .no_content(),
        )
        .delete(
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user_id}",
            reactions::remove,
            op("deleteReaction", "Reactions", "Removes one's own reaction, or another's (MANAGE_MESSAGES).").no_content(),
        )
        .get(
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}",
            reactions::users,
            op("getReactions", "Reactions", "Who reacted with an emoji.").query::<reactions::UsersQuery>().ok::<List<User>>(),
        )
        .delete(
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}",
            reactions::clear_emoji,
            op("deleteAllReactionsForEmoji", "Reactions", "Removes every reaction with an emoji (MANAGE_MESSAGES).").no_content(),
        )
        .delete(
            "/channels/{channel_id}/messages/{message_id}/reactions",
            reactions::clear_all,
            op("deleteAllReactions", "Reactions", "Removes every reaction (MANAGE_MESSAGES).").no_content(),
        )
        // Pins.
        .get(
            "/channels/{channel_id}/messages/pins",
            pins::list,
            op("getChannelPins", "Pins", "Pinned messages, the latest first.").query::<pins::PinsQuery>().ok::<Pins>(),
        )
        .put(
            "/channels/{channel_id}/messages/pins/{message_id}",
            pins::pin,
            op("pinMessage", "Pins", "Pins a message (PIN_MESSAGES or MANAGE_MESSAGES).").no_content(),
        )
        .delete(
            "/channels/{channel_id}/messages/pins/{message_id}",
            pins::unpin,
            op("unpinMessage", "Pins", "Unpins a message.").no_content(),
        )
        .get(
            "/channels/{channel_id}/pins",
            pins::list_old,
            op("getPinnedMessages", "Pins", "The latest 50 pinned messages (Discord's older route).").ok::<List<Message>>(),
        )
        .put(
            "/channels/{channel_id}/pins/{message_id}",
            pins::pin,
            op("pinMessageOld", "Pins", "Pins a message (older route).").no_content(),
        )
        .delete(
            "/channels/{channel_id}/pins/{message_id}",
            pins::unpin,
            op("unpinMessageOld", "Pins", "Unpins a message (older route).").no_content(),
        )
        // Emojis.
        .get("/guilds/{guild_id}/emojis", emojis::list, op("listGuildEmojis", "Emojis", "The guild's custom emojis.").ok::<List<Emoji>>())
        .post(
            "/guilds/{guild_id}/emojis",
            emojis::create,
            op("createGuildEmoji", "Emojis", "Creates an emoji from a data URI (CREATE_GUILD_EXPRESSIONS).")
                .body::<emojis::CreateBody>()
                .created::<Emoji>(),
        )
        .get("/guilds/{guild_id}/emojis/{emoji_id}", emojis::get, op("getGuildEmoji", "Emojis", "An emoji.").ok::<Emoji>())
        .patch(
            "/guilds/{guild_id}/emojis/{emoji_id}",
            emojis::modify,
            op("modifyGuildEmoji", "Emojis", "Renames an emoji or sets its roles.").body::<emojis::ModifyBody>().ok::<Emoji>(),
        )
        .delete("/guilds/{guild_id}/emojis/{emoji_id}", emojis::delete, op("deleteGuildEmoji", "Emojis", "Deletes an emoji.").no_content())
        // Webhooks.
        .get(
            "/channels/{channel_id}/webhooks",
            webhooks::list_channel,
            op("getChannelWebhooks", "Webhooks", "A channel's webhooks (MANAGE_WEBHOOKS).").ok::<List<Webhook>>(),
        )
        .post(
            "/channels/{channel_id}/webhooks",
            webhooks::create,
            op("createWebhook", "Webhooks", "Creates a webhook (MANAGE_WEBHOOKS).").body::<webhooks::CreateBody>().ok::<Webhook>(),
        )
        .get(
            "/guilds/{guild_id}/webhooks",
            webhooks::list_guild,
            op("getGuildWebhooks", "Webhooks", "A guild's webhooks (MANAGE_WEBHOOKS).").ok::<List<Webhook>>(),
        )
        .get("/webhooks/{webhook_id}", webhooks::get_one, op("getWebhook", "Webhooks", "A webhook (MANAGE_WEBHOOKS).").ok::<Webhook>())
        .patch(
            "/webhooks/{webhook_id}",
            webhooks::modify,
            op("modifyWebhook", "Webhooks", "Changes a webhook (MANAGE_WEBHOOKS).").body::<webhooks::ModifyBody>().ok::<Webhook>(),
        )
        .delete(
            "/webhooks/{webhook_id}",
            webhooks::delete,
            op("deleteWebhook", "Webhooks", "Deletes a webhook (MANAGE_WEBHOOKS).").no_content(),
        )
        .get(
            "/webhooks/{webhook_id}/{token}",
            webhooks::get_by_token,
            op("getWebhookWithToken", "Webhooks", "A webhook, by its token.").public().ok::<Webhook>(),
        )
        .patch(
            "/webhooks/{webhook_id}/{token}",
            webhooks::modify_by_token,
            op("modifyWebhookWithToken", "Webhooks", "Changes a webhook, by its token.")
                .public()
                .body::<webhooks::ModifyBody>()
                .ok::<Webhook>(),
        )
        .delete(
            "/webhooks/{webhook_id}/{token}",
            webhooks::delete_by_token,
            op("deleteWebhookWithToken", "Webhooks", "Deletes a webhook, by its token.").public().no_content(),
        )
        .post(
            "/webhooks/{webhook_id}/{token}",
            webhooks::execute,
            op("executeWebhook", "Webhooks", "Posts as the webhook: 204, or 200 with the message if `wait=true`.")
                .public()
                .query::<webhooks::ExecuteQuery>()
                .body::<webhooks::ExecuteBody>()
                .multipart()
                .ok::<Message>()
                .no_content(),
        )
        // DMs and threads.
        .get("/users/@me/channels", dms::list, op("getUserDms", "DMs", "The caller's DM channels.").ok::<List<DmChannel>>())
        .post(
            "/users/@me/channels",
            dms::open,
            op("createDm", "DMs", "Opens (or finds) a DM with a user who shares a guild.").body::<dms::OpenDm>().ok::<DmChannel>(),
        )
        .post(
            "/channels/{channel_id}/messages/{message_id}/threads",
            threads::start_from_message,
            op("startThreadFromMessage", "Threads", "Starts a public thread on a message.")
                .body::<threads::StartThread>()
                .created::<Thread>(),
        )
        .post(
            "/channels/{channel_id}/threads",
            threads::start,
            op("startThreadWithoutMessage", "Threads", "Starts a thread (type 11 public, 12 private).")
                .body::<threads::StartThread>()
                .created::<Thread>(),
        )
        .get(
            "/channels/{channel_id}/threads/archived/public",
            threads::archived_public,
            op("listPublicArchivedThreads", "Threads", "Archived public threads, the latest first.")
                .query::<threads::ArchivedQuery>()
                .ok::<ThreadList>(),
        )
        .get(
            "/channels/{channel_id}/threads/archived/private",
            threads::archived_private,
            op("listPrivateArchivedThreads", "Threads", "Archived private threads (MANAGE_THREADS).")
                .query::<threads::ArchivedQuery>()
                .ok::<ThreadList>(),
        )
        .get(
            "/channels/{channel_id}/thread-members",
            threads::members,
            op("listThreadMembers", "Threads", "A thread's members.").query::<threads::MembersQuery>().ok::<List<ThreadMember>>(),
        )
        .get(
            "/channels/{channel_id}/thread-members/{user_id}",
            threads::member,
            op("getThreadMember", "Threads", "A thread member.").query::<threads::MembersQuery>().ok::<ThreadMember>(),
        )
        .put(
            "/channels/{channel_id}/thread-members/{user_id}",
            threads::add_member,
            op("addThreadMember", "Threads", "Joins a thread (`@me`) or adds a member.").no_content(),
        )
        .delete(
            "/channels/{channel_id}/thread-members/{user_id}",
            threads::remove_member,
            op("removeThreadMember", "Threads", "Leaves a thread (`@me`) or removes a member.").no_content(),
        )
        .get(
            "/guilds/{guild_id}/threads/active",
            threads::active,
            op("listActiveGuildThreads", "Threads", "The guild's active threads the caller can see.").ok::<ThreadList>(),
        )
        // Interactions: what a person's client sends, what a bot answers.
        .post(
            "/interactions",
            interactions::create,
            op("createInteraction", "Interactions", "Runs a command, uses a component or submits a modal: 204 once the bot has it.")
                .body::<interactions::InteractionBody>()
                .no_content(),
        )
        .post(
            "/interactions/{interaction_id}/{token}/callback",
            interactions::callback,
            op("createInteractionResponse", "Interactions", "The bot's one initial response to an interaction.")
                .public()
                .query::<interactions::CallbackQuery>()
                .body::<interactions::CallbackBody>()
                .ok::<serde_json::Value>()
                .no_content(),
        )
        .get(
            "/guilds/{guild_id}/application-command-index",
            interactions::guild_index,
            op("getGuildApplicationCommandIndex", "Interactions", "The commands the caller may run in the guild, with their applications.")
                .ok::<serde_json::Value>(),
        )
        .get(
            "/channels/{channel_id}/application-command-index",
            interactions::channel_index,
            op("getChannelApplicationCommandIndex", "Interactions", "The commands the caller may run in the channel: its guild's, or in a DM the bot's.")
                .ok::<serde_json::Value>(),
        )
        .get(
            "/users/@me/application-command-index",
            interactions::user_index,
            op("getUserApplicationCommandIndex", "Interactions", "The commands the caller may run outside guilds: those of the bots they have DMs with.")
                .ok::<serde_json::Value>(),
        )
        .get(
            "/webhooks/{webhook_id}/{token}/messages/{message_id}",
            webhooks::get_message,
            op("getWebhookMessage", "Webhooks", "A message the webhook or interaction sent (`@original`: the interaction's response).")
                .public()
                .ok::<Message>(),
        )
        .patch(
            "/webhooks/{webhook_id}/{token}/messages/{message_id}",
            webhooks::edit_message,
            op("editWebhookMessage", "Webhooks", "Edits a message the webhook or interaction sent.")
                .public()
                .body::<webhooks::ExecuteBody>()
                .ok::<Message>(),
        )
        .delete(
            "/webhooks/{webhook_id}/{token}/messages/{message_id}",
            webhooks::delete_message,
            op("deleteWebhookMessage", "Webhooks", "Deletes a message the webhook or interaction sent.").public().no_content(),
        )
        // Application commands.
        .get(
            "/applications/{app_id}/commands",
            commands::global_list,
            op("getGlobalApplicationCommands", "Commands", "The application's global commands.").ok::<List<ApplicationCommand>>(),
        )
        .post(
            "/applications/{app_id}/commands",
            commands::global_create,
            op("createGlobalApplicationCommand", "Commands", "Creates a command (201), or replaces the one of that name (200).")
                .body::<CommandBody>()
                .created::<ApplicationCommand>()
                .ok::<ApplicationCommand>(),
        )
        .put(
            "/applications/{app_id}/commands",
            commands::global_overwrite,
            op("bulkOverwriteGlobalApplicationCommands", "Commands", "Replaces every global command.")
                .body::<List<CommandBody>>()
                .ok::<List<ApplicationCommand>>(),
        )
        .get(
            "/applications/{app_id}/commands/{command_id}",
            commands::global_get,
            op("getGlobalApplicationCommand", "Commands", "A global command.").ok::<ApplicationCommand>(),
        )
        .patch(
            "/applications/{app_id}/commands/{command_id}",
            commands::global_edit,
            op("editGlobalApplicationCommand", "Commands", "Edits a global command.").body::<CommandBody>().ok::<ApplicationCommand>(),
        )
        .delete(
            "/applications/{app_id}/commands/{command_id}",
            commands::global_delete,
            op("deleteGlobalApplicationCommand", "Commands", "Deletes a global command.").no_content(),
        )
        .get(
            "/applications/{app_id}/guilds/{guild_id}/commands",
            commands::guild_list,
            op("getGuildApplicationCommands", "Commands", "The application's commands in a guild.").ok::<List<ApplicationCommand>>(),
        )
        .post(
            "/applications/{app_id}/guilds/{guild_id}/commands",
            commands::guild_create,
            op("createGuildApplicationCommand", "Commands", "Creates a guild command (201), or replaces the one of that name (200).")
                .body::<CommandBody>()
                .created::<ApplicationCommand>()
                .ok::<ApplicationCommand>(),
        )
        .put(
            "/applications/{app_id}/guilds/{guild_id}/commands",
            commands::guild_overwrite,
            op("bulkOverwriteGuildApplicationCommands", "Commands", "Replaces every command in a guild.")
                .body::<List<CommandBody>>()
                .ok::<List<ApplicationCommand>>(),
        )
        .get(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}",
            commands::guild_get,
            op("getGuildApplicationCommand", "Commands", "A guild command.").ok::<ApplicationCommand>(),
        )
        .patch(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}",
            commands::guild_edit,
            op("editGuildApplicationCommand", "Commands", "Edits a guild command.").body::<CommandBody>().ok::<ApplicationCommand>(),
        )
        .delete(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}",
            commands::guild_delete,
            op("deleteGuildApplicationCommand", "Commands", "Deletes a guild command.").no_content(),
        )
        .get(
            "/applications/{app_id}/guilds/{guild_id}/commands/permissions",
            commands::guild_permissions,
            op("getGuildApplicationCommandPermissions", "Commands", "The application's permission overrides in a guild.").ok::<List<Value>>(),
        )
        .get(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions",
            commands::command_permissions,
            op("getApplicationCommandPermissions", "Commands", "One command's permission overrides in a guild (404 10066 if none).")
                .ok::<Value>(),
        )
        .put(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions",
            commands::edit_command_permissions,
            op(
                "editApplicationCommandPermissions",
                "Commands",
                "Replaces a command's (or, by the application's id, all its commands') overrides: people who manage the guild and its roles.",
            )
            .body::<commands::PermissionsBody>()
            .ok::<Value>(),
        )
        // What throng does not have, answered empty so clients that ask carry on.
        .get(
            "/applications/{app_id}/entitlements",
            absent::empty_list,
            op("listEntitlements", "Absent", "Always empty: no monetisation.").ok::<List<Value>>(),
        )
        .get(
            "/applications/{app_id}/emojis",
            absent::empty_items,
            op("listApplicationEmojis", "Absent", "Always empty: no application emojis.").ok::<Items>(),
        )
        .get(
            "/soundboard-default-sounds",
            absent::empty_list,
            op("listDefaultSoundboardSounds", "Absent", "Always empty: no soundboard.").ok::<List<Value>>(),
        )
        .get(
            "/guilds/{guild_id}/soundboard-sounds",
            absent::guild_empty_items,
            op("listGuildSoundboardSounds", "Absent", "Always empty (to members): no soundboard.").ok::<Items>(),
        )
        .get(
            "/guilds/{guild_id}/stickers",
            absent::guild_empty_list,
            op("listGuildStickers", "Absent", "Always empty (to members): no stickers.").ok::<List<Value>>(),
        )
        .get("/sticker-packs", absent::sticker_packs, op("listStickerPacks", "Absent", "Always empty: no stickers.").ok::<StickerPacks>())
        .get("/voice/regions", absent::empty_list, op("listVoiceRegions", "Absent", "Always empty: no voice.").ok::<List<Value>>())
        // Operators' routes (`X-Throng-Admin-Token`; absent without an admin token).
        .post(
            "/_throng/admin/drop-sessions",
            admin::drop_sessions,
            op("adminDropSessions", "Operators", "Closes a user's gateway sessions.").admin().body::<admin::DropSessions>().ok::<Dropped>(),
        )
        .get("/_throng/admin/stats", admin::stats, op("adminStats", "Operators", "The node's counters.").admin().ok::<Stats>())
        .get(
            "/_throng/admin/guilds/{guild_id}/owner",
            admin::owner,
            op("adminGuildOwner", "Operators", "The node that runs a guild's actor.").admin().ok::<Owner>(),
        )
}

/// The OpenAPI document of [`api_table`] (built once).
pub fn openapi() -> &'static Value {
    OPENAPI.get_or_init(|| api_table().finish().1.document())
}

static OPENAPI: std::sync::OnceLock<Value> = std::sync::OnceLock::new();

fn api(node: &Arc<Node>) -> Router<Arc<Node>> {
    let (routes, described) = api_table().finish();
    let doc = bytes::Bytes::from(OPENAPI.get_or_init(|| described.document()).to_string());
    routes
        .route("/openapi.json", get(move || std::future::ready(json_bytes(StatusCode::OK, doc.clone()))))
        .route("/docs", get(openapi::docs_file(&openapi::DOCS_PAGE)))
        .route("/docs.js", get(openapi::docs_file(&openapi::DOCS_JS)))
        .route("/docs.css", get(openapi::docs_file(&openapi::DOCS_CSS)))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(audit::with_reason))
        .layer(axum::middleware::from_fn_with_state(node.clone(), ratelimit::middleware))
        .layer(compression(node.config.http.compress_min_bytes))
}

/// gzip and Brotli for API answers of at least `min` bytes (tower-http's
/// compression; `http.compress_min_bytes`), at level 4 of each: near their
/// best ratio for JSON at a fraction of the top levels' CPU. Images never
/// (attachments are served outside the API, and come compressed).
fn compression(min: u16) -> tower_http::compression::CompressionLayer<impl tower_http::compression::Predicate> {
    use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
    use tower_http::compression::{CompressionLayer, CompressionLevel};
    let on = min > 0;
    CompressionLayer::new()
        .gzip(on)
        .br(on)
        .no_deflate()
        .no_zstd()
        .quality(CompressionLevel::Precise(4))
        .compress_when(SizeAbove::new(min.saturating_sub(1)).and(NotForContentType::IMAGES).and(NotForContentType::GRPC))
}

/// `GET /health`: 200 `{"status":"ok"}` while the node takes sessions;
/// 503 with `"draining"` during shutdown or `"no-cluster"` when a cluster
/// node has lost its bus. For load balancers' checks; no token.
async fn health(axum::extract::State(node): axum::extract::State<Arc<Node>>) -> axum::response::Response {
    let nodes = node.cluster_nodes();
    let (status, code, reason) = if node.shutdown.is_cancelled() {
        ("draining", StatusCode::SERVICE_UNAVAILABLE, None)
    } else {
        match node.health() {
            Ok(()) => ("ok", StatusCode::OK, None),
            Err(why) => ("no-cluster", StatusCode::SERVICE_UNAVAILABLE, Some(why)),
        }
    };
    let body = serde_json::json!({
        "status": status, "reason": reason, "node": node.id.0, "cluster_nodes": nodes,
        "sessions": node.sessions.len(), "guild_actors": node.guilds.local_actors(),
    });
    json_bytes(code, body.to_string())
}

/// `GET /ready`: 200 `{"status":"ready"}` when the node takes sessions
/// (as `/health`) and its store answers a query; 503 with the reason
/// otherwise. For orchestrators' readiness checks; no token.
/// How long `/ready` waits for the store's answer before it says not ready.
const READY_STORE_PROBE: std::time::Duration = std::time::Duration::from_secs(2);

async fn ready(axum::extract::State(node): axum::extract::State<Arc<Node>>) -> axum::response::Response {
    let why: Option<String> = if node.shutdown.is_cancelled() {
        Some("draining".into())
    } else if let Err(why) = node.health() {
        Some(why.into())
    } else {
        let probe = tokio::time::timeout(READY_STORE_PROBE, node.store.get_user(UserId(0))).await;
        match probe {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("store: {e}")),
            Err(_) => Some(format!("store: no answer within {} s", READY_STORE_PROBE.as_secs())),
        }
    };
    match why {
        None => json_bytes(StatusCode::OK, r#"{"status":"ready"}"#),
        Some(w) => json_bytes(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "not-ready", "reason": w}).to_string()),
    }
}

/// The whole HTTP surface: the API under its three prefixes and the gateway
/// upgrade on `/` (handled before routing by the listener).
/// The HTTP routes of `node`; `sessions` is the gateway's table (admin and
/// metrics read it).
pub fn router(node: Arc<Node>, sessions: Arc<gateway::Sessions>) -> Router {
    let api = api(&node);
    Router::new()
        .nest("/api/v10", api.clone())
        .nest("/api/v9", api.clone())
        .nest("/api", api)
        .route("/health", get(health))
        .route("/metrics", get(metrics::metrics))
        .route("/ready", get(ready))
        .route("/emojis/{file}", get(emojis::image))
        .route("/avatars/{user_id}/{file}", get(users::avatar))
        .route("/icons/{guild_id}/{file}", get(guilds::icon))
        .merge(web::routes(&node.config))
        .merge(attachments::routes())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(node.config.limits.max_body_bytes))
        .layer(axum::Extension(sessions))
        .with_state(node)
}

/// A user id in a path, where `@me` is the caller. Clients may send it
/// percent-encoded (discord.js: `members/%40me`), which no literal `@me`
/// route matches, so routes with a `{user_id}` take it too.
pub fn user_or_me(s: &str, caller: UserId) -> ApiResult<UserId> {
    if s == "@me" {
        return Ok(caller);
    }
    parse_id(s, ErrorCode::UnknownUser)
}

/// Parses a path id; anything that is not a snowflake is an unknown `code`.
/// Message components (at `path`) within Discord's limits: 400 50035 naming the field otherwise.
pub fn check_components(components: &serde_json::Value, path: &str) -> ApiResult<()> {
    node::components::check(components, path).map_err(|e| ApiError::field(&e.path, e.code, &e.message))
}

pub fn parse_id<T: std::str::FromStr>(s: &str, code: ErrorCode) -> ApiResult<T> {
    s.parse().map_err(|_| ApiError::not_found(code))
}

/// A snowflake in query parameter `field`: 400 50035 naming it otherwise.
pub fn snowflake_param(field: &str, v: &str) -> ApiResult<u64> {
    v.parse().map_err(|_| ApiError::field(field, "NUMBER_TYPE_COERCE", &format!("Value \"{v}\" is not snowflake.")))
}

/// Asks the actor `key` (a guild's or a DM's), wherever it runs, to carry out `action` for
/// `user`, and answers with what it says: the actor checks permissions
/// from its own state and commits the change. A full mailbox or writer, an
/// owner that is gone or no answer within `limits.write_timeout_ms`: 503
/// (the change may have committed in the last case; the client may retry).
pub async fn ask(node: &Arc<Node>, guild: GuildId, user: UserId, action: node::route::Action) -> ApiResult<axum::response::Response> {
    ask_actor(node, ActorKey::guild(guild), user, action).await
}

/// [`ask`] of any actor: a guild's, or a DM's (a channel's, by [`actor_of`]).
pub async fn ask_actor(node: &Arc<Node>, key: ActorKey, user: UserId, action: node::route::Action) -> ApiResult<axum::response::Response> {
    reply_response(ask_actor_reply(node, key, user, action).await?)
}

/// [`ask_actor`]'s answer as the actor gave it.
pub async fn ask_actor_reply(
    node: &Arc<Node>,
    key: ActorKey,
    user: UserId,
    action: node::route::Action,
) -> ApiResult<node::route::OpReply> {
    use node::route::Op;
    let (reply, answer) = node.replies.register();
    let reason = audit::reason();
    node.guilds.send(key, guild::GuildMsg::Op(Box::new(Op { user, action, reply, reason })))?;
    let wait = std::time::Duration::from_millis(node.config.limits.write_timeout_ms);
    let Ok(Ok(answer)) = tokio::time::timeout(wait, answer).await else { return Err(ApiError::Busy) };
    serde_json::from_slice(&answer).map_err(ApiError::internal)
}

/// An actor's answer as the HTTP response.
pub fn reply_response(reply: node::route::OpReply) -> ApiResult<axum::response::Response> {
    use node::route::OpReply;
    match reply {
        OpReply::Done { status, body } => {
            let status = StatusCode::from_u16(status).map_err(ApiError::internal)?;
            Ok(match body {
                Some(b) => json_bytes(status, b.get().to_owned()),
                None => axum::response::IntoResponse::into_response(status),
            })
        }
        OpReply::Error { status, code } => Err(ApiError::Code(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), code)),
        OpReply::Form(errors) => Err(ApiError::InvalidForm(errors)),
        OpReply::Retry => Err(ApiError::Busy),
        OpReply::Failed(e) => Err(ApiError::internal(e)),
    }
}

/// The actor of channel `id`, its guild's or a DM's own (a node-level map;
/// a store read the first time): 404 10003 if there is no such channel.
pub async fn actor_of(node: &Node, id: protocol::ChannelId) -> ApiResult<ActorKey> {
    node.channel_actor(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))
}

/// Sends a committed change to its guild's actor. The store already has it,
/// so a busy guild only delays live delivery; that is logged, not failed.
pub fn publish(node: &Arc<Node>, guild: GuildId, ev: guild::GuildEvent) {
    if let Err(e) = node.guilds.send(guild.into(), ev.into()) {
        tracing::warn!(guild = %guild, error = %e, "committed change not dispatched");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Named {
        #[allow(dead_code)]
        name: Option<String>,
    }

    fn invalid_json<T: std::fmt::Debug>(r: ApiResult<T>) -> bool {
        matches!(r, Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)))
    }

    #[test]
    fn parse_json_rejects_invalid_utf8_even_in_ignored_fields() {
        // Found by fuzzing (fuzz/ rest_json): a non-UTF-8 byte in an
        // unknown key was accepted.
        assert!(invalid_json(parse_json::<Named>(b"{\"name\":\"c\",\"al\xbfw\":3}")));
        assert!(invalid_json(parse_json::<Named>(b"{\"x\":\"\xff\"}")));
        assert!(invalid_json(parse_json::<Named>(b"{\"name\":\"\xc0\xaf\"}")));
        assert_eq!(parse_json::<Named>("{\"name\":\"h\u{e9}\"}".as_bytes()).unwrap().name.as_deref(), Some("h\u{e9}"));
        assert!(parse_json::<Named>(b" \n").unwrap().name.is_none());
        assert!(matches!(parse_json::<Named>(b"{\"name\":1}"), Err(ApiError::InvalidForm(_))));
    }
}
