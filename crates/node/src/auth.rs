//! Accounts and tokens.
//!
//! Tokens look like Discord's: `base64url(user id) . random`. Only their
//! SHA-256 is stored. A token lives until it is revoked (logout, password
//! change, the session list) or, with `auth.token_ttl_ms`, until it expires.
//! Resolved tokens are cached per node; a revocation removes them from every
//! node's cache through a notice (`Node::notify`, `Notice::ForgetTokens`).
//! A node that may have missed notices (its bus connection came back, or
//! the bus dropped messages to it as a slow consumer) empties its whole
//! cache ([`Auth::forget_all`]); `auth.token_cache_ms` bounds an entry's
//! life in any case. A lookup that read the store before a revocation
//! landed does not cache what it read (the cache's generation moved).
//!
//! Password hashing (argon2id, ~29 ms and 19 MiB each) runs on the blocking
//! pool, at most `limits.password_hash_concurrency` at once, handed out in
//! turn across client addresses ([`HashQueue`]): one address's flood waits
//! behind everyone else. A login for an unknown username verifies against a
//! dummy hash, so it costs what a wrong password costs and the answer's
//! timing does not tell which usernames exist.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use protocol::{ApplicationId, UserId};
use rand::RngCore;
use sha2::{Digest, Sha256};
use store::{ApplicationRecord, Store, StoreError, TokenRecord, UserRecord};
use tokio::sync::oneshot;

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

/// A random secret (OAuth2 codes, access tokens, client secrets) and its hash.
pub fn new_secret() -> (String, [u8; 32]) {
    let mut secret = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut secret);
    let s = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let h = hash_token(&s);
    (s, h)
}

pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("unauthorized")]
    Unauthorized,
    /// The client's address has too many password hashes waiting, or its
    /// turn did not come in time.
    #[error("too many password operations in flight")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("password hashing failed: {0}")]
    Hash(argon2::password_hash::Error),
    /// The blocking task that hashes panicked or was cancelled.
    #[error("password hashing task failed")]
    Task(#[from] tokio::task::JoinError),
}

/// A cached token: its user, when it was read, when it expires.
struct Cached {
    user: Arc<UserRecord>,
    at: Instant,
    expires_at: Option<u64>,
}

/// Resolves tokens to users, with a small cache in front of the store.
pub struct Auth {
    store: Arc<dyn Store>,
    /// Guards only the map; never held across an await.
    cache: Mutex<HashMap<[u8; 32], Cached>>,
    /// Moved by every forget: a lookup caches its read only if this is
    /// what it was when the read began.
    generation: std::sync::atomic::AtomicU64,
    cache_for: Duration,
    token_ttl_ms: Option<u64>,
    pub hashing: HashQueue,
    /// A hash of a password nobody has, verified for unknown usernames.
    dummy_hash: OnceLock<String>,
}

impl Auth {
    pub fn new(store: Arc<dyn Store>, config: &crate::Config) -> Self {
        let a = &config.auth;
        Self {
            store,
            cache: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            cache_for: Duration::from_millis(a.token_cache_ms),
            token_ttl_ms: a.token_ttl_ms,
            hashing: HashQueue::new(
                config.limits.password_hash_concurrency,
                a.hash_queue_per_address,
                Duration::from_millis(a.hash_queue_wait_ms),
            ),
            dummy_hash: OnceLock::new(),
        }
    }

    /// Resolves a token (without any `Bot ` prefix) to its user.
    pub async fn user_for_token(&self, token: &str) -> Result<Arc<UserRecord>, AuthError> {
        let hash = hash_token(token);
        let now = now_ms();
        if let Some(c) = self.cache.lock().expect("token cache poisoned").get(&hash) {
            if c.at.elapsed() < self.cache_for && c.expires_at.is_none_or(|e| e > now) {
                return Ok(c.user.clone());
            }
        }
        let generation = self.generation.load(std::sync::atomic::Ordering::Acquire);
        let (user, expires_at) = self.store.token_user(&hash, now).await?.ok_or(AuthError::Unauthorized)?;
        let user = Arc::new(user);
        let mut cache = self.cache.lock().expect("token cache poisoned");
        // A forget since the read began: what was read may be revoked.
        if self.generation.load(std::sync::atomic::Ordering::Acquire) != generation {
            return Ok(user);
        }
        if cache.len() >= TOKEN_CACHE_MAX {
            cache.clear();
        }
        cache.insert(hash, Cached { user: user.clone(), at: Instant::now(), expires_at });
        Ok(user)
    }

