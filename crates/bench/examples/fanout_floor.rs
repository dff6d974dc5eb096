//! The machine's floor for one message to N sockets: a bare program (no
//! WebSocket, no JSON, no runtime) writes one 200-byte message to each of N
//! loopback TCP connections, one write each, from one thread per core; bare
//! epoll readers in two other processes (one process may hold only ~20,000
//! sockets) time each receipt. Prints, per message, when the last reader
//! had it, and the CPU each side spent per delivery.
//!
//!   cargo run --release -p bench --example fanout_floor -- 19000 10
//!
//! Compare with `throng-bench broadcast` at one message per second.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MSG: usize = 200;

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

fn cpu_us() -> u64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as u64 * 1_000_000 + v.tv_usec as u64;
    t(u.ru_utime) + t(u.ru_stime)
}

fn raise_nofile() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain get/set of our own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

fn main() {
    raise_nofile();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("reader") => reader(args[2].parse().unwrap(), args[3].parse().unwrap()),
        _ => coordinator(args.get(1).map_or(19_000, |n| n.parse().unwrap()), args.get(2).map_or(10, |n| n.parse().unwrap())),
    }
}

fn coordinator(n: usize, messages: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let me = std::env::current_exe().unwrap();
    let halves = [n / 2, n - n / 2];
    let mut readers: Vec<_> = halves
        .iter()
        .map(|&k| {
            Command::new(&me)
                .args(["reader", &port.to_string(), &k.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut socks = Vec::with_capacity(n);
    for _ in 0..n {
        let (s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        socks.push(s);
    }
    let mut outs: Vec<_> = readers.iter_mut().map(|r| BufReader::new(r.stdout.take().unwrap())).collect();
    let mut line = String::new();
    for o in &mut outs {
        line.clear();
        o.read_line(&mut line).unwrap(); // "connected"
    }
    let cores = std::thread::available_parallelism().map_or(2, |c| c.get());
    let chunk = n.div_ceil(cores);
    println!("{n} sockets, {messages} messages of {MSG} B, {cores} writer threads");
    for m in 0..messages {
        std::thread::sleep(Duration::from_millis(1000));
        let t0 = now_us();
        let cpu0 = cpu_us();
        let mut body = [b'x'; MSG];
        let stamp = t0.to_string();
        body[..stamp.len()].copy_from_slice(stamp.as_bytes());
        std::thread::scope(|sc| {
            for part in socks.chunks(chunk) {
                sc.spawn(move || {
                    for mut s in part {
                        s.write_all(&body).unwrap();
                    }
                });
            }
        });
        let written = now_us() - t0;
        let server_cpu = cpu_us() - cpu0;
        let (mut last, mut p50s, mut reader_cpu) = (0u64, Vec::new(), 0u64);
        for o in &mut outs {
            line.clear();
            o.read_line(&mut line).unwrap(); // "last p50 cpu"
            let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            last = last.max(v[0]);
            p50s.push(v[1]);
            reader_cpu += v[2];
        }
        println!(
            "message {m}: written in {:.1} ms, last receipt {:.1} ms (reader p50 {:?} ms); CPU per delivery: writer {:.2} µs, readers {:.2} µs",
            written as f64 / 1e3,
            last as f64 / 1e3,
            p50s.iter().map(|p| *p as f64 / 1e3).collect::<Vec<_>>(),
            server_cpu as f64 / n as f64,
            reader_cpu as f64 / n as f64
        );
    }
    drop(socks);
    for mut r in readers {
        let _ = r.wait();
    }
}

fn reader(port: u16, k: usize) {
    let mut socks = Vec::with_capacity(k);
    for _ in 0..k {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nonblocking(true).unwrap();
        socks.push(s);
    }
    // SAFETY: epoll on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(0) };
    for (i, s) in socks.iter().enumerate() {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: i as u64 };
        // SAFETY: `ep` and the socket are open; `ev` is ours.
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
    }
    println!("connected");
    std::io::stdout().flush().unwrap();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = [0u8; 4096];
    loop {
        let (mut got, mut lat) = (0usize, Vec::with_capacity(k));
        let mut cpu0 = None;
        while got < k {
            // SAFETY: `events` has room for the count passed.
            let r = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 5_000) };
            if r <= 0 {
                return; // the writer is gone
            }
            cpu0.get_or_insert_with(cpu_us);
            for ev in &events[..r as usize] {
                let mut s = &socks[ev.u64 as usize];
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => {}
                    Ok(len) => {
                        let now = now_us();
                        let stamp = std::str::from_utf8(&buf[..len.min(20)]).unwrap_or("").trim_end_matches('x');
                        lat.push(now.saturating_sub(stamp.parse().unwrap_or(now)));
                        got += len / MSG;
                    }
                }
            }
        }
        let cpu = cpu_us() - cpu0.unwrap_or(0);
        lat.sort_unstable();
        println!("{} {} {cpu}", lat[lat.len() - 1], lat[lat.len() / 2]);
        std::io::stdout().flush().unwrap();
    }
}
