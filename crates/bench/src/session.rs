//! One simulated user's gateway session, as a real client runs it: HELLO,
//! IDENTIFY (or RESUME after a drop), heartbeats with Discord's jitter and ACK
//! tracking (a missing ACK is a zombie connection: reconnect and resume),
//! decoding of every message received, and the close-code rules of
//! discord.py/discord.js (4004 and 4010-4014 are fatal, the rest reconnect).
//!
//! A session is one task that owns its socket. While idle it holds the
//! socket, a few ids and a timer: reads go through a per-thread buffer.

use std::borrow::Cow;
use std::rc::Rc;
use std::time::{Duration, Instant};

use protocol::compress::{Decompressor, Transport};
use protocol::gateway::{op, Intents};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::watch;

use crate::worker::{now_us, Control, RecordUs, Worker};
use crate::ws::{tcp_connect, Event, WsConn};

/// Time allowed for TCP connect plus the WebSocket upgrade.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed from the upgrade until READY (or RESUMED) arrives.
const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
struct Frame<'a> {
    op: u8,
    #[serde(default)]
    s: Option<u64>,
    #[serde(default, borrow)]
    t: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    d: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Hello {
    heartbeat_interval: u64,
}

#[derive(Deserialize)]
struct Ready {
    session_id: String,
    #[serde(default)]
    guilds: Vec<ReadyGuild>,
}

#[derive(Deserialize)]
struct ReadyGuild {
    #[serde(default)]
    unavailable: Option<bool>,
}

#[derive(Deserialize)]
struct MessageCreate<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
}

/// Why a connection ended and what to do next.
enum Next {
    /// Reconnect after `delay`; RESUME if the session is still valid.
    Reconnect {
        delay: Duration,
    },
    /// The server refused an IDENTIFY for load (op 9 true before READY):
    /// try again after `delay`; not a failure of the session.
    Busy {
        delay: Duration,
    },
    /// Discard the session (op 9 false) and IDENTIFY again after `delay`.
    Reidentify {
        delay: Duration,
    },
    /// A close code that clients treat as fatal.
    Fatal,
    Finish,
}

/// Per-session state that outlives a connection.
struct State {
    user: u32,
    session_id: Option<String>,
    seq: Option<u64>,
    /// Whether this user's first session has been fully ready (its
    /// `ready_at` is recorded) and whether it is ready right now.
    ever_ready: bool,
    live: bool,
    /// The Drop generation this session last reacted to, and when.
    drop_gen: u64,
    drop_at: Option<Instant>,
}

pub async fn run(w: Rc<Worker>, user: u32, nth: usize, mut ctl: watch::Receiver<Control>) {
    let target = &w.cfg.gateways[nth % w.cfg.gateways.len()];
    let source = (!w.cfg.sources.is_empty()).then(|| w.cfg.sources[nth % w.cfg.sources.len()]);
    let mut st = State { user, session_id: None, seq: None, ever_ready: false, live: false, drop_gen: 0, drop_at: None };
    if let Control::Drop(g) = *ctl.borrow_and_update() {
        st.drop_gen = g;
    }
    let mut failures = 0u32;
    loop {
        if matches!(*ctl.borrow(), Control::Finish) {
            break;
        }
        let t0 = Instant::now();
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let tcp = tcp_connect(target.addr, source).await.map_err(crate::ws::WsError::Io)?;
            WsConn::handshake(tcp, &target.host, &target.path_query).await
        })
        .await;
        let conn = match conn {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                failures += 1;
                w.note_connect_failure(&e.to_string());
                if failures >= w.cfg.max_attempts {
                    give_up(&w, &mut st);
                    return;
                }
                tokio::time::sleep(backoff(failures)).await;
                continue;
            }
            Err(_) => {
                failures += 1;
                w.note_connect_failure("connect timeout");
                if failures >= w.cfg.max_attempts {
                    give_up(&w, &mut st);
                    return;
                }
                tokio::time::sleep(backoff(failures)).await;
                continue;
            }
        };
        w.stats.borrow_mut().connect_us.record_us(t0.elapsed());
        let next = drive(&w, &mut st, conn, &mut ctl, t0).await;
        if st.live {
            st.live = false;
            w.stats.borrow_mut().counters.ready -= 1;
        }
        match next {
            Next::Finish => break,
            Next::Fatal => {
                give_up(&w, &mut st);
                return;
            }
            Next::Reconnect { delay } => {
                failures = if st.session_id.is_some() { 0 } else { failures + 1 };
                tokio::time::sleep(delay).await;
            }
            Next::Busy { delay } => tokio::time::sleep(delay).await,
            Next::Reidentify { delay } => {
                st.session_id = None;
                st.seq = None;
                if st.ever_ready {
                    w.session_broken(st.user);
                }
                w.stats.borrow_mut().counters.reidentifies += 1;
                tokio::time::sleep(delay).await;
            }
        }
        if failures >= w.cfg.max_attempts {
            give_up(&w, &mut st);
            return;
        }
    }
}

