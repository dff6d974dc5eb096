// Emojis: the full picker (the server's own emojis, then Unicode's groups,
// with a search box) for the composer and for reactions, and the lookup
// behind `:name:` completion in the composer. Unicode emojis go into text
// as themselves; a server's emoji as Discord's `<:name:id>`.

import { clear, h } from "./dom";
import { EMOJI_GROUPS } from "./emoji-data";

export type CustomEmoji = { id: string; name: string; animated?: boolean };
/** One emoji: Unicode (`unicode` set) or a server's (`custom` set). */
export type EmojiChoice = { name: string; unicode?: string; custom?: CustomEmoji };

let table: { group: string; list: EmojiChoice[] }[] | null = null;

/** Unicode's emojis by group, parsed once on first use. */
export function unicodeGroups(): { group: string; list: EmojiChoice[] }[] {
  table ??= EMOJI_GROUPS.map(([group, packed]) => ({
    group,
    list: packed.split(",").map((pair) => {
      const at = pair.indexOf(" ");
      return { unicode: pair.slice(0, at), name: pair.slice(at + 1) };
    }),
  }));
  return table;
}

/** Emojis whose name matches `query`: names starting with it first (the
 *  server's before Unicode's), then names containing it. */
export function searchEmoji(query: string, customs: CustomEmoji[], limit = 50): EmojiChoice[] {
  const q = query.toLowerCase();
  const all: EmojiChoice[] = [...customs.map((c) => ({ name: c.name, custom: c })), ...unicodeGroups().flatMap((g) => g.list)];
  const starts = all.filter((e) => e.name.toLowerCase().startsWith(q));
  const inside = all.filter((e) => !e.name.toLowerCase().startsWith(q) && e.name.toLowerCase().includes(q));
  return [...starts, ...inside].slice(0, limit);
}

/** What an emoji shows as: the character, or the server's image. */
export function emojiFace(e: EmojiChoice, size = 22): Node {
  if (e.custom)
    return h("img", { class: "md-emoji", src: `/emojis/${e.custom.id}.${e.custom.animated ? "gif" : "png"}`, alt: `:${e.name}:`, width: size, height: size });
  return document.createTextNode(e.unicode!);
}

/** What an emoji is in a message's text. */
export function emojiText(e: EmojiChoice): string {
  return e.custom ? `<${e.custom.animated ? "a" : ""}:${e.custom.name}:${e.custom.id}>` : e.unicode!;
}

const COLUMNS = 9;

/** The picker: a panel by `anchor` with a search box and a grid of emojis
 *  (arrows move, Enter picks, Escape closes). One open at a time. */
export function openEmojiPicker(anchor: HTMLElement, label: string, customs: CustomEmoji[], pick: (e: EmojiChoice) => void) {
  document.querySelector(".emoji-panel")?.remove();
  const search = h("input", { type: "search", placeholder: "Find an emoji", autocomplete: "off", "aria-label": "Find an emoji" }) as HTMLInputElement;
  const grid = h("div", { class: "emoji-grid", role: "grid", "aria-label": "Emojis" });
  const panel = h("div", { class: "emoji-panel", role: "dialog", "aria-label": label }, search, grid);
  const close = (refocus = true) => {
    panel.remove();
    document.removeEventListener("mousedown", outside, true);
    if (refocus) anchor.focus();
  };
  const outside = (e: MouseEvent) => {
    if (!panel.contains(e.target as Node) && e.target !== anchor) close(false);
  };
  const button = (e: EmojiChoice) =>
    h(
      "button",
      {
        type: "button",
        role: "gridcell",
        class: "emoji-cell",
        tabindex: "-1",
        title: `:${e.name}:`,
        "aria-label": `:${e.name}:`,
        onclick: () => {
          close();
          pick(e);
        },
      },
      emojiFace(e, 28),
    );
  const section = (title: string, list: EmojiChoice[]) => [h("div", { class: "emoji-group", role: "row" }, h("span", { role: "columnheader" }, title)), h("div", { class: "emoji-row", role: "row" }, list.map(button))];
  const draw = () => {
    const q = search.value.trim().replace(/^:|:$/g, "");
    if (q) {
      const found = searchEmoji(q, customs, 90);
      clear(grid, found.length ? section(`Results for ${q}`, found) : h("p", { class: "muted" }, "No emoji by that name."));
    } else {
      clear(
        grid,
        customs.length ? section("This server", customs.map((c) => ({ name: c.name, custom: c }))) : null,
        unicodeGroups().map((g) => section(g.group, g.list)),
      );
    }
    const first = grid.querySelector<HTMLElement>(".emoji-cell");
    if (first) first.tabIndex = 0;
  };
  search.addEventListener("input", draw);
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      grid.querySelector<HTMLButtonElement>(".emoji-cell")?.click();
    } else if (e.key === "ArrowDown") {
      e.preventDefault();
      grid.querySelector<HTMLElement>(".emoji-cell")?.focus();
    }
  });
  panel.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      return close();
    }
    const cell = (e.target as HTMLElement).closest(".emoji-cell");
    if (!cell) return;
    const cells = [...grid.querySelectorAll<HTMLElement>(".emoji-cell")];
    const i = cells.indexOf(cell as HTMLElement);
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: COLUMNS, ArrowUp: -COLUMNS } as Record<string, number>;
    if (!(e.key in step)) return;
    e.preventDefault();
    const next = cells[Math.max(0, Math.min(cells.length - 1, i + step[e.key]))];
    if (i + step[e.key] < 0) return search.focus();
    (cell as HTMLElement).tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
  draw();
  document.body.appendChild(panel);
  // Beside the anchor, kept on screen.
  const r = anchor.getBoundingClientRect();
  const w = panel.offsetWidth;
  const ht = panel.offsetHeight;
  panel.style.left = `${Math.max(8, Math.min(window.innerWidth - w - 8, r.right - w))}px`;
  panel.style.top = `${Math.max(8, r.top - ht - 8 < 8 ? Math.min(window.innerHeight - ht - 8, r.bottom + 8) : r.top - ht - 8)}px`;
  document.addEventListener("mousedown", outside, true);
  search.focus();
}
