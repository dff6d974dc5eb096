// Embeds from bots and webhooks, drawn as Discord draws them: a coloured
// bar, author, title (a link when it has a URL), description and field
// values in markdown, fields (inline ones side by side), image, thumbnail,
// footer and timestamp. Everything is text nodes and elements (markdown.ts);
// links pass safeHref. Images load only from this server (an attachment of
// the message, `attachment://name` included): the page's policy allows no
// other origin, and a proxy that fetches them is deliberately absent, so an
// image elsewhere shows as a link to it.

import { Child, h, safeHref } from "./dom";
import { markdown, Names } from "./markdown";
import { here } from "./uploads";

type Media = { url?: string; width?: number; height?: number };

/** A message's embeds, or null when it has none. */
export function embedsEl(m: { embeds?: any[]; attachments?: any[] }, names: Names, me?: string): HTMLElement | null {
  const list = (m.embeds ?? []).filter((e) => e && typeof e === "object");
  if (!list.length) return null;
  return h("div", { class: "embeds" }, list.map((e) => embedEl(e, m.attachments ?? [], names, me)));
}

/** The attachments an embed shows (`attachment://name`): drawn there, not
 *  again under the message, as on Discord. */
export function shownInEmbeds(m: { embeds?: any[] }): Set<string> {
  const out = new Set<string>();
  for (const e of m.embeds ?? [])
    for (const u of [e?.image?.url, e?.thumbnail?.url, e?.author?.icon_url, e?.footer?.icon_url])
      if (typeof u === "string" && u.startsWith("attachment://")) out.add(u.slice("attachment://".length));
  return out;
}

/** The URL an embed's image loads from here, or null (elsewhere). */
function local(url: string | undefined, attachments: any[]): string | null {
  if (!url) return null;
  if (url.startsWith("attachment://")) {
    const a = attachments.find((x) => x.filename === url.slice("attachment://".length));
    return a ? here(String(a.url ?? "")) : null;
  }
  return here(url);
}

function link(url: string | undefined, body: Child, cls: string): Child {
  const href = url ? safeHref(url) : null;
  return href ? h("a", { href, target: "_blank", rel: "noopener noreferrer", class: cls }, body) : h("span", { class: cls }, body);
}

function picture(media: Media | undefined, attachments: any[], cls: string, box: { w: number; h: number }): Child {
  if (!media?.url) return null;
  const src = local(media.url, attachments);
  if (!src) return link(media.url, `🖼 ${media.url}`, `${cls} embed-remote`);
  const w = Number(media.width), ht = Number(media.height);
  const k = w > 0 && ht > 0 ? Math.min(1, box.w / w, box.h / ht) : 0;
  const size = k ? { width: Math.max(1, Math.round(w * k)), height: Math.max(1, Math.round(ht * k)) } : {};
  return h("a", { href: src, target: "_blank", rel: "noopener noreferrer", class: cls }, h("img", { src, alt: "", loading: "lazy", ...size }));
}

function embedEl(e: any, attachments: any[], names: Names, me?: string): HTMLElement {
  const text = (v: unknown) => (typeof v === "string" ? v : "");
  const author = e.author && text(e.author.name)
    ? h(
        "div",
        { class: "embed-author" },
        local(e.author.icon_url, attachments) ? h("img", { src: local(e.author.icon_url, attachments)!, alt: "", width: 24, height: 24 }) : null,
        link(e.author.url, text(e.author.name), "embed-author-name"),
      )
    : null;
  const title = text(e.title) ? h("div", { class: "embed-title" }, link(e.url, text(e.title), "embed-title-text")) : null;
  const description = text(e.description) ? h("div", { class: "embed-description" }, markdown(text(e.description), names, me)) : null;
  const fields = Array.isArray(e.fields) && e.fields.length
    ? h(
        "div",
        { class: "embed-fields" },
        e.fields.map((f: any) =>
          h("div", { class: "embed-field" + (f?.inline ? " inline" : "") }, h("div", { class: "embed-field-name" }, text(f?.name)), h("div", { class: "embed-field-value" }, markdown(text(f?.value), names, me))),
        ),
      )
    : null;
  const when = text(e.timestamp) ? new Date(e.timestamp) : null;
  const footerText = [text(e.footer?.text), when && !isNaN(when.getTime()) ? when.toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) : ""].filter(Boolean).join(" • ");
  const footer = footerText
    ? h("div", { class: "embed-footer" }, local(e.footer?.icon_url, attachments) ? h("img", { src: local(e.footer.icon_url, attachments)!, alt: "", width: 20, height: 20 }) : null, footerText)
    : null;
  const el = h(
    "article",
    { class: "embed", "aria-label": text(e.title) || text(e.author?.name) || "Embed" },
    h("div", { class: "embed-main" }, author, title, description, fields, picture(e.image, attachments, "embed-image", { w: 400, h: 300 }), footer),
    picture(e.thumbnail, attachments, "embed-thumb", { w: 80, h: 80 }),
  );
  const color = Number(e.color);
  if (Number.isInteger(color) && color > 0 && color <= 0xffffff) el.style.borderLeftColor = `#${color.toString(16).padStart(6, "0")}`;
  return el;
}
