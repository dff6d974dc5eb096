//! Member-list range normalisation for ops 14/37 with extreme indices, and
//! the range ops the list sends for them.
//!
//! The input is a list of members and mutations plus requested
//! `[start, end]` pairs of any `u64`. The pairs go through the server's
//! `guild::list::requested_chunks` (what ops 14/37 do) and through
//! `member_list::normalize` with any `usize` and chunk bound. Each
//! subscriber keeps a client-side copy of its chunks and applies the
//! INSERT/UPDATE/DELETE ops literally.
//!
//! Checks: no panic or overflow; chunks are aligned, sorted, distinct, at
//! most the bound; every op lands inside the subscriber's chunks; after
//! every mutation each copy equals a fresh SYNC of its chunk.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use member_list::{normalize, Item, ListRange, Member, MemberList, Op, Status, CHUNK};
use server::guild::list::{requested_chunks, MAX_CHUNKS};

#[derive(Arbitrary, Debug)]
enum Mutation {
    Upsert { user: u8, name: u8, status: u8, roles: u8 },
    Remove { user: u8 },
    Status { user: u8, status: u8 },
    Nick { user: u8, nick: Option<u8> },
    Roles { user: u8, roles: u8 },
    Hoist { roles: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Op 14/37 pairs as they arrive (any u64).
    requested: Vec<(u64, u64)>,
    /// Direct calls of `normalize` with any indices and bound.
    direct: Vec<(usize, usize)>,
    direct_max: u8,
    mutations: Vec<Mutation>,
}

fn status(s: u8) -> Status {
    [Status::Online, Status::Idle, Status::Dnd, Status::Offline][usize::from(s % 4)]
}

/// Role ids 1..=4 from the low bits.
fn roles(bits: u8) -> Vec<u64> {
    (0u8..4).filter(|i| bits & (1 << i) != 0).map(|i| u64::from(i) + 1).collect()
}

fn check_chunks(chunks: &[ListRange], max: usize) {
    assert!(chunks.len() <= max);
    for c in chunks {
        assert_eq!(c.start % CHUNK, 0);
        assert_eq!(c.end, c.start + CHUNK - 1);
    }
    assert!(chunks.windows(2).all(|w| w[0].end < w[1].start), "chunks not sorted and distinct: {chunks:?}");
}

fn apply(copy: &mut Vec<Item>, range: &ListRange, op: &Op) {
    let len = range.end - range.start + 1;
    match op {
        Op::Insert { index, item } => {
            let at = index - range.start;
            assert!(at <= copy.len(), "INSERT at {index} past the copy's end");
            copy.insert(at, item.clone());
            copy.truncate(len);
        }
        Op::Delete { index } => {
            let at = index - range.start;
            assert!(at < copy.len(), "DELETE at {index} of a missing item");
            copy.remove(at);
        }
        Op::Update { index, item } => {
            let at = index - range.start;
            assert!(at < copy.len(), "UPDATE at {index} of a missing item");
            copy[at] = item.clone();
        }
        Op::Sync { .. } | Op::Invalidate { .. } => panic!("range_ops sent {op:?}"),
    }
}

fuzz_target!(|input: Input| {
    let direct_max = usize::from(input.direct_max);
    check_chunks(&normalize(&input.direct, direct_max), direct_max);

    let chunks = requested_chunks(&input.requested);
    check_chunks(&chunks, MAX_CHUNKS);
    // Small lists: only the first chunks can hold items; keep those that may.
    let mut list = MemberList::new([(1, 1), (2, 2)]);
    let mut copies: Vec<Vec<Item>> = chunks.iter().map(|r| list.items(r.start..=r.end)).collect();
    for m in input.mutations.iter().take(200) {
        let changes = match *m {
            Mutation::Upsert { user, name, status: s, roles: r } => list.upsert(Member {
                user_id: u64::from(user % 64),
                username: format!("u{}", name % 16),
                global_name: None,
                nick: None,
                status: status(s),
                roles: roles(r),
            }),
            Mutation::Remove { user } => list.remove(u64::from(user % 64)),
            Mutation::Status { user, status: s } => list.set_status(u64::from(user % 64), status(s)),
            Mutation::Nick { user, nick } => list.set_nick(u64::from(user % 64), nick.map(|n| format!("n{}", n % 16))),
            Mutation::Roles { user, roles: r } => list.set_roles(u64::from(user % 64), roles(r)),
            Mutation::Hoist { roles: r } => list.set_hoisted_roles(roles(r).into_iter().map(|id| (id, id as i64))),
        };
        let ops = list.range_ops(&changes, &chunks);
        for op in &ops {
            match op {
                Op::Sync { range, items } => {
                    let k = chunks.iter().position(|c| c == range).expect("SYNC of a watched chunk");
                    assert!(items.len() <= CHUNK);
                    copies[k] = items.clone();
                }
                Op::Insert { index, .. } | Op::Delete { index } | Op::Update { index, .. } => {
                    let k = chunks.iter().position(|c| c.contains(*index)).expect("op inside a watched chunk");
                    apply(&mut copies[k], &chunks[k], op);
                }
                Op::Invalidate { .. } => panic!("range_ops sent INVALIDATE"),
            }
        }
        for (k, r) in chunks.iter().enumerate() {
            assert_eq!(copies[k], list.items(r.start..=r.end), "copy of {r:?} differs from a fresh SYNC");
        }
    }
});
