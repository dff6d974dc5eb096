//! Accounts and tokens.
//!
//! Tokens look like Discord's: `base64url(user id) . random`. Only their
//! SHA-256 is stored. Password hashing (argon2id, ~29 ms and 19 MiB each) runs
//! on the blocking pool behind a semaphore that fails fast when full, so a
//! burst of logins cannot starve the async threads or exhaust memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use protocol::{ApplicationId, UserId};
use rand::RngCore;
use sha2::{Digest, Sha256};
use store::{ApplicationRecord, Store, StoreError, UserRecord};
use tokio::sync::Semaphore;

/// How long a resolved token stays cached in memory.
const TOKEN_CACHE_TTL: Duration = Duration::from_secs(60);
/// Entries beyond which the token cache is cleared wholesale.
const TOKEN_CACHE_MAX: usize = 200_000;

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A new random token for `user` and its hash.
pub fn new_token(user: UserId) -> (String, [u8; 32]) {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut secret = [0u8; 30];
    rand::thread_rng().fill_bytes(&mut secret);
    let token = format!("{}.{}", b64.encode(user.0.to_string()), b64.encode(secret));
    let hash = hash_token(&token);
    (token, hash)
}

pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("unauthorized")]
    Unauthorized,
    #[error("too many password operations in flight")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("password hashing failed: {0}")]
    Hash(String),
}

/// Token hash -> (user, when cached).
type TokenCache = HashMap<[u8; 32], (Arc<UserRecord>, Instant)>;

/// Resolves tokens to users, with a small cache in front of the store.
pub struct Auth {
    store: Arc<dyn Store>,
    /// Guards only the map; never held across an await.
    cache: Mutex<TokenCache>,
    /// Bounds concurrent argon2 work; `try_acquire` so callers get 429 at once.
    hashing: Arc<Semaphore>,
}

impl Auth {
    pub fn new(store: Arc<dyn Store>, hash_concurrency: usize) -> Self {
        Self { store, cache: Mutex::new(HashMap::new()), hashing: Arc::new(Semaphore::new(hash_concurrency.max(1))) }
    }

    /// Resolves a token (without any `Bot ` prefix) to its user.
    pub async fn user_for_token(&self, token: &str) -> Result<Arc<UserRecord>, AuthError> {
        let hash = hash_token(token);
        if let Some((u, at)) = self.cache.lock().expect("token cache poisoned").get(&hash) {
            if at.elapsed() < TOKEN_CACHE_TTL {
                return Ok(u.clone());
            }
        }
        let user = Arc::new(self.store.user_by_token(&hash).await?.ok_or(AuthError::Unauthorized)?);
        let mut cache = self.cache.lock().expect("token cache poisoned");
        if cache.len() >= TOKEN_CACHE_MAX {
            cache.clear();
        }
        cache.insert(hash, (user.clone(), Instant::now()));
        Ok(user)
    }

    /// Resolves an `Authorization` header: `Bot <token>` for bots, the bare token for users.
    pub async fn user_for_header(&self, header: &str) -> Result<Arc<UserRecord>, AuthError> {
        let (token, bot_prefix) = match header.strip_prefix("Bot ") {
            Some(t) => (t.trim(), true),
            None => (header.trim(), false),
        };
        let user = self.user_for_token(token).await?;
        if user.bot != bot_prefix {
            return Err(AuthError::Unauthorized);
        }
        Ok(user)
    }

    pub async fn issue_token(&self, user: UserId) -> Result<String, AuthError> {
        let (token, hash) = new_token(user);
        self.store.add_token(&hash, user, now_ms()).await?;
        Ok(token)
    }

    pub async fn hash_password(&self, password: String) -> Result<String, AuthError> {
        let _permit = self.hashing.clone().try_acquire_owned().map_err(|_| AuthError::Busy)?;
        tokio::task::spawn_blocking(move || {
            let salt = SaltString::generate(&mut rand::rngs::OsRng);
            Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(|e| AuthError::Hash(e.to_string()))
        })
        .await
        .map_err(|e| AuthError::Hash(e.to_string()))?
    }

    pub async fn verify_password(&self, password: String, hash: String) -> Result<bool, AuthError> {
        let _permit = self.hashing.clone().try_acquire_owned().map_err(|_| AuthError::Busy)?;
        tokio::task::spawn_blocking(move || {
            let parsed = PasswordHash::new(&hash).map_err(|e| AuthError::Hash(e.to_string()))?;
            Ok(Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        })
        .await
        .map_err(|e| AuthError::Hash(e.to_string()))?
    }
}

/// Creates a bot user and its application; returns the bot's token.
pub async fn create_bot(store: &Arc<dyn Store>, ids: &protocol::SnowflakeGen, name: &str) -> Result<(UserRecord, String), AuthError> {
    let id = UserId::from(ids.next());
    let user = UserRecord { id, username: name.to_string(), global_name: None, avatar: None, bot: true, flags: 0, created_at: now_ms() };
    store.create_user(&user, None).await?;
    let mut key = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut key);
    store
        .create_application(&ApplicationRecord {
            id: ApplicationId(id.0),
            name: name.to_string(),
            owner_id: None,
            bot_user_id: id,
            flags: 0,
            verify_key: hex::encode(key),
        })
        .await?;
    let (token, hash) = new_token(id);
    store.add_token(&hash, id, now_ms()).await?;
    Ok((user, token))
}
