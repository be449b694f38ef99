"""docs/ARCHITECTURE.md stays true: the paths and Notes it names exist, the functions of its
walk of a gradient exist where it says, imports follow its layer table (no module imports a
later layer, not even inside a function; no import cycle), and the layout limits of issue 16
hold (no `*_ext` modules, no source file over 1,200 lines)."""
from __future__ import annotations

import ast
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
MAX_LINES = 1200


def _doc():
    with open(DOC) as f:
        return f.read()


def _paths_in(text):
    out = set()
    for tok in re.findall(r"`([^`\s]+)`", text):
        if re.fullmatch(r"(cgrad|csrc|docs|tests|bench|examples)/[\w./]*", tok):
            out.add(tok.rstrip("/"))
    return out


def test_every_path_named_exists():
    paths = _paths_in(_doc())
    assert len(paths) > 40
    missing = sorted(p for p in paths if not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def _sources(*patterns):
    files = []
    for pat in patterns:
        files += glob.glob(os.path.join(ROOT, pat), recursive=True)
    return files


def _read(path):
    with open(path) as f:
        return f.read()


def test_every_note_named_exists():
    notes = {" ".join(n.split()) for n in re.findall(r"Note \[([^\]]+)\]", _doc())}
    assert notes
    text = "".join(_read(p) for p in _sources("cgrad/**/*.py", "cgrad/**/*.pyx",
                                              "cgrad/**/*.pxi", "csrc/*.[ch]"))
    missing = sorted(n for n in notes if f"Note [{n}]" not in text)
    assert not missing, missing


# the walk of one gradient: (file or directory of the Cython core, what must be defined there)
_CORE = ("cgrad/_C.pyx", "cgrad/_C_*.pxi")
WALK = [
    (("cgrad/tensor.py",), r"def backward\("),
    (("cgrad/autograd/engine.py",), r"def backward\("),
    (("cgrad/autograd/engine.py",), r"def _make_grads\("),
    (_CORE, r"cdef object _binop\("),
    (_CORE, r"cdef object _record_binop\("),
    (_CORE, r"cdef object _apply\("),
    (_CORE, r"def _run_engine\("),
    (_CORE, r"cdef cg_callbacks_t _make_callbacks\("),
    (_CORE, r"cdef int _cb_apply\("),
    (_CORE, r"cdef PyObject \*_cb_add\("),
    (_CORE, r"cdef int _cb_release\("),
    (_CORE, r"cdef int _cb_accumulate\("),
    (_CORE, r"cdef int _accumulate_leaf\("),
    (("csrc/cg_engine.c",), r"int cg_engine_run\("),
    (("csrc/cg_engine.c",), r"static int discover\("),
    (("csrc/cg_engine.c",), r"static int buf_add\("),
    (("csrc/cg_engine.c",), r"static int heap_push\("),
    (("csrc/cg_engine.c",), r"static int run_node\("),
    (("cgrad/ops/arithmetic.py",), r"class Mul\("),
    (("cgrad/ops/reductions.py",), r"class Sum\("),
    (("cgrad/__init__.py",), r"def _wire\("),
    (("cgrad/tensor.py",), r"def _bind\("),
]


@pytest.mark.parametrize("where,pattern", WALK, ids=[p for _, p in WALK])
def test_walk_names_exist(where, pattern):
    text = "".join(_read(p) for p in _sources(*where))
    assert re.search(pattern, text), f"{pattern} not found in {where}"
    name = re.sub(r"\\", "", pattern).split("(")[0].split()[-1].lstrip("*")
    assert name in _doc(), f"{name} is not named in docs/ARCHITECTURE.md"


# ---------------------------------------------------------------------------------------------
# layers


def _layer_table():
    """[(layer number, [module path prefixes])] from the doc's layer table."""
    rows = []
    for line in _doc().splitlines():
        m = re.match(r"\| (\d+)\. [^|]+\| ([^|]+)\|", line)
        if m:
            rows.append((int(m.group(1)), re.findall(r"`([^`]+)`", m.group(2))))
    return rows


def _module_of(path):
    rel = os.path.relpath(path, ROOT)
    mod = re.sub(r"\.(py|pyx|pxi)$", "", rel).replace(os.sep, ".")
    return mod[:-len(".__init__")] if mod.endswith(".__init__") else mod


def _all_modules():
    mods = {}
    for p in _sources("cgrad/**/*.py", "cgrad/*.pyx"):
        mods[_module_of(p)] = p
    return mods


def _layer_of(mod, table):
    best, best_len = None, -1
    for n, prefixes in table:
        for pre in prefixes:
            pm = _module_of(os.path.join(ROOT, pre.rstrip("/")))
            if (mod == pm or mod.startswith(pm + ".")) and len(pm) > best_len:
                best, best_len = n, len(pm)
    return best


def _imports(path, mods):
    """Modules of cgrad imported anywhere in path (top level or inside functions)."""
    src = _read(path)
    if path.endswith(".pyx"):
        for inc in re.findall(r'^include "([^"]+)"', src, re.M):
            src += "\n" + _read(os.path.join(os.path.dirname(path), inc))
        lines = [ln.strip() for ln in src.splitlines()
                 if re.match(r"\s*(from cgrad[\w.]* import [^(\\]*$|import cgrad[\w.]*\s*$)", ln)
                 and "cimport" not in ln]
        tree = ast.parse("\n".join(lines))
        pkg = "cgrad"
    else:
        tree = ast.parse(src)
        me = _module_of(path)
        pkg = me if path.endswith("__init__.py") else me.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                     for a in node.names]
        for n in names:
            while n and n not in mods:
                n = n.rsplit(".", 1)[0] if "." in n else ""
            if n:
                out.add(n)
    return out


