//! One simulated user's gateway session, as a real client runs it: HELLO,
//! IDENTIFY (or RESUME after a drop), heartbeats with Discord's jitter and ACK
//! tracking (a missing ACK is a zombie connection: reconnect and resume),
//! decoding of every message received, and the close-code rules of
//! discord.py/discord.js (4004 and 4010-4014 are fatal, the rest reconnect).
//!
//! A session is one task that owns its socket. While idle it holds the
//! socket, a few ids and a timer: reads go through a per-thread buffer.
//!
//! For `slow`, a session can be told to stall: it then neither reads its
//! socket nor heartbeats (the kernel buffers fill, the server sees a slow
//! consumer). Told to read again, it reads what the socket still holds until
//! the socket ends (close frame, EOF or reset; if the server never closes it,
//! the client drops it after [`CATCH_UP`]) and then RESUMEs.

use std::borrow::Cow;
use std::rc::Rc;
use std::time::{Duration, Instant};

use protocol::compress::{Decompressor, Transport};
use protocol::gateway::{op, Intents};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{watch, Notify};

use crate::hub::Beat;
use crate::worker::{now_us, Control, RecordUs, StallPhase, Worker};
use crate::ws::{tcp_connect, Event, WsConn};

/// Time allowed for TCP connect plus the WebSocket upgrade.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed from the upgrade until READY (or RESUMED) arrives.
const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(60);
/// A stalled session reading again drops a socket the server has not closed
/// after this long, and RESUMEs.
pub const CATCH_UP: Duration = Duration::from_secs(5);

/// One gateway payload. A MESSAGE_CREATE whose `t` comes before its `d`
/// (throng writes `t` first, as Discord does) has its content read in the
/// same pass, so the hot path scans each message once; otherwise `d` is
/// kept raw and read afterwards.
pub(crate) struct Frame<'a> {
    pub op: u8,
    s: Option<u64>,
    /// Event names are plain ASCII: borrowed, never escaped.
    t: Option<&'a str>,
    d: Option<&'a RawValue>,
    content: Option<Cow<'a, str>>,
}

impl<'a> Frame<'a> {
    /// The content of a MESSAGE_CREATE (None if `d` is not one).
    fn message_content(&self) -> Option<Cow<'a, str>> {
        match (&self.content, self.d) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(d)) => serde_json::from_str::<MessageCreate>(d.get()).ok().map(|m| m.content),
            (None, None) => None,
        }
    }
}

/// A payload's key, read without allocating.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Op,
    S,
    T,
    D,
    #[serde(other)]
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Frame<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Frame<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a gateway payload")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Frame<'a>, A::Error> {
                let (mut op, mut s, mut t, mut d, mut content) = (None, None, None, None, None);
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Op => op = Some(map.next_value::<u8>()?),
                        Key::S => s = map.next_value()?,
                        Key::T => t = map.next_value()?,
                        Key::D if t == Some("MESSAGE_CREATE") => content = Some(map.next_value::<MessageCreate<'de>>()?.content),
                        Key::D => d = map.next_value()?,
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let op = op.ok_or_else(|| serde::de::Error::missing_field("op"))?;
                Ok(Frame { op, s, t, d, content })
            }
        }
        de.deserialize_map(V(std::marker::PhantomData))
    }
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

/// The first `"key":` value in `json` (a number, or a string with its
/// quotes), found by scanning. A GUILD_CREATE's first `"id"` is the
/// guild's (throng writes it first) and `"member_count"` occurs once.
fn json_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let rest = json[json.find(&pat)? + pat.len()..].trim_start();
    let end = if let Some(s) = rest.strip_prefix('"') { s.find('"')? + 2 } else { rest.find([',', '}'])? };
    Some(&rest[..end])
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
    /// How the last connection ended, and the close code if a close frame came.
    end: (Cow<'static, str>, Option<u16>),
}

