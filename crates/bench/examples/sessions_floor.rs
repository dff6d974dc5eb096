//! The machine's floor for many idle gateway sessions (issue #31): a bare
//! program (no WebSocket, no JSON, no runtime) holds N loopback TCP
//! connections open and does for each what an idle gateway session needs,
//! one heartbeat per interval and its ack, and optionally the chat model's
//! one message per user per minute relayed to the other member of a
//! one-to-one guild. Prints what that costs the box: connections
//! established, kernel memory per connection pair, RSS, CPU per heartbeat
//! on each side, and the heartbeat round trip.
//!
//! One process may hold only ~20,000 descriptors, so the coordinator starts
//! P = ceil(N / per-proc) server processes and as many client processes;
//! client k connects to server k from its own loopback source addresses
//! (127.1.k.1, 127.1.k.2, ...; `IP_BIND_ADDRESS_NO_PORT`, so each
//! source/destination pair holds only a few thousand ephemeral ports).
//!
//!   cargo run --release -p bench --example sessions_floor -- total=100000
//!   sessions_floor total=500000 interval=41.25 hold=90 rate=10000
//!
//! Keys (defaults): total (100000), interval in s (41.25), hold in s (90),
//! rate of new connections per second over all clients (10000), per-proc
//! sockets per process (19000), buf = SO_RCVBUF/SO_SNDBUF on both ends in
//! bytes, 0 = the kernel's defaults (4096), srcs = source addresses per
//! client process, 0 = none bound, all from 127.0.0.1 (4), reuseport = 1:
//! every server listens on one port with SO_REUSEPORT (0), msg = seconds
//! between one 200-byte message per connection, relayed by the server to
//! the connection accepted next to it, 0 = none (0).
//!
//! A frame is a 16-byte header (op, 0, payload length u16 LE, 4 zero bytes,
//! the sender's CLOCK_MONOTONIC µs u64 LE) and its payload: op 1 heartbeat
//! and op 11 ack carry none (the gateway's are ~20 bytes of JSON), op 0 a
//! message carries 184 bytes.
//! `docs/bench/sessions-floor.sh` runs it at several totals, with the
//! sysctls that bound it printed.

use std::io::{BufRead, BufReader, Write};

mod floor;
use floor::raise_nofile;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HDR: usize = 16;
const MSG: usize = 200;
const OP_DISPATCH: u8 = 0;
const OP_HEARTBEAT: u8 = 1;
const OP_ACK: u8 = 11;
const TICK_US: u64 = 10_000;
const LISTEN_TOKEN: u64 = u64::MAX;

fn mono_us() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

fn header(op: u8, len: u16, t: u64) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[0] = op;
    h[2..4].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&t.to_le_bytes());
    h
}

fn message(t: u64) -> [u8; MSG] {
    let mut m = [b'x'; MSG];
    m[..HDR].copy_from_slice(&header(OP_DISPATCH, (MSG - HDR) as u16, t));
    m
}

/// Calls `f` with each whole frame of `carry` + `data`; keeps a partial
/// frame in `carry` (empty, and so without a heap block, between frames).
fn frames(carry: &mut Vec<u8>, data: &[u8], mut f: impl FnMut(&[u8])) {
    let mut parse = |b: &[u8]| -> usize {
        let mut at = 0;
        while b.len() - at >= HDR {
            let len = HDR + u16::from_le_bytes([b[at + 2], b[at + 3]]) as usize;
            if b.len() - at < len {
                break;
            }
            f(&b[at..at + len]);
            at += len;
        }
        at
    };
    if carry.is_empty() {
        let used = parse(data);
        carry.extend_from_slice(&data[used..]);
    } else {
        carry.extend_from_slice(data);
        let used = parse(carry);
        carry.drain(..used);
        if carry.is_empty() {
            *carry = Vec::new();
        }
    }
}

fn stamp(frame: &[u8]) -> u64 {
    u64::from_le_bytes(frame[8..16].try_into().unwrap())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn setopt(fd: i32, level: i32, name: i32, val: i32) {
    // SAFETY: setsockopt reads an int we own.
    unsafe { libc::setsockopt(fd, level, name, (&val as *const i32).cast(), 4) };
}

fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes(ip).to_be() },
        sin_zero: [0; 8],
    }
}

fn set_bufs(fd: i32, buf: i32) {
    if buf > 0 {
        setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, buf);
        setopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, buf);
    }
}

fn epoll_add(ep: i32, fd: i32, events: u32, token: u64) {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: `ep` and `fd` are open; `ev` is ours.
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
}

fn write_all(fd: i32, b: &[u8]) -> bool {
    // SAFETY: writes from a buffer we own. One write of ≤ 200 bytes into a
    // socket with room always goes whole; anything else counts as a drop.
    let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
    n == b.len() as isize
}

