//! [`Store`] and [`DmThreadCommandStore`] for every [`Backend`]: users,
//! tokens, guilds, channels, members, messages, ownership and invites here;
//! the rest in the modules named for it.

use async_trait::async_trait;
use protocol::{ActorKey, ApplicationId, ChannelId, GuildId, MessageId, UserId};
use sqlx::FromRow;

use super::rows::*;
use super::{attachments, bans, changes, commands, conflict, dms, guilds, i, query, reactions, threads, Backend, Dialect};
use crate::*;

#[derive(FromRow)]
struct UserWithPassword {
    #[sqlx(flatten)]
    user: UserRow,
    password_hash: String,
}

#[async_trait]
impl<B: Backend> Store for B {
    async fn create_user(&self, u: &UserRecord, password_hash: Option<&str>) -> Result<()> {
        query(
            "INSERT INTO users (id, username, global_name, avatar, bot, flags, password_hash, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(u.id)
        .bind(&u.username)
        .bind(&u.global_name)
        .bind(&u.avatar)
        .bind(u.bot)
        .bind(u.flags)
        .bind(password_hash)
        .bind(u.created_at)
        .execute(self.writer())
        .await
        .map_err(conflict)?;
        Ok(())
    }

    async fn get_user(&self, id: UserId) -> Result<Option<UserRecord>> {
        let row: Option<UserRow> =
            query(format!("SELECT {USER_COLS} FROM users WHERE id = $1")).bind(id).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn get_users(&self, ids: &[UserId]) -> Result<Vec<UserRecord>> {
        let db = self.reader();
        let rows: Vec<UserRow> = query(format!("SELECT {USER_COLS} FROM users WHERE id {}", db.dialect().in_ids("$1")))
            .bind(ids.iter().map(|&u| i(u)).collect::<Vec<_>>())
            .fetch_all(db)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn user_by_username(&self, username: &str) -> Result<Option<(UserRecord, String)>> {
        let db = self.reader();
        let human = db.dialect().human();
        let q = format!("SELECT {USER_COLS}, password_hash FROM users WHERE username = $1 AND {human} AND password_hash IS NOT NULL");
        let row: Option<UserWithPassword> = query(q).bind(username).fetch_optional(db).await?;
        Ok(row.map(|r| (r.user.into(), r.password_hash)))
    }

    async fn add_token(&self, hash: &[u8; 32], user: UserId, now_ms: u64) -> Result<()> {
        query("INSERT INTO tokens (hash, user_id, created_at) VALUES ($1, $2, $3)")
            .bind(&hash[..])
            .bind(user)
            .bind(now_ms)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn user_by_token(&self, hash: &[u8; 32]) -> Result<Option<UserRecord>> {
        let q = format!("SELECT {} FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1", qualified("u", USER_COLS));
        let row: Option<UserRow> = query(q).bind(&hash[..]).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn create_application(&self, a: &ApplicationRecord) -> Result<()> {
        query(format!("INSERT INTO applications ({APPLICATION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
            .bind(a.id)
            .bind(&a.name)
            .bind(a.owner_id)
            .bind(a.bot_user_id)
            .bind(a.flags)
            .bind(&a.verify_key)
            .bind(&a.interactions_endpoint_url)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn set_interactions_endpoint(&self, app: ApplicationId, url: Option<&str>) -> Result<()> {
        query("UPDATE applications SET interactions_endpoint_url = $1 WHERE id = $2").bind(url).bind(app).execute(self.writer()).await?;
        Ok(())
    }

    async fn application_of_bot(&self, bot: UserId) -> Result<Option<ApplicationRecord>> {
        let q = format!("SELECT {APPLICATION_COLS} FROM applications WHERE bot_user_id = $1");
        let row: Option<ApplicationRow> = query(q).bind(bot).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn get_application(&self, id: ApplicationId) -> Result<Option<ApplicationRecord>> {
        let q = format!("SELECT {APPLICATION_COLS} FROM applications WHERE id = $1");
        let row: Option<ApplicationRow> = query(q).bind(id).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn guild_applications(&self, guild: GuildId) -> Result<Vec<ApplicationRecord>> {
        let q = format!(
            "SELECT {APPLICATION_COLS} FROM applications WHERE bot_user_id IN (SELECT user_id FROM members WHERE guild_id = $1) ORDER BY id"
        );
        let rows: Vec<ApplicationRow> = query(q).bind(guild).fetch_all(self.reader()).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        Backend::identify_lookup(self, hashes).await
    }

    async fn bulk_load(&self, b: &BulkLoad) -> Result<()> {
        let mut tx = self.writer().begin().await?;
        tx.insert_users(&b.users).await?;
        tx.insert_tokens(&b.tokens).await?;
        guilds::insert(&mut tx, &b.guilds.iter().collect::<Vec<_>>()).await?;
        if !b.messages.is_empty() {
            tx.insert_messages(&b.messages.iter().collect::<Vec<_>>()).await?;
        }
        tx.commit().await
    }

    async fn create_guild(&self, g: &NewGuild) -> Result<()> {
        let mut tx = self.writer().begin().await?;
        guilds::insert(&mut tx, &[g]).await?;
        tx.commit().await
    }

    async fn get_guild(&self, id: GuildId) -> Result<Option<GuildRecord>> {
        let row: Option<GuildRow> =
            query(format!("SELECT {GUILD_COLS} FROM guilds WHERE id = $1")).bind(id).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn load_guilds(&self, ids: &[GuildId]) -> Result<Vec<GuildSnapshot>> {
        guilds::load(self.reader(), ids).await
    }

    async fn guilds_of_user(&self, user: UserId) -> Result<Vec<GuildId>> {
        let rows: Vec<(i64,)> =
            query("SELECT guild_id FROM members WHERE user_id = $1 ORDER BY guild_id").bind(user).fetch_all(self.reader()).await?;
        Ok(rows.into_iter().map(|(g,)| GuildId(g as u64)).collect())
    }

    async fn roles_of_guild(&self, guild: GuildId) -> Result<Vec<RoleRecord>> {
        let q = format!("SELECT {ROLE_COLS} FROM roles WHERE guild_id = $1 ORDER BY position, id");
        let rows: Vec<RoleRow> = query(q).bind(guild).fetch_all(self.reader()).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn get_channel(&self, id: ChannelId) -> Result<Option<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = $1");
        query(q).bind(id).fetch_optional::<ChannelRow>(self.reader()).await?.map(TryInto::try_into).transpose()
    }

    async fn channels_of_guild(&self, guild: GuildId) -> Result<Vec<ChannelRecord>> {
        let q = format!("SELECT {CHANNEL_COLS} FROM channels WHERE guild_id = $1 ORDER BY position, id");
        query(q).bind(guild).fetch_all::<ChannelRow>(self.reader()).await?.into_iter().map(TryInto::try_into).collect()
    }

    async fn get_member(&self, guild: GuildId, user: UserId) -> Result<Option<MemberRecord>> {
        let q = format!("SELECT {MEMBER_COLS} FROM members WHERE guild_id = $1 AND user_id = $2");
        query(q).bind(guild).bind(user).fetch_optional::<MemberRow>(self.reader()).await?.map(TryInto::try_into).transpose()
    }

    async fn list_members(&self, guild: GuildId, after: UserId, limit: u32) -> Result<Vec<MemberRecord>> {
        let q = format!("SELECT {MEMBER_COLS} FROM members WHERE guild_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3");
        let rows: Vec<MemberRow> = query(q).bind(guild).bind(after).bind(limit).fetch_all(self.reader()).await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn count_members(&self, guild: GuildId) -> Result<u64> {
        let (n,): (i64,) = query("SELECT count(*) FROM members WHERE guild_id = $1").bind(guild).fetch_one(self.reader()).await?;
        Ok(n as u64)
    }

    async fn create_message(&self, m: &MessageRecord) -> Result<()> {
        let mut tx = self.writer().begin().await?;
        tx.insert_messages(&[m]).await?;
        tx.commit().await
    }

    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        Backend::create_messages(self, batch).await
    }

    async fn claim_guild(&self, guild: ActorKey, node: u64) -> Result<u64> {
        let (epoch,): (i64,) = query(
            "INSERT INTO guild_owners (guild_id, node, epoch) VALUES ($1, $2, 1)
             ON CONFLICT (guild_id) DO UPDATE SET node = excluded.node, epoch = guild_owners.epoch + 1
             RETURNING epoch",
        )
        .bind(guild)
        .bind(node)
        .fetch_one(self.writer())
        .await?;
        Ok(epoch as u64)
    }

    async fn claim_guilds(&self, guilds: &[ActorKey], node: u64) -> Result<Vec<(ActorKey, u64)>> {
        if guilds.is_empty() {
            return Ok(Vec::new());
        }
        Backend::claim_guilds(self, guilds, node).await
    }

    async fn apply_changes(&self, epoch: u64, guild: ActorKey, changes: &[Change]) -> Result<Option<Vec<u64>>> {
        let mut tx = self.writer().begin().await?;
        if epoch != 0 {
            // The fence holds until the commit: SQLite's transaction took
            // the write lock; PostgreSQL's takes the fence row's lock (FOR
            // SHARE, as group commits do), which a claim's upsert waits for.
            let lock = if tx.dialect() == Dialect::Postgres { " FOR SHARE" } else { "" };
            let current: Option<(i64,)> =
                query(format!("SELECT epoch FROM guild_owners WHERE guild_id = $1{lock}")).bind(guild).fetch_optional(&mut tx).await?;
            if current != Some((epoch as i64,)) {
                return Ok(None);
            }
        }
        let mut rows = Vec::with_capacity(changes.len());
        for c in changes {
            rows.push(changes::apply(&mut tx, c).await?);
        }
        tx.commit().await?;
        Ok(Some(rows))
    }

    async fn guild_owner(&self, guild: ActorKey) -> Result<Option<(u64, u64)>> {
        let row: Option<(i64, i64)> =
            query("SELECT node, epoch FROM guild_owners WHERE guild_id = $1").bind(guild).fetch_optional(self.reader()).await?;
        Ok(row.map(|(n, e)| (n as u64, e as u64)))
    }

    async fn get_message(&self, channel: ChannelId, id: MessageId) -> Result<Option<MessageRecord>> {
        let q = format!("SELECT {MESSAGE_COLS} FROM messages WHERE id = $1 AND channel_id = $2");
        query(q).bind(id).bind(channel).fetch_optional::<MessageRow>(self.reader()).await?.map(TryInto::try_into).transpose()
    }

    async fn recent_message_keys(
        &self,
        channels: &[ChannelId],
        since: MessageId,
        limit: u32,
    ) -> Result<Vec<(ChannelId, MessageId, UserId, String)>> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let db = self.reader();
        // `extra` is JSON text as serde_json writes it: the LIKE keeps the
        // rows read to those that may have a key; the parse below decides.
        // The pattern is a literal, not a parameter: SQLite re-prepares a
        // statement whose LIKE pattern is bound each time it is bound (the
        // pattern may change the plan), which profiled at ~8% of the
        // reader threads' time in an IDENTIFY ramp.
        let q = format!(
            "SELECT channel_id, id, author_id, extra FROM messages WHERE channel_id {} AND id >= $2 AND extra LIKE '%\"{DEDUP_FIELD}\":%' ORDER BY id DESC LIMIT $3",
            db.dialect().in_ids("$1")
        );
        let rows: Vec<(i64, i64, i64, String)> =
            query(q).bind(channels.iter().map(|&c| i(c)).collect::<Vec<_>>()).bind(since).bind(i64::from(limit)).fetch_all(db).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(channel, id, author, extra)| {
                let v: serde_json::Value = serde_json::from_str(&extra).ok()?;
                let key = v.get(DEDUP_FIELD)?.as_str()?.to_string();
                Some((ChannelId(channel as u64), MessageId(id as u64), UserId(author as u64), key))
            })
            .collect())
    }

    async fn list_messages(&self, channel: ChannelId, window: MessageWindow, limit: u32) -> Result<Vec<MessageRecord>> {
        let limit = i64::from(limit);
        let fetch = |cond: &str, order: &str, from: i64, limit: i64| {
            let q = format!("SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = $1 AND id {cond} $2 ORDER BY id {order} LIMIT $3");
            query(q).bind(channel).bind(from).bind(limit).fetch_all::<MessageRow>(self.reader())
        };
        let rows = match window {
            MessageWindow::Latest => fetch(">", "DESC", i64::MIN, limit).await?,
            MessageWindow::Before(m) => fetch("<", "DESC", i(m), limit).await?,
            MessageWindow::After(m) => {
                let mut v = fetch(">", "ASC", i(m), limit).await?;
                v.reverse();
                v
            }
            MessageWindow::Around(m) => {
                // Discord: up to limit/2 older ones, the message itself if it exists, and newer ones.
                let before = limit / 2;
                let after = limit - before - 1;
                let mut newer = fetch(">=", "ASC", i(m), after + 1).await?;
                newer.reverse();
                newer.extend(fetch("<", "DESC", i(m), before).await?);
                newer
            }
        };
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn create_invite(&self, v: &InviteRecord) -> Result<()> {
        query(format!("INSERT INTO invites ({INVITE_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&v.code)
            .bind(v.guild_id)
            .bind(v.channel_id)
            .bind(v.inviter_id)
            .bind(v.max_age)
            .bind(v.max_uses)
            .bind(v.uses)
            .bind(v.created_at)
            .execute(self.writer())
            .await
            .map_err(conflict)?;
        Ok(())
    }

    async fn get_invite(&self, code: &str) -> Result<Option<InviteRecord>> {
        let row: Option<InviteRow> =
            query(format!("SELECT {INVITE_COLS} FROM invites WHERE code = $1")).bind(code).fetch_optional(self.reader()).await?;
        Ok(row.map(Into::into))
    }

    async fn use_invite(&self, code: &str) -> Result<bool> {
        // One conditional statement: two nodes using the last use at once
        // cannot both succeed (the second re-checks the row after the first commits).
        let n = query("UPDATE invites SET uses = uses + 1 WHERE code = $1 AND (max_uses = 0 OR uses < max_uses)")
            .bind(code)
            .execute(self.writer())
            .await?;
        Ok(n == 1)
    }

    async fn delete_invite(&self, code: &str) -> Result<bool> {
        Ok(query("DELETE FROM invites WHERE code = $1").bind(code).execute(self.writer()).await? == 1)
    }

    async fn invites_of_guild(&self, guild: GuildId, limit: u32) -> Result<Vec<InviteRecord>> {
        let rows: Vec<InviteRow> =
            query(format!("SELECT {INVITE_COLS} FROM invites WHERE guild_id = $1 ORDER BY created_at DESC, code LIMIT $2"))
                .bind(guild)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    // Roles, overwrites, bans:
    async fn bans_of_guild(&self, guild: GuildId, before: Option<UserId>, after: UserId, limit: u32) -> Result<Vec<BanRecord>> {
        bans::of_guild(self.reader(), guild, before, after, limit).await
    }

    async fn get_ban(&self, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
        bans::get(self.reader(), guild, user).await
    }

    async fn messages_of_author(
        &self,
        guild: GuildId,
        author: UserId,
        since: MessageId,
        limit: u32,
    ) -> Result<Vec<(ChannelId, MessageId)>> {
        bans::messages_of_author(self.reader(), guild, author, since, limit).await
    }

    // Reactions, emojis, pins, bulk delete:
    async fn reactions_of(&self, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
        reactions::reactions_of(self.reader(), messages, viewer).await
    }

    async fn reaction_users(&self, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
        reactions::reaction_users(self.reader(), message, key, after, limit).await
    }

    async fn pins_among(&self, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
        reactions::pins_among(self.reader(), messages).await
    }

    async fn pinned_messages(&self, channel: ChannelId, before: Option<u64>, limit: u32) -> Result<Vec<(MessageRecord, u64)>> {
        reactions::pinned_messages(self.reader(), channel, before, limit).await
    }

    async fn count_pins(&self, channel: ChannelId) -> Result<u64> {
        reactions::count_pins(self.reader(), channel).await
    }

    async fn messages_among(&self, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        reactions::messages_among(self.reader(), channel, ids).await
    }

    async fn emojis_of(&self, guild: GuildId) -> Result<Vec<EmojiRecord>> {
        reactions::emojis_of(self.reader(), guild).await
    }

    async fn get_emoji(&self, id: protocol::id::EmojiId) -> Result<Option<EmojiRecord>> {
        reactions::get_emoji(self.reader(), id).await
    }

    // Attachments, webhooks:
    async fn create_attachment(&self, a: &AttachmentRecord) -> Result<()> {
        attachments::create(self.writer(), a).await
    }

    async fn get_attachment(&self, id: protocol::Snowflake) -> Result<Option<AttachmentRecord>> {
        attachments::get(self.reader(), id).await
    }

    async fn attachments_of_message(&self, message: MessageId) -> Result<Vec<AttachmentRecord>> {
        attachments::of_message(self.reader(), message).await
    }

    async fn delete_pending_attachments(&self, ids: &[protocol::Snowflake]) -> Result<Vec<String>> {
        attachments::delete_pending(self.writer(), ids).await
    }

    async fn expire_pending_attachments(&self, before_ms: u64) -> Result<Vec<String>> {
        attachments::expire_pending(self.writer(), before_ms).await
    }

    async fn blob_refs(&self, hash: &str) -> Result<u64> {
        // The writer: a count that sees every commit before it (see the
        // release protocol in the server's `attachments`).
        attachments::blob_refs(self.writer(), hash).await
    }

    async fn uploaded_bytes(&self, user: UserId) -> Result<u64> {
        attachments::uploaded_bytes(self.reader(), user).await
    }

    async fn setting_or_init(&self, name: &str, value: &str) -> Result<String> {
        attachments::setting_or_init(self.writer(), name, value).await
    }

    async fn get_webhook(&self, id: protocol::Snowflake) -> Result<Option<WebhookRecord>> {
        attachments::get_webhook(self.reader(), id).await
    }

    async fn webhooks_of_channel(&self, channel: ChannelId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(self.reader(), "channel_id", i(channel)).await
    }

    async fn webhooks_of_guild(&self, guild: GuildId) -> Result<Vec<WebhookRecord>> {
        attachments::webhooks_where(self.reader(), "guild_id", i(guild)).await
    }
}

#[async_trait]
impl<B: Backend> DmThreadCommandStore for B {
    async fn open_dm(&self, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId> {
        dms::open(self.writer(), channel, a, b).await
    }

    async fn create_group_dm(&self, channel: &ChannelRecord, recipients: &[UserId]) -> Result<()> {
        dms::create_group(self.writer(), channel, recipients).await
    }

    async fn get_dm(&self, id: ChannelId) -> Result<Option<DmChannel>> {
        dms::get(self.reader(), id).await
    }

    async fn dms_of_users(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<DmChannel>)>> {
        // READY's `private_channels`: IDENTIFY's own reader.
        dms::of_users(self.lookup(), users).await
    }

    async fn get_thread(&self, id: ChannelId) -> Result<Option<(ChannelRecord, ThreadRecord)>> {
        threads::get(self.reader(), id).await
    }

    async fn thread_members(&self, thread: ChannelId) -> Result<Vec<ThreadMemberRecord>> {
        threads::members(self.reader(), thread).await
    }

    async fn archived_threads(&self, parent: ChannelId, private: bool, before: u64, limit: u32) -> Result<Vec<ThreadSnapshot>> {
        threads::archived(self.reader(), parent, private, before, limit).await
    }

    async fn list_commands(&self, app: ApplicationId, guild: Option<GuildId>) -> Result<Vec<CommandRecord>> {
        commands::list(self.reader(), app, guild).await
    }

    async fn get_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<Option<CommandRecord>> {
        commands::get(self.reader(), app, guild, id).await
    }

    async fn upsert_command(&self, c: &CommandRecord) -> Result<CommandRecord> {
        commands::upsert(self.writer(), c).await
    }

    async fn update_command(&self, c: &CommandRecord) -> Result<bool> {
        commands::update(self.writer(), c).await
    }

    async fn delete_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<bool> {
        commands::delete(self.writer(), app, guild, id).await
    }

    async fn overwrite_commands(&self, app: ApplicationId, guild: Option<GuildId>, cmds: &[CommandRecord]) -> Result<Vec<CommandRecord>> {
        commands::overwrite(self.writer(), app, guild, cmds).await
    }

    async fn command_permissions(&self, app: ApplicationId, guild: GuildId) -> Result<Vec<CommandPermissions>> {
        commands::permissions(self.reader(), app, guild).await
    }

    async fn set_command_permissions(&self, app: ApplicationId, guild: GuildId, p: &CommandPermissions) -> Result<()> {
        commands::set_permissions(self.writer(), app, guild, p).await
    }
}
