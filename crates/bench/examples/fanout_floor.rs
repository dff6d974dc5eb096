//! The machine's floor for one message to N sockets: a bare program (no
//! WebSocket, no JSON, no runtime) writes one 200-byte message to each of N
//! loopback TCP connections, one write each, from one thread per core; bare
//! epoll readers in two other processes (one process may hold only ~20,000
//! sockets) time each receipt. Prints, per message, when the last reader
//! had it, and the CPU each side spent per delivery.
//!
//!   cargo run --release -p bench --example fanout_floor -- 19000 10
//!
//! Over several processes (the floor of a cluster on one host): P writer
//! processes hold N/P sockets each and write when told, P reader processes
//! read N/P each; the time is from the coordinator's "go" to the last
//! receipt anywhere.
//!
//!   cargo run --release -p bench --example fanout_floor -- 100000 20 6
//!
//! Compare with `throng-bench broadcast` at one message per second.

use std::io::{BufRead, BufReader, Read, Write};

mod floor;
use floor::raise_nofile;
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

fn main() {
    raise_nofile();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("reader") => reader(args[2].parse().unwrap(), args[3].parse().unwrap()),
        Some("writer") => writer(args[2].parse().unwrap()),
        _ => {
            let n = args.get(1).map_or(19_000, |n| n.parse().unwrap());
            let messages = args.get(2).map_or(10, |n| n.parse().unwrap());
            match args.get(3).map_or(1, |p| p.parse().unwrap()) {
                1 => coordinator(n, messages),
                p => coordinator_processes(n, messages, p),
            }
        }
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
        let body = body_at(t0);
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

/// The body of one message: the send time in µs, then 'x' up to MSG bytes.
fn body_at(t0: u64) -> [u8; MSG] {
    let mut body = [b'x'; MSG];
    let stamp = t0.to_string();
    body[..stamp.len()].copy_from_slice(stamp.as_bytes());
    body
}

fn coordinator_processes(n: usize, messages: usize, p: usize) {
    let me = std::env::current_exe().unwrap();
    let shares: Vec<usize> = (0..p).map(|i| n / p + usize::from(i < n % p)).collect();
    let mut writers: Vec<_> = shares
        .iter()
        .map(|&k| Command::new(&me).args(["writer", &k.to_string()]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap())
        .collect();
    let mut w_out: Vec<_> = writers.iter_mut().map(|w| BufReader::new(w.stdout.take().unwrap())).collect();
    let mut w_in: Vec<_> = writers.iter_mut().map(|w| w.stdin.take().unwrap()).collect();
    let mut line = String::new();
    let mut readers = Vec::new();
    for (o, &k) in w_out.iter_mut().zip(&shares) {
        line.clear();
        o.read_line(&mut line).unwrap(); // the writer's port
        let port = line.trim().to_string();
        readers.push(Command::new(&me).args(["reader", &port, &k.to_string()]).stdout(Stdio::piped()).spawn().unwrap());
    }
    let mut r_out: Vec<_> = readers.iter_mut().map(|r| BufReader::new(r.stdout.take().unwrap())).collect();
    for o in w_out.iter_mut().chain(r_out.iter_mut()) {
        line.clear();
        o.read_line(&mut line).unwrap(); // "accepted" / "connected"
    }
    println!("{n} sockets over {p} writer and {p} reader processes, {messages} messages of {MSG} B");
    let mut lasts = Vec::new();
    for m in 0..messages {
        std::thread::sleep(Duration::from_millis(1000));
        let t0 = now_us();
        for w in &mut w_in {
            writeln!(w, "{t0}").unwrap();
            w.flush().unwrap();
        }
        let mut writer_cpu = 0u64;
        for o in &mut w_out {
            line.clear();
            o.read_line(&mut line).unwrap(); // "cpu_us"
            writer_cpu += line.trim().parse::<u64>().unwrap();
        }
        let (mut last, mut reader_cpu) = (0u64, 0u64);
        for o in &mut r_out {
            line.clear();
            o.read_line(&mut line).unwrap(); // "last p50 cpu"
            let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            last = last.max(v[0]);
            reader_cpu += v[2];
        }
        lasts.push(last);
        println!(
            "message {m}: last receipt {:.1} ms; CPU per delivery: writers {:.2} µs, readers {:.2} µs",
            last as f64 / 1e3,
            writer_cpu as f64 / n as f64,
            reader_cpu as f64 / n as f64
        );
    }
    lasts.sort_unstable();
    println!("last receipt: median {:.1} ms, max {:.1} ms", lasts[lasts.len() / 2] as f64 / 1e3, lasts[lasts.len() - 1] as f64 / 1e3);
    drop(w_in);
    for mut c in writers.into_iter().chain(readers) {
        let _ = c.wait();
    }
}

/// A writer process: accepts `k` connections, then writes one message to
/// each for every send time read from stdin, and prints its CPU for it.
fn writer(k: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    let mut socks = Vec::with_capacity(k);
    for _ in 0..k {
        let (s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        socks.push(s);
    }
    println!("accepted");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(t0) = line.unwrap_or_default().trim().parse::<u64>() else { break };
        let cpu0 = cpu_us();
        let body = body_at(t0);
        for mut s in &socks {
            s.write_all(&body).unwrap();
        }
        println!("{}", cpu_us() - cpu0);
        std::io::stdout().flush().unwrap();
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
            let r = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 60_000) };
            if r <= 0 {
                eprintln!("reader: nothing for 60 s after {got} of {k} receipts");
                return;
            }
            cpu0.get_or_insert_with(cpu_us);
            for ev in &events[..r as usize] {
                let mut s = &socks[ev.u64 as usize];
                match s.read(&mut buf) {
                    Ok(0) => {
                        eprintln!("reader: connection closed after {got} of {k} receipts");
                        return; // the writer is gone
                    }
                    Err(_) => {}
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
