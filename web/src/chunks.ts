// The open channel's drawn messages, in chunks: the list (#messages) holds
// chunks of at most CHUNK entries, then an end marker. An entry is a
// message's <li> with the lines drawn before it (its date line, the "New
// messages" line), always in the same chunk.
//
// Each chunk is laid out and painted apart from the others (`contain:
// layout style` in app.css): a frame that appends a message, or takes the
// oldest away, relayouts the one chunk it touches, and the others only
// move. And the list is kept in place by the browser, not by script (CSS
// scroll anchoring): reading at the newest, the chunks are no anchors
// (`.pinned`), so the end marker is, and new messages below or old ones
// leaving above keep the view at the bottom; reading further up, the
// message in view is the anchor, so messages undrawn below or leaving above
// leave it where it is. Nothing here reads the layout.

import { h } from "./dom";

/** Entries per chunk: a frame's work relayouts one chunk of this many
 *  (and moves the others), whatever the number drawn. */
export const CHUNK = 40;

export class Chunks {
  /** The end marker: the anchor that keeps the view at the bottom. */
  readonly end: HTMLLIElement = h("li", { class: "end", "aria-hidden": "true" });

  constructor(readonly ol: HTMLElement) {
    // A list said so: its items are inside chunks of no role (a bare <ol>
    // would only count its own <li>s).
    ol.setAttribute("role", "list");
    ol.appendChild(this.end);
  }

  /** Empties the list; `notes` (what shows when no channel is open) stand
   *  in it alone. */
  reset(...notes: Node[]) {
    this.ol.replaceChildren(...notes, this.end);
  }

  /** Entries after the last one drawn, in order: into the last chunk
   *  while it has room, then into new ones. */
  append(entries: Node[][]) {
    let chunk = this.last();
    const fresh = document.createDocumentFragment();
    for (const e of entries) {
      if (!chunk || chunk.childElementCount >= CHUNK) fresh.appendChild((chunk = chunkEl()));
      chunk.append(...e);
    }
    if (fresh.firstChild) this.ol.insertBefore(fresh, this.end);
  }

  /** Entries before the first one drawn, in order (oldest first): into the
   *  first chunk while it has room, then into new ones above it. */
  prepend(entries: Node[][]) {
    let chunk = this.first();
    for (let i = entries.length - 1; i >= 0; i--) {
      if (!chunk || chunk.childElementCount >= CHUNK) this.ol.prepend((chunk = chunkEl()));
      chunk.prepend(...entries[i]);
    }
  }

  /** The entry of message `li` drawn again as `entry`, in its place. */
  replace(li: Element, entry: Node[]) {
    dropLines(li);
    li.replaceWith(...entry);
  }

  /** The entry of message `li` leaves. */
  remove(li: Element) {
    const chunk = li.parentElement;
    dropLines(li);
    li.remove();
    if (chunk && chunk !== this.ol && !chunk.firstElementChild) chunk.remove();
  }

  /** Everything drawn before message `li` leaves, its own lines too. */
  removeBefore(li: Element) {
    const chunk = li.parentElement!;
    while (li.previousElementSibling) li.previousElementSibling.remove();
    while (chunk.previousElementSibling) chunk.previousElementSibling.remove();
  }

  /** Message `li`, its lines and everything drawn after it leave. */
  removeFrom(li: Element) {
    const chunk = li.parentElement!;
    while (chunk.nextElementSibling && chunk.nextElementSibling !== this.end) chunk.nextElementSibling.remove();
    while (li.nextElementSibling) li.nextElementSibling.remove();
    dropLines(li);
    li.remove();
    if (!chunk.firstElementChild) chunk.remove();
  }

  private first(): HTMLElement | null {
    const c = this.ol.firstElementChild;
    return c?.classList.contains("chunk") ? (c as HTMLElement) : null;
  }

  private last(): HTMLElement | null {
    const c = this.end.previousElementSibling;
    return c?.classList.contains("chunk") ? (c as HTMLElement) : null;
  }
}

/** A chunk: no role of its own, so its messages are the list's items. */
function chunkEl(): HTMLElement {
  return h("div", { class: "chunk", role: "none" });
}

/** The lines drawn before message `li` (its date line, "New messages") leave. */
function dropLines(li: Element) {
  while (li.previousElementSibling && !li.previousElementSibling.classList.contains("message")) li.previousElementSibling.remove();
}
