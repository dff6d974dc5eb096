// Files in messages: picking them (button, drag and drop, paste), the tray
// of files waiting to go with the next message (previews, sizes, the
// server's limits), the upload with its progress, and how a message's
// attachments show (images, videos and sounds inline, other files as a
// card to download).

import { ApiError } from "./api";
import { Child, clear, h } from "./dom";

/** The server's upload limits (`GET /client.json`, its `[attachments]`). */
export type Limits = { max_file_bytes: number; max_files: number };

/** Discord's defaults, until the server has said. */
let limits: Limits = { max_file_bytes: 25 << 20, max_files: 10 };

export async function loadLimits(): Promise<Limits> {
  try {
    const r = await fetch("/client.json");
    if (r.ok) {
      const v = await r.json();
      if (Number.isFinite(v?.max_file_bytes) && Number.isFinite(v?.max_files)) limits = v;
    }
  } catch {
    // Keep the defaults: the server still enforces its own.
  }
  return limits;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KB`;
  return `${(n / (1024 * 1024)).toFixed(n < 10 * 1024 * 1024 ? 1 : 0)} MB`;
}

type Staged = { file: File; preview: string | null };

/** The files that go with the next message, shown above the composer. */
export class Tray {
  private files: Staged[] = [];
  private error = "";
  private progress: number | null = null;

  constructor(private el: HTMLElement) {}

  get count() {
    return this.files.length;
  }

  /** Adds what was picked, dropped or pasted; refuses what passes the limits. */
  add(list: FileList | File[]) {
    this.error = "";
    for (const file of Array.from(list)) {
      if (this.files.length >= limits.max_files) {
        this.error = `At most ${limits.max_files} files in one message.`;
        break;
      }
      if (file.size > limits.max_file_bytes) {
        this.error = `${file.name} is ${bytes(file.size)}: files can be up to ${bytes(limits.max_file_bytes)}.`;
        continue;
      }
      const preview = /^(image|video)\//.test(file.type) ? URL.createObjectURL(file) : null;
      this.files.push({ file, preview });
    }
    this.render();
  }

  remove(i: number) {
    const [gone] = this.files.splice(i, 1);
    if (gone?.preview) URL.revokeObjectURL(gone.preview);
    this.error = "";
    this.render();
  }

  /** Takes the files for a send, leaving the tray empty. */
  take(): File[] {
    const out = this.files.map((s) => s.file);
    for (const s of this.files) if (s.preview) URL.revokeObjectURL(s.preview);
    this.files = [];
    this.error = "";
    this.render();
    return out;
  }

  /** Shows an upload's progress (0-1), or none. */
  setProgress(p: number | null) {
    this.progress = p;
    this.render();
  }

  render() {
    const busy = this.progress !== null;
    this.el.hidden = !this.files.length && !this.error && !busy;
    clear(
      this.el,
      this.files.map((s, i) =>
        h(
          "div",
          { class: "staged", role: "group", "aria-label": s.file.name },
          s.preview && s.file.type.startsWith("image/")
            ? h("img", { src: s.preview, alt: "", class: "thumb" })
            : h("span", { class: "thumb file-icon", "aria-hidden": "true" }, extension(s.file.name)),
          h("span", { class: "staged-name" }, s.file.name),
          h("span", { class: "staged-size" }, bytes(s.file.size)),
          h("button", { type: "button", class: "secondary", "aria-label": `Remove ${s.file.name}`, onclick: () => this.remove(i) }, "×"),
        ),
      ),
      busy
        ? h("div", { class: "upload-progress" }, "Uploading ", h("progress", { max: 100, value: Math.round((this.progress ?? 0) * 100), "aria-label": "Upload progress" }))
        : null,
      this.error ? h("p", { class: "error", role: "alert" }, this.error) : null,
      h("p", { class: "limits" }, `Up to ${limits.max_files} files of ${bytes(limits.max_file_bytes)} each`),
    );
  }
}

function extension(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 && name.length - dot <= 5 ? name.slice(dot + 1).toUpperCase() : "FILE";
}

/**
 * POSTs a message with files as Discord's multipart form (`payload_json`
 * and `files[n]`), reporting the upload's progress. A 4xx or 5xx throws
 * an ApiError; a lost connection a TypeError (as fetch does), so the
 * caller's retry treats both alike.
 */
export function postWithFiles(token: string | null, path: string, payload: any, files: File[], progress: (p: number) => void): Promise<any> {
  const form = new FormData();
  form.append("payload_json", JSON.stringify({ ...payload, attachments: files.map((f, i) => ({ id: i, filename: f.name })) }));
  files.forEach((f, i) => form.append(`files[${i}]`, f, f.name));
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("POST", `/api/v10${path}`);
    if (token) x.setRequestHeader("authorization", token);
    x.upload.onprogress = (e) => e.lengthComputable && progress(e.loaded / e.total);
    x.onerror = () => reject(new TypeError("the connection was lost"));
    x.onload = () => {
      let body: any = null;
      try {
        body = x.responseText ? JSON.parse(x.responseText) : null;
      } catch {
        body = null;
      }
      if (x.status >= 200 && x.status < 300) resolve(body);
      else reject(new ApiError(x.status, body));
    };
    x.send(form);
  });
}

/** An attachment's address on this page's own origin (img-src 'self'). */
export function here(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url, location.href);
  } catch {
    return null;
  }
  return (u.protocol === "http:" || u.protocol === "https:") && u.pathname.startsWith("/attachments/") ? u.pathname + u.search : null;
}

/** Largest box an image or video shows in, in CSS pixels. */
const BOX = { w: 400, h: 300 };

function fit(a: any): { width?: number; height?: number } {
  const w = Number(a.width), hgt = Number(a.height);
  if (!(w > 0 && hgt > 0)) return {};
  const k = Math.min(1, BOX.w / w, BOX.h / hgt);
  return { width: Math.max(1, Math.round(w * k)), height: Math.max(1, Math.round(hgt * k)) };
}

/** A message's attachments, or null when it has none. */
export function attachmentsEl(list: any[] | undefined): HTMLElement | null {
  if (!list?.length) return null;
  return h("div", { class: "attachments" }, list.map(attachmentEl));
}

function attachmentEl(a: any): Child {
  const src = here(String(a.url ?? ""));
  const name = String(a.filename ?? "file");
  const type = String(a.content_type ?? "");
  if (!src) return h("div", { class: "file-card" }, name);
  if (type.startsWith("image/")) {
    return h(
      "a",
      { href: src, target: "_blank", rel: "noopener noreferrer", class: "image", title: name },
      h("img", { src, alt: a.description ? String(a.description) : name, loading: "lazy", ...fit(a) }),
    );
  }
  if (type.startsWith("video/")) return h("video", { src, controls: true, preload: "metadata", class: "video", "aria-label": name, ...fit(a) });
  if (type.startsWith("audio/"))
    return h("div", { class: "file-card" }, h("span", { class: "staged-name" }, name), h("audio", { src, controls: true, preload: "none", "aria-label": name }));
  return h(
    "div",
    { class: "file-card" },
    h("span", { class: "thumb file-icon", "aria-hidden": "true" }, extension(name)),
    h("a", { href: src, download: name, rel: "noopener noreferrer" }, name),
    h("span", { class: "staged-size" }, bytes(Number(a.size) || 0)),
  );
}