def _graph():
    mods = _all_modules()
    return mods, {m: _imports(p, mods) - {m} for m, p in mods.items()}


def test_every_module_has_a_layer():
    table = _layer_table()
    assert [n for n, _ in table] == list(range(len(table)))
    mods = _all_modules()
    orphans = sorted(m for m in mods if _layer_of(m, table) is None)
    assert not orphans, f"modules missing from the layer table of ARCHITECTURE.md: {orphans}"


def test_imports_run_down_the_layers():
    table = _layer_table()
    _, edges = _graph()
    bad = sorted(f"{m} (layer {_layer_of(m, table)}) imports {d} (layer {_layer_of(d, table)})"
                 for m, ds in edges.items() for d in ds
                 if _layer_of(d, table) > _layer_of(m, table))
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    _, edges = _graph()
    # iterative DFS for a back edge
    state, cycles = {}, []
    for root in sorted(edges):
        if root in state:
            continue
        stack = [(root, iter(sorted(edges[root])))]
        state[root] = 1
        path = [root]
        while stack:
            node, it = stack[-1]
            for d in it:
                if state.get(d) == 1:
                    cycles.append(path[path.index(d):] + [d])
                elif d not in state:
                    state[d] = 1
                    path.append(d)
                    stack.append((d, iter(sorted(edges[d]))))
                    break
            else:
                state[node] = 2
                path.pop()
                stack.pop()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])


def test_layout_limits():
    ext = _sources("cgrad/**/*_ext.py")
    assert not ext, ext
    generated = {os.path.join(ROOT, "cgrad", f"_{m}.c") for m in ("C", "sparse", "memory", "fused")}
    big = []
    for p in _sources("cgrad/**/*.py", "cgrad/**/*.pyx", "cgrad/**/*.pxi", "cgrad/**/*.pxd",
                      "cgrad/**/*.pyi", "csrc/*.[ch]"):
        if p in generated:
            continue
        with open(p) as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            big.append((os.path.relpath(p, ROOT), n))
    assert not big, f"files over {MAX_LINES} lines: {big}"