    /// Resolves an `Authorization` header: `Bot <token>` for bots, the bare token for users.
    pub async fn user_for_header(&self, header: &str) -> Result<Arc<UserRecord>, AuthError> {
        let (token, bot_prefix) = split_header(header);
        let user = self.user_for_token(token).await?;
        if user.bot != bot_prefix {
            return Err(AuthError::Unauthorized);
        }
        Ok(user)
    }

    /// A new login token for `user`; `client` names what it was issued to.
    pub async fn issue_token(&self, user: UserId, client: Option<&str>) -> Result<String, AuthError> {
        let (token, hash) = new_token(user);
        let now = now_ms();
        let client = client.map(|c| c.chars().take(CLIENT_MAX).collect());
        let t = TokenRecord { hash, user_id: user, created_at: now, expires_at: self.token_ttl_ms.map(|ttl| now + ttl), client };
        self.store.issue_token(&t).await?;
        Ok(token)
    }

    /// Drops tokens from this node's cache (revoked, or their user changed).
    pub fn forget(&self, hashes: &[[u8; 32]]) {
        let mut cache = self.cache.lock().expect("token cache poisoned");
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        for h in hashes {
            cache.remove(h);
        }
    }

    /// Empties this node's cache: it may have missed revocations (its
    /// bus connection was lost, or the bus dropped messages to it).
    pub fn forget_all(&self) {
        let mut cache = self.cache.lock().expect("token cache poisoned");
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        cache.clear();
    }

    /// Tokens cached on this node (tests, stats).
    pub fn cached(&self) -> usize {
        self.cache.lock().expect("token cache poisoned").len()
    }

    /// Hashes a new password, in `client`'s turn.
    pub async fn hash_password(&self, client: IpAddr, password: String) -> Result<String, AuthError> {
        let _turn = self.hashing.acquire(client).await?;
        tokio::task::spawn_blocking(move || {
            let salt = SaltString::generate(&mut rand::rngs::OsRng);
            Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(AuthError::Hash)
        })
        .await?
    }

    /// Checks a password against `hash`, in `client`'s turn. With no hash
    /// (no such account) it checks against a dummy one and answers false:
    /// the same work, so the same time, as a wrong password.
    pub async fn verify_password(&self, client: IpAddr, password: String, hash: Option<String>) -> Result<bool, AuthError> {
        let known = hash.is_some();
        let hash = match hash {
            Some(h) => h,
            None => self.dummy_hash().await?,
        };
        let _turn = self.hashing.acquire(client).await?;
        let ok = tokio::task::spawn_blocking(move || {
            let parsed = PasswordHash::new(&hash).map_err(AuthError::Hash)?;
            Ok::<_, AuthError>(Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        })
        .await??;
        Ok(ok && known)
    }

    /// The dummy hash, made once per process with the same parameters as
    /// real ones (outside any client's turn: it is the server's own work).
    async fn dummy_hash(&self) -> Result<String, AuthError> {
        if let Some(h) = self.dummy_hash.get() {
            return Ok(h.clone());
        }
        let h = tokio::task::spawn_blocking(|| {
            let mut pw = [0u8; 32];
            rand::thread_rng().fill_bytes(&mut pw);
            let salt = SaltString::generate(&mut rand::rngs::OsRng);
            Argon2::default().hash_password(&pw, &salt).map(|h| h.to_string()).map_err(AuthError::Hash)
        })
        .await??;
        Ok(self.dummy_hash.get_or_init(|| h).clone())
    }
}

/// A token and whether it came as `Bot <token>`.
pub fn split_header(header: &str) -> (&str, bool) {
    match header.strip_prefix("Bot ") {
        Some(t) => (t.trim(), true),
        None => (header.trim(), false),
    }
}

/// Characters of a client description kept with a token.
const CLIENT_MAX: usize = 200;

/// Turns at password hashing: `permits` run at once; waiting requests are
/// served one address at a time in turn (round robin), each address with
/// at most `per_address` running or waiting; a wait longer than `wait` gives
/// up. So a flood from one address fills only its own queue, and requests
/// from other addresses get the next free turns.
pub struct HashQueue {
    permits: usize,
    per_address: usize,
    wait: Duration,
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    running: usize,
    /// Running or waiting, per address.
    held: HashMap<IpAddr, usize>,
    waiting: HashMap<IpAddr, VecDeque<oneshot::Sender<()>>>,
    /// Addresses with someone waiting, in turn order.
    turn: VecDeque<IpAddr>,
}

/// A turn at hashing; the next one goes to the next address in line when dropped.
pub struct HashTurn<'a> {
    queue: &'a HashQueue,
    client: IpAddr,
}

