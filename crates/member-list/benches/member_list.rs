//! Cost of one presence change (online <-> offline) in a 1,000,000-member
//! list: the full-list changes plus the ops for one subscriber of [0, 99].
//!
//! The list has 5 hoisted roles and ~40% of members online, random names.
//! Each iteration flips a different random member, so the sorted-set paths
//! are cold-ish, as in production. Also timed separately: the change alone,
//! and a subscriber deep in the list ([500000, 500099]), for which nearly
//! every change before it produces a DELETE + INSERT pair.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use member_list::{ListRange, Member, MemberList, Status};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const MEMBERS: u64 = 1_000_000;

fn build(rng: &mut SmallRng) -> MemberList {
    let mut list = MemberList::new((1..=5).map(|r| (r, r as i64)));
    for id in 1..=MEMBERS {
        let len = rng.gen_range(4..12);
        let username: String = (0..len).map(|_| rng.gen_range(b'a'..=b'z') as char).collect();
        let status = if rng.gen_bool(0.4) { Status::Online } else { Status::Offline };
        let roles = (1..=8).filter(|_| rng.gen_bool(0.1)).collect();
        list.upsert(Member { user_id: id, username, global_name: None, nick: None, status, roles });
    }
    list
}

fn bench(c: &mut Criterion) {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut list = build(&mut rng);
    let mut group = c.benchmark_group("presence_change_1M");
    group.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let top = [ListRange::chunk(0)];
    let deep = [ListRange::chunk(5_000)];
    for (name, ranges) in [("changes_only", &[][..]), ("subscriber_0_99", &top[..]), ("subscriber_500000", &deep[..])] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let id = rng.gen_range(1..=MEMBERS);
                let status = match list.member(id) {
                    Some(m) if m.status.is_online() => Status::Offline,
                    _ => Status::Online,
                };
                let changes = list.set_status(id, status);
                let ops = list.range_ops(&changes, ranges);
                black_box((changes, ops))
            })
        });
    }
    group.finish();
}

criterion_group!(member_list_benches, bench);
criterion_main!(member_list_benches);
