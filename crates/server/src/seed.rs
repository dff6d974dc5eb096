//! `throng seed`: bulk-creates users, guilds, channels and memberships
//! directly in the store and writes a fixture with every token and id, so
//! large guilds and load tests need no slow per-user registration.
//!
//! Fixture shape (other tools read it; extra keys allowed):
//! `{"users":[{"id","token"}],"guilds":[{"id","channel_ids":[...],"member_ids":[...]}]}`,
//! and with `--bot` a `"bot":{"id","token","application_id"}` in every guild;
//! with `--messages N`, a `"search"` object ([`messages`]).

pub mod messages;

use std::collections::HashSet;

use protocol::{ChannelId, GuildId, SnowflakeGen, UserId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use store::{BulkLoad, ChannelRecord, GuildRecord, MemberRecord, NewGuild, UserRecord};

use node::auth::{new_token, now_ms};

#[derive(Clone, Debug)]
pub struct SeedSpec {
    pub users: usize,
    pub guilds: usize,
    /// Guilds each user joins among the regular ones (capped at `guilds`).
    pub memberships_per_user: usize,
    /// If > 0, one more guild holding the first `huge_guild_members` users.
    pub huge_guild_members: usize,
    pub channels_per_guild: usize,
    pub rng_seed: u64,
    /// One-to-one guilds instead: users 1+2, 3+4, … each share one guild of
    /// two (`guilds` and `memberships_per_user` are ignored).
    pub pairs: bool,
}

#[derive(Serialize)]
pub struct FixtureUser {
    pub id: UserId,
    pub token: String,
}

#[derive(Serialize)]
pub struct FixtureGuild {
    pub id: GuildId,
    pub channel_ids: Vec<ChannelId>,
    pub member_ids: Vec<UserId>,
    pub huge: bool,
}

#[derive(Serialize)]
pub struct Fixture {
    pub users: Vec<FixtureUser>,
    pub guilds: Vec<FixtureGuild>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot: Option<FixtureBot>,
    /// The guild holding `--messages` and the search benchmark's queries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<messages::SearchFixture>,
}

/// A bot (with its application) that is a member of every guild.
#[derive(Serialize)]
pub struct FixtureBot {
    pub id: UserId,
    pub token: String,
    pub application_id: UserId,
}

/// Builds the rows and the fixture. Pure: nothing is written yet.
pub fn build(spec: &SeedSpec, ids: &SnowflakeGen) -> (BulkLoad, Fixture) {
    let mut rng = StdRng::seed_from_u64(spec.rng_seed);
    let now = now_ms();
    let mut load = BulkLoad::default();
    let mut fixture = Fixture { users: Vec::with_capacity(spec.users), guilds: Vec::new(), bot: None, search: None };
    for n in 0..spec.users {
        let id = UserId::from(ids.next());
        let (token, hash) = new_token(id);
        load.users.push(UserRecord {
            id,
            username: format!("user{n}_{}", id.0 % 100_000),
            global_name: Some(format!("User {n}")),
            avatar: None,
            bot: false,
            flags: 0,
            created_at: now,
        });
        load.tokens.push((hash, id));
        fixture.users.push(FixtureUser { id, token });
    }
    let user_ids: Vec<UserId> = load.users.iter().map(|u| u.id).collect();
    let mut members_of: Vec<Vec<UserId>> = vec![Vec::new(); if spec.pairs { 0 } else { spec.guilds }];
    if spec.pairs {
        members_of = user_ids.chunks(2).map(<[UserId]>::to_vec).collect();
    }
    let k = if spec.pairs { 0 } else { spec.memberships_per_user.min(spec.guilds) };
    for &u in &user_ids {
        let mut chosen = HashSet::with_capacity(k);
        while chosen.len() < k {
            chosen.insert(rng.gen_range(0..spec.guilds));
        }
        for g in chosen {
            members_of[g].push(u);
        }
    }
    let mut specs: Vec<(Vec<UserId>, bool)> = members_of.into_iter().map(|m| (m, false)).collect();
    if spec.huge_guild_members > 0 {
        specs.push((user_ids.iter().take(spec.huge_guild_members).copied().collect(), true));
    }
    for (n, (members, huge)) in specs.into_iter().enumerate() {
        let gid = GuildId::from(ids.next());
        let channels: Vec<ChannelRecord> = (0..spec.channels_per_guild.max(1))
            .map(|c| {
                let name = if c == 0 { "general".into() } else { format!("channel-{c}") };
                guild::text_channel(ids.next().into(), gid, name, c as i32)
            })
            .collect();
        // The first member owns the guild; an empty guild is owned by the first user.
        let owner = members.first().copied().or(user_ids.first().copied()).unwrap_or(UserId(0));
        let guild = GuildRecord {
            id: gid,
            name: if huge { "huge guild".into() } else { format!("guild {n}") },
            icon: None,
            description: None,
            owner_id: owner,
            system_channel_id: channels.first().map(|c| c.id),
            created_at: now,
        };
        let everyone = guild::everyone_role(gid);
        fixture.guilds.push(FixtureGuild {
            id: gid,
            channel_ids: channels.iter().map(|c| c.id).collect(),
            member_ids: members.clone(),
            huge,
        });
        let members = members.into_iter().map(|u| MemberRecord::joined(gid, u, now)).collect();
        load.guilds.push(NewGuild { guild, roles: vec![everyone], channels, members });
    }
    (load, fixture)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memberships_are_distinct_and_counted() {
        let spec = SeedSpec {
            users: 300,
            guilds: 20,
            memberships_per_user: 5,
            huge_guild_members: 50,
            channels_per_guild: 2,
            rng_seed: 7,
            pairs: false,
        };
        let (load, fx) = build(&spec, &SnowflakeGen::new(0, 0));
        assert_eq!(load.users.len(), 300);
        assert_eq!(fx.guilds.len(), 21);
        let regular: usize = fx.guilds.iter().filter(|g| !g.huge).map(|g| g.member_ids.len()).sum();
        assert_eq!(regular, 300 * 5);
        let huge = fx.guilds.iter().find(|g| g.huge).unwrap();
        assert_eq!(huge.member_ids.len(), 50);
        assert!(fx.guilds.iter().all(|g| g.channel_ids.len() == 2));
        for g in &fx.guilds {
            let set: HashSet<_> = g.member_ids.iter().collect();
            assert_eq!(set.len(), g.member_ids.len(), "no duplicate memberships");
        }
    }

    #[test]
    fn pairs_put_each_user_in_one_guild_of_two() {
        let spec = SeedSpec {
            users: 5,
            guilds: 0,
            memberships_per_user: 5,
            huge_guild_members: 0,
            channels_per_guild: 1,
            rng_seed: 1,
            pairs: true,
        };
        let (_, fx) = build(&spec, &SnowflakeGen::new(0, 0));
        let sizes: Vec<usize> = fx.guilds.iter().map(|g| g.member_ids.len()).collect();
        assert_eq!(sizes, [2, 2, 1]);
        assert_eq!(fx.guilds[0].member_ids, [fx.users[0].id, fx.users[1].id]);
    }
}