/// Log-linear histogram of µs values: exact below 128, then 64 steps per
/// power of two (≤ 1.6% wide).
#[derive(Default)]
struct Hist(Vec<u64>);

impl Hist {
    fn index(v: u64) -> usize {
        if v < 128 {
            return v as usize;
        }
        let b = 63 - v.leading_zeros() as usize;
        128 + (b - 7) * 64 + ((v >> (b - 6)) & 63) as usize
    }
    fn lower(i: usize) -> u64 {
        if i < 128 {
            return i as u64;
        }
        let b = (i - 128) / 64 + 7;
        (1u64 << b) + ((((i - 128) % 64) as u64) << (b - 6))
    }
    fn record(&mut self, v: u64) {
        let i = Self::index(v);
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] += 1;
    }
    fn encode(&self) -> String {
        let parts: Vec<String> = self.0.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, c)| format!("{i}:{c}")).collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(",")
        }
    }
    fn merge(&mut self, s: &str) {
        for p in s.split(',').filter(|p| *p != "-") {
            let (i, c) = p.split_once(':').unwrap();
            let (i, c): (usize, u64) = (i.parse().unwrap(), c.parse().unwrap());
            if self.0.len() <= i {
                self.0.resize(i + 1, 0);
            }
            self.0[i] += c;
        }
    }
    fn count(&self) -> u64 {
        self.0.iter().sum()
    }
    fn quantile(&self, q: f64) -> u64 {
        let want = ((self.count() as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::lower(i);
            }
        }
        0
    }
}

/// Answers "stat" lines on stdin with `line()` and sets `quit` on "quit" or
/// end of input.
fn stats_thread(quit: Arc<AtomicBool>, line: impl Fn() -> String + Send + 'static) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut out = std::io::stdout();
        for l in stdin.lock().lines() {
            match l.as_deref().map(str::trim) {
                Ok("stat") => {
                    let _ = writeln!(out, "{}", line());
                    let _ = out.flush();
                }
                _ => break,
            }
        }
        quit.store(true, Relaxed);
    });
}

fn main() {
    raise_nofile();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(&args[1..]),
        Some("client") => client(&args[1..]),
        _ => coordinator(&args),
    }
}

// ---------------------------------------------------------------- server

#[derive(Default)]
struct ServerStats {
    accepted: AtomicU64,
    closed: AtomicU64,
    heartbeats: AtomicU64,
    messages: AtomicU64,
    drops: AtomicU64,
}

