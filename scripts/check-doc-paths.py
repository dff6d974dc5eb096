#!/usr/bin/env python3
"""Every repository path named in backticks in the docs exists.

    scripts/check-doc-paths.py [--self-test]

Reads README.md, ARCHITECTURE.md, docs/*.md, crates/*/README.md and
tests/*/README.md; in each inline code span (`...`, not fenced blocks) every
word that starts with a top-level directory of the repository (`crates/`,
`docs/`, `.ci/`, ...) or is a root file name (`Cargo.toml`, an upper-case
`NAME.md`) must name a file or directory the repository has (tracked, or new
and not ignored). In a document below the root, a word that starts with a
directory beside it (`src/`, `tests/` in a crate's README) is read from
there first. Fails naming each one that does not, with its file and line.

How a word is read:
- `path:120`, `path:10-20`, `path::item`, `path#anchor`: the file before the
  suffix.
- Globs (`*`, `?`, `**`, `[ab]`) must match at least one path.
- `{a,b}` stands for each of `a` and `b`; a placeholder (`{name}`, `<name>`,
  an upper-case segment such as `NAME`, `$VAR`) stands for any one segment.
- A path cut short with `...` or `…` counts by what comes before.
- Words with `://` (URLs) are not paths. Not checked: `rev:path` (a path at
  a git revision, `f108b22f:docs/bench/x`: history) and paths git ignores
  (`tests/api/.venv`, `fuzz/artifacts/`: made by a run).
"""

import fnmatch
import os
import re
import subprocess
import sys

DOCS = ["README.md", "ARCHITECTURE.md", "docs/*.md", "crates/*/README.md", "tests/*/README.md"]

PAIRS = {"(": ")", "[": "]", "<": ">"}
PLACEHOLDER = re.compile(r"^(?:\{[^{},]*\}|<[^<>]*>|[A-Z][A-Z0-9_]*|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)$")
ROOT_DOC = re.compile(r"^[A-Z][A-Z0-9_-]*\.md$")


def repo_paths(root):
    """Files (tracked, or untracked and not ignored) and every directory above them."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    paths = set()
    for f in out.split("\0"):
        # Deleted but not yet committed: gone.
        if not f or not os.path.lexists(os.path.join(root, f)):
            continue
        paths.add(f)
        parts = f.split("/")
        for i in range(1, len(parts)):
            paths.add("/".join(parts[:i]))
    return paths


def code_spans(text):
    """(line number, content) of each inline code span outside fenced blocks.
    A span may run over line breaks within a paragraph."""
    block, first, fence = [], 0, None
    for no, line in enumerate(text.split("\n") + [""], 1):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        if m or not line.strip():
            yield from block_spans("\n".join(block), first)
            block = []
            if m:
                fence = m.group(1)[0] * len(m.group(1))
            continue
        if not block:
            first = no
        block.append(line)


def block_spans(block, first):
    # `x`, ``x `y` z``: a run of n backticks closes at the next run of exactly n.
    i = 0
    while True:
        m = re.compile(r"`+").search(block, i)
        if not m:
            return
        end = re.compile(r"(?<!`)" + m.group(0) + r"(?!`)").search(block, m.end())
        if not end:
            i = m.end()
            continue
        yield first + block.count("\n", 0, m.start()), block[m.end() : end.start()]
        i = end.end()


def unwrap(word):
    """A word without the quotes, sentence punctuation and unpaired brackets around it."""
    while True:
        before = word
        word = word.strip("\"'").rstrip(",.;!?")
        for o, c in PAIRS.items():
            if word.startswith(o) and word.count(o) > word.count(c):
                word = word[1:]
            if word.endswith(c) and word.count(c) > word.count(o):
                word = word[:-1]
        if word == before:
            return word


def candidates(span, heads, root_files):
    """The words of a span that look like repository paths, as written."""
    for word in re.split(r"[\s=]+", span):
        word = unwrap(word)
        if "://" in word:
            continue
        if word.startswith("./"):
            word = word[2:]
        head = word.split("/", 1)[0]
        if "/" in word and head in heads:
            yield word
        elif "/" not in word and (word in root_files or ROOT_DOC.match(word)):
            yield word


def expand_braces(path):
    """`a/{b,c}/d` -> [`a/b/d`, `a/c/d`] (nested and repeated lists too)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(path[: m.start()] + alt + path[m.end() :]))
    return out


def pattern(word):
    """The glob a word stands for, or None when it names nothing to check."""
    # A suffix: path:line, path::item, path#anchor.
    word = re.split(r"[:#]", word, maxsplit=1)[0]
    for cut in ("...", "…"):
        if cut in word:
            word = word.split(cut, 1)[0].rsplit("/", 1)[0]
    word = word.rstrip("/")
    if not word:
        return None
    segs = ["*" if PLACEHOLDER.match(s) else s for s in word.split("/")]
    return "/".join(segs)


def exists(glob, paths):
    if not any(c in glob for c in "*?["):
        return glob in paths
    # `**` spans directories; `*` alone stays within one segment.
    rx = re.escape(glob).replace(r"\*\*", "\0").replace(r"\*", "[^/]*").replace("\0", ".*")
    rx = rx.replace(r"\?", "[^/]")
    rx = re.sub(r"\\\[(.*?)\\\]", lambda m: "[" + m.group(1).replace("\\", "") + "]", rx)
    r = re.compile(rx + r"\Z")
    return any(r.match(p) for p in paths)


