//! Accounts and access (migration 0007): tokens, passwords, OAuth2 grants,
//! managed roles, session starts.

use protocol::{ApplicationId, GuildId, RoleId, UserId};

use crate::*;

fn user(id: u64, name: &str, bot: bool) -> UserRecord {
    UserRecord { id: UserId(id), username: name.into(), global_name: None, avatar: None, bot, flags: 0, created_at: 1 }
}

fn token(n: u8, user: u64, created_at: u64, expires_at: Option<u64>) -> TokenRecord {
    TokenRecord { hash: [n; 32], user_id: UserId(user), created_at, expires_at, client: Some(format!("client {n}")) }
}

pub(super) async fn run(s: &dyn Store) {
    tokens(s).await;
    users(s).await;
    oauth(s).await;
    managed_roles(s).await;
    session_starts(s).await;
}

async fn tokens(s: &dyn Store) {
    s.create_user(&user(8_001, "acc1", false), Some("h1")).await.unwrap();
    s.create_user(&user(8_002, "acc2", false), Some("h2")).await.unwrap();
    s.issue_token(&token(201, 8_001, 10, None)).await.unwrap();
    s.issue_token(&token(202, 8_001, 20, Some(1_000))).await.unwrap();
    s.issue_token(&token(203, 8_001, 30, None)).await.unwrap();
    s.issue_token(&token(204, 8_002, 40, None)).await.unwrap();
    assert_eq!(s.token_user(&[201; 32], 5_000).await.unwrap().unwrap(), (user(8_001, "acc1", false), None));
    assert_eq!(s.token_user(&[202; 32], 999).await.unwrap().unwrap(), (user(8_001, "acc1", false), Some(1_000)), "before expiry");
    assert!(s.token_user(&[202; 32], 1_000).await.unwrap().is_none(), "an expired token finds no one");
    let listed = s.tokens_of_user(UserId(8_001)).await.unwrap();
    assert_eq!(listed, vec![token(201, 8_001, 10, None), token(202, 8_001, 20, Some(1_000)), token(203, 8_001, 30, None)]);
    let found = s.identify_lookup(&[[202; 32]]).await.unwrap();
    assert_eq!(found[0].1.token_expires_at, Some(1_000), "IDENTIFY sees the expiry");
    // Revoking: only the caller's own tokens go.
    assert_eq!(s.revoke_tokens(UserId(8_001), &[[201; 32], [204; 32], [99; 32]]).await.unwrap(), vec![[201; 32]]);
    assert!(s.token_user(&[201; 32], 0).await.unwrap().is_none());
    assert!(s.token_user(&[204; 32], 0).await.unwrap().is_some(), "another user's token stays");
    let mut gone = s.revoke_other_tokens(UserId(8_001), &[203; 32]).await.unwrap();
    gone.sort();
    assert_eq!(gone, vec![[202; 32]]);
    assert_eq!(s.tokens_of_user(UserId(8_001)).await.unwrap().len(), 1);
    assert!(s.token_user(&[203; 32], 0).await.unwrap().is_some(), "the kept token works");
}

async fn users(s: &dyn Store) {
    let mut u = user(8_001, "acc1", false);
    u.username = "acc1renamed".into();
    u.global_name = Some("Acc One".into());
    u.avatar = Some("0123abcd".into());
    s.update_user(&u).await.unwrap();
    assert_eq!(s.get_user(UserId(8_001)).await.unwrap().unwrap(), u);
    assert!(s.user_by_username("acc1renamed").await.unwrap().is_some(), "logs in by the new name");
    let mut taken = user(8_002, "acc1renamed", false);
    taken.global_name = Some("x".into());
    assert!(matches!(s.update_user(&taken).await, Err(StoreError::Conflict)), "usernames stay unique");
    assert_eq!(s.get_user(UserId(8_002)).await.unwrap().unwrap().username, "acc2", "nothing changed");
    assert_eq!(s.password_of(UserId(8_001)).await.unwrap().as_deref(), Some("h1"));
    s.set_password(UserId(8_001), "h1-new").await.unwrap();
    assert_eq!(s.password_of(UserId(8_001)).await.unwrap().as_deref(), Some("h1-new"));
    assert_eq!(s.user_by_username("acc1renamed").await.unwrap().unwrap().1, "h1-new");
    assert_eq!(s.password_of(UserId(999_999)).await.unwrap(), None);
}

