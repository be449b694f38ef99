#!/usr/bin/env python3
"""Reference-count lint for the Cython layer: translate cgrad/*.pyx to C and reject any raw
reference macro applied to a Cython temporary (in the .pyx or in a .pxi it includes).

Why: a stealing call (PyTuple_SET_ITEM, PyList_SET_ITEM) or an explicit Py_INCREF/Py_DECREF
is only correct on a variable whose reference the code owns on purpose. When the argument is
a Cython temporary (`__pyx_t_N`), Cython releases that temporary right after the call, so a
steal leaves the container with a dangling pointer and an INCREF/DECREF is spent on an object
nobody keeps. That is how an untyped `pi = i` (inferred as a C integer, boxed once per call)
made every built-in op with more than 256 inputs crash (Note [Typed object before a steal] in
cgrad/_C_function.pxi): small ints are cached, so nothing failed below 257.

Usage: python .ci/reflint.py [file.pyx ...]   (default: every cgrad/*.pyx). Exit 1 on a hit.
Needs Cython (a build requirement).
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

MACROS = r"(?:Py_INCREF|Py_XINCREF|Py_DECREF|Py_XDECREF|Py_CLEAR|PyTuple_SET_ITEM|" \
         r"PyList_SET_ITEM|PyTuple_SetItem|PyList_SetItem|PyModule_AddObject)"
CALL = re.compile(r"(?<![A-Za-z0-9_])" + MACROS + r"\((?P<args>[^;]*)\);")
TEMP = re.compile(r"(?<![>.])__pyx_t_\d+")   # not p->__pyx_t_0 (a closure field)
SRC = re.compile(r'/\* "(?P<file>[^"]+\.(?:pyx|pxi))":(?P<line>\d+)')


def scan(c_path):
    """Yield (pyx_file, pyx_line, c_line_no, c_text) for each reference macro on a temporary
    inside code generated from a .pyx line (or a line of a .pxi it includes)."""
    where = None
    prev = ""
    with open(c_path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = SRC.search(line)
            if m:
                where = (m.group("file"), int(m.group("line")))
            call = CALL.search(line)
            if call and where is not None and TEMP.search(call.group("args")):
                # Cython's own module-creation code (multi-phase init) increfs its module in a
                # temporary that it keeps: not user code.
                if "__pyx_pyinit_module" not in prev:
                    yield where[0], where[1], no, line.strip()
            prev = line


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    pyx = argv or sorted(glob.glob(os.path.join(root, "cgrad", "*.pyx")))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for src in pyx:
            out = os.path.join(tmp, os.path.basename(src)[:-4] + ".c")
            cmd = [sys.executable, "-m", "cython", "-3", "-I", os.path.join(root, "csrc"),
                   "-I", os.path.join(root, "cgrad"), "-o", out, src]
            r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
            if r.returncode != 0:
                sys.stderr.write(r.stdout + r.stderr)
                return 2
            for f, ln, cno, text in scan(out):
                bad += 1
                print(f"{f}:{ln}: reference macro on a Cython temporary "
                      f"(generated C line {cno}: {text})")
    if bad:
        print(f"reflint: {bad} hit(s). Give the argument a declared `object` variable (or a "
              "PyObject * you own) before the call; see Note [Typed object before a steal].")
        return 1
    print(f"reflint: {len(pyx)} file(s) clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
