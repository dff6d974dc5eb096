//! One presence change in a 1,000,000-member guild, end to end inside the
//! guild actor's member-list path: the list change, the range ops for a
//! subscriber of [0, 99], the JSON encoding of GUILD_MEMBER_LIST_UPDATE, and
//! the push to the subscriber's session (no socket: into its replay buffer).

use criterion::{criterion_group, criterion_main, Criterion};
use protocol::gateway::{Intents, Status};
use protocol::{GuildId, UserId};
use server::gateway::SessionHandle;
use server::guild::list::{Lists, View};
use server::guild::members::Members;
use server::presence::Presence;
use store::{MemberRecord, UserRecord};

const MEMBERS: u64 = 1_000_000;

fn bench(c: &mut Criterion) {
    let guild = GuildId(1);
    let mut members = Members::new(guild);
    for n in 0..MEMBERS {
        let u = UserRecord {
            id: UserId(10 + n),
            username: format!("member{n:07}"),
            global_name: None,
            avatar: None,
            bot: false,
            flags: 0,
            created_at: 0,
        };
        let m = MemberRecord::joined(guild, u.id, 0);
        members.insert(&m, &u);
    }
    let mut online = server::guild::online::Online::default();
    // 10% online, so both groups are large.
    for n in (0..MEMBERS).step_by(10) {
        online.report(UserId(10 + n), 1, Presence::new(Status::Online));
    }
    let roles = vec![server::guild::everyone_role(guild)];
    let view = View { guild, owner: UserId(0), roles: &roles, members: &members, online: &online };
    let channel = server::guild::text_channel(protocol::ChannelId(2), guild, "general".into(), 0);
    let mut lists = Lists::default();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let delivery = server::fanout::Delivery::standalone(1, rt.handle().clone());
    let session =
        SessionHandle::new("bench".into(), UserId(2), false, Intents::ALL, 250, vec![protocol::ActorKey::guild(guild)], &delivery);
    lists.subscribe(&view, session.clone(), &[(channel.id, vec![(0, 99)])], std::slice::from_ref(&channel));
    std::hint::black_box(session.take_replay());
    // A member whose name sorts into the first chunk when online.
    let who = UserId(10 + 1);
    let mut up = true;
    let mut g = c.benchmark_group("presence_change_1m");
    g.bench_function("set_status+range_ops+encode+enqueue", |b| {
        b.iter(|| {
            let status = if up { Status::Online } else { Status::Offline };
            up = !up;
            lists.status_changed(&view, who, status);
            std::hint::black_box(session.take_replay());
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
