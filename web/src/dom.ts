// The one way the client builds DOM: h(tag, props, ...children). Strings
// become text nodes, never markup, so a name, a topic or a message can
// only ever show as what it is. Props are an allow-list: a few attributes
// by name, aria-* and data-*, event handlers as functions, and `href` only
// when it leads to http(s) or a path of this app. Nothing in web/src parses
// markup (`scripts/web.sh check` fails on the DOM calls that would), and no
// attribute can carry script or inline style, so the page runs under a
// Content-Security-Policy without 'unsafe-inline'.

export type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (e: any) => void;
export type Props = Record<string, string | number | boolean | null | undefined | Handler>;

/// Elements the client makes. Anything that runs or loads code (script,
/// iframe, object, embed, style, link, base, meta) is absent on purpose.
const TAGS = new Set([
  "a", "button", "div", "footer", "form", "h1", "h2", "h3", "header", "img", "input", "label", "li", "ol",
  "option", "p", "section", "select", "span", "strong", "textarea", "time", "ul", "code", "em", "s", "u",
  "video", "audio", "progress", "aside", "article",
]);

/// Plain attributes that carry no URL and no script.
const ATTRS = new Set([
  "class", "id", "title", "role", "tabindex", "type", "name", "value", "for", "datetime", "alt",
  "placeholder", "autocomplete", "rel", "target", "width", "height", "start", "preload", "loading",
  "download", "max", "rows", "maxlength", "inputmode",
]);

/// Boolean attributes, set when true and left out otherwise.
const FLAGS = new Set(["disabled", "hidden", "readonly", "required", "selected", "checked", "controls"]);

/// `href` for a link the user may follow: http(s) anywhere, or a path or
/// fragment of this app (resolved against the page, it stays on this
/// origin). Everything else (javascript:, data:, vbscript:, protocol-
/// relative `//host`) is refused: null.
export function safeHref(raw: string): string | null {
  const s = String(raw).trim();
  if (s.startsWith("#") || (s.startsWith("/") && !s.startsWith("//") && !s.startsWith("/\\"))) {
    let u: URL;
    try {
      u = new URL(s, location.href);
    } catch {
      return null;
    }
    return u.origin === location.origin ? s : null;
  }
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
}

/// `src` of an image, a video or a sound: a path of this server, or a
/// `blob:` URL this page made (a file picked for upload, before it is
/// sent): img-src and media-src are 'self' and blob:.
function safeSrc(raw: string): string | null {
  const s = String(raw);
  if (s.startsWith(`blob:${location.origin}/`)) return s;
  return s.startsWith("/") && !s.startsWith("//") && !s.startsWith("/\\") ? s : null;
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props?: Props | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  if (!TAGS.has(tag)) throw new Error(`h: <${tag}> is not an element the client makes`);
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) {
      if (typeof v !== "function") throw new Error(`h: ${k} must be a function`);
      el.addEventListener(k.slice(2), v);
    } else if (typeof v === "function") {
      throw new Error(`h: ${k} cannot be a function`);
    } else if (k === "href") {
      const href = safeHref(String(v));
      if (href !== null) el.setAttribute("href", href);
    } else if (k === "src") {
      const src = safeSrc(String(v));
      if (src !== null) el.setAttribute("src", src);
    } else if (FLAGS.has(k)) {
      if (v) el.setAttribute(k, "");
    } else if (ATTRS.has(k) || k.startsWith("aria-") || k.startsWith("data-")) {
      el.setAttribute(k, String(v));
    } else {
      throw new Error(`h: attribute ${k} is not allowed`);
    }
  }
  append(el, children);
  return el;
}

/// Appends children: strings and numbers as text nodes, arrays flattened.
export function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/// Empties `el` (or replaces its children): never through markup.
export function clear(el: Element, ...children: Child[]) {
  el.replaceChildren();
  append(el, children);
}
