// Discord-flavoured markdown, parsed into DOM nodes through h() and text
// nodes (never markup): code blocks (with a small highlighter), block
// quotes (`> ` and `>>> `), headings (#, ##, ###), lists (`- `, `* `,
// `1. `), and inline **bold**, *italic* / _italic_, __underline__,
// ~~strike~~, ||spoiler||, `code`, [masked](https://links), bare and
// <angle-bracketed> URLs, mentions (<@user>, <#channel>, <@&role>,
// @everyone, @here), custom emojis (<:name:id>) and backslash escapes.
// Anything that does not parse stays the text it was.

import { Child, h, safeHref } from "./dom";

/** Names for mentions: null when unknown (shown as Discord does). */
export type Names = {
  user(id: string): string | null;
  channel(id: string): string | null;
  role(id: string): string | null;
};

const LINK_ATTRS = { target: "_blank", rel: "noopener noreferrer nofollow" } as const;

/** `text` as nodes. `me` marks mentions of that user as such. */
export function markdown(text: string, names: Names, me?: string): Child[] {
  const out: Child[] = [];
  let last = 0;
  // Code blocks first: nothing inside one is markdown.
  for (const m of text.matchAll(/```(?:([A-Za-z0-9_+#.-]+)\n)?\n?([\s\S]*?)```/g)) {
    if (m.index! > last) out.push(...blocks(text.slice(last, m.index), names, me));
    out.push(codeBlock(m[2].replace(/\n$/, ""), m[1]));
    last = m.index! + m[0].length;
  }
  if (last < text.length) out.push(...blocks(text.slice(last), names, me));
  return out;
}