/// `server BUF PORT REUSEPORT DEADLINE_S`: listens on 127.0.0.1:PORT (0: any
/// port; REUSEPORT 1: with SO_REUSEPORT), prints the port, answers each heartbeat
/// with an ack and relays each message to the connection paired with the
/// sender (accepted next to it).
fn server(a: &[String]) {
    let buf: i32 = a[0].parse().unwrap();
    let port: u16 = a[1].parse().unwrap();
    let reuseport = a[2] == "1";
    let deadline = Instant::now() + Duration::from_secs(a[3].parse().unwrap());
    // SAFETY: plain socket calls on a descriptor we own.
    let lfd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    setopt(lfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    if reuseport {
        setopt(lfd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1);
    }
    set_bufs(lfd, buf); // inherited by every accepted socket
    let sa = sockaddr([127, 0, 0, 1], port);
    // SAFETY: `sa` is a sockaddr_in we own.
    let r = unsafe { libc::bind(lfd, (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) };
    assert_eq!(r, 0, "bind 127.0.0.1:{port}: errno {}", errno());
    // SAFETY: as above.
    unsafe { libc::listen(lfd, 4096) };
    let mut sa_len = size_of::<libc::sockaddr_in>() as u32;
    let mut bound = sockaddr([0; 4], 0);
    // SAFETY: getsockname fills the sockaddr_in we own.
    unsafe { libc::getsockname(lfd, (&mut bound as *mut libc::sockaddr_in).cast(), &mut sa_len) };
    println!("{}", u16::from_be(bound.sin_port));
    std::io::stdout().flush().unwrap();

    let stats = Arc::new(ServerStats::default());
    let quit = Arc::new(AtomicBool::new(false));
    let s = stats.clone();
    stats_thread(quit.clone(), move || {
        let g = |a: &AtomicU64| a.load(Relaxed);
        format!("{} {} {} {} {}", g(&s.accepted), g(&s.closed), g(&s.heartbeats), g(&s.messages), g(&s.drops))
    });

    // Per connection, indexed by descriptor: a partial frame, if any, and
    // the descriptor of the other member of its one-to-one guild.
    struct Conn {
        carry: Vec<u8>,
        partner: i32,
    }
    let mut conns: Vec<Conn> = Vec::new();
    let mut unpaired: i32 = -1;
    // SAFETY: epoll on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    epoll_add(ep, lfd, libc::EPOLLIN as u32, LISTEN_TOKEN);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut rbuf = [0u8; 4096];
    while !quit.load(Relaxed) && Instant::now() < deadline {
        // SAFETY: `events` has room for the count passed.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 100) };
        for ev in &events[..n.max(0) as usize] {
            let token = ev.u64;
            if token == LISTEN_TOKEN {
                loop {
                    // SAFETY: accept4 on our listening socket; no address wanted.
                    let fd =
                        unsafe { libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) };
                    if fd < 0 {
                        break;
                    }
                    if conns.len() <= fd as usize {
                        conns.resize_with(fd as usize + 1, || Conn { carry: Vec::new(), partner: -1 });
                    }
                    conns[fd as usize] = Conn { carry: Vec::new(), partner: -1 };
                    if unpaired >= 0 {
                        conns[fd as usize].partner = unpaired;
                        conns[unpaired as usize].partner = fd;
                        unpaired = -1;
                    } else {
                        unpaired = fd;
                    }
                    epoll_add(ep, fd, libc::EPOLLIN as u32, fd as u64);
                    stats.accepted.fetch_add(1, Relaxed);
                }
                continue;
            }
            let fd = token as i32;
            // SAFETY: reads into a buffer we own. Level-triggered: one read a
            // wake-up; anything left wakes us again.
            let r = unsafe { libc::read(fd, rbuf.as_mut_ptr().cast(), rbuf.len()) };
            if r < 0 && errno() == libc::EAGAIN {
                continue;
            }
            if r <= 0 {
                let p = conns[fd as usize].partner;
                if p >= 0 {
                    conns[p as usize].partner = -1;
                }
                if unpaired == fd {
                    unpaired = -1;
                }
                conns[fd as usize] = Conn { carry: Vec::new(), partner: -1 };
                // SAFETY: closing our own descriptor (this also drops it from epoll).
                unsafe { libc::close(fd) };
                stats.closed.fetch_add(1, Relaxed);
                continue;
            }
            let partner = conns[fd as usize].partner;
            frames(&mut conns[fd as usize].carry, &rbuf[..r as usize], |f| match f[0] {
                OP_HEARTBEAT => {
                    stats.heartbeats.fetch_add(1, Relaxed);
                    if !write_all(fd, &header(OP_ACK, 0, stamp(f))) {
                        stats.drops.fetch_add(1, Relaxed);
                    }
                }
                OP_DISPATCH => {
                    stats.messages.fetch_add(1, Relaxed);
                    if partner < 0 || !write_all(partner, f) {
                        stats.drops.fetch_add(1, Relaxed);
                    }
                }
                _ => {}
            });
        }
    }
    // Exiting closes every descriptor.
}

// ---------------------------------------------------------------- client

#[derive(Default)]
struct ClientStats {
    connected: AtomicU64,
    failed: AtomicU64,
    pending: AtomicU64,
    closed: AtomicU64,
    heartbeats: AtomicU64,
    acks: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
    drops: AtomicU64,
}

/// Slots of connection indices visited one per tick, round and round: a
/// connection in slot s is due every `slots × TICK` at phase s.
struct Wheel {
    slots: Vec<Vec<u32>>,
    at: usize,
}

impl Wheel {
    fn new(period_us: u64) -> Wheel {
        Wheel { slots: vec![Vec::new(); (period_us / TICK_US).max(1) as usize], at: 0 }
    }
    fn next(&mut self) -> &[u32] {
        let s = self.at;
        self.at = (self.at + 1) % self.slots.len();
        &self.slots[s]
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// `client PORT SRCS N RATE INTERVAL_US MSG_US BUF DEADLINE_S`: opens N
/// connections to 127.0.0.1:PORT at RATE per second, from the source
/// addresses SRCS (comma-separated, or "-": unbound) in turn; each sends a
/// heartbeat every INTERVAL_US (first one at a random phase, as Discord's
/// clients jitter theirs) and, if MSG_US > 0, a message every MSG_US.
fn client(a: &[String]) {
    let port: u16 = a[0].parse().unwrap();
    let srcs: Vec<[u8; 4]> = if a[1] == "-" {
        Vec::new()
    } else {
        a[1].split(',').map(|s| s.split('.').map(|o| o.parse().unwrap()).collect::<Vec<u8>>().try_into().unwrap()).collect()
    };
    let n: usize = a[2].parse().unwrap();
    let rate: f64 = a[3].parse().unwrap();
    let interval_us: u64 = a[4].parse().unwrap();
    let msg_us: u64 = a[5].parse().unwrap();
    let buf: i32 = a[6].parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(a[7].parse().unwrap());

    let stats = Arc::new(ClientStats::default());
    let hists = Arc::new(Mutex::new((Hist::default(), Hist::default())));
    let quit = Arc::new(AtomicBool::new(false));
    let (s, h) = (stats.clone(), hists.clone());
    stats_thread(quit.clone(), move || {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let (hb, msg) = std::mem::take(&mut *h.lock().unwrap());
        format!(
            "{} {} {} {} {} {} {} {} {} {} {}",
            g(&s.connected),
            g(&s.failed),
            g(&s.pending),
            g(&s.closed),
            g(&s.heartbeats),
            g(&s.acks),
            g(&s.sent),
            g(&s.received),
            g(&s.drops),
            hb.encode(),
            msg.encode()
        )
    });

    const PENDING: u8 = 0;
    const OPEN: u8 = 1;
    const DEAD: u8 = 2;
    struct Conn {
        fd: i32,
        state: u8,
        carry: Vec<u8>,
    }
    let mut conns: Vec<Conn> = Vec::with_capacity(n);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (std::process::id() as u64) << 20 ^ port as u64);
    let mut hb_wheel = Wheel::new(interval_us);
    let mut msg_wheel = (msg_us > 0).then(|| Wheel::new(msg_us));
    // SAFETY: epoll on descriptors this process owns.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut rbuf = [0u8; 4096];
    let start = Instant::now();
    let ramp_deadline = start + Duration::from_secs_f64(n as f64 / rate + 30.0);
    let mut next_tick = mono_us() + TICK_US;
    let mut ramp_over = false;
    let dst = sockaddr([127, 0, 0, 1], port);
    let close_conn = |c: &mut Conn| {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(c.fd) };
        c.state = DEAD;
        c.carry = Vec::new();
    };

    while !quit.load(Relaxed) && Instant::now() < deadline {
        // Open the connections that are due by now.
        let due = ((start.elapsed().as_secs_f64() * rate) as usize).min(n).min(conns.len() + 256);
        while conns.len() < due {
            let idx = conns.len() as u64;
            // SAFETY: plain socket calls on a descriptor we own.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                stats.failed.fetch_add(1, Relaxed);
                conns.push(Conn { fd: -1, state: DEAD, carry: Vec::new() });
                continue;
            }
            set_bufs(fd, buf);
            let mut ok = true;
            if !srcs.is_empty() {
                setopt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
                let src = sockaddr(srcs[idx as usize % srcs.len()], 0);
                // SAFETY: `src` is a sockaddr_in we own.
                ok = unsafe { libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } == 0;
            }
            // SAFETY: `dst` is a sockaddr_in we own.
            ok = ok
                && (unsafe { libc::connect(fd, (&dst as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) } == 0
                    || errno() == libc::EINPROGRESS);
            if ok {
                epoll_add(ep, fd, (libc::EPOLLOUT | libc::EPOLLIN) as u32, idx);
                stats.pending.fetch_add(1, Relaxed);
                conns.push(Conn { fd, state: PENDING, carry: Vec::new() });
            } else {
                if stats.failed.load(Relaxed) < 5 {
                    eprintln!("client {port}: connect failed: errno {}", errno());
                }
                // SAFETY: closing our own descriptor.
                unsafe { libc::close(fd) };
                stats.failed.fetch_add(1, Relaxed);
                conns.push(Conn { fd: -1, state: DEAD, carry: Vec::new() });
            }
        }
        if !ramp_over && Instant::now() > ramp_deadline {
            ramp_over = true;
            for c in conns.iter_mut().filter(|c| c.state == PENDING) {
                close_conn(c);
                stats.pending.fetch_sub(1, Relaxed);
                stats.failed.fetch_add(1, Relaxed);
            }
        }

        let now = mono_us();
        let wait_ms = if conns.len() < n { 1 } else { (next_tick.saturating_sub(now)).div_ceil(1000).min(100) as i32 };
        // SAFETY: `events` has room for the count passed.
        let r = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, wait_ms) };
        for ev in &events[..r.max(0) as usize] {
            let idx = ev.u64 as usize;
            let c = &mut conns[idx];
            if c.state == PENDING {
                let mut err: i32 = 0;
                let mut len = 4u32;
                // SAFETY: getsockopt fills an int we own.
                unsafe { libc::getsockopt(c.fd, libc::SOL_SOCKET, libc::SO_ERROR, (&mut err as *mut i32).cast(), &mut len) };
                stats.pending.fetch_sub(1, Relaxed);
                if err != 0 {
                    if stats.failed.load(Relaxed) < 5 {
                        eprintln!("client {port}: connect failed: errno {err}");
                    }
                    close_conn(c);
                    stats.failed.fetch_add(1, Relaxed);
                    continue;
                }
                c.state = OPEN;
                let mut mod_ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: idx as u64 };
                // SAFETY: `ep` and the socket are open; `mod_ev` is ours.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, c.fd, &mut mod_ev) };
                let s = rng.below(hb_wheel.slots.len());
                hb_wheel.slots[s].push(idx as u32);
                if let Some(w) = msg_wheel.as_mut() {
                    let s = rng.below(w.slots.len());
                    w.slots[s].push(idx as u32);
                }
                stats.connected.fetch_add(1, Relaxed);
                continue;
            }
            if c.state != OPEN {
                continue;
            }
            // SAFETY: reads into a buffer we own.
            let r = unsafe { libc::read(c.fd, rbuf.as_mut_ptr().cast(), rbuf.len()) };
            if r < 0 && errno() == libc::EAGAIN {
                continue;
            }
            if r <= 0 {
                close_conn(c);
                stats.closed.fetch_add(1, Relaxed);
                continue;
            }
            let now = mono_us();
            let mut h = hists.lock().unwrap();
            frames(&mut c.carry, &rbuf[..r as usize], |f| match f[0] {
                OP_ACK => {
                    stats.acks.fetch_add(1, Relaxed);
                    h.0.record(now.saturating_sub(stamp(f)));
                }
                OP_DISPATCH => {
                    stats.received.fetch_add(1, Relaxed);
                    h.1.record(now.saturating_sub(stamp(f)));
                }
                _ => {}
            });
        }

        // Heartbeats and messages due in the ticks that have passed.
        while mono_us() >= next_tick {
            next_tick += TICK_US;
            let t = mono_us();
            for &idx in hb_wheel.next() {
                let c = &conns[idx as usize];
                if c.state == OPEN {
                    stats.heartbeats.fetch_add(1, Relaxed);
                    if !write_all(c.fd, &header(OP_HEARTBEAT, 0, t)) {
                        stats.drops.fetch_add(1, Relaxed);
                    }
                }
            }
            if let Some(w) = msg_wheel.as_mut() {
                let m = message(t);
                for &idx in w.next() {
                    let c = &conns[idx as usize];
                    if c.state == OPEN {
                        stats.sent.fetch_add(1, Relaxed);
                        if !write_all(c.fd, &m) {
                            stats.drops.fetch_add(1, Relaxed);
                        }
                    }
                }
            }
        }
    }
    // Reset, not FIN: no TIME_WAIT left behind by 600,000 closes.
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    for c in conns.iter().filter(|c| c.state != DEAD) {
        // SAFETY: setsockopt reads a struct we own; then close our descriptor.
        unsafe {
            libc::setsockopt(
                c.fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                size_of::<libc::linger>() as u32,
            );
            libc::close(c.fd);
        }
    }
}

