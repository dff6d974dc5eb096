//! Accounts and access (migration 0007): tokens with expiry and revocation,
//! password changes, OAuth2 applications and grants, and bots' gateway
//! session starts.
//!
//! Both backends run the same SQL here (`impl_account_store!`): the
//! statements use only what SQLite and PostgreSQL agree on (`$N`
//! placeholders numbered in order of first use, `ON CONFLICT … DO UPDATE …
//! WHERE`, `RETURNING`), so each is written once.

use async_trait::async_trait;
use protocol::{ApplicationId, UserId};

use crate::records::UserRecord;
use crate::Result;

/// One login token of an account (only its hash is stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub hash: [u8; 32],
    pub user_id: UserId,
    pub created_at: u64,
    /// `None`: never expires.
    pub expires_at: Option<u64>,
    /// What the token was issued to (the login's User-Agent), for the
    /// account's session list.
    pub client: Option<String>,
}

/// What OAuth2 needs of an application beyond its record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthApp {
    /// SHA-256 of the client secret; `None` until one is issued.
    pub secret_hash: Option<[u8; 32]>,
    /// Where authorization codes may be sent.
    pub redirect_uris: Vec<String>,
}

/// What an OAuth2 grant is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantKind {
    /// An authorization code: single use, minutes long.
    Code = 0,
    Access = 1,
    Refresh = 2,
}

/// An OAuth2 code or token of `user` for `application` (stored by hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    pub hash: [u8; 32],
    pub kind: GrantKind,
    pub application_id: ApplicationId,
    pub user_id: UserId,
    pub scopes: Vec<String>,
    /// The redirect URI a code was issued for (the token request must name it again).
    pub redirect_uri: Option<String>,
    pub expires_at: u64,
}

/// The bounds on a bot's gateway session starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartLimits {
    /// One IDENTIFY per bucket per this long (Discord: 5 s).
    pub concurrency_window_ms: u64,
    /// The session start limit's period (Discord: 24 h) and its total.
    pub period_ms: u64,
    pub total: u32,
}

/// The outcome of [`AccountStore::start_session`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStart {
    Started {
        remaining: u32,
        reset_after_ms: u64,
    },
    /// The bucket had an IDENTIFY less than a window ago.
    TooSoon,
    /// The period's total is used up.
    Exhausted {
        reset_after_ms: u64,
    },
}

#[async_trait]
pub trait AccountStore: Send + Sync {
    async fn issue_token(&self, t: &TokenRecord) -> Result<()>;
    /// The user of a token that exists and has not expired at `now_ms`,
    /// with the token's expiry.
    async fn token_user(&self, hash: &[u8; 32], now_ms: u64) -> Result<Option<(UserRecord, Option<u64>)>>;
    /// The account's tokens, oldest first.
    async fn tokens_of_user(&self, user: UserId) -> Result<Vec<TokenRecord>>;
    /// Deletes those of `hashes` that are `user`'s tokens; returns them.
    async fn revoke_tokens(&self, user: UserId, hashes: &[[u8; 32]]) -> Result<Vec<[u8; 32]>>;
    /// Deletes every token of `user` but `keep`; returns them.
    async fn revoke_other_tokens(&self, user: UserId, keep: &[u8; 32]) -> Result<Vec<[u8; 32]>>;

    /// Stores a user's username, display name and avatar
    /// ([`crate::StoreError::Conflict`] if the username is taken).
    async fn update_user(&self, u: &UserRecord) -> Result<()>;
    async fn password_of(&self, user: UserId) -> Result<Option<String>>;
    async fn set_password(&self, user: UserId, hash: &str) -> Result<()>;

    async fn oauth_app(&self, app: ApplicationId) -> Result<Option<OAuthApp>>;
    async fn set_oauth_app(&self, app: ApplicationId, o: &OAuthApp) -> Result<()>;
    async fn put_grant(&self, g: &GrantRecord) -> Result<()>;
    /// A live grant of `kind`; codes and refresh tokens are deleted as they are read (single use).
    async fn use_grant(&self, hash: &[u8; 32], kind: GrantKind, now_ms: u64) -> Result<Option<GrantRecord>>;

    /// Counts a bot's IDENTIFY in its bucket and its period, if both allow it.
    async fn start_session(&self, token: &[u8; 32], bucket: u32, now_ms: u64, l: &StartLimits) -> Result<SessionStart>;
    /// Session starts left in the period and when it resets: (remaining, ms).
    async fn session_starts_left(&self, token: &[u8; 32], now_ms: u64, l: &StartLimits) -> Result<(u32, u64)>;
}