async fn oauth(s: &dyn Store) {
    s.create_user(&user(8_010, "oauthbot", true), None).await.unwrap();
    let app = ApplicationRecord {
        id: ApplicationId(8_010),
        name: "oauthbot".into(),
        owner_id: None,
        bot_user_id: UserId(8_010),
        flags: 0,
        verify_key: "00".into(),
        interactions_endpoint_url: None,
    };
    s.create_application(&app).await.unwrap();
    assert_eq!(s.oauth_app(ApplicationId(8_010)).await.unwrap(), Some(OAuthApp::default()), "no secret, no redirect URIs yet");
    s.set_interactions_endpoint(ApplicationId(8_010), Some("http://127.0.0.1:9/i")).await.unwrap();
    let got = s.get_application(ApplicationId(8_010)).await.unwrap().unwrap();
    assert_eq!(got.interactions_endpoint_url.as_deref(), Some("http://127.0.0.1:9/i"));
    assert_eq!(s.application_of_bot(UserId(8_010)).await.unwrap().unwrap(), got);
    s.set_interactions_endpoint(ApplicationId(8_010), None).await.unwrap();
    assert_eq!(s.get_application(ApplicationId(8_010)).await.unwrap().unwrap(), app, "cleared");
    assert_eq!(s.oauth_app(ApplicationId(1)).await.unwrap(), None);
    let o = OAuthApp { secret_hash: Some([7; 32]), redirect_uris: vec!["http://localhost/cb".into()] };
    s.set_oauth_app(ApplicationId(8_010), &o).await.unwrap();
    assert_eq!(s.oauth_app(ApplicationId(8_010)).await.unwrap(), Some(o));
    let grant = |n: u8, kind: GrantKind, expires_at: u64| GrantRecord {
        hash: [n; 32],
        kind,
        application_id: ApplicationId(8_010),
        user_id: UserId(8_002),
        scopes: vec!["identify".into(), "guilds.join".into()],
        redirect_uri: Some("http://localhost/cb".into()),
        expires_at,
    };
    s.put_grant(&grant(1, GrantKind::Code, 100)).await.unwrap();
    s.put_grant(&grant(2, GrantKind::Access, 100)).await.unwrap();
    assert_eq!(s.use_grant(&[1; 32], GrantKind::Access, 0).await.unwrap(), None, "a code is not an access token");
    assert_eq!(s.use_grant(&[1; 32], GrantKind::Code, 0).await.unwrap(), Some(grant(1, GrantKind::Code, 100)));
    assert_eq!(s.use_grant(&[1; 32], GrantKind::Code, 0).await.unwrap(), None, "a code works once");
    assert_eq!(s.use_grant(&[2; 32], GrantKind::Access, 50).await.unwrap(), Some(grant(2, GrantKind::Access, 100)));
    assert_eq!(s.use_grant(&[2; 32], GrantKind::Access, 50).await.unwrap(), Some(grant(2, GrantKind::Access, 100)), "tokens last");
    assert_eq!(s.use_grant(&[2; 32], GrantKind::Access, 100).await.unwrap(), None, "until they expire");
}

async fn managed_roles(s: &dyn Store) {
    const G: u64 = 8_100;
    let g = GuildRecord {
        id: GuildId(G),
        name: "managed".into(),
        icon: None,
        description: None,
        owner_id: UserId(8_002),
        system_channel_id: None,
        created_at: 1,
    };
    let role = |id: u64, bot_id: Option<u64>| RoleRecord {
        id: RoleId(id),
        guild_id: GuildId(G),
        name: "r".into(),
        color: 0,
        hoist: false,
        position: 1,
        permissions: 2048,
        mentionable: false,
        bot_id: bot_id.map(UserId),
    };
    let member = MemberRecord::joined(GuildId(G), UserId(8_002), 1);
    s.create_guild(&NewGuild { guild: g, roles: vec![role(8_101, Some(8_010))], channels: vec![], members: vec![member] }).await.unwrap();
    s.apply_changes(0, ActorKey::from(GuildId(G)), &[Change::CreateRole(role(8_102, Some(8_011))), Change::CreateRole(role(8_103, None))])
        .await
        .unwrap()
        .expect("not fenced");
    let roles = s.roles_of_guild(GuildId(G)).await.unwrap();
    assert_eq!(roles, vec![role(8_101, Some(8_010)), role(8_102, Some(8_011)), role(8_103, None)]);
    assert_eq!(load_roles(s, G).await, roles, "guild loads carry the bot id");
}

async fn load_roles(s: &dyn Store, g: u64) -> Vec<RoleRecord> {
    s.load_guilds(&[GuildId(g)]).await.unwrap().pop().unwrap().roles
}

async fn session_starts(s: &dyn Store) {
    let l = StartLimits { concurrency_window_ms: 5_000, period_ms: 100_000, total: 3 };
    let t = [42u8; 32];
    assert_eq!(s.session_starts_left(&t, 0, &l).await.unwrap(), (3, 100_000), "a token never used has the whole period");
    assert_eq!(s.start_session(&t, 0, 10_000, &l).await.unwrap(), SessionStart::Started { remaining: 2, reset_after_ms: 100_000 });
    assert_eq!(s.start_session(&t, 0, 12_000, &l).await.unwrap(), SessionStart::TooSoon, "one per bucket per window");
    assert_eq!(
        s.start_session(&t, 1, 12_000, &l).await.unwrap(),
        SessionStart::Started { remaining: 1, reset_after_ms: 98_000 },
        "another bucket is free"
    );
    assert_eq!(s.session_starts_left(&t, 12_000, &l).await.unwrap(), (1, 98_000));
    assert_eq!(s.start_session(&t, 0, 15_000, &l).await.unwrap(), SessionStart::Started { remaining: 0, reset_after_ms: 95_000 });
    assert_eq!(
        s.start_session(&t, 0, 20_000, &l).await.unwrap(),
        SessionStart::Exhausted { reset_after_ms: 90_000 },
        "the period's total is used up"
    );
    assert_eq!(s.start_session(&[43; 32], 0, 20_000, &l).await.unwrap(), SessionStart::Started { remaining: 2, reset_after_ms: 100_000 });
    // A new period starts over.
    assert_eq!(s.start_session(&t, 0, 110_000, &l).await.unwrap(), SessionStart::Started { remaining: 2, reset_after_ms: 100_000 });
}