// ----------------------------------------------------------- coordinator

struct Proc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Proc {
    fn start(args: &[String]) -> Proc {
        let mut child =
            Command::new(std::env::current_exe().unwrap()).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Proc { child, stdin, stdout }
    }
    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).unwrap();
        l.trim().to_string()
    }
}

/// Sends "stat" to every process first, then reads every answer.
fn stat_all(ps: &mut [Proc]) -> Vec<Vec<String>> {
    for p in ps.iter_mut() {
        let _ = writeln!(p.stdin, "stat");
        let _ = p.stdin.flush();
    }
    ps.iter_mut().map(|p| p.line().split_whitespace().map(String::from).collect()).collect()
}

fn col(rows: &[Vec<String>], i: usize) -> u64 {
    rows.iter().map(|r| r.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)).sum()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// utime + stime of a process, all threads, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let s = read(&format!("/proc/{pid}/stat"));
    let rest = &s[s.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    read(&format!("/proc/{pid}/status"))
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn meminfo(key: &str) -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The "TCP:" line of /proc/net/sockstat as (inuse, orphan, tw, alloc, mem pages).
fn sockstat_tcp() -> [u64; 5] {
    let s = read("/proc/net/sockstat");
    let l = s.lines().find(|l| l.starts_with("TCP:")).unwrap_or("");
    let v: Vec<u64> =
        l.split_whitespace().skip(1).collect::<Vec<_>>().chunks(2).map(|kv| kv.get(1).and_then(|v| v.parse().ok()).unwrap_or(0)).collect();
    [0, 1, 2, 3, 4].map(|i| v.get(i).copied().unwrap_or(0))
}

/// Bytes held by each slab cache (slabs × pages per slab × 4 KiB).
fn slabs() -> Vec<(String, i64)> {
    read("/proc/slabinfo")
        .lines()
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let pages: i64 = f.get(5)?.parse().ok()?;
            let slabs: i64 = f.get(14)?.parse().ok()?;
            Some((f[0].to_string(), slabs * pages * 4096))
        })
        .collect()
}

