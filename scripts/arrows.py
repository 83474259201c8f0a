#!/usr/bin/env python3
"""Imports that run back up, and import circles, in a part of a crate.

    scripts/arrows.py src src/lock        # the library's lock/ (crate root src/lib.rs)
    scripts/arrows.py cli/src cli/src     # the whole CLI (crate root cli/src/main.rs)
    scripts/arrows.py -v cli/src cli/src  # with every arrow and circle named

An arrow runs back up when a module names an item (not a module) of a module above it: a
`super::X`, `crate::a::X` or `$crate::a::X` path whose longest module prefix is an
ancestor of the file's module (in the CLI `crate::Fail`: an item of main.rs). Counted once
per (file, ancestor) pair, and as paths. A file and its inline modules are one module (a
`mod sealed { use super::X }` inside api.rs stays in its file). Production code only: a
`#[cfg(test)]` item or block is skipped, and so is a file declared under `#[cfg(test)]`.

A circle is a strongly connected set of two or more modules of the part (files; an
arrow to a module's re-export counts as one to that module): `hold` uses `show` and `show`
uses `hold`; `main` re-exporting `conn` while `conn` imports from `main`. Printed: the
arrows back up, their paths, the circles and the modules in them.
"""

import os
import re
import sys

VERBOSE = "-v" in sys.argv
args = [a for a in sys.argv[1:] if a != "-v"]
if len(args) != 2:
    sys.exit(__doc__)
root, part = (os.path.normpath(a) for a in args)


def module_of(path):
    rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


files = {}
for d, _, names in os.walk(root):
    for n in names:
        if n.endswith(".rs"):
            p = os.path.join(d, n)
            files[module_of(p)] = p
modules = set(files)


def strip(text):
    """Comments, strings and `#[cfg(test)]` items out; inline `mod m {` kept as markers."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    out, i = [], 0
    while True:
        m = re.compile(r"#\[cfg\(test\)\]").search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i : m.start()])
        j = m.end()
        # the item: up to its `;` or its balanced `{ }`
        while j < len(text) and text[j] not in ";{":
            j += 1
        if j < len(text) and text[j] == "{":
            depth = 0
            while j < len(text):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
        else:
            j += 1
        i = j
    return "".join(out)


def test_only(mod):
    """Declared `#[cfg(test)] mod x;` in its parent."""
    if not mod:
        return False
    parent = files.get(mod[:-1])
    if parent is None:
        return False
    text = open(parent).read()
    return re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s*)?mod\s+%s\s*;" % mod[-1], text) is not None


def expand(tree):
    """`a::{b, c::{d, self}}` -> ['a::b', 'a::c::d', 'a::c']."""
    tree = re.sub(r"\s+", "", tree)
    depth, parts, cur = 0, [], ""
    for ch in tree:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        m = re.match(r"^(.*?)::\{(.*)\}$", p)
        if m:
            for sub in expand(m.group(2)):
                out.append(m.group(1) if sub == "self" else m.group(1) + "::" + sub)
        elif p.startswith("{") and p.endswith("}"):
            out.extend(expand(p[1:-1]))
        else:
            out.append(re.sub(r"\bas\b.*$", "", p))
    return out


def paths(text):
    """(inline module path, path) for every `use` tree and every other path in `text`."""
    found = []
    inline = []  # stack of (name, depth at open)
    depth = 0
    i = 0
    token = re.compile(r"\bmod\s+(\w+)\s*\{|\buse\s+([^;]*);|(\$?crate|super|self)((?:::\w+)+)|[{}]")
    for m in token.finditer(text):
        if m.group(1):
            depth += 1
            inline.append((m.group(1), depth))
        elif m.group(2) is not None:
            for p in expand(m.group(2)):
                found.append((tuple(n for n, _ in inline), p))
        elif m.group(3):
            found.append((tuple(n for n, _ in inline), m.group(3) + m.group(4)))
        elif m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            if inline and inline[-1][1] == depth:
                inline.pop()
            depth -= 1
    return found


def resolve(mod, inner, path):
    """The module a path names (its longest module prefix) and the item after it, if any."""
    segs = path.split("::")
    here = mod + inner
    if segs[0] in ("crate", "$crate"):
        at, segs = (), segs[1:]
    elif segs[0] == "super":
        at = here
        while segs and segs[0] == "super":
            at, segs = at[:-1], segs[1:]
    elif segs[0] == "self":
        at, segs = here, segs[1:]
    elif (mod + (segs[0],)) in modules:  # `use child::X` (2018 relative path)
        at = mod
    else:
        return None  # an external crate or std
    # inside the file, inline modules are the file's own
    while segs and (at + (segs[0],)) in modules:
        at, segs = at + (segs[0],), segs[1:]
    if at[: len(mod)] == mod and len(at) > len(mod) and at not in modules:
        at = mod
    return at, (segs[0] if segs else None)


in_part = {m: p for m, p in files.items() if os.path.normpath(p).startswith(part) and not test_only(m)}
ups = {}  # (module, ancestor) -> paths
edges = {m: set() for m in in_part}
for mod, path in sorted(in_part.items()):
    for inner, p in paths(strip(open(path).read())):
        r = resolve(mod, inner, p)
        if r is None:
            continue
        target, item = r
        while target not in modules and target:
            target = target[:-1]
        if target == mod:
            continue
        if target in in_part:
            edges[mod].add(target)
        if item is not None and len(target) < len(mod) and mod[: len(target)] == target:
            ups.setdefault((mod, target), set()).add(p)


def name(m):
    return "::".join(("crate",) + m)


# circles: Tarjan's strongly connected components
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = n[0]
    n[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        visit(v)
pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})

print(f"{part}: {len(ups)} arrows back up ({sum(len(p) for p in ups.values())} paths), "
      f"{len(sccs)} circles ({sum(len(c) for c in sccs)} modules in them; {len(pairs)} pairs using each other)")
if VERBOSE:
    for (m, t), ps in sorted(ups.items()):
        print(f"  up: {name(m)} -> {name(t)}: {', '.join(sorted(ps))}")
    for c in sccs:
        print(f"  circle: {' '.join(name(m) for m in c)}")
    for a, b in pairs:
        print(f"  pair: {name(a)} <-> {name(b)}")