fn give_up(w: &Worker, st: &mut State) {
    w.stats.borrow_mut().counters.failed += 1;
    w.session_broken(st.user);
    w.mark_failed(st.user);
}

fn backoff(failures: u32) -> Duration {
    let base = 100u64 << failures.min(6);
    Duration::from_millis(base.min(5_000) + rand::random::<u64>() % 100)
}

/// Discord's advice after op 9: wait 1-5 s before identifying again.
fn identify_delay() -> Duration {
    Duration::from_millis(1_000 + rand::random::<u64>() % 4_000)
}

async fn drive(w: &Rc<Worker>, st: &mut State, mut conn: WsConn, ctl: &mut watch::Receiver<Control>, t0: Instant) -> Next {
    let mut decomp = match Decompressor::new(w.transport) {
        Ok(d) => d,
        Err(_) => return Next::Fatal,
    };
    let mut events = Vec::new();
    let mut plain = Vec::new();
    // (interval, next beat) once HELLO arrived; `acked` tracks the last beat.
    let mut beat: Option<(Duration, tokio::time::Instant)> = None;
    let mut acked = true;
    let mut pending_guilds: Option<usize> = None;
    let deadline = tokio::time::Instant::now() + IDENTIFY_TIMEOUT;
    loop {
        let beat_at = beat.map(|(_, at)| at).unwrap_or(deadline);
        tokio::select! {
            biased;
            r = ctl.changed() => {
                if r.is_err() {
                    return Next::Finish;
                }
                let c = *ctl.borrow_and_update();
                match c {
                    Control::Finish => {
                        conn.close(1000).await;
                        return Next::Finish;
                    }
                    Control::Drop(g) if g != st.drop_gen => {
                        st.drop_gen = g;
                        if st.live {
                            st.drop_at = Some(Instant::now());
                        }
                        w.stats.borrow_mut().counters.drops_seen += 1;
                        // Abrupt: the socket goes away without a close frame.
                        drop(conn);
                        return Next::Reconnect { delay: Duration::ZERO };
                    }
                    _ => {}
                }
            }
            _ = tokio::time::sleep_until(beat_at), if beat.is_some() => {
                if !acked {
                    w.stats.borrow_mut().counters.zombies += 1;
                    conn.close(4000).await;
                    return Next::Reconnect { delay: Duration::ZERO };
                }
                if send_heartbeat(&mut conn, st.seq).await.is_err() {
                    return Next::Reconnect { delay: Duration::ZERO };
                }
                acked = false;
                if let Some((iv, at)) = beat.as_mut() {
                    *at += *iv;
                }
            }
            _ = tokio::time::sleep_until(deadline), if !st.live => {
                w.note_connect_failure("no READY in time");
                conn.close(4000).await;
                return Next::Reconnect { delay: backoff(1) };
            }
            r = conn.readable() => {
                if r.is_err() {
                    return Next::Reconnect { delay: Duration::ZERO };
                }
                let open = match conn.read_events(&mut events) {
                    Ok(open) => open,
                    Err(_) => {
                        w.stats.borrow_mut().counters.decode_errors += 1;
                        return Next::Reconnect { delay: Duration::ZERO };
                    }
                };
                for ev in events.drain(..) {
                    let payload = match ev {
                        Event::Close(code) => return on_close(w, code),
                        Event::Message { binary, payload } => match (&mut decomp, binary) {
                            (Some(d), true) => {
                                plain.clear();
                                if d.decompress(&payload, &mut plain).is_err() {
                                    w.stats.borrow_mut().counters.decode_errors += 1;
                                    return Next::Reconnect { delay: Duration::ZERO };
                                }
                                std::mem::take(&mut plain)
                            }
                            _ => payload,
                        },
                    };
                    let Ok(f) = serde_json::from_slice::<Frame>(&payload) else {
                        w.stats.borrow_mut().counters.decode_errors += 1;
                        continue;
                    };
                    match f.op {
                        op::HELLO => {
                            let Some(h) = f.d.and_then(|d| serde_json::from_str::<Hello>(d.get()).ok()) else {
                                w.stats.borrow_mut().counters.decode_errors += 1;
                                return Next::Reconnect { delay: backoff(1) };
                            };
                            let iv = Duration::from_millis(h.heartbeat_interval.max(100));
                            // Discord's jitter: the first beat after interval * random[0, 1).
                            let first = iv.mul_f64(rand::random::<f64>());
                            beat = Some((iv, tokio::time::Instant::now() + first));
                            let hello_sent = match &st.session_id {
                                Some(sid) => send_resume(&mut conn, &w.token(st.user), sid, st.seq).await,
                                None => send_identify(&mut conn, &w.token(st.user), w.cfg.intents).await,
                            };
                            if hello_sent.is_err() {
                                return Next::Reconnect { delay: Duration::ZERO };
                            }
                        }
                        op::HEARTBEAT_ACK => acked = true,
                        op::HEARTBEAT if send_heartbeat(&mut conn, st.seq).await.is_err() => {
                            return Next::Reconnect { delay: Duration::ZERO };
                        }
                        op::RECONNECT => {
                            conn.close(4000).await;
                            return Next::Reconnect { delay: Duration::ZERO };
                        }
                        op::INVALID_SESSION => {
                            w.stats.borrow_mut().counters.invalid_sessions += 1;
                            let resumable = f.d.is_some_and(|d| d.get() == "true");
                            conn.close(4000).await;
                            return if resumable && st.session_id.is_some() {
                                Next::Reconnect { delay: Duration::from_millis(200 + rand::random::<u64>() % 800) }
                            } else if resumable {
                                // Identify was refused for load: not the session's fault.
                                Next::Busy { delay: identify_delay() }
                            } else {
                                Next::Reidentify { delay: identify_delay() }
                            };
                        }
                        op::DISPATCH => {
                            if let Some(s) = f.s {
                                if st.seq.is_some_and(|last| s <= last) {
                                    // Already seen: a replay overlap or a server bug.
                                    w.stats.borrow_mut().counters.duplicates_seq += 1;
                                    continue;
                                }
                                st.seq = Some(s);
                            }
                            let name = f.t.as_deref().unwrap_or("");
                            let d = f.d.map(RawValue::get).unwrap_or("null");
                            match name {
                                "MESSAGE_CREATE" => match serde_json::from_str::<MessageCreate>(d) {
                                    Ok(m) => w.on_message(st.user, &m.content),
                                    Err(_) => w.stats.borrow_mut().counters.decode_errors += 1,
                                },
                                "READY" => {
                                    let Ok(r) = serde_json::from_str::<Ready>(d) else {
                                        w.stats.borrow_mut().counters.decode_errors += 1;
                                        return Next::Reconnect { delay: backoff(1) };
                                    };
                                    st.session_id = Some(r.session_id);
                                    // Without the GUILDS intent no GUILD_CREATE follows: READY is the end.
                                    let pending = if w.cfg.intents & Intents::GUILDS == 0 {
                                        0
                                    } else {
                                        r.guilds.iter().filter(|g| g.unavailable.unwrap_or(true)).count()
                                    };
                                    pending_guilds = Some(pending);
                                    if pending == 0 {
                                        became_ready(w, st, t0, false);
                                    }
                                }
                                "GUILD_CREATE" => {
                                    if let Some(p) = pending_guilds.as_mut() {
                                        if *p > 0 {
                                            *p -= 1;
                                            if *p == 0 {
                                                became_ready(w, st, t0, false);
                                            }
                                        }
                                    }
                                }
                                "RESUMED" => {
                                    w.stats.borrow_mut().counters.resumes += 1;
                                    became_ready(w, st, t0, true);
                                }
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                if !open {
                    return Next::Reconnect { delay: Duration::ZERO };
                }
            }
        }
    }
}

fn became_ready(w: &Worker, st: &mut State, t0: Instant, resumed: bool) {
    if st.live {
        return;
    }
    st.live = true;
    let mut s = w.stats.borrow_mut();
    s.counters.ready += 1;
    if !resumed {
        s.ready_us.record_us(t0.elapsed());
    }
    if let Some(at) = st.drop_at.take() {
        s.counters.recovered += 1;
        s.storm_us.record_us(at.elapsed());
        s.storm_last = s.storm_last.max(at.elapsed());
    }
    drop(s);
    if !st.ever_ready {
        st.ever_ready = true;
        w.session_ready(st.user, now_us());
    } else if !resumed {
        // A fresh session after the first was lost: eligible again from now.
        w.session_ready(st.user, now_us());
    }
}

fn on_close(w: &Worker, code: Option<u16>) -> Next {
    match code {
        Some(4004 | 4010..=4014) => {
            w.note_connect_failure(&format!("fatal close code {}", code.unwrap_or(0)));
            Next::Fatal
        }
        // Invalid seq: the session cannot continue (discord.js re-identifies).
        Some(4007) => Next::Reidentify { delay: Duration::ZERO },
        _ => Next::Reconnect { delay: Duration::ZERO },
    }
}

async fn send_heartbeat(conn: &mut WsConn, seq: Option<u64>) -> std::io::Result<()> {
    let msg = match seq {
        Some(s) => format!("{{\"op\":1,\"d\":{s}}}"),
        None => "{\"op\":1,\"d\":null}".to_owned(),
    };
    conn.send_text(msg.as_bytes()).await
}

async fn send_identify(conn: &mut WsConn, token: &str, intents: u64) -> std::io::Result<()> {
    let msg = serde_json::json!({
        "op": op::IDENTIFY,
        "d": {
            "token": token,
            "intents": intents,
            "properties": {"os": "linux", "browser": "throng-bench", "device": "throng-bench"},
            "large_threshold": 50,
        }
    });
    conn.send_text(msg.to_string().as_bytes()).await
}

async fn send_resume(conn: &mut WsConn, token: &str, session_id: &str, seq: Option<u64>) -> std::io::Result<()> {
    let msg = serde_json::json!({"op": op::RESUME, "d": {"token": token, "session_id": session_id, "seq": seq}});
    conn.send_text(msg.to_string().as_bytes()).await
}

/// Which transport compression the gateway URL asks for.
pub fn transport_of(path_query: &str) -> Transport {
    path_query.split(['?', '&']).find_map(|kv| kv.strip_prefix("compress=")).and_then(Transport::parse).unwrap_or(Transport::None)
}