/// Machine-wide CPU from /proc/stat: (busy, softirq, total) in clock ticks.
fn machine_cpu() -> (u64, u64, u64) {
    let s = read("/proc/stat");
    let v: Vec<u64> = s.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).unwrap_or(&0) + v.get(4).unwrap_or(&0);
    (total - idle, *v.get(6).unwrap_or(&0), total)
}

fn memcg_kmem() -> Option<u64> {
    let cg = read("/proc/self/cgroup");
    let path = cg.lines().find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))?;
    read(&format!("/sys/fs/cgroup/memory{path}/memory.kmem.usage_in_bytes")).trim().parse().ok()
}

struct Snap {
    slab_kib: u64,
    sunreclaim_kib: u64,
    used_kib: u64,
    tcp: [u64; 5],
    slabs: Vec<(String, i64)>,
    kmem: Option<u64>,
    cpu: (u64, u64, u64),
}

fn snap() -> Snap {
    Snap {
        slab_kib: meminfo("Slab"),
        sunreclaim_kib: meminfo("SUnreclaim"),
        used_kib: meminfo("MemTotal") - meminfo("MemAvailable"),
        tcp: sockstat_tcp(),
        slabs: slabs(),
        kmem: memcg_kmem(),
        cpu: machine_cpu(),
    }
}

