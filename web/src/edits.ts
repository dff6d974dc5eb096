// Unsaved edits kept across a redraw. Settings panels are drawn again from
// what the server says whenever a gateway event changes it (a role made by
// another admin, a channel renamed): what the person had typed, ticked or
// picked and not saved yet is taken from the old form and put into the new
// one, with the focus and the caret. A control is known by the subject of
// its form (`data-scope`: the role, the channel, the overwrite) and its id
// (radio buttons: name and value), so an edit never lands on another
// subject's form; a control left as it was drawn is not an edit, and shows
// what the server says now.

type Control = HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;

type Edit = { key: string; value: string; checked: boolean };

export type Kept = { edits: Edit[]; focus: string | null; selection: [number, number] | null };

function keyOf(el: Control): string | null {
  const scope = el.closest<HTMLElement>("[data-scope]")?.dataset.scope ?? "";
  if (el instanceof HTMLInputElement && (el.type === "radio" || el.type === "checkbox") && !el.id) return el.name ? `${scope}|${el.name}=${el.value}` : null;
  return el.id ? `${scope}|#${el.id}` : null;
}

function edited(el: Control): boolean {
  if (el instanceof HTMLSelectElement) return el.selectedIndex !== Math.max(0, [...el.options].findIndex((o) => o.defaultSelected));
  if (el instanceof HTMLInputElement && (el.type === "radio" || el.type === "checkbox")) return el.checked !== el.defaultChecked;
  if (el instanceof HTMLInputElement && el.type === "file") return false;
  return el.value !== el.defaultValue;
}

function controls(root: HTMLElement): Control[] {
  return [...root.querySelectorAll<Control>("input, textarea, select")];
}

/** What is edited and not saved in `root`, and where the focus is. */
export function keep(root: HTMLElement): Kept {
  const edits: Edit[] = [];
  for (const el of controls(root)) {
    const key = keyOf(el);
    if (key && edited(el)) edits.push({ key, value: el.value, checked: "checked" in el ? el.checked : false });
  }
  const active = document.activeElement;
  const focused = active instanceof HTMLElement && root.contains(active) && active.matches("input, textarea, select") ? keyOf(active as Control) : null;
  let selection: [number, number] | null = null;
  if (focused && (active instanceof HTMLTextAreaElement || active instanceof HTMLInputElement)) {
    try {
      if (active.selectionStart !== null && active.selectionEnd !== null) selection = [active.selectionStart, active.selectionEnd];
    } catch {
      // Inputs without a caret (checkboxes, colours) have no selection.
    }
  }
  return { edits, focus: focused, selection };
}

/** Puts `kept` into the controls of `root` drawn again. */
export function restore(root: HTMLElement, kept: Kept) {
  if (!kept.edits.length && !kept.focus) return;
  const byKey = new Map<string, Control>();
  for (const el of controls(root)) {
    const key = keyOf(el);
    if (key) byKey.set(key, el);
  }
  for (const e of kept.edits) {
    const el = byKey.get(e.key);
    if (!el) continue;
    if (el instanceof HTMLInputElement && (el.type === "radio" || el.type === "checkbox")) el.checked = e.checked;
    else el.value = e.value;
  }
  const el = kept.focus ? byKey.get(kept.focus) : null;
  if (el && !el.disabled) {
    el.focus();
    if (kept.selection && (el instanceof HTMLTextAreaElement || el instanceof HTMLInputElement)) {
      try {
        el.setSelectionRange(...kept.selection);
      } catch {
        // As above: no caret to put back.
      }
    }
  }
}
