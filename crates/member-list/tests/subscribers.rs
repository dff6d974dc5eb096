//! Model-based test of range subscriptions: simulated clients apply the ops
//! literally to per-range copies; after every step each copy must equal a
//! fresh SYNC of its range, and no op may ever fall outside the client's
//! ranges.

use member_list::{normalize, Change, Item, ListRange, Member, MemberList, Op, Status};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A client that knows nothing but the ops it received.
struct Client {
    ranges: Vec<ListRange>,
    copies: Vec<Vec<Item>>,
    ops_received: usize,
}

impl Client {
    fn subscribe(list: &MemberList, requested: &[(usize, usize)]) -> Self {
        let ranges = normalize(requested, 10);
        let mut client = Client { copies: vec![Vec::new(); ranges.len()], ranges, ops_received: 0 };
        for op in list.sync_ops(&client.ranges) {
            client.apply(&op);
        }
        client
    }

    fn slot(&self, index: usize) -> usize {
        self.ranges
            .iter()
            .position(|r| r.contains(index))
            .unwrap_or_else(|| panic!("op at {index} is outside the ranges {:?}", self.ranges))
    }

    fn apply(&mut self, op: &Op) {
        self.ops_received += 1;
        match op {
            Op::Sync { range, items } => {
                let s = self.ranges.iter().position(|r| r == range).expect("sync of a subscribed range");
                self.copies[s] = items.clone();
            }
            Op::Insert { index, item } => {
                let s = self.slot(*index);
                let (r, copy) = (self.ranges[s], &mut self.copies[s]);
                let local = index - r.start;
                assert!(local <= copy.len(), "insert at {index} leaves a hole");
                copy.insert(local, item.clone());
                copy.truncate(r.end - r.start + 1);
            }
            Op::Update { index, item } => {
                let s = self.slot(*index);
                let local = index - self.ranges[s].start;
                let copy = &mut self.copies[s];
                assert!(local < copy.len(), "update at {index} of a missing item");
                copy[local] = item.clone();
            }
            Op::Delete { index } => {
                let s = self.slot(*index);
                let local = index - self.ranges[s].start;
                let copy = &mut self.copies[s];
                assert!(local < copy.len(), "delete at {index} of a missing item");
                copy.remove(local);
            }
            Op::Invalidate { range } => {
                let s = self.ranges.iter().position(|r| r == range).expect("subscribed");
                self.copies[s].clear();
            }
        }
    }

    fn receive(&mut self, list: &MemberList, changes: &[Change]) {
        for op in list.range_ops(changes, &self.ranges) {
            self.apply(&op);
        }
    }

    fn check(&self, list: &MemberList, step: usize) {
        for (r, copy) in self.ranges.iter().zip(&self.copies) {
            let fresh = list.items(r.start..=r.end);
            assert!(*copy == fresh, "step {step}: range {r:?} diverged\n client: {copy:?}\n server: {fresh:?}");
        }
    }
}

const NAMES: [&str; 12] = ["alice", "Bob", "carol", "DAVE", "eve", "frank", "Grace", "heidi", "ivan", "judy", "mallory", "zed"];

/// A random name from a small pool, so equal and case-variant names (and
/// hence id tie-breaks) are common.
fn name(rng: &mut SmallRng) -> String {
    let base = NAMES[rng.gen_range(0..NAMES.len())];
    let mut s: String = if rng.gen_bool(0.5) { base.to_uppercase() } else { base.to_string() };
    if rng.gen_bool(0.7) {
        s.push_str(&rng.gen_range(0..500).to_string());
    }
    s
}

fn status(rng: &mut SmallRng) -> Status {
    match rng.gen_range(0..20) {
        0..=4 => Status::Online,
        5..=6 => Status::Idle,
        7 => Status::Dnd,
        _ => Status::Offline,
    }
}

/// Roles 1..=`hoisted` are hoisted; up to 3 more are not.
fn roles(rng: &mut SmallRng, hoisted: u64) -> Vec<u64> {
    (1..=hoisted + 3).filter(|_| rng.gen_bool(0.15)).collect()
}

fn random_member(rng: &mut SmallRng, id: u64, hoisted: u64) -> Member {
    Member {
        user_id: id,
        username: name(rng),
        global_name: rng.gen_bool(0.3).then(|| name(rng)),
        nick: rng.gen_bool(0.2).then(|| name(rng)),
        status: status(rng),
        roles: roles(rng, hoisted),
    }
}