pub async fn run(w: Rc<Worker>, user: u32, nth: usize, mut ctl: watch::Receiver<Control>) {
    let target = &w.cfg.gateways[nth % w.cfg.gateways.len()];
    // The source address varies apart from the gateway: with `nth % sources`
    // (8 sources, 8 gateways) each source always met the same gateway, so
    // each (source, destination) pair had 1/8 of all connections, and past
    // ~112,000 (8 x the ~14,000 ports of connect's half of the ephemeral
    // range) the kernel's port search in connect() took over a core.
    let source = (!w.cfg.sources.is_empty()).then(|| w.cfg.sources[(nth / w.cfg.gateways.len()) % w.cfg.sources.len()]);
    let mut st = State {
        user,
        session_id: None,
        seq: None,
        ever_ready: false,
        live: false,
        drop_gen: 0,
        drop_at: None,
        end: (Cow::Borrowed(""), None),
    };
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
        st.end = (Cow::Borrowed("ended by the client"), None);
        let next = drive(&w, &mut st, conn, &mut ctl, t0).await;
        if st.live {
            st.live = false;
            w.stats.borrow_mut().counters.ready -= 1;
        }
        if !matches!(next, Next::Finish) {
            w.track_conn_end(st.user, &st.end.0, st.end.1);
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
    // `--open-home-only`: ready once a heartbeat sent after the last
    // GUILD_CREATE is acknowledged, so the op 14 sent before it has reached
    // the server, and a message sent from then on finds the guild open.
    let mut ready_on_ack = false;
    let deadline = tokio::time::Instant::now() + IDENTIFY_TIMEOUT;
    // Slow consumer: not reading at all, or reading again until `catch_up`.
    let mut stalled = false;
    let mut catch_up: Option<tokio::time::Instant> = None;
    // The control watch and the heartbeat timer live across iterations: a
    // loop turn (one per socket read) then registers neither a watch waiter
    // nor a timer entry anew, which was a good part of the generator's CPU
    // per received message.
    let mut ctl_wait = Box::pin(control_changed(ctl.clone()));
    let mut beat_at = deadline;
    let mut beat_sleep = std::pin::pin!(tokio::time::sleep_until(beat_at));
    // Set if the hub refused this connection (then this task reads it).
    let mut hub_refused = false;
    let wake = Rc::new(Notify::new());
    loop {
        if w.cfg.shared_reader && st.live && !stalled && catch_up.is_none() && decomp.is_none() && !hub_refused && !conn.has_frame() {
            match w.hub.insert(conn, st.user, st.seq, acked, wake.clone()) {
                Ok(key) => match in_hub(w, st, key, &wake, &mut acked, ctl, &mut beat).await {
                    Ok(c) => conn = c,
                    Err(next) => return next,
                },
                Err(Ok(c)) => {
                    conn = c;
                    hub_refused = true;
                }
                Err(Err(e)) => {
                    st.end = (Cow::Owned(io_end(&e)), None);
                    return Next::Reconnect { delay: Duration::ZERO };
                }
            }
        }
        let at = beat.map(|(_, at)| at).unwrap_or(deadline);
        if at != beat_at {
            beat_at = at;
            beat_sleep.as_mut().reset(on_tick(at));
        }
        tokio::select! {
            biased;
            (ok, rx) = &mut ctl_wait => {
                if !ok {
                    return Next::Finish;
                }
                ctl_wait = Box::pin(control_changed(rx));
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
                    Control::Poke(_) => match w.stall_phase(st.user) {
                        StallPhase::Stalled if !stalled && st.live => stalled = true,
                        StallPhase::Reading if stalled => {
                            stalled = false;
                            w.track_unstalled(st.user, conn.queued_bytes());
                            // Whatever was owed before the stall is forgiven: read first.
                            acked = true;
                            if let Some((iv, at)) = beat.as_mut() {
                                *at = tokio::time::Instant::now() + *iv;
                            }
                            catch_up = Some(tokio::time::Instant::now() + CATCH_UP);
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
            _ = tokio::time::sleep_until(catch_up.unwrap_or(deadline)), if catch_up.is_some() => {
                st.end = (Cow::Owned(format!("still open {} s after reading again (dropped by the client)", CATCH_UP.as_secs())), None);
                drop(conn);
                return Next::Reconnect { delay: Duration::ZERO };
            }
            _ = &mut beat_sleep, if beat.is_some() && !stalled => {
                if !acked {
                    w.stats.borrow_mut().counters.zombies += 1;
                    st.end = (Cow::Borrowed("no heartbeat ACK (closed by the client)"), None);
                    conn.close(4000).await;
                    return Next::Reconnect { delay: Duration::ZERO };
                }
                if send_heartbeat(&mut conn, st.seq).await.is_err() {
                    st.end = (Cow::Borrowed("heartbeat write failed"), None);
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
            r = conn.readable(), if !stalled => {
                if let Err(e) = r {
                    st.end = (Cow::Owned(io_end(&e)), None);
                    return Next::Reconnect { delay: Duration::ZERO };
                }
                let open = match conn.read_events(&mut events) {
                    Ok(open) => open,
                    Err(crate::ws::WsError::Io(e)) => {
                        // Messages read before the error still count.
                        st.end = (Cow::Owned(io_end(&e)), None);
                        for ev in events.drain(..) {
                            match ev {
                                Event::Message { binary: false, payload } => on_text(w, st, &payload),
                                Event::Close(code) => {
                                    st.end = (Cow::Owned(format!("{} (then {})", close_label(code), io_end(&e))), code);
                                    break;
                                }
                                Event::Message { .. } => {}
                            }
                        }
                        return Next::Reconnect { delay: Duration::ZERO };
                    }
                    Err(e) => {
                        st.end = (Cow::Owned(e.to_string()), None);
                        w.stats.borrow_mut().counters.decode_errors += 1;
                        return Next::Reconnect { delay: Duration::ZERO };
                    }
                };
                for ev in events.drain(..) {
                    let payload = match ev {
                        Event::Close(code) => {
                            st.end = (Cow::Owned(close_label(code)), code);
                            return on_close(w, code);
                        }
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
                        op::HEARTBEAT_ACK => {
                            acked = true;
                            if std::mem::take(&mut ready_on_ack) {
                                became_ready(w, st, t0, false);
                            }
                        }
                        op::HEARTBEAT if send_heartbeat(&mut conn, st.seq).await.is_err() => {
                            st.end = (Cow::Borrowed("heartbeat write failed"), None);
                            return Next::Reconnect { delay: Duration::ZERO };
                        }
                        op::RECONNECT => {
                            st.end = (Cow::Borrowed("op 7 RECONNECT"), None);
                            conn.close(4000).await;
                            return Next::Reconnect { delay: Duration::ZERO };
                        }
                        op::INVALID_SESSION => {
                            w.stats.borrow_mut().counters.invalid_sessions += 1;
                            let resumable = f.d.is_some_and(|d| d.get() == "true");
                            st.end = (Cow::Borrowed("op 9 INVALID_SESSION"), None);
                            w.track_invalid(st.user, resumable && st.session_id.is_some());
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
                            if !on_dispatch(w, st.user, &mut st.seq, &f) {
                                continue;
                            }
                            let name = f.t.unwrap_or("");
                            let d = f.d.map(RawValue::get).unwrap_or("null");
                            match name {
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
                                    // Read by scanning, not parsing: a GUILD_CREATE
                                    // lists the online members, and the ramp reads
                                    // thousands a second.
                                    if let Some(id) = json_field(d, "id").map(|v| v.trim_matches('"')) {
                                        let open = if w.cfg.open_home_only {
                                            w.home_guild(st.user) == Some(id)
                                        } else {
                                            json_field(d, "member_count").and_then(|v| v.parse::<u64>().ok()).is_some_and(|n| n > w.cfg.open_above)
                                        };
                                        if open && send_open(&mut conn, id).await.is_err() {
                                            return Next::Reconnect { delay: Duration::ZERO };
                                        }
                                    }
                                    if let Some(p) = pending_guilds.as_mut() {
                                        if *p > 0 {
                                            *p -= 1;
                                            if *p == 0 && w.cfg.open_home_only {
                                                if send_heartbeat(&mut conn, st.seq).await.is_err() {
                                                    return Next::Reconnect { delay: Duration::ZERO };
                                                }
                                                ready_on_ack = true;
                                            } else if *p == 0 {
                                                became_ready(w, st, t0, false);
                                            }
                                        }
                                    }
                                }
                                "RESUMED" => {
                                    w.stats.borrow_mut().counters.resumes += 1;
                                    w.track_resumed(st.user);
                                    became_ready(w, st, t0, true);
                                }
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                if !open {
                    st.end = (Cow::Borrowed("EOF without a close frame"), None);
                    return Next::Reconnect { delay: Duration::ZERO };
                }
            }
        }
    }
}

/// A ready session while the worker's hub reads its socket: this task
/// keeps the heartbeats and watches for a control change or the hub's
/// call. It takes the connection back (Ok) when the hub stopped before a
/// frame for it or the control value changed (the caller's loop then
/// handles either as usual), or ends the connection (Err).
async fn in_hub(
    w: &Worker,
    st: &mut State,
    key: usize,
    wake: &Notify,
    acked: &mut bool,
    ctl: &watch::Receiver<Control>,
    beat: &mut Option<(Duration, tokio::time::Instant)>,
) -> Result<WsConn, Next> {
    // A clone sees the changes `ctl` has not seen; the caller's own wait
    // then handles the change once the connection is back.
    let mut peek = ctl.clone();
    let Some((iv, at)) = beat.as_mut() else { unreachable!("a session is ready only after HELLO") };
    let sleep = tokio::time::sleep_until(on_tick(*at));
    tokio::pin!(sleep);
    let take_back = |st: &mut State, acked: &mut bool| -> Result<WsConn, Next> {
        let t = w.hub.take(key);
        st.seq = t.seq;
        *acked = t.acked;
        let conn = t.conn.map_err(|e| {
            st.end = (Cow::Owned(io_end(&e)), None);
            Next::Reconnect { delay: Duration::ZERO }
        })?;
        match t.end {
            None => Ok(conn),
            Some(Ok(())) => {
                st.end = (Cow::Borrowed("EOF without a close frame"), None);
                Err(Next::Reconnect { delay: Duration::ZERO })
            }
            Some(Err(e)) => {
                st.end = (Cow::Owned(io_end(&e)), None);
                Err(Next::Reconnect { delay: Duration::ZERO })
            }
        }
    };
    loop {
        tokio::select! {
            biased;
            _ = peek.changed() => return take_back(st, acked),
            () = wake.notified() => return take_back(st, acked),
            () = &mut sleep => match w.hub.beat(key) {
                Beat::Sent => {
                    *at += *iv;
                    sleep.as_mut().reset(on_tick(*at));
                }
                Beat::Zombie => {
                    w.stats.borrow_mut().counters.zombies += 1;
                    let conn = take_back(st, acked)?;
                    st.end = (Cow::Borrowed("no heartbeat ACK (closed by the client)"), None);
                    conn.close(4000).await;
                    return Err(Next::Reconnect { delay: Duration::ZERO });
                }
                Beat::WriteFailed => {
                    take_back(st, acked)?;
                    st.end = (Cow::Borrowed("heartbeat write failed"), None);
                    return Err(Next::Reconnect { delay: Duration::ZERO });
                }
            },
        }
    }
}

/// Heartbeats leave on this grid (each at most this much late; the mean
/// interval is unchanged): a worker's sessions then wake it a few dozen
/// times a second for heartbeats, not up to once per millisecond each. In
/// a 45,000-session capacity run on 8 nodes the generator's context
/// switches alone were 5% of the machine.
const BEAT_TICK: Duration = Duration::from_millis(25);

/// `at` rounded up to the next [`BEAT_TICK`] of this thread's grid.
fn on_tick(at: tokio::time::Instant) -> tokio::time::Instant {
    thread_local! {
        static ORIGIN: tokio::time::Instant = tokio::time::Instant::now();
    }
    let origin = ORIGIN.with(|o| *o);
    let since = at.saturating_duration_since(origin).as_micros() as u64;
    let tick = BEAT_TICK.as_micros() as u64;
    origin + Duration::from_micros(since.div_ceil(tick) * tick)
}

/// Resolves when the control value changes (false: the sender is gone),
/// handing the receiver back for the next wait.
async fn control_changed(mut rx: watch::Receiver<Control>) -> (bool, watch::Receiver<Control>) {
    let ok = rx.changed().await.is_ok();
    (ok, rx)
}

/// A text message read before the socket failed: only MESSAGE_CREATE
/// dispatches are counted (the connection is over anyway).
fn on_text(w: &Worker, st: &mut State, payload: &[u8]) {
    let Ok(f) = serde_json::from_slice::<Frame>(payload) else { return };
    if f.op == op::DISPATCH && f.t == Some("MESSAGE_CREATE") {
        on_dispatch(w, st.user, &mut st.seq, &f);
    }
}

/// A dispatch for `user` whose last seq is `seq`: the seq accounting, and
/// the receipt if it is a MESSAGE_CREATE. False if it was seen before (a
/// replay overlap or a server bug): the caller skips it.
pub(crate) fn on_dispatch(w: &Worker, user: u32, seq: &mut Option<u64>, f: &Frame) -> bool {
    if let Some(s) = f.s {
        if seq.is_some_and(|last| s <= last) {
            w.stats.borrow_mut().counters.duplicates_seq += 1;
            return false;
        }
        if seq.is_some_and(|last| s > last + 1) {
            w.stats.borrow_mut().counters.seq_gaps += 1;
        }
        *seq = Some(s);
    }
    if f.t == Some("MESSAGE_CREATE") {
        match f.message_content() {
            Some(c) => w.on_message(user, &c),
            None => w.stats.borrow_mut().counters.decode_errors += 1,
        }
    }
    true
}

fn close_label(code: Option<u16>) -> String {
    code.map(|c| format!("close {c}")).unwrap_or_else(|| "close (no code)".into())
}

/// A socket error as a connection end.
fn io_end(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionReset => "reset (RST)".to_owned(),
        _ => format!("socket error: {e}"),
    }
}

fn became_ready(w: &Worker, st: &mut State, t0: Instant, resumed: bool) {
    if st.live {
        return;
    }
    st.live = true;
    let mut s = w.stats.borrow_mut();
    s.counters.ready += 1;
    s.counters.last_ready_at_us = crate::worker::now_us();
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
    conn.send_text(heartbeat(seq).as_bytes()).await
}

/// An op 1 payload carrying the last sequence received.
pub(crate) fn heartbeat(seq: Option<u64>) -> String {
    match seq {
        Some(s) => format!("{{\"op\":1,\"d\":{s}}}"),
        None => "{\"op\":1,\"d\":null}".to_owned(),
    }
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

/// op 14 without member-list ranges: the client has the guild open.
async fn send_open(conn: &mut WsConn, guild: &str) -> std::io::Result<()> {
    let msg =
        serde_json::json!({"op": op::GUILD_SUBSCRIPTIONS, "d": {"guild_id": guild, "typing": true, "activities": true, "threads": true}});
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

#[cfg(test)]
mod tests {
    use super::json_field;

    #[test]
    fn json_field_finds_the_first_value_of_a_key() {
        let d = r#"{"id":"42","name":"g","roles":[{"id":"7"}],"member_count":1234,"members":[]}"#;
        assert_eq!(json_field(d, "id"), Some("\"42\""));
        assert_eq!(json_field(d, "member_count"), Some("1234"));
        assert_eq!(json_field(d, "absent"), None);
        assert_eq!(json_field(r#"{"member_count": 5}"#, "member_count"), Some("5"));
    }
}