def missing(word, paths, here=""):
    """The expansions of `word` that name nothing in the repository, read
    from the directory `here` (a document's) when it has the first segment,
    else from the root."""
    # `rev:path`: a path at a git revision.
    if re.match(r"^[0-9a-f]{7,40}:", word):
        return []
    out = []
    for alt in expand_braces(word):
        glob = pattern(alt)
        if glob is None:
            continue
        local = here and (here + "/" + glob.split("/", 1)[0]) in paths
        if not (local and exists(here + "/" + glob, paths)) and not exists(glob, paths):
            out.append(alt)
    return out


def ignored(root, words):
    """The words git ignores (made by a run, never committed). One question
    per path: git stops at the first path it cannot judge (one beyond a
    symbolic link, such as a file inside a virtualenv's `bin/python/`), and
    a batch would then lose the answers after it."""
    out = set()
    for word in words:
        for w in (word, word.rstrip("/") + "/"):
            if subprocess.run(["git", "check-ignore", "-q", w], cwd=root, capture_output=True).returncode == 0:
                out.add(word)
                break
    return out


def doc_files(root):
    out = []
    for g in DOCS:
        d, base = os.path.split(g)
        if "*" in d:
            top, _ = d.split("/*", 1)
            dirs = sorted(os.path.join(top, x) for x in os.listdir(os.path.join(root, top)) if os.path.isdir(os.path.join(root, top, x)))
        else:
            dirs = [d]
        for dd in dirs:
            full = os.path.join(root, dd)
            names = sorted(os.listdir(full)) if os.path.isdir(full) else []
            out.extend(os.path.join(dd, n) for n in names if fnmatch.fnmatch(n, base) and os.path.isfile(os.path.join(full, n)))
    return out


def check(root):
    paths = repo_paths(root)
    tops = {p for p in paths if "/" not in p and os.path.isdir(os.path.join(root, p))}
    root_files = {p for p in paths if "/" not in p and p not in tops}
    found = []
    for doc in doc_files(root):
        here = os.path.dirname(doc)
        beside = {p.split("/")[-1] for p in paths if here and os.path.dirname(p) == here and os.path.isdir(os.path.join(root, p))}
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        for no, span in code_spans(text):
            for word in candidates(span, tops | beside, root_files):
                for alt in missing(word, paths, here):
                    found.append((doc, no, word, alt))
    skip = ignored(root, {alt for _, _, _, alt in found})
    return [f"{doc}:{no}: `{alt}` does not exist" + (f" (in `{word}`)" if alt != word else "") for doc, no, word, alt in found if alt not in skip]


def self_test():
    paths = {"crates", "crates/bench", "crates/bench/README.md", "crates/bench/src", "crates/bench/src/main.rs", "docs", "docs/a.md", "README.md"}
    tops, roots = {"crates", "docs"}, {"README.md"}

    def bad(span, here=""):
        heads = tops | ({"src"} if here else set())
        return [m for w in candidates(span, heads, roots) for m in missing(w, paths, here)]

    cases = {
        "crates/bench/src/main.rs": [],
        "crates/bench/src/main.rs:12": [],
        "crates/bench/src/main.rs:10-20": [],
        "crates/bench/src/main.rs::plot": [],
        "(crates/bench/README.md),": [],
        "'crates/<name>/README.md'.": [],
        "(crates/<name>)": [],
        "cargo run --bin x -- docs/a.md": [],
        "crates/bench/src/*.rs": [],
        "crates/**/main.rs": [],
        "crates/*/README.md": [],
        "crates/{bench,store}/README.md": ["crates/store/README.md"],
        "crates/{name}/src/main.rs": [],
        "crates/<crate>/README.md": [],
        "crates/NAME/src": [],
        "crates/$CRATE/src": [],
        "docs/…": [],
        "crates/bench/...": [],
        "crates/gone.rs": ["crates/gone.rs"],
        "crates/*.md": ["crates/*.md"],
        "--out=docs/b.md": ["docs/b.md"],
        "CONTRIBUTING.md": ["CONTRIBUTING.md"],
        "README.md": [],
        "report.md src/main.rs ./data": [],
        "https://example.com/crates/x": [],
        "f108b22f:docs/gone/report.md": [],
    }
    failed = 0
    for span, want in cases.items():
        got = bad(span)
        if got != want:
            failed += 1
            print(f"self-test: `{span}`: got {got}, want {want}", file=sys.stderr)
    # In crates/bench/README.md, `src/...` is the crate's; `crates/...` the root's.
    for span, want in {"src/main.rs": [], "src/gone.rs": ["src/gone.rs"], "crates/bench/src": [], "docs/a.md": []}.items():
        got = bad(span, "crates/bench")
        if got != want:
            failed += 1
            print(f"self-test: `{span}` in crates/bench: got {got}, want {want}", file=sys.stderr)
    spans = list(code_spans("a `x` b ``y `z` w``\n```\n`not/this`\n```\n`c`\nd `e\nf` g\n\n`h"))
    if spans != [(1, "x"), (1, "y `z` w"), (5, "c"), (6, "e\nf")]:
        failed += 1
        print(f"self-test: code spans: {spans}", file=sys.stderr)
    return failed


def main():
    if sys.argv[1:] == ["--self-test"]:
        failed = self_test()
        print("check-doc-paths self-test: " + ("ok" if not failed else f"{failed} failed"))
        return 1 if failed else 0
    if sys.argv[1:]:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    bad = check(root)
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"check-doc-paths: {len(bad)} path(s) named in the docs do not exist", file=sys.stderr)
        return 1
    print("check-doc-paths: every path named in the docs exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
