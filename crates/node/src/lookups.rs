//! What every interaction looks up and rarely changes: an application,
//! commands by id, and an application's permission overrides in a guild. Kept for `interactions.lookup_ttl_ms`
//! (commands written through this node are forgotten at once; another
//! node's write is seen within the TTL, and a client holding a newer
//! version than the cache is told to retry as for a stale one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use protocol::{ApplicationId, GuildId};

use store::{ApplicationRecord, CommandPermissions, CommandRecord, Store};

/// Entries beyond which a cache is cleared wholesale.
const MAX: usize = 50_000;

type AppEntry = Option<ApplicationRecord>;
type CommandKey = (ApplicationId, Option<GuildId>, u64);
type Overrides = Arc<Vec<CommandPermissions>>;
type CommandEntry = Option<Arc<CommandRecord>>;

pub struct Lookups {
    ttl: Duration,
    apps: Mutex<HashMap<ApplicationId, (Instant, AppEntry)>>,
    commands: Mutex<HashMap<CommandKey, (Instant, CommandEntry)>>,
    permissions: Mutex<HashMap<(ApplicationId, GuildId), (Instant, Overrides)>>,
}

fn fresh<K: std::hash::Hash + Eq, V: Clone>(map: &Mutex<HashMap<K, (Instant, V)>>, k: &K, ttl: Duration) -> Option<V> {
    let m = map.lock().expect("lookup cache poisoned");
    m.get(k).filter(|(at, _)| at.elapsed() < ttl).map(|(_, v)| v.clone())
}

fn keep<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, (Instant, V)>>, k: K, v: V) {
    let mut m = map.lock().expect("lookup cache poisoned");
    if m.len() >= MAX {
        m.clear();
    }
    m.insert(k, (Instant::now(), v));
}

impl Lookups {
    pub fn new(ttl_ms: u64) -> Lookups {
        Lookups { ttl: Duration::from_millis(ttl_ms), apps: Mutex::default(), commands: Mutex::default(), permissions: Mutex::default() }
    }

    /// The application.
    pub async fn application(&self, store: &dyn Store, id: ApplicationId) -> store::Result<AppEntry> {
        if let Some(v) = fresh(&self.apps, &id, self.ttl) {
            return Ok(v);
        }
        let v = store.get_application(id).await?;
        keep(&self.apps, id, v.clone());
        Ok(v)
    }

    /// A command of `app` (a guild's, or a global one with `guild: None`).
    pub async fn command(&self, store: &dyn Store, app: ApplicationId, guild: Option<GuildId>, id: u64) -> store::Result<CommandEntry> {
        let k = (app, guild, id);
        if let Some(v) = fresh(&self.commands, &k, self.ttl) {
            return Ok(v);
        }
        let v = store.get_command(app, guild, id).await?.map(Arc::new);
        keep(&self.commands, k, v.clone());
        Ok(v)
    }

    /// An application's command permission overrides in a guild.
    pub async fn permissions(&self, store: &dyn Store, app: ApplicationId, guild: GuildId) -> store::Result<Overrides> {
        if let Some(v) = fresh(&self.permissions, &(app, guild), self.ttl) {
            return Ok(v);
        }
        let v = Arc::new(store.command_permissions(app, guild).await?);
        keep(&self.permissions, (app, guild), v.clone());
        Ok(v)
    }

    /// An application's overrides in a guild changed on this node.
    pub fn forget_permissions(&self, app: ApplicationId, guild: GuildId) {
        self.permissions.lock().expect("lookup cache poisoned").remove(&(app, guild));
    }

    /// An application's commands changed on this node.
    pub fn forget_commands(&self, app: ApplicationId) {
        self.commands.lock().expect("lookup cache poisoned").retain(|(a, _, _), _| *a != app);
    }

    /// An application changed on this node.
    pub fn forget_application(&self, app: ApplicationId) {
        self.apps.lock().expect("lookup cache poisoned").remove(&app);
    }
}