fn coordinator(args: &[String]) {
    let get = |k: &str, d: f64| -> f64 {
        args.iter().find_map(|a| a.strip_prefix(k)?.strip_prefix('=')).map_or(d, |v| v.parse().unwrap_or_else(|_| panic!("{k}={v}")))
    };
    let total = get("total", 100_000.0) as usize;
    let interval = get("interval", 41.25);
    let hold = get("hold", 90.0);
    let rate = get("rate", 10_000.0);
    let per_proc = get("per-proc", 19_000.0) as usize;
    let buf = get("buf", 4096.0) as i32;
    let srcs = get("srcs", 4.0) as usize;
    let reuseport = get("reuseport", 0.0) as u16 == 1;
    let msg = get("msg", 0.0);
    let p = total.div_ceil(per_proc);
    let tck = 100.0; // USER_HZ: /proc CPU figures are in 1/100 s
    let deadline = (total as f64 / rate + hold + 150.0) as u64;
    println!(
        "sessions_floor: {total} sessions over {p} server + {p} client processes; heartbeat every {interval} s{}; hold {hold} s; {rate}/s new; \
         SO_RCVBUF/SO_SNDBUF {}; {} source addresses per client{}",
        if msg > 0.0 { format!(", a {MSG} B message every {msg} s relayed to the partner") } else { String::new() },
        if buf > 0 { buf.to_string() } else { "kernel default".into() },
        srcs,
        if reuseport { "; one SO_REUSEPORT port" } else { "" }
    );
    let base = snap();
    let t0 = Instant::now();

    let mut servers: Vec<Proc> = Vec::new();
    let mut ports = Vec::new();
    let mut shared_port = 0u16;
    for _ in 0..p {
        let mut s = Proc::start(&[
            "server".into(),
            buf.to_string(),
            shared_port.to_string(),
            u8::from(reuseport).to_string(),
            deadline.to_string(),
        ]);
        let port: u16 = s.line().parse().expect("server port");
        if reuseport && shared_port == 0 {
            shared_port = port;
        }
        ports.push(port);
        servers.push(s);
    }
    let shares: Vec<usize> = (0..p).map(|i| total / p + usize::from(i < total % p)).collect();
    let mut clients: Vec<Proc> = (0..p)
        .map(|k| {
            let addrs: Vec<String> = (0..srcs).map(|j| format!("127.1.{k}.{}", j + 1)).collect();
            Proc::start(&[
                "client".into(),
                ports[k].to_string(),
                if addrs.is_empty() { "-".into() } else { addrs.join(",") },
                shares[k].to_string(),
                (rate / p as f64).to_string(),
                ((interval * 1e6) as u64).to_string(),
                ((msg * 1e6) as u64).to_string(),
                buf.to_string(),
                deadline.to_string(),
            ])
        })
        .collect();

    // Ramp: wait until every client has settled every connection.
    let ramp_limit = Duration::from_secs_f64(total as f64 / rate + 60.0);
    let (mut connected, mut failed);
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let c = stat_all(&mut clients);
        (connected, failed) = (col(&c, 0), col(&c, 1));
        let pending = col(&c, 2);
        let (tcp, sv) = (sockstat_tcp(), stat_all(&mut servers));
        println!(
            "  {:>5.0} s: {connected} connected, {failed} failed, {pending} pending; servers accepted {}; TCP inuse {} mem {} pages",
            t0.elapsed().as_secs_f64(),
            col(&sv, 0),
            tcp[0],
            tcp[4]
        );
        if connected + failed >= total as u64 || t0.elapsed() > ramp_limit {
            break;
        }
    }
    let ramp_s = t0.elapsed().as_secs_f64();
    let pids_s: Vec<u32> = servers.iter().map(|s| s.child.id()).collect();
    let pids_c: Vec<u32> = clients.iter().map(|s| s.child.id()).collect();
    let sum_cpu = |pids: &[u32]| pids.iter().map(|&p| cpu_ticks(p)).sum::<u64>();
    let ramp_cpu = (sum_cpu(&pids_s), sum_cpu(&pids_c), machine_cpu());
    println!(
        "ramp CPU per connection (heartbeats of the connections already open included): servers {:.1} µs, clients {:.1} µs, machine-wide busy {:.1} µs (softirq {:.1} µs)",
        ramp_cpu.0 as f64 * 1e4 / connected.max(1) as f64,
        ramp_cpu.1 as f64 * 1e4 / connected.max(1) as f64,
        (ramp_cpu.2.0 - base.cpu.0) as f64 * 1e4 / connected.max(1) as f64,
        (ramp_cpu.2.1 - base.cpu.1) as f64 * 1e4 / connected.max(1) as f64
    );
    std::thread::sleep(Duration::from_secs(5)); // let the ramp's last work finish

    let (sv0, cl0) = (stat_all(&mut servers), stat_all(&mut clients)); // also resets the clients' histograms
    let (cs0, cc0, a) = (sum_cpu(&pids_s), sum_cpu(&pids_c), snap());
    let h0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(hold));
    let (cs1, cc1, b) = (sum_cpu(&pids_s), sum_cpu(&pids_c), snap());
    let held = h0.elapsed().as_secs_f64();
    let (sv1, cl1) = (stat_all(&mut servers), stat_all(&mut clients));
    let rss_s: u64 = pids_s.iter().map(|&p| rss_kib(p)).sum();
    let rss_c: u64 = pids_c.iter().map(|&p| rss_kib(p)).sum();
    let rss_me = rss_kib(std::process::id());

    let (mut hb, mut mh) = (Hist::default(), Hist::default());
    for r in &cl1 {
        hb.merge(r.get(9).map_or("-", |s| s.as_str()));
        mh.merge(r.get(10).map_or("-", |s| s.as_str()));
    }
    let d = |x: &[Vec<String>], y: &[Vec<String>], i: usize| col(y, i) - col(x, i);
    let heartbeats = d(&sv0, &sv1, 2);
    let relayed = d(&sv0, &sv1, 3);
    let acks = d(&cl0, &cl1, 5);
    let hb_sent = d(&cl0, &cl1, 4);
    let (drops_s, drops_c) = (d(&sv0, &sv1, 4), d(&cl0, &cl1, 8));
    let closed = col(&cl1, 3) + col(&sv1, 1);
    let n = connected.max(1) as f64;
    let est = col(&sv1, 0) - col(&sv1, 1);
    let srv_us = (cs1 - cs0) as f64 / tck * 1e6;
    let cli_us = (cc1 - cc0) as f64 / tck * 1e6;
    let (busy, soft, all) = (b.cpu.0 - a.cpu.0, b.cpu.1 - a.cpu.1, b.cpu.2 - a.cpu.2);
    let cores = all as f64 / tck / held;
    let events = (heartbeats + relayed).max(1) as f64;
    let per_pair = |kib_a: u64, kib_base: u64| (kib_a as f64 - kib_base as f64) * 1024.0 / n;

    println!("ramp: {connected} established, {failed} failed in {ramp_s:.1} s; servers hold {est}; {closed} closed since");
    println!(
        "kernel, per connection pair (2 sockets), hold end vs before start: Slab {:.0} B (SUnreclaim {:.0} B), TCP buffer mem {:.0} B (sockstat: {} pages, was {}), \
         MemTotal-MemAvailable {:.0} B (includes RSS){}",
        per_pair(b.slab_kib, base.slab_kib),
        per_pair(b.sunreclaim_kib, base.sunreclaim_kib),
        (b.tcp[4] as f64 - base.tcp[4] as f64) * 4096.0 / n,
        b.tcp[4],
        base.tcp[4],
        per_pair(b.used_kib, base.used_kib),
        match (b.kmem, base.kmem) {
            (Some(x), Some(y)) => format!(", memcg kmem {:.0} B", (x as f64 - y as f64) / n),
            _ => String::new(),
        }
    );
    let mut caches: Vec<(String, i64)> = b
        .slabs
        .iter()
        .map(|(name, bytes)| (name.clone(), bytes - base.slabs.iter().find(|(n2, _)| n2 == name).map_or(0, |x| x.1)))
        .filter(|x| x.1.abs() as f64 / n >= 8.0)
        .collect();
    caches.sort_by_key(|x| -x.1);
    println!(
        "  slab caches per pair: {}",
        caches.iter().map(|(name, bytes)| format!("{name} {:.0}", *bytes as f64 / n)).collect::<Vec<_>>().join(", ")
    );
    println!("  sockstat TCP at hold end: inuse {} orphan {} tw {} alloc {} mem {}", b.tcp[0], b.tcp[1], b.tcp[2], b.tcp[3], b.tcp[4]);
    println!(
        "RSS: servers {:.1} MiB ({:.0} B per session), clients {:.1} MiB ({:.0} B per session), coordinator {:.1} MiB",
        rss_s as f64 / 1024.0,
        rss_s as f64 * 1024.0 / n,
        rss_c as f64 / 1024.0,
        rss_c as f64 * 1024.0 / n,
        rss_me as f64 / 1024.0
    );
    println!(
        "hold {held:.1} s: {heartbeats} heartbeats answered ({:.0}/s), {hb_sent} sent, {acks} acks read; {relayed} messages relayed ({:.0}/s); writes refused (socket buffer full): servers {drops_s}, clients {drops_c}",
        heartbeats as f64 / held,
        relayed as f64 / held
    );
    println!(
        "CPU over the hold (process utime+stime): servers {:.2} s = {:.2} µs per heartbeat{}, {:.2}% of the {:.0} cores; clients {:.2} s = {:.2} µs per heartbeat",
        srv_us / 1e6,
        srv_us / events,
        if relayed > 0 { " or message" } else { "" },
        srv_us / 1e6 / held / cores * 100.0,
        cores,
        cli_us / 1e6,
        cli_us / events
    );
    println!(
        "CPU, machine-wide (/proc/stat, includes the other users of the box): busy {:.2} s ({:.1}% of {:.0} cores), of it softirq {:.2} s = {:.2} µs per heartbeat{}",
        busy as f64 / tck,
        busy as f64 / tck / held / cores * 100.0,
        cores,
        soft as f64 / tck,
        soft as f64 / tck * 1e6 / events,
        if relayed > 0 { " or message" } else { "" }
    );
    let q = |h: &Hist, x: f64| h.quantile(x) as f64 / 1e3;
    let quantiles = |what: &str, h: &Hist| {
        println!(
            "{what}: {} samples, p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
            h.count(),
            q(h, 0.5),
            q(h, 0.99),
            q(h, 0.999),
            q(h, 1.0)
        );
    };
    quantiles("heartbeat round trip", &hb);
    if mh.count() > 0 {
        quantiles("message end to end", &mh);
    }
    let hb_rate_41 = total as f64 / 41.25;
    let total_us = (srv_us + cli_us + soft as f64 / tck * 1e6) / events;
    println!(
        "RESULT total={total} procs={} established={connected} failed={failed} slab_per_pair={:.0} tcpmem_per_pair={:.0} rss_server_mib={:.1} rss_client_mib={:.1} \
         srv_us_per_hb={:.2} cli_us_per_hb={:.2} softirq_us_per_hb={:.2} all_us_per_hb={:.2} srv_pct_2cores_at_41s={:.2} all_pct_2cores_at_41s={:.2} srv_pct_measured={:.2} all_pct_measured={:.2} rtt_p50_ms={:.3} rtt_p99_ms={:.3}",
        2 * p,
        per_pair(b.slab_kib, base.slab_kib),
        (b.tcp[4] as f64 - base.tcp[4] as f64) * 4096.0 / n,
        rss_s as f64 / 1024.0,
        rss_c as f64 / 1024.0,
        srv_us / events,
        cli_us / events,
        soft as f64 / tck * 1e6 / events,
        total_us,
        srv_us / events * hb_rate_41 / 1e6 / 2.0 * 100.0,
        total_us * hb_rate_41 / 1e6 / 2.0 * 100.0,
        srv_us / 1e6 / held / cores * 100.0,
        total_us * events / 1e6 / held / cores * 100.0,
        q(&hb, 0.5),
        q(&hb, 0.99)
    );

    // Stop: clients reset their connections, then the servers see them go.
    for c in &mut clients {
        let _ = writeln!(c.stdin, "quit");
    }
    for c in &mut clients {
        let _ = c.child.wait();
    }
    for s in &mut servers {
        let _ = writeln!(s.stdin, "quit");
    }
    for s in &mut servers {
        let _ = s.child.wait();
    }
    std::thread::sleep(Duration::from_secs(2));
    let after = snap();
    println!(
        "after exit: Slab {:+.1} MiB, SUnreclaim {:+.1} MiB against before start; TCP inuse {} mem {} pages",
        (after.slab_kib as f64 - base.slab_kib as f64) / 1024.0,
        (after.sunreclaim_kib as f64 - base.sunreclaim_kib as f64) / 1024.0,
        after.tcp[0],
        after.tcp[4]
    );
}
