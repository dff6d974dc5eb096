// REST client for the public API (/api/v10), the same routes bots use.

export class ApiError extends Error {
  constructor(
    public status: number,
    public body: any,
  ) {
    super(ApiError.describe(status, body));
  }

  static describe(status: number, body: any): string {
    if (body && typeof body === "object") {
      const fields = body.errors ? collectErrors(body.errors) : [];
      if (fields.length) return fields.join(" ");
      if (body.message) return String(body.message);
    }
    return `Request failed (${status})`;
  }
}

function collectErrors(e: any, out: string[] = []): string[] {
  if (!e || typeof e !== "object") return out;
  if (Array.isArray(e._errors)) for (const x of e._errors) out.push(String(x.message));
  for (const k of Object.keys(e)) if (k !== "_errors") collectErrors(e[k], out);
  return out;
}

export class Api {
  token: string | null = null;

  constructor(private base = "/api/v10") {}

  async req<T = any>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
    const headers: Record<string, string> = { ...extra };
    if (this.token) headers["authorization"] = this.token;
    // A form (files) sets its own multipart content type.
    const form = body instanceof FormData;
    if (body !== undefined && !form) headers["content-type"] = "application/json";
    for (let attempt = 0; ; attempt++) {
      const r = await fetch(this.base + path, {
        method,
        headers,
        body: body === undefined ? undefined : form ? body : JSON.stringify(body),
      });
      if (r.status === 204) return undefined as T;
      const text = await r.text();
      let json: any = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch {
        json = null;
      }
      if (r.status === 429 && attempt < 3) {
        const wait = Number(json?.retry_after ?? r.headers.get("retry-after") ?? 1);
        await new Promise((res) => setTimeout(res, Math.min(wait, 10) * 1000));
        continue;
      }
      if (!r.ok) throw new ApiError(r.status, json);
      return json as T;
    }
  }

  /** A request that outlives the page (`keepalive`): sent as the page
   *  goes, its answer never read. */
  beacon(method: string, path: string, body: unknown) {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.token) headers["authorization"] = this.token;
    fetch(this.base + path, { method, headers, body: JSON.stringify(body), keepalive: true }).catch(() => undefined);
  }

  get<T = any>(path: string) {
    return this.req<T>("GET", path);
  }
  post<T = any>(path: string, body?: unknown) {
    return this.req<T>("POST", path, body ?? {});
  }
  patch<T = any>(path: string, body: unknown) {
    return this.req<T>("PATCH", path, body);
  }
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.req<T>("PUT", path, body, headers);
  }
  del<T = any>(path: string, headers?: Record<string, string>) {
    return this.req<T>("DELETE", path, undefined, headers);
  }
}