impl HashQueue {
    pub fn new(permits: usize, per_address: usize, wait: Duration) -> Self {
        Self { permits: permits.max(1), per_address: per_address.max(1), wait, state: Mutex::default() }
    }

    pub async fn acquire(&self, client: IpAddr) -> Result<HashTurn<'_>, AuthError> {
        let rx = {
            let mut st = self.state.lock().expect("hash queue poisoned");
            let held = st.held.entry(client).or_default();
            if *held >= self.per_address {
                return Err(AuthError::Busy);
            }
            *held += 1;
            if st.running < self.permits && st.turn.is_empty() {
                st.running += 1;
                return Ok(HashTurn { queue: self, client });
            }
            let (tx, rx) = oneshot::channel();
            st.waiting.entry(client).or_default().push_back(tx);
            if !st.turn.contains(&client) {
                st.turn.push_back(client);
            }
            rx
        };
        let mut rx = rx;
        match tokio::time::timeout(self.wait, &mut rx).await {
            Ok(Ok(())) => Ok(HashTurn { queue: self, client }),
            _ => {
                // Given a turn just as the wait ended: take it after all.
                rx.close();
                if rx.try_recv().is_ok() {
                    return Ok(HashTurn { queue: self, client });
                }
                let mut st = self.state.lock().expect("hash queue poisoned");
                release_held(&mut st, client);
                Err(AuthError::Busy)
            }
        }
    }

    fn release(&self, client: IpAddr) {
        let mut st = self.state.lock().expect("hash queue poisoned");
        release_held(&mut st, client);
        st.running -= 1;
        // The next address in turn whose waiter is still there gets it.
        while let Some(addr) = st.turn.pop_front() {
            let Some(q) = st.waiting.get_mut(&addr) else { continue };
            let next = q.pop_front();
            if q.is_empty() {
                st.waiting.remove(&addr);
            } else {
                st.turn.push_back(addr);
            }
            if let Some(tx) = next {
                if tx.send(()).is_ok() {
                    st.running += 1;
                    return;
                }
            }
        }
    }

    /// Hashes running now.
    pub fn running(&self) -> usize {
        self.state.lock().expect("hash queue poisoned").running
    }
}

fn release_held(st: &mut QueueState, client: IpAddr) {
    if let Some(n) = st.held.get_mut(&client) {
        *n -= 1;
        if *n == 0 {
            st.held.remove(&client);
        }
    }
}

impl Drop for HashTurn<'_> {
    fn drop(&mut self) {
        self.queue.release(self.client);
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
            interactions_endpoint_url: None,
        })
        .await?;
    let (token, hash) = new_token(id);
    store.add_token(&hash, id, now_ms()).await?;
    Ok((user, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[tokio::test]
    async fn turns_go_round_the_addresses_and_a_flooding_address_waits_behind_the_others() {
        let q = Arc::new(HashQueue::new(1, 3, Duration::from_secs(5)));
        let first = q.acquire(ip(1)).await.unwrap();
        // Address 1 queues two more (its limit is 3 in all), then is refused.
        let (tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (n, addr) in [(1, 1), (2, 1), (3, 2), (4, 3)] {
            let (qc, tx) = (q.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                let _t = qc.acquire(ip(addr)).await.unwrap();
                tx.send(n).unwrap();
            }));
            // Each waits before the next arrives, so arrival order is known.
            let deadline = Instant::now() + Duration::from_secs(5);
            while q.state.lock().unwrap().waiting.values().map(VecDeque::len).sum::<usize>() < n {
                assert!(Instant::now() < deadline, "waiter {n} never queued");
                tokio::task::yield_now().await;
            }
        }
        assert!(matches!(q.acquire(ip(1)).await, Err(AuthError::Busy)), "a fourth from one address is refused at once");
        drop(first);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(order.recv().await.unwrap());
        }
        // Address 1's second waiter goes after addresses 2 and 3 had a turn.
        assert_eq!(got, vec![1, 3, 4, 2]);
        assert_eq!(q.running(), 0);
        assert!(q.state.lock().unwrap().held.is_empty());
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_gives_up_and_frees_its_place() {
        let q = HashQueue::new(1, 2, Duration::from_millis(20));
        let held = q.acquire(ip(1)).await.unwrap();
        assert!(matches!(q.acquire(ip(2)).await, Err(AuthError::Busy)));
        assert!(!q.state.lock().unwrap().held.contains_key(&ip(2)));
        drop(held);
        let again = q.acquire(ip(2)).await.unwrap();
        assert_eq!(q.running(), 1);
        drop(again);
    }
}
