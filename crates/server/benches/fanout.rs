//! Encode once + fan out to N in-process sessions, measured until every
//! session has taken the dispatch off its queue and framed it (header,
//! per-session prefix, shared body) into its write buffer — i.e. until it
//! would be written, not merely enqueued. The socket write itself (a
//! syscall, ~6 µs on loopback here) is measured by throng-bench.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use protocol::gateway::Intents;
use protocol::{GuildId, UserId};
use server::gateway::conn::frame_dispatch;
use server::gateway::SessionHandle;
use tokio::sync::Notify;

struct Sessions {
    handles: Vec<Arc<SessionHandle>>,
    done: Arc<AtomicUsize>,
    all: Arc<Notify>,
}

fn spawn_sessions(rt: &tokio::runtime::Runtime, n: usize) -> Sessions {
    let done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(Notify::new());
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let h = SessionHandle::new(format!("s{i}").into(), UserId(i as u64), true, Intents::ALL, 50, vec![GuildId(1)], 256);
        let (done, all, me) = (done.clone(), all.clone(), h.clone());
        rt.spawn(async move {
            let mut seq = 0u64;
            loop {
                me.woken().await;
                for d in me.take().1 {
                    seq += 1;
                    let mut out = Vec::new();
                    frame_dispatch(&mut out, d.name, seq, &d.body);
                    std::hint::black_box(&out);
                    if done.fetch_add(1, Ordering::AcqRel) + 1 == n {
                        all.notify_one();
                    }
                }
            }
        });
        handles.push(h);
    }
    Sessions { handles, done, all }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut g = c.benchmark_group("fanout_encode_once");
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    for n in [1usize, 1_000, 10_000, 100_000] {
        let s = spawn_sessions(&rt, n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for i in 0..iters {
                        s.done.store(0, Ordering::Release);
                        // Encode once per event; every recipient shares the bytes.
                        let msg = serde_json::json!({
                            "id": (1_000_000 + i).to_string(), "channel_id": "2", "guild_id": "1",
                            "author": {"id": "3", "username": "sender", "discriminator": "0", "avatar": null},
                            "content": "x".repeat(120), "type": 0,
                        });
                        let body = bytes::Bytes::from(serde_json::to_vec(&msg).unwrap());
                        let notified = s.all.notified();
                        let taken = server::guild::deliver(&s.handles, "MESSAGE_CREATE", &body, Intents::GUILD_MESSAGES);
                        assert_eq!(taken, n);
                        notified.await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
