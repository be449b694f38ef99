"""Thread counts: ``cgrad.set_num_threads`` / ``get_num_threads`` and the inter-op pair.

Note [Thread pools]
~~~~~~~~~~~~~~~~~~~
cgrad's parallel work happens in two places: the BLAS that NumPy and SciPy call (matmul,
linear algebra) and cgrad's own sparse kernel (SDDMM, ``cgrad.sparse.set_num_threads``).
``set_num_threads(n)`` sets both. The BLAS libraries are found among the shared libraries
loaded in the process (``/proc/self/maps`` on Linux, dyld on macOS, the module list on
Windows) by name (OpenBLAS, including the ``scipy_openblas`` builds NumPy and SciPy wheels
ship, MKL, BLIS) and set through their own C entry points with ctypes
(``openblas_set_num_threads`` and its prefixed/suffixed variants, ``MKL_Set_Num_Threads``,
``bli_thread_set_num_threads``). This is what threadpoolctl does, in the 100 lines cgrad
needs, so that the run-time dependencies stay NumPy and SciPy. A library loaded later
(SciPy's BLAS is loaded on first use) is set when cgrad first uses it
(``sync_blas()``) and otherwise starts with its own default. Libraries inside a torch
installation are left alone (torch manages its own pools).

cgrad has no inter-op pool (the engine runs nodes on the calling thread), so
``set_num_interop_threads`` only records the value, with torch's checks (a positive int,
settable once); ``get_num_interop_threads`` reports it (default: the CPU count).
"""
from __future__ import annotations

import builtins
import ctypes
import os
import re
import sys

import numpy as np

from cgrad import _device

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads"]

_BLAS_NAME = re.compile(r"(openblas|mkl_rt|libblis)", re.I)
_OPENBLAS_SET = [f"{p}openblas_set_num_threads{s}" for p in ("", "scipy_")
                 for s in ("", "64_", "_64_")]
_OPENBLAS_GET = [f"{p}openblas_get_num_threads{s}" for p in ("", "scipy_")
                 for s in ("", "64_", "_64_")]
_SETTERS = {"openblas": (_OPENBLAS_SET, _OPENBLAS_GET), "mkl": (["MKL_Set_Num_Threads"],
                                                                ["MKL_Get_Max_Threads"]),
            "blis": (["bli_thread_set_num_threads"], ["bli_thread_get_num_threads"])}


def _default_sparse_threads():
    env = os.environ.get("CGRAD_SPARSE_THREADS", "")
    if env.strip():
        return max(1, builtins.int(env))
    return max(1, min(2, os.cpu_count() or 1))


_state = {"threads": None, "interop": None, "sparse": _default_sparse_threads(),
          "synced": frozenset(), "modules": 0, "single": None}


# -- the loaded libraries --------------------------------------------------------------------
def _loaded_paths():
    """Paths of the shared libraries loaded in this process (best effort, never raises)."""
    try:
        if sys.platform.startswith("linux"):
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                return {ln.split(None, 5)[5].strip() for ln in f
                        if ln.count(" ") >= 5 and "/" in ln}
        if sys.platform == "darwin":
            libc = ctypes.CDLL(None)
            libc._dyld_get_image_name.restype = ctypes.c_char_p
            return {libc._dyld_get_image_name(i).decode()
                    for i in range(libc._dyld_image_count())}
        if sys.platform == "win32":
            from ctypes import wintypes
            psapi, kernel32 = ctypes.WinDLL("Psapi.dll"), ctypes.WinDLL("kernel32")
            proc = kernel32.GetCurrentProcess()
            mods = (wintypes.HMODULE * 4096)()
            need = wintypes.DWORD()
            if not psapi.EnumProcessModulesEx(proc, ctypes.byref(mods), ctypes.sizeof(mods),
                                              ctypes.byref(need), 3):
                return set()
            out = set()
            buf = ctypes.create_unicode_buffer(1024)
            for h in mods[:need.value // ctypes.sizeof(wintypes.HMODULE)]:
                if psapi.GetModuleFileNameExW(proc, ctypes.c_void_p(h), buf, 1024):
                    out.add(buf.value)
            return out
    except Exception:       # noqa: BLE001 - no library list: nothing to set
        pass
    return set()


def _blas_libraries():
    """[(path, kind, ctypes library)] for the BLAS libraries loaded (not torch's own)."""
    out = []
    for path in sorted(_loaded_paths()):
        base = os.path.basename(path)
        m = _BLAS_NAME.search(base)
        if m is None or f"{os.sep}torch{os.sep}" in path:
            continue
        kind = {"openblas": "openblas", "mkl_rt": "mkl", "libblis": "blis"}[m.group(1).lower()]
        try:
            mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0)
            lib = ctypes.CDLL(path, mode=mode) if os.name == "posix" else ctypes.CDLL(path)
        except OSError:
            continue
        out.append((path, kind, lib))
    return out


