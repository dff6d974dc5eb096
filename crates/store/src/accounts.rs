//! Accounts and access (migration 0007): tokens with expiry and revocation,
//! password changes, OAuth2 applications and grants, and bots' gateway
//! session starts.
//!
//! Both backends run the same SQL for them (`sql/accounts.rs`).

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
