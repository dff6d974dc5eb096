//! The fixture: who exists on the server under test. Other tools (the lead's
//! `throng seed`) write the same shape, so the required keys are fixed and
//! extra keys are ignored:
//! `{"users":[{"id","token"}],"guilds":[{"id","channel_ids":[..],"member_ids":[..]}]}`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fixture {
    pub users: Vec<FixtureUser>,
    pub guilds: Vec<FixtureGuild>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FixtureUser {
    pub id: String,
    pub token: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FixtureGuild {
    pub id: String,
    pub channel_ids: Vec<String>,
    pub member_ids: Vec<String>,
}

/// The fixture with ids resolved to indices, built once per process.
pub struct Index {
    pub fixture: Fixture,
    /// For each user index: the guild indices it belongs to.
    pub guilds_of: Vec<Vec<u32>>,
    /// For each guild index: its members as user indices (ids the fixture
    /// lists as members but not as users are skipped: they have no token).
    pub members_of: Vec<Vec<u32>>,
}

impl Fixture {
    pub fn load(path: &Path) -> anyhow::Result<Fixture> {
        let text = std::fs::read(path).with_context(|| format!("reading fixture {}", path.display()))?;
        let f: Fixture = serde_json::from_slice(&text).with_context(|| format!("parsing fixture {}", path.display()))?;
        if f.users.is_empty() {
            bail!("fixture {} has no users", path.display());
        }
        Ok(f)
    }

    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_vec(self)?;
        std::fs::write(path, text).with_context(|| format!("writing fixture {}", path.display()))
    }
}

impl Index {
    pub fn new(fixture: Fixture) -> Index {
        let by_id: HashMap<&str, u32> = fixture.users.iter().enumerate().map(|(i, u)| (u.id.as_str(), i as u32)).collect();
        let mut guilds_of = vec![Vec::new(); fixture.users.len()];
        let mut members_of = Vec::with_capacity(fixture.guilds.len());
        for (gi, g) in fixture.guilds.iter().enumerate() {
            let members: Vec<u32> = g.member_ids.iter().filter_map(|m| by_id.get(m.as_str()).copied()).collect();
            for &u in &members {
                guilds_of[u as usize].push(gi as u32);
            }
            members_of.push(members);
        }
        Index { fixture, guilds_of, members_of }
    }

    /// The guild with the most members (the broadcast target by default).
    pub fn largest_guild(&self) -> Option<u32> {
        (0..self.members_of.len()).max_by_key(|&g| self.members_of[g].len()).map(|g| g as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_maps_members_and_ignores_unknown_ids_and_extra_keys() {
        let text = r#"{"users":[{"id":"1","token":"a","username":"x"},{"id":"2","token":"b"}],
            "guilds":[{"id":"10","channel_ids":["11"],"member_ids":["1","2","99"],"name":"g"}],"extra":true}"#;
        let f: Fixture = serde_json::from_str(text).unwrap();
        let ix = Index::new(f);
        assert_eq!(ix.members_of[0], vec![0, 1]);
        assert_eq!(ix.guilds_of[1], vec![0]);
        assert_eq!(ix.largest_guild(), Some(0));
    }
}