function blocks(text: string, names: Names, me?: string): Child[] {
  const out: Child[] = [];
  const lines = text.split("\n");
  let para: string[] = [];
  const flush = () => {
    if (para.length) out.push(h("span", { class: "md-p" }, inline(para.join("\n"), names, me)));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m: RegExpMatchArray | null;
    if (line.startsWith(">>> ")) {
      flush();
      const rest = [line.slice(4), ...lines.slice(i + 1)].join("\n");
      out.push(h("div", { class: "md-quote", role: "blockquote" }, blocks(rest, names, me)));
      return out;
    } else if (line.startsWith("> ") || line === ">") {
      flush();
      const quoted: string[] = [];
      while (i < lines.length && (lines[i].startsWith("> ") || lines[i] === ">")) quoted.push(lines[i++].slice(2));
      i--;
      out.push(h("div", { class: "md-quote", role: "blockquote" }, blocks(quoted.join("\n"), names, me)));
    } else if ((m = line.match(/^(#{1,3}) (.+)$/))) {
      flush();
      const level = m[1].length;
      out.push(h("div", { class: `md-h${level}`, role: "heading", "aria-level": String(level + 2) }, inline(m[2], names, me)));
    } else if (/^\s*([-*]|\d{1,9}\.) \S/.test(line)) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const items: Child[] = [];
      let start = 1;
      while (i < lines.length && (m = lines[i].match(ordered ? /^\s*(\d{1,9})\. (.*)$/ : /^\s*[-*] (.*)$/))) {
        if (ordered && !items.length) start = Number(m[1]);
        items.push(h("li", null, inline(ordered ? m[2] : m[1], names, me)));
        i++;
      }
      i--;
      out.push(ordered ? h("ol", { class: "md-list", start: start === 1 ? null : start }, items) : h("ul", { class: "md-list" }, items));
    } else {
      para.push(line);
    }
  }
  flush();
  return out;
}

/** Inline spans, earliest match first; unmatched delimiters stay text. */
function inline(text: string, names: Names, me?: string): Child[] {
  const out: Child[] = [];
  let plain = "";
  const emit = (c: Child) => {
    if (plain) out.push(plain);
    plain = "";
    out.push(c);
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    // Most characters start nothing: no slice, no pattern tried.
    if (!SPECIAL.has(c)) {
      plain += c;
      i++;
      continue;
    }
    const rest = text.slice(i);
    let m: RegExpMatchArray | null;
    if (c === "\\" && /^\\[\\`*_~|<>#@\[\]()-]/.test(rest)) {
      plain += rest[1];
      i += 2;
    } else if (c === "`" && (m = rest.match(/^(``?)([^`]|[^`][\s\S]*?[^`])\1(?!`)/))) {
      emit(h("code", { class: "md-code" }, m[2]));
      i += m[0].length;
    } else if (c === "|" && (m = rest.match(/^\|\|([\s\S]+?)\|\|/))) {
      const s: HTMLSpanElement = h("span", {
        class: "md-spoiler",
        role: "button",
        tabindex: 0,
        "aria-label": "Spoiler, select to reveal",
        onclick: () => reveal(s),
        onkeydown: (e: KeyboardEvent) => (e.key === "Enter" || e.key === " ") && reveal(s),
      }, inline(m[1], names, me));
      emit(s);
      i += m[0].length;
    } else if (c === "*" && (m = rest.match(/^\*\*([\s\S]+?)\*\*(?!\*)/))) {
      emit(h("strong", null, inline(m[1], names, me)));
      i += m[0].length;
    } else if (c === "_" && (m = rest.match(/^__([\s\S]+?)__(?!_)/))) {
      emit(h("u", null, inline(m[1], names, me)));
      i += m[0].length;
    } else if ((c === "*" || c === "_") && (m = rest.match(c === "*" ? /^\*(?!\s)([\s\S]*?[^\s\\])\*(?!\*)/ : /^_([\s\S]*?[^\\])_(?![A-Za-z0-9_])/)) && boundary(text, i, c)) {
      emit(h("em", null, inline(m[1], names, me)));
      i += m[0].length;
    } else if (c === "~" && (m = rest.match(/^~~([\s\S]+?)~~/))) {
      emit(h("s", null, inline(m[1], names, me)));
      i += m[0].length;
    } else if (c === "[" && (m = rest.match(/^\[([^\]\n]+)\]\(<?(https?:\/\/[^\s)>]+)>?\)/)) && safeHref(m[2])) {
      emit(h("a", { href: m[2], title: m[2], ...LINK_ATTRS }, inline(m[1], names, me)));
      i += m[0].length;
    } else if (c === "<" && (m = rest.match(/^<(https?:\/\/[^\s>]+)>/)) && safeHref(m[1])) {
      emit(h("a", { href: m[1], ...LINK_ATTRS }, m[1]));
      i += m[0].length;
    } else if (c === "<" && (m = rest.match(/^<(@!?|#|@&)(\d{1,20})>/))) {
      emit(mention(m[1], m[2], names, me));
      i += m[0].length;
    } else if (c === "<" && (m = rest.match(/^<(a?):([A-Za-z0-9_]{2,32}):(\d{1,20})>/))) {
      emit(h("img", { class: "md-emoji", src: `/emojis/${m[3]}.${m[1] ? "gif" : "png"}`, alt: `:${m[2]}:`, title: `:${m[2]}:`, width: 22, height: 22 }));
      i += m[0].length;
    } else if (c === "@" && (m = rest.match(/^@(everyone|here)\b/))) {
      emit(h("span", { class: "mention mention-all" }, m[0]));
      i += m[0].length;
    } else if ((c === "h" || c === "H") && /\w/.test(text[i - 1] ?? "") === false && (m = rest.match(/^https?:\/\/[^\s<>"]+/i))) {
      // Trailing punctuation usually ends the sentence, not the address.
      const url = m[0].replace(/[).,;:!?'\]]+$/, "");
      const href = safeHref(url);
      if (href) emit(h("a", { href, ...LINK_ATTRS }, url));
      else plain += url;
      i += url.length;
    } else {
      plain += c;
      i++;
    }
  }
  if (plain) out.push(plain);
  return out;
}

/** The characters an inline span may start with. */
const SPECIAL = new Set(["\\", "`", "|", "*", "_", "~", "[", "<", "@", "h", "H"]);

/** `*`/`_` italics open only where a word does not go on before them. */
function boundary(text: string, i: number, c: string): boolean {
  return c === "*" || !/[A-Za-z0-9]/.test(text[i - 1] ?? "");
}

function reveal(s: HTMLElement) {
  s.classList.add("revealed");
  s.removeAttribute("role");
  s.removeAttribute("tabindex");
  s.setAttribute("aria-label", "Spoiler");
}

function mention(kind: string, id: string, names: Names, me?: string): HTMLElement {
  if (kind === "#") {
    const n = names.channel(id);
    return h("span", { class: "mention", "data-channel": id }, n ? `#${n}` : "#unknown");
  }
  if (kind === "@&") {
    const n = names.role(id);
    return h("span", { class: "mention", "data-role": id }, n ? `@${n}` : "@unknown-role");
  }
  const n = names.user(id);
  return h("span", { class: "mention" + (id === me ? " mention-me" : ""), "data-user-id": id }, `@${n ?? "unknown-user"}`);
}

// ---------- code blocks ----------

const KEYWORDS: Record<string, string[]> = {
  js: ["async", "await", "break", "case", "catch", "class", "const", "continue", "default", "else", "export", "extends", "false", "finally", "for", "from", "function", "if", "import", "in", "instanceof", "let", "new", "null", "of", "return", "switch", "this", "throw", "true", "try", "typeof", "undefined", "var", "while", "yield", "interface", "type", "enum", "implements"],
  py: ["and", "as", "async", "await", "break", "class", "continue", "def", "elif", "else", "except", "False", "finally", "for", "from", "if", "import", "in", "is", "lambda", "None", "not", "or", "pass", "raise", "return", "True", "try", "while", "with", "yield"],
  rs: ["as", "async", "await", "break", "const", "continue", "crate", "else", "enum", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while"],
  go: ["break", "case", "chan", "const", "continue", "default", "defer", "else", "false", "for", "func", "go", "if", "import", "interface", "map", "nil", "package", "range", "return", "select", "struct", "switch", "true", "type", "var"],
  sh: ["case", "do", "done", "echo", "elif", "else", "esac", "exit", "export", "fi", "for", "function", "if", "in", "local", "return", "then", "while"],
  c: ["auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete", "do", "double", "else", "enum", "extern", "false", "float", "for", "if", "int", "long", "namespace", "new", "nullptr", "private", "public", "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "true", "typedef", "unsigned", "void", "while"],
  java: ["abstract", "boolean", "break", "case", "catch", "class", "continue", "default", "do", "else", "extends", "false", "final", "finally", "for", "if", "implements", "import", "instanceof", "int", "interface", "new", "null", "package", "private", "protected", "public", "return", "static", "super", "switch", "this", "throw", "throws", "true", "try", "void", "while", "val", "var", "fun"],
  sql: ["and", "as", "by", "create", "delete", "from", "group", "insert", "into", "join", "left", "limit", "not", "null", "on", "or", "order", "select", "set", "table", "update", "values", "where"],
};
const FAMILY: Record<string, string> = {
  js: "js", javascript: "js", ts: "js", typescript: "js", jsx: "js", tsx: "js", json: "js",
  py: "py", python: "py", rs: "rs", rust: "rs", go: "go", golang: "go",
  sh: "sh", bash: "sh", shell: "sh", zsh: "sh", c: "c", h: "c", cpp: "c", "c++": "c", cs: "c", csharp: "c",
  java: "java", kotlin: "java", kt: "java", scala: "java", sql: "sql",
};

function codeBlock(code: string, lang?: string): HTMLElement {
  const family = lang ? FAMILY[lang.toLowerCase()] : undefined;
  const body = family ? highlight(code, family) : [code];
  return h("div", { class: "md-pre", "data-lang": lang ?? null }, h("code", { class: "md-block" }, body));
}

/** Strings, comments, numbers and keywords as spans; the rest as text. */
function highlight(code: string, family: string): Child[] {
  const kw = new Set(KEYWORDS[family]);
  const hashComments = family === "py" || family === "sh";
  const sqlish = family === "sql";
  const token = new RegExp(
    [
      String.raw`"(?:[^"\\\n]|\\.)*"?`,
      String.raw`'(?:[^'\\\n]|\\.)*'?`,
      family === "js" || family === "go" ? "`[^`]*`?" : null,
      hashComments ? "#[^\\n]*" : String.raw`//[^\n]*|/\*[\s\S]*?(?:\*/|$)`,
      sqlish ? "--[^\\n]*" : null,
      String.raw`\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[0-9a-fA-F_]+\b`,
      String.raw`\b[A-Za-z_][A-Za-z0-9_]*\b`,
    ]
      .filter(Boolean)
      .join("|"),
    "g",
  );
  const out: Child[] = [];
  let last = 0;
  for (const m of code.matchAll(token)) {
    const t = m[0];
    let cls: string | null = null;
    if (t[0] === '"' || t[0] === "'" || t[0] === "`") cls = "hl-str";
    else if (t.startsWith("//") || t.startsWith("/*") || (hashComments && t[0] === "#") || (sqlish && t.startsWith("--"))) cls = "hl-com";
    else if (/^\d|^0x/.test(t)) cls = "hl-num";
    else if (kw.has(sqlish ? t.toLowerCase() : t)) cls = "hl-kw";
    if (!cls) continue;
    if (m.index! > last) out.push(code.slice(last, m.index));
    out.push(h("span", { class: cls }, t));
    last = m.index! + t.length;
  }
  if (last < code.length) out.push(code.slice(last));
  return out;
}
