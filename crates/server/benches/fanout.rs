//! Encode once + fan out to N in-process sessions through the delivery
//! workers, measured until every session's frame has been written (the
//! workers' barrier returns only after each touched session was flushed),
//! not merely enqueued. The sessions' sockets are sinks: the kernel's part
//! of a write (a syscall, ~6 µs on loopback here) is measured by
//! throng-bench, not here.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use protocol::compress::{CompressParams, Transport};
use protocol::gateway::Intents;
use protocol::{ActorKey, GuildId, UserId};
use server::fanout::{Delivery, FanEvent, Filter, Sink, Subscribers};
use server::gateway::socket::Conn;
use server::gateway::SessionHandle;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let delivery = Delivery::standalone(workers, rt.handle().clone());
    let mut g = c.benchmark_group("fanout_encode_once");
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    for n in [1usize, 1_000, 10_000, 100_000] {
        let mut subs = Subscribers::new(delivery.workers());
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let h = SessionHandle::new(
                format!("s{i}").into(),
                UserId(i as u64),
                true,
                Intents::ALL,
                50,
                vec![ActorKey::guild(GuildId(1))],
                &delivery,
            );
            h.attach_for_bench(Conn::sink(Transport::None, &CompressParams::default()).unwrap());
            handles.push(h.clone());
            subs.insert(h as Sink);
        }
        let parts = subs.partitions().clone();
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for i in 0..iters {
                    // Encode once per event; every recipient shares the bytes.
                    let msg = serde_json::json!({
                        "id": (1_000_000 + i).to_string(), "channel_id": "2", "guild_id": "1",
                        "author": {"id": "3", "username": "sender", "discriminator": "0", "avatar": null},
                        "content": "x".repeat(120), "type": 0,
                    });
                    let body = bytes::Bytes::from(serde_json::to_vec(&msg).unwrap());
                    let ev = FanEvent::new("MESSAGE_CREATE", body, Filter::Intent(Intents::GUILD_MESSAGES));
                    delivery.fan_out(&ev, &parts);
                    delivery.barrier();
                }
                start.elapsed()
            })
        });
        // Keep replay buffers from growing across sizes.
        for s in &handles {
            s.take_replay();
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