/// `[u8; 32]` from a stored hash column.
pub(crate) fn hash32(v: Vec<u8>) -> Result<[u8; 32]> {
    <[u8; 32]>::try_from(v.as_slice()).map_err(|_| crate::StoreError::Corrupt(serde::de::Error::custom("stored hash is not 32 bytes")))
}

pub(crate) fn grant_kind(k: i64) -> GrantKind {
    match k {
        0 => GrantKind::Code,
        2 => GrantKind::Refresh,
        _ => GrantKind::Access,
    }
}

/// Implements [`AccountStore`] for a backend from its write and read pools
/// (fields of the store). The SQL is the same on both backends.
macro_rules! impl_account_store {
    ($store:ty, $write:ident, $read:ident) => {
        #[async_trait::async_trait]
        impl $crate::accounts::AccountStore for $store {
            async fn issue_token(&self, t: &$crate::accounts::TokenRecord) -> $crate::Result<()> {
                sqlx::query("INSERT INTO tokens (hash, user_id, created_at, expires_at, client) VALUES ($1, $2, $3, $4, $5)")
                    .bind(&t.hash[..])
                    .bind(t.user_id.0 as i64)
                    .bind(t.created_at as i64)
                    .bind(t.expires_at.map(|e| e as i64))
                    .bind(&t.client)
                    .execute(&self.$write)
                    .await?;
                Ok(())
            }

            async fn token_user(&self, hash: &[u8; 32], now_ms: u64) -> $crate::Result<Option<($crate::UserRecord, Option<u64>)>> {
                use sqlx::Row;
                let row = sqlx::query(
                    "SELECT u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at, t.expires_at
                     FROM tokens t JOIN users u ON u.id = t.user_id
                     WHERE t.hash = $1 AND (t.expires_at IS NULL OR t.expires_at > $2)",
                )
                .bind(&hash[..])
                .bind(now_ms as i64)
                .fetch_optional(&self.$read)
                .await?;
                row.map(|r| {
                    let user = $crate::UserRecord {
                        id: protocol::UserId(r.try_get::<i64, _>("id")? as u64),
                        username: r.try_get("username")?,
                        global_name: r.try_get("global_name")?,
                        avatar: r.try_get("avatar")?,
                        bot: r.try_get("bot")?,
                        flags: r.try_get::<i64, _>("flags")? as u64,
                        created_at: r.try_get::<i64, _>("created_at")? as u64,
                    };
                    Ok((user, r.try_get::<Option<i64>, _>("expires_at")?.map(|e| e as u64)))
                })
                .transpose()
            }

            async fn tokens_of_user(&self, user: protocol::UserId) -> $crate::Result<Vec<$crate::accounts::TokenRecord>> {
                use sqlx::Row;
                let rows =
                    sqlx::query("SELECT hash, created_at, expires_at, client FROM tokens WHERE user_id = $1 ORDER BY created_at, hash")
                        .bind(user.0 as i64)
                        .fetch_all(&self.$read)
                        .await?;
                rows.into_iter()
                    .map(|r| {
                        Ok($crate::accounts::TokenRecord {
                            hash: $crate::accounts::hash32(r.try_get("hash")?)?,
                            user_id: user,
                            created_at: r.try_get::<i64, _>("created_at")? as u64,
                            expires_at: r.try_get::<Option<i64>, _>("expires_at")?.map(|e| e as u64),
                            client: r.try_get("client")?,
                        })
                    })
                    .collect()
            }

            async fn revoke_tokens(&self, user: protocol::UserId, hashes: &[[u8; 32]]) -> $crate::Result<Vec<[u8; 32]>> {
                use sqlx::Row;
                let mut tx = self.$write.begin().await?;
                let mut out = Vec::new();
                for h in hashes {
                    let row = sqlx::query("DELETE FROM tokens WHERE hash = $1 AND user_id = $2 RETURNING hash")
                        .bind(&h[..])
                        .bind(user.0 as i64)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if let Some(r) = row {
                        out.push($crate::accounts::hash32(r.try_get("hash")?)?);
                    }
                }
                tx.commit().await?;
                Ok(out)
            }

            async fn revoke_other_tokens(&self, user: protocol::UserId, keep: &[u8; 32]) -> $crate::Result<Vec<[u8; 32]>> {
                use sqlx::Row;
                let rows = sqlx::query("DELETE FROM tokens WHERE user_id = $1 AND hash <> $2 RETURNING hash")
                    .bind(user.0 as i64)
                    .bind(&keep[..])
                    .fetch_all(&self.$write)
                    .await?;
                rows.into_iter().map(|r| $crate::accounts::hash32(r.try_get("hash")?)).collect()
            }

            async fn update_user(&self, u: &$crate::UserRecord) -> $crate::Result<()> {
                sqlx::query("UPDATE users SET username = $1, global_name = $2, avatar = $3 WHERE id = $4")
                    .bind(&u.username)
                    .bind(&u.global_name)
                    .bind(&u.avatar)
                    .bind(u.id.0 as i64)
                    .execute(&self.$write)
                    .await
                    .map_err(|e| match e {
                        sqlx::Error::Database(d) if d.is_unique_violation() => $crate::StoreError::Conflict,
                        e => e.into(),
                    })?;
                Ok(())
            }

            async fn password_of(&self, user: protocol::UserId) -> $crate::Result<Option<String>> {
                use sqlx::Row;
                let row =
                    sqlx::query("SELECT password_hash FROM users WHERE id = $1").bind(user.0 as i64).fetch_optional(&self.$read).await?;
                Ok(match row {
                    Some(r) => r.try_get::<Option<String>, _>("password_hash")?,
                    None => None,
                })
            }

            async fn set_password(&self, user: protocol::UserId, hash: &str) -> $crate::Result<()> {
                sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
                    .bind(hash)
                    .bind(user.0 as i64)
                    .execute(&self.$write)
                    .await?;
                Ok(())
            }

            async fn oauth_app(&self, app: protocol::ApplicationId) -> $crate::Result<Option<$crate::accounts::OAuthApp>> {
                use sqlx::Row;
                let row = sqlx::query("SELECT secret_hash, redirect_uris FROM applications WHERE id = $1")
                    .bind(app.0 as i64)
                    .fetch_optional(&self.$read)
                    .await?;
                row.map(|r| {
                    Ok($crate::accounts::OAuthApp {
                        secret_hash: r.try_get::<Option<Vec<u8>>, _>("secret_hash")?.map($crate::accounts::hash32).transpose()?,
                        redirect_uris: serde_json::from_str(&r.try_get::<String, _>("redirect_uris")?)?,
                    })
                })
                .transpose()
            }

            async fn set_oauth_app(&self, app: protocol::ApplicationId, o: &$crate::accounts::OAuthApp) -> $crate::Result<()> {
                sqlx::query("UPDATE applications SET secret_hash = $1, redirect_uris = $2 WHERE id = $3")
                    .bind(o.secret_hash.as_ref().map(|h| h.to_vec()))
                    .bind(serde_json::to_string(&o.redirect_uris)?)
                    .bind(app.0 as i64)
                    .execute(&self.$write)
                    .await?;
                Ok(())
            }

            async fn put_grant(&self, g: &$crate::accounts::GrantRecord) -> $crate::Result<()> {
                sqlx::query(
                    "INSERT INTO oauth_grants (hash, kind, application_id, user_id, scopes, redirect_uri, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&g.hash[..])
                .bind(g.kind as i64)
                .bind(g.application_id.0 as i64)
                .bind(g.user_id.0 as i64)
                .bind(serde_json::to_string(&g.scopes)?)
                .bind(&g.redirect_uri)
                .bind(g.expires_at as i64)
                .execute(&self.$write)
                .await?;
                // Expired grants go with the writes that make new ones: no
                // grant lives 30 days, so one that expired 30 days before
                // this one expires is long dead.
                sqlx::query("DELETE FROM oauth_grants WHERE expires_at <= $1")
                    .bind(g.expires_at as i64 - 30 * 86_400_000)
                    .execute(&self.$write)
                    .await?;
                Ok(())
            }

            async fn use_grant(
                &self,
                hash: &[u8; 32],
                kind: $crate::accounts::GrantKind,
                now_ms: u64,
            ) -> $crate::Result<Option<$crate::accounts::GrantRecord>> {
                use sqlx::Row;
                // Codes and refresh tokens are single use: deleted by the read that uses them.
                let q = if kind != $crate::accounts::GrantKind::Access {
                    "DELETE FROM oauth_grants WHERE hash = $1 AND kind = $2
                     RETURNING hash, kind, application_id, user_id, scopes, redirect_uri, expires_at"
                } else {
                    "SELECT hash, kind, application_id, user_id, scopes, redirect_uri, expires_at
                     FROM oauth_grants WHERE hash = $1 AND kind = $2"
                };
                let pool = if kind != $crate::accounts::GrantKind::Access { &self.$write } else { &self.$read };
                let row = sqlx::query(q).bind(&hash[..]).bind(kind as i64).fetch_optional(pool).await?;
                let Some(r) = row else { return Ok(None) };
                let g = $crate::accounts::GrantRecord {
                    hash: $crate::accounts::hash32(r.try_get("hash")?)?,
                    kind: $crate::accounts::grant_kind(r.try_get::<i64, _>("kind")?),
                    application_id: protocol::ApplicationId(r.try_get::<i64, _>("application_id")? as u64),
                    user_id: protocol::UserId(r.try_get::<i64, _>("user_id")? as u64),
                    scopes: serde_json::from_str(&r.try_get::<String, _>("scopes")?)?,
                    redirect_uri: r.try_get("redirect_uri")?,
                    expires_at: r.try_get::<i64, _>("expires_at")? as u64,
                };
                Ok((g.expires_at > now_ms).then_some(g))
            }

            async fn start_session(
                &self,
                token: &[u8; 32],
                bucket: u32,
                now_ms: u64,
                l: &$crate::accounts::StartLimits,
            ) -> $crate::Result<$crate::accounts::SessionStart> {
                use sqlx::Row;
                let now = now_ms as i64;
                // The bucket first: a refused IDENTIFY costs nothing of the period.
                let bucket_ok = sqlx::query(
                    "INSERT INTO session_starts (token_hash, bucket, window_start, count) VALUES ($1, $2, $3, 1)
                     ON CONFLICT (token_hash, bucket) DO UPDATE SET window_start = excluded.window_start, count = 1
                     WHERE session_starts.window_start <= $4",
                )
                .bind(&token[..])
                .bind(i64::from(bucket))
                .bind(now)
                .bind(now - l.concurrency_window_ms as i64)
                .execute(&self.$write)
                .await?
                .rows_affected()
                    == 1;
                if !bucket_ok {
                    return Ok($crate::accounts::SessionStart::TooSoon);
                }
                let period_start = now - l.period_ms as i64;
                let row = sqlx::query(
                    "INSERT INTO session_starts (token_hash, bucket, window_start, count) VALUES ($1, -1, $2, 1)
                     ON CONFLICT (token_hash, bucket) DO UPDATE SET
                         count = CASE WHEN session_starts.window_start <= $3 THEN 1 ELSE session_starts.count + 1 END,
                         window_start = CASE WHEN session_starts.window_start <= $3 THEN $2 ELSE session_starts.window_start END
                     WHERE session_starts.window_start <= $3 OR session_starts.count < $4
                     RETURNING count, window_start",
                )
                .bind(&token[..])
                .bind(now)
                .bind(period_start)
                .bind(i64::from(l.total))
                .fetch_optional(&self.$write)
                .await?;
                Ok(match row {
                    Some(r) => {
                        let (count, start) = (r.try_get::<i64, _>("count")?, r.try_get::<i64, _>("window_start")?);
                        $crate::accounts::SessionStart::Started {
                            remaining: (i64::from(l.total) - count).max(0) as u32,
                            reset_after_ms: (start - period_start).max(0) as u64,
                        }
                    }
                    None => {
                        let left = self.session_starts_left(token, now_ms, l).await?;
                        $crate::accounts::SessionStart::Exhausted { reset_after_ms: left.1 }
                    }
                })
            }

            async fn session_starts_left(
                &self,
                token: &[u8; 32],
                now_ms: u64,
                l: &$crate::accounts::StartLimits,
            ) -> $crate::Result<(u32, u64)> {
                use sqlx::Row;
                let row = sqlx::query("SELECT count, window_start FROM session_starts WHERE token_hash = $1 AND bucket = -1")
                    .bind(&token[..])
                    .fetch_optional(&self.$read)
                    .await?;
                let period_start = now_ms as i64 - l.period_ms as i64;
                Ok(match row {
                    Some(r) if r.try_get::<i64, _>("window_start")? > period_start => {
                        let (count, start) = (r.try_get::<i64, _>("count")?, r.try_get::<i64, _>("window_start")?);
                        ((i64::from(l.total) - count).max(0) as u32, (start - period_start) as u64)
                    }
                    _ => (l.total, l.period_ms),
                })
            }
        }
    };
}

pub(crate) use impl_account_store;
