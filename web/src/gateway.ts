// Gateway v10 client: HELLO, heartbeats, IDENTIFY, and RESUME after a drop.

export type LinkState = "connecting" | "ready" | "reconnecting" | "closed";

/// Close codes after which neither RESUME nor IDENTIFY can help.
const FATAL = new Set([4004, 4010, 4011, 4012, 4013, 4014]);

export class Gateway {
  ws: WebSocket | null = null;
  seq: number | null = null;
  sessionId: string | null = null;
  state: LinkState = "closed";
  identifies = 0;
  resumes = 0;
  private heartbeat: number | undefined;
  private acked = true;
  private attempt = 0;
  private stopped = false;
  private retry: number | undefined;

  onDispatch: (t: string, d: any) => void = () => {};
  onState: (s: LinkState) => void = () => {};
  onFatal: (code: number) => void = () => {};

  constructor(
    private url: string,
    private token: string,
  ) {}

  start() {
    this.stopped = false;
    this.setState(this.sessionId ? "reconnecting" : "connecting");
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    this.clearHeartbeat();
    const ws = this.ws;
    this.ws = null;
    // 1000: the session ends (logout).
    if (ws) ws.close(1000);
    this.setState("closed");
  }

  /// Closes the socket as a network drop would (resumable code) and reconnects.
  drop() {
    this.ws?.close(4000);
  }

  send(op: number, d: unknown) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ op, d }));
  }

  private setState(s: LinkState) {
    if (this.state === s) return;
    this.state = s;
    this.onState(s);
  }

  private open() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onmessage = (e) => {
      if (this.ws !== ws) return;
      this.frame(JSON.parse(e.data as string));
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.clearHeartbeat();
      if (this.stopped) return;
      if (FATAL.has(e.code)) {
        this.setState("closed");
        this.onFatal(e.code);
        return;
      }
      this.scheduleReconnect();
    };
  }

  private scheduleReconnect() {
    this.setState("reconnecting");
    // 1 s, 2 s, 4 s ... up to 15 s, with jitter.
    const delay = Math.min(15000, 1000 * 2 ** Math.min(this.attempt, 4)) * (0.8 + Math.random() * 0.4);
    this.attempt++;
    clearTimeout(this.retry);
    this.retry = window.setTimeout(() => {
      if (!this.stopped) this.open();
    }, delay);
  }

  private clearHeartbeat() {
    clearInterval(this.heartbeat);
    clearTimeout(this.heartbeat);
    this.heartbeat = undefined;
  }

  private beat() {
    if (!this.acked) {
      // No ACK since the last beat: the link is dead; close and resume.
      this.ws?.close(4000);
      return;
    }
    this.acked = false;
    this.send(1, this.seq);
  }

  private frame(f: { op: number; d: any; s?: number | null; t?: string | null }) {
    if (f.s != null) this.seq = f.s;
    switch (f.op) {
      case 10: {
        const every = f.d.heartbeat_interval as number;
        this.acked = true;
        this.clearHeartbeat();
        this.heartbeat = window.setTimeout(() => {
          this.beat();
          this.heartbeat = window.setInterval(() => this.beat(), every);
        }, every * Math.random());
        if (this.sessionId) {
          this.send(6, { token: this.token, session_id: this.sessionId, seq: this.seq });
        } else {
          this.identifies++;
          this.send(2, {
            token: this.token,
            properties: { os: "browser", browser: "throng-web", device: "throng-web" },
            presence: { status: "online", since: 0, activities: [], afk: false },
            large_threshold: 50,
          });
        }
        break;
      }
      case 11:
        this.acked = true;
        break;
      case 1:
        this.send(1, this.seq);
        break;
      case 7:
        this.ws?.close(4000);
        break;
      case 9:
        // Not resumable (d false): forget the session and IDENTIFY anew.
        if (!f.d) {
          this.sessionId = null;
          this.seq = null;
        }
        this.ws?.close(4000);
        break;
      case 0:
        if (f.t === "READY") {
          this.sessionId = f.d.session_id;
          this.attempt = 0;
          this.setState("ready");
        } else if (f.t === "RESUMED") {
          this.resumes++;
          this.attempt = 0;
          this.setState("ready");
        }
        this.onDispatch(f.t!, f.d);
        break;
    }
  }
}
