#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Every repository path a comment or document names exists.

A path named in a comment outlives the file it named unless something checks
it. This scans the tracked files (and new ones not ignored): in Markdown, the
spans in backticks, fenced code and link targets (relative to the page); in
C, Python (comments and docstrings), meson, shell and Makefiles, the
comments. A path is a token that starts with a top-level entry of the tree
(src/, nf/, README.md, ...), or an include-relative one with an
extension (veloz/nf.h is include/veloz/nf.h, ctl/ctl.h is
src/ctl/ctl.h). `*` is a glob and an ALL-CAPS segment (NAME, NF, N) a
placeholder: nf/NAME.c names any NF. Build outputs (build/, anything git
ignores) and the kernel's include/linux are not the tree's. `make lint` runs
this; tests/unit/test_check_paths.py checks that it fails a stale path.

    python3 scripts/check_paths.py [ROOT]      # exit 1 and one line per stale path
"""

from __future__ import annotations

import ast
import io
import posixpath
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Generated or vendored text is nobody's prose: fuzz corpora, test vectors.
SKIP_PREFIXES = ("tests/fuzz/corpus/", "tests/vectors/")
# The layout's top-level folders, so that a path into one not made yet is named too.
LAYOUT_TOPS = {"bench", "deploy", "docs", "include", "install", "nf", "python", "scripts", "src",
               "tests"}  # fmt: skip
# Where `#include "x/y.h"` and `import veloz.x` names start from.
INCLUDE_ROOTS = ("include", "src", "python")
HASH_NAMES = {"meson.build", "meson_options.txt", "meson.options", "Makefile", "rules"}
TOKEN = re.compile(r"[\w.*/-]+")
# An ALL-CAPS run standing for a name (NAME, NF, N); the literal path is tried first.
PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9_]*(?![a-z0-9])")
NOT_PLACEHOLDERS = {"README", "LICENSE", "COPYING", "CHANGELOG", "DESIGN", "TODO", "NEWS"}
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]]+\]:\s*(\S+)")
BUILD_OUTPUT = re.compile(r"build[\w-]*(/|$)")  # build/, build-sanitize/: not the tree's
# The kernel's headers, named as in its tree; veloz's own are include/veloz.
FOREIGN_PREFIXES = ("include/linux/", "include/uapi/")
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class Tree:
    files: frozenset[str]
    dirs: frozenset[str]  # every folder holding a file, without a trailing slash
    tops: frozenset[str]  # top-level entries: files and folders
    include_dirs: frozenset[str]  # first folders under INCLUDE_ROOTS: veloz, ctl, ...

    def has(self, rel: str) -> bool:
        rel = rel.rstrip("/")
        return rel in self.files or rel in self.dirs


@dataclass(frozen=True)
class Mention:
    line: int
    text: str  # a comment, a backtick span or a line of fenced code
    link: bool = False  # a Markdown link target: relative to the file's folder


def tracked(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    return sorted(p for p in out if (root / p).is_file())


def tree_of(files: list[str]) -> Tree:
    dirs = {posixpath.dirname(f) for f in files}
    for d in list(dirs):
        while d:
            dirs.add(d)
            d = posixpath.dirname(d)
    dirs.discard("")
    tops = {f.split("/", 1)[0] for f in files} | LAYOUT_TOPS
    inc = {d.split("/")[1] for d in dirs if d.count("/") == 1 and d.split("/")[0] in INCLUDE_ROOTS}
    return Tree(frozenset(files), frozenset(dirs), frozenset(tops), frozenset(inc))


def kind_of(root: Path, rel: str) -> str | None:
    name = posixpath.basename(rel)
    suffix = posixpath.splitext(name)[1]
    if suffix == ".md":
        return "md"
    if suffix in (".c", ".h"):
        return "c"
    if suffix == ".py":
        return "py"
    if suffix in (".sh", ".mk") or name in HASH_NAMES:
        return "hash"
    if suffix == "":
        with open(root / rel, "rb") as f:
            first = f.readline(200)
        if first.startswith(b"#!") and b"python" in first:
            return "py"
        if first.startswith(b"#!") and re.search(rb"\b(ba|da)?sh\b", first):
            return "hash"
    return None


def c_comments(text: str) -> Iterator[Mention]:
    i, line, n = 0, 1, len(text)
    while i < n:
        if text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n" if text[i + 1] == "/" else "*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2 : end].split("\n")):
                yield Mention(line + k, part)
            line += text.count("\n", i, end)
            i = end + (1 if text[i + 1] == "/" else 2)
            if text[i - 1 : i] == "\n":
                line += 1
            continue
        if text[i] in "\"'":
            j = i + 1
            while j < n and text[j] not in (text[i], "\n"):
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j + 1)
            i = j + 1
            continue
        line += text[i] == "\n"
        i += 1


def hash_comment(line: str) -> str | None:
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1 :]
    return None


def hash_comments(text: str) -> Iterator[Mention]:
    for k, line in enumerate(text.splitlines(), 1):
        comment = hash_comment(line)
        if comment is not None:
            yield Mention(k, comment)


def py_comments(text: str) -> Iterator[Mention]:
    try:
        tree = ast.parse(text)
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, tokenize.TokenError):
        yield from hash_comments(text)
        return
    for tok in toks:
        if tok.type == tokenize.COMMENT:
            yield Mention(tok.start[0], tok.string[1:])
    lines = text.splitlines()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            continue
        doc = body[0].value
        if isinstance(doc.value, str):
            for k in range(doc.lineno, (doc.end_lineno or doc.lineno) + 1):
                yield Mention(k, lines[k - 1])


def md_mentions(text: str) -> Iterator[Mention]:
    fenced = False
    for k, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            yield Mention(k, line)
            continue
        for span in re.findall(r"`([^`]+)`", line):
            yield Mention(k, span)
        for m in LINK.finditer(line):
            yield Mention(k, m.group(1) or m.group(2), link=True)


READERS: dict[str, Callable[[str], Iterator[Mention]]] = {
    "md": md_mentions,
    "c": c_comments,
    "py": py_comments,
    "hash": hash_comments,
}


def mentions(root: Path, rel: str) -> Iterator[Mention]:
    kind = kind_of(root, rel)
    if kind is not None:
        yield from READERS[kind]((root / rel).read_text(errors="replace"))


def candidates(tree: Tree, text: str) -> Iterator[tuple[str, list[str]]]:
    """Each token that names a path, with the paths it may stand for."""
    for m in TOKEN.finditer(text):
        token = m.group().rstrip(".")
        first, slash, rest = token.partition("/")
        if m.start() > 0 and text[m.start() - 1] in "$@~:":
            continue  # $(BUILD)/x, ~/x, a URL's //host/x
        if first in tree.tops and (slash or "." in first):
            yield token, [token]
        elif first in tree.include_dirs and slash and "." in posixpath.basename(rest):
            yield token, [f"{r}/{token}" for r in INCLUDE_ROOTS]


def link_target(rel: str, target: str) -> str | None:
    if SCHEME.match(target) or target.startswith("#"):
        return None
    path = re.split(r"[#?]", target, maxsplit=1)[0]
    if not path:
        return None
    if path.startswith("/"):
        return path.lstrip("/")
    return posixpath.normpath(posixpath.join(posixpath.dirname(rel), path))


def glob_pattern(path: str) -> re.Pattern[str] | None:
    out, pos, wild = [], 0, False
    for m in re.finditer(r"\*\*|\*|" + PLACEHOLDER.pattern, path):
        if m.group() in NOT_PLACEHOLDERS:
            continue
        out.append(re.escape(path[pos : m.start()]))
        out.append(".*" if m.group() == "**" else "[^/]*" if m.group() == "*" else "[^/]+")
        pos, wild = m.end(), True
    out.append(re.escape(path[pos:].rstrip("/")))
    return re.compile("".join(out)) if wild else None


def ignored(root: Path, path: str) -> bool:
    """A path git ignores is an output (python/veloz/_build.py, results/): not the tree's."""
    done = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "--no-index", path],
                          capture_output=True)  # fmt: skip
    return done.returncode == 0


def exists(root: Path, tree: Tree, path: str, literal: bool = False) -> bool:
    if BUILD_OUTPUT.match(path) or (path + "/").startswith(FOREIGN_PREFIXES) or tree.has(path):
        return True
    pattern = None if literal else glob_pattern(path)
    if pattern is not None:
        return any(pattern.fullmatch(p) for p in (*tree.files, *tree.dirs))
    return ignored(root, path)


def stale_in(root: Path, tree: Tree, rel: str) -> list[str]:
    out: list[tuple[int, str]] = []
    for mention in mentions(root, rel):
        if mention.link:
            path = link_target(rel, mention.text)
            found = [(mention.text, [path])] if path is not None else []
        else:
            found = list(candidates(tree, mention.text))
        for token, paths in found:
            if not any(exists(root, tree, p, literal=mention.link) for p in paths):
                out.append(
                    (mention.line, f"{rel}:{mention.line}: names '{token}', which does not exist")
                )
    return [msg for _, msg in sorted(out)]


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    files = tracked(root)
    tree = tree_of(files)
    problems = [
        p for rel in files if not rel.startswith(SKIP_PREFIXES) for p in stale_in(root, tree, rel)
    ]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