/// Runs `steps` random mutations against a list of `initial` members,
/// translating every `batch`-sized group of mutations for each client, and
/// checking the clients after every batch.
fn run(seed: u64, initial: usize, hoisted: u64, steps: usize, max_batch: usize, clients: &[&[(usize, usize)]]) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut list = MemberList::new((1..=hoisted).map(|r| (r, r as i64 * 10)));
    let mut present: Vec<u64> = Vec::new();
    let mut next_id = 1u64;
    for _ in 0..initial {
        list.upsert(random_member(&mut rng, next_id, hoisted));
        present.push(next_id);
        next_id += 1;
    }
    let mut clients: Vec<Client> = clients.iter().map(|r| Client::subscribe(&list, r)).collect();
    for c in &clients {
        c.check(&list, 0);
    }
    let mut step = 0;
    while step < steps {
        let batch = rng.gen_range(1..=max_batch);
        let mut changes = Vec::new();
        for _ in 0..batch {
            step += 1;
            let pick = |rng: &mut SmallRng, present: &Vec<u64>| present[rng.gen_range(0..present.len())];
            let roll = if present.is_empty() { 0 } else { rng.gen_range(0..100) };
            match roll {
                0..=9 => {
                    changes.extend(list.upsert(random_member(&mut rng, next_id, hoisted)));
                    present.push(next_id);
                    next_id += 1;
                }
                10..=19 => {
                    let i = rng.gen_range(0..present.len());
                    let id = present.swap_remove(i);
                    changes.extend(list.remove(id));
                }
                20..=64 => {
                    let id = pick(&mut rng, &present);
                    changes.extend(list.set_status(id, status(&mut rng)));
                }
                65..=84 => {
                    let id = pick(&mut rng, &present);
                    let nick = rng.gen_bool(0.8).then(|| name(&mut rng));
                    changes.extend(list.set_nick(id, nick));
                }
                85..=94 => {
                    let id = pick(&mut rng, &present);
                    changes.extend(list.set_roles(id, roles(&mut rng, hoisted)));
                }
                95..=97 => {
                    let id = pick(&mut rng, &present);
                    // Re-upsert an existing member with new data.
                    changes.extend(list.upsert(random_member(&mut rng, id, hoisted)));
                }
                _ => {
                    let id = pick(&mut rng, &present);
                    changes.extend(list.set_user_names(id, name(&mut rng), None));
                }
            }
        }
        for c in &mut clients {
            c.receive(&list, &changes);
            c.check(&list, step);
        }
    }
    assert_eq!(list.member_count(), present.len());
    for c in &clients {
        assert!(c.ops_received > 0, "the workload never touched {:?}", c.ranges);
    }
}

/// The required scale test: 100,000 members, 10,000 random joins, leaves,
/// presence, nickname and role changes, two clients, checked every step.
#[test]
fn hundred_thousand_members_two_clients() {
    let top: &[(usize, usize)] = &[(0, 99), (100, 199)];
    // Deep in the list (every change before it shifts it) and near the end
    // of the list (ends, partial chunks).
    let deep: &[(usize, usize)] = &[(30_000, 30_099), (99_950, 100_200)];
    run(1, 100_000, 5, 10_000, 1, &[top, deep]);
}

/// Small lists: groups appear and disappear inside the ranges, ranges at
/// and past the end, and batches of several mutations translated at once.
#[test]
fn small_lists_many_seeds_batched() {
    for seed in 0..40 {
        let initial = [0, 5, 50, 150, 290][seed as usize % 5];
        let all: &[(usize, usize)] = &[(0, 99), (100, 199), (200, 299)];
        let second: &[(usize, usize)] = &[(100, 150)];
        run(seed, initial, 4, 1_500, 4, &[all, second]);
    }
}

/// Reset (hoisted roles changed) re-syncs every range.
#[test]
fn reset_resyncs() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut list = MemberList::new([(1, 10), (2, 20)]);
    for id in 1..=300 {
        list.upsert(random_member(&mut rng, id, 2));
    }
    let mut client = Client::subscribe(&list, &[(0, 99), (200, 299)]);
    let changes = list.set_hoisted_roles([(2, 5), (3, 50)]);
    let ops = list.range_ops(&changes, &client.ranges);
    assert!(ops.iter().all(|op| matches!(op, Op::Sync { .. })));
    client.receive(&list, &changes);
    client.check(&list, 1);
}
