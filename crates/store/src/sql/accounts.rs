//! [`AccountStore`] for every [`Backend`]: tokens, passwords, OAuth2
//! applications and grants, and bots' session starts.

use async_trait::async_trait;
use protocol::{ApplicationId, UserId};
use sqlx::FromRow;

use super::rows::*;
use super::{conflict, query, Backend};
use crate::accounts::{AccountStore, GrantKind, GrantRecord, OAuthApp, SessionStart, StartLimits, TokenRecord};
use crate::{Result, UserRecord};

#[derive(FromRow)]
struct TokenUserRow {
    #[sqlx(flatten)]
    user: UserRow,
    expires_at: Option<i64>,
}

#[async_trait]
impl<B: Backend> AccountStore for B {
    async fn issue_token(&self, t: &TokenRecord) -> Result<()> {
        query("INSERT INTO tokens (hash, user_id, created_at, expires_at, client) VALUES ($1, $2, $3, $4, $5)")
            .bind(&t.hash[..])
            .bind(t.user_id)
            .bind(t.created_at)
            .bind(t.expires_at)
            .bind(&t.client)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn token_user(&self, hash: &[u8; 32], now_ms: u64) -> Result<Option<(UserRecord, Option<u64>)>> {
        let q = format!(
            "SELECT {}, t.expires_at FROM tokens t JOIN users u ON u.id = t.user_id
             WHERE t.hash = $1 AND (t.expires_at IS NULL OR t.expires_at > $2)",
            qualified("u", USER_COLS)
        );
        let row: Option<TokenUserRow> = query(q).bind(&hash[..]).bind(now_ms).fetch_optional(self.reader()).await?;
        Ok(row.map(|r| (r.user.into(), r.expires_at.map(|e| e as u64))))
    }

    async fn tokens_of_user(&self, user: UserId) -> Result<Vec<TokenRecord>> {
        let q = query("SELECT hash, created_at, expires_at, client FROM tokens WHERE user_id = $1 ORDER BY created_at, hash").bind(user);
        q.fetch_all::<TokenRow>(self.reader()).await?.into_iter().map(|r| r.into_record(user)).collect()
    }

    async fn revoke_tokens(&self, user: UserId, hashes: &[[u8; 32]]) -> Result<Vec<[u8; 32]>> {
        let mut tx = self.writer().begin().await?;
        let mut out = Vec::new();
        for h in hashes {
            let q = query("DELETE FROM tokens WHERE hash = $1 AND user_id = $2 RETURNING hash").bind(&h[..]).bind(user);
            if let Some((hash,)) = q.fetch_optional::<(Vec<u8>,)>(&mut tx).await? {
                out.push(hash32(hash)?);
            }
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn revoke_other_tokens(&self, user: UserId, keep: &[u8; 32]) -> Result<Vec<[u8; 32]>> {
        let q = query("DELETE FROM tokens WHERE user_id = $1 AND hash <> $2 RETURNING hash").bind(user).bind(&keep[..]);
        q.fetch_all::<(Vec<u8>,)>(self.writer()).await?.into_iter().map(|(h,)| hash32(h)).collect()
    }

    async fn update_user(&self, u: &UserRecord) -> Result<()> {
        query("UPDATE users SET username = $1, global_name = $2, avatar = $3 WHERE id = $4")
            .bind(&u.username)
            .bind(&u.global_name)
            .bind(&u.avatar)
            .bind(u.id)
            .execute(self.writer())
            .await
            .map_err(conflict)?;
        Ok(())
    }

    async fn password_of(&self, user: UserId) -> Result<Option<String>> {
        let row: Option<(Option<String>,)> =
            query("SELECT password_hash FROM users WHERE id = $1").bind(user).fetch_optional(self.reader()).await?;
        Ok(row.and_then(|(h,)| h))
    }

    async fn set_password(&self, user: UserId, hash: &str) -> Result<()> {
        query("UPDATE users SET password_hash = $1 WHERE id = $2").bind(hash).bind(user).execute(self.writer()).await?;
        Ok(())
    }

    async fn oauth_app(&self, app: ApplicationId) -> Result<Option<OAuthApp>> {
        let q = query("SELECT secret_hash, redirect_uris FROM applications WHERE id = $1").bind(app);
        let Some((secret, uris)) = q.fetch_optional::<(Option<Vec<u8>>, String)>(self.reader()).await? else { return Ok(None) };
        Ok(Some(OAuthApp { secret_hash: secret.map(hash32).transpose()?, redirect_uris: serde_json::from_str(&uris)? }))
    }

    async fn set_oauth_app(&self, app: ApplicationId, o: &OAuthApp) -> Result<()> {
        query("UPDATE applications SET secret_hash = $1, redirect_uris = $2 WHERE id = $3")
            .bind(o.secret_hash.as_ref().map(|h| &h[..]))
            .bind(serde_json::to_string(&o.redirect_uris)?)
            .bind(app)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn put_grant(&self, g: &GrantRecord) -> Result<()> {
        query(format!("INSERT INTO oauth_grants ({GRANT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
            .bind(&g.hash[..])
            .bind(g.kind as i64)
            .bind(g.application_id)
            .bind(g.user_id)
            .bind(serde_json::to_string(&g.scopes)?)
            .bind(&g.redirect_uri)
            .bind(g.expires_at)
            .execute(self.writer())
            .await?;
        // Expired grants go with the writes that make new ones: no grant
        // lives 30 days, so one that expired 30 days before this one
        // expires is long dead.
        query("DELETE FROM oauth_grants WHERE expires_at <= $1").bind(g.expires_at as i64 - 30 * 86_400_000).execute(self.writer()).await?;
        Ok(())
    }

    async fn use_grant(&self, hash: &[u8; 32], kind: GrantKind, now_ms: u64) -> Result<Option<GrantRecord>> {
        // Codes and refresh tokens are single use: deleted by the read that uses them.
        let (q, db) = if kind != GrantKind::Access {
            (format!("DELETE FROM oauth_grants WHERE hash = $1 AND kind = $2 RETURNING {GRANT_COLS}"), self.writer())
        } else {
            (format!("SELECT {GRANT_COLS} FROM oauth_grants WHERE hash = $1 AND kind = $2"), self.reader())
        };
        let Some(row) = query(q).bind(&hash[..]).bind(kind as i64).fetch_optional::<GrantRow>(db).await? else { return Ok(None) };
        let g = GrantRecord::try_from(row)?;
        Ok((g.expires_at > now_ms).then_some(g))
    }

    async fn start_session(&self, token: &[u8; 32], bucket: u32, now_ms: u64, l: &StartLimits) -> Result<SessionStart> {
        let now = now_ms as i64;
        // The bucket first: a refused IDENTIFY costs nothing of the period.
        let bucket_ok = query(
            "INSERT INTO session_starts (token_hash, bucket, window_start, count) VALUES ($1, $2, $3, 1)
             ON CONFLICT (token_hash, bucket) DO UPDATE SET window_start = excluded.window_start, count = 1
             WHERE session_starts.window_start <= $4",
        )
        .bind(&token[..])
        .bind(bucket)
        .bind(now)
        .bind(now - l.concurrency_window_ms as i64)
        .execute(self.writer())
        .await?
            == 1;
        if !bucket_ok {
            return Ok(SessionStart::TooSoon);
        }
        let period_start = now - l.period_ms as i64;
        let row: Option<(i64, i64)> = query(
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
        .bind(l.total)
        .fetch_optional(self.writer())
        .await?;
        Ok(match row {
            Some((count, start)) => SessionStart::Started {
                remaining: (i64::from(l.total) - count).max(0) as u32,
                reset_after_ms: (start - period_start).max(0) as u64,
            },
            None => SessionStart::Exhausted { reset_after_ms: self.session_starts_left(token, now_ms, l).await?.1 },
        })
    }

    async fn session_starts_left(&self, token: &[u8; 32], now_ms: u64, l: &StartLimits) -> Result<(u32, u64)> {
        let q = query("SELECT count, window_start FROM session_starts WHERE token_hash = $1 AND bucket = -1").bind(&token[..]);
        let row: Option<(i64, i64)> = q.fetch_optional(self.reader()).await?;
        let period_start = now_ms as i64 - l.period_ms as i64;
        Ok(match row {
            Some((count, start)) if start > period_start => ((i64::from(l.total) - count).max(0) as u32, (start - period_start) as u64),
            _ => (l.total, l.period_ms),
        })
    }
}