def _symbol(lib, names):
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            return fn
    return None


def _set_blas(n, libs):
    for _, kind, lib in libs:
        fn = _symbol(lib, _SETTERS[kind][0])
        if fn is not None:
            fn.restype = None
            fn(ctypes.c_int(n))


def blas_threads():
    """{library path: its current thread count} for the BLAS libraries loaded."""
    out = {}
    for path, kind, lib in _blas_libraries():
        fn = _symbol(lib, _SETTERS[kind][1])
        if fn is not None:
            fn.restype = ctypes.c_int
            out[path] = fn()
    return out


def blas_single():
    """True when NumPy's BLAS runs on one thread (set_num_threads(1), or its own setting at
    load, e.g. OPENBLAS_NUM_THREADS=1): cgrad's single-threaded float32 GEMM then takes
    products of any size (Note [float32 GEMM] in cgrad/ops/_gemm.py). Cached; set_num_threads
    refreshes it."""
    single = _state["single"]
    if single is None:
        n = _state["threads"]
        if n is None:
            counts = list(blas_threads().values())
            n = min(counts) if counts else 1
        single = _state["single"] = n == 1
    return single


def sync_blas():
    """Give the BLAS libraries loaded since the last set_num_threads its count (cgrad calls
    this after loading SciPy's BLAS); cheap when nothing was set."""
    n = _state["threads"]
    if n is None or _state["modules"] == len(sys.modules):
        return
    _state["modules"] = len(sys.modules)
    libs = [lib for lib in _blas_libraries() if lib[0] not in _state["synced"]]
    if libs:
        _set_blas(n, libs)
        _state["synced"] = _state["synced"] | {p for p, _, _ in libs}


# -- the public functions --------------------------------------------------------------------
def _check_count(n, fname):
    if isinstance(n, builtins.bool) or not isinstance(n, (builtins.int, np.integer)):
        raise RuntimeError(f"{fname} expects an int, but got {_device._tname(n)}")
    n = builtins.int(n)
    if not -2 ** 63 <= n < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if not -2 ** 31 <= n < 2 ** 31:
        raise ValueError("Overflow when unpacking long")
    if n <= 0:
        raise RuntimeError(f"{fname} expects a positive integer")
    return n


def set_num_threads(int):  # noqa: A002 - torch's parameter name
    """Set the number of threads cgrad uses for intra-op parallelism: the BLAS of NumPy and
    SciPy and cgrad's sparse kernels (Note [Thread pools])."""
    n = _check_count(int, "set_num_threads")
    libs = _blas_libraries()
    _set_blas(n, libs)
    _state["threads"] = n
    _state["synced"] = frozenset(p for p, _, _ in libs)
    _state["modules"] = len(sys.modules)
    _state["sparse"] = n
    _state["single"] = n == 1


def get_num_threads():
    """The number of threads used for intra-op parallelism (the value set by
    set_num_threads, else what the BLAS NumPy loaded uses)."""
    if _state["threads"] is not None:
        return _state["threads"]
    counts = list(blas_threads().values())
    return counts[0] if counts else _state["sparse"]


def set_num_interop_threads(int):  # noqa: A002 - torch's parameter name
    """Record the number of inter-op threads (cgrad has no inter-op pool: Note [Thread
    pools]); as in torch, it can be set once."""
    n = _check_count(int, "set_num_interop_threads")
    if _state["interop"] is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _state["interop"] = n


def get_num_interop_threads():
    """The number of inter-op threads (set_num_interop_threads's value, else the CPU
    count)."""
    return _state["interop"] or os.cpu_count() or 1


def set_sparse_threads(n):
    _state["sparse"] = n


def sparse_threads():
    return _state["sparse"]
