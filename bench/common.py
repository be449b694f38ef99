"""Shared helpers of the benchmark scripts in bench/ (not a benchmark itself).

The systems compared, by the names used in every result dict:

* ``cgrad``: this project;
* ``numpy``: the floor, hand-written NumPy/SciPy forward and backward of the same computation;
* ``torch``: PyTorch on the CPU, one thread (when importable);
* ``hips``: HIPS autograd, the ``autograd`` package on PyPI (when importable).

Importing this module pins OPENBLAS/OMP/MKL threads to 1 (the scripts also do it themselves
before NumPy is imported, which is what counts).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
perf_counter = time.perf_counter
cpu_time = time.process_time

SYSTEMS = ("cgrad", "numpy", "torch", "hips")
LABELS = {"cgrad": "cgrad", "numpy": "NumPy floor", "torch": "torch", "hips": "HIPS autograd"}


# ---------------------------------------------------------------------------------------------
# libraries

def load_cgrad():
    try:
        import cgrad
    except ImportError:
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        import cgrad
    import cgrad.nn.functional  # noqa: F401
    return cgrad


def load_torch():
    """torch with one thread, or None when it is not importable."""
    try:
        import torch
    except Exception:  # ImportError, or a broken install
        return None
    torch.set_num_threads(1)
    return torch


def load_hips():
    """HIPS autograd as a namespace (np = autograd.numpy, make_vjp, make_hvp, grad, primitive,
    defvjp, list = autograd.builtins.list, version), or None when it is not importable."""
    try:
        import autograd
        import autograd.numpy as anp
        from autograd.builtins import list as ag_list
        from autograd.extend import defvjp, primitive
        from autograd.scipy.special import logsumexp
    except Exception:
        return None
    try:
        from importlib.metadata import version
        ver = version("autograd")
    except Exception:
        ver = "?"
    return types.SimpleNamespace(
        np=anp, make_vjp=autograd.make_vjp, make_hvp=autograd.differential_operators.make_hvp,
        grad=autograd.grad, primitive=primitive, defvjp=defvjp, list=ag_list,
        logsumexp=logsumexp, version=ver, __name__="hips")


def load(name):
    """The module object for a system name (ImportError when it is missing)."""
    if name == "cgrad":
        return load_cgrad()
    if name == "numpy":
        return np
    mod = {"torch": load_torch, "hips": load_hips}[name]()
    if mod is None:
        raise ImportError(f"{name} is not importable")
    return mod


def available(name):
    """Is the system importable (without importing torch)?"""
    import importlib.util
    if name in ("cgrad", "numpy"):
        return True
    try:
        return importlib.util.find_spec({"torch": "torch", "hips": "autograd"}[name]) is not None
    except (ImportError, ValueError):
        return False


def to_numpy(t):
    """A gradient (cgrad/torch tensor, ndarray or scalar) as an ndarray copy."""
    if t is None:
        return None
    if isinstance(t, (list, tuple)):
        return [to_numpy(x) for x in t]
    if hasattr(t, "detach"):
        return np.array(t.detach().numpy(), copy=True)
    return np.array(t, copy=True)


# ---------------------------------------------------------------------------------------------
# statistics and checks

def stats(values, scale=1.0):
    vs = [v * scale for v in values]
    return {"median": statistics.median(vs), "min": min(vs), "samples": vs}


def close(got, ref, rtol=1e-3):
    """'ok' or what differs; got/ref: arrays or lists of arrays. Tolerance relative to the
    largest magnitude of each reference array (gradients of sums of many terms)."""
    if got is None:
        return "no gradient"
    if not isinstance(ref, (list, tuple)):
        got, ref = [got], [ref]
    if len(got) != len(ref):
        return f"{len(got)} gradients, expected {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return f"grad {i}: shape {g.shape} != {r.shape}"
        finite = np.isfinite(r)
        if not np.array_equal(finite, np.isfinite(g)) or not np.array_equal(g[~finite],
                                                                          r[~finite]):
            return f"grad {i}: non-finite entries differ"
        if finite.any():
            scale = float(np.abs(r[finite]).max()) or 1.0
            err = float(np.abs(g[finite] - r[finite]).max())
            if not err <= rtol * scale:
                return f"grad {i}: max |diff| {err:.3g} > {rtol:g} * {scale:.3g}"
    return "ok"


def check_all(grads, ref="numpy", rtol=1e-3):
    """{system: 'ok' | difference} for every system's gradient against the reference's."""
    if ref not in grads:
        ref = next(iter(grads), None)
    out = {}
    for name, g in grads.items():
        if name != ref:
            out[name] = close(g, grads[ref], rtol)
    return out


def err_text(e):
    return f"{type(e).__name__}: {e}".splitlines()[0][:200]


# Note [Heap settling]: glibc malloc keeps freed small chunks in "fastbins" and merges them
# only when a request of 1 KiB or more arrives, walking every one of them then. A torch run
# frees tens of thousands of small chunks, so whichever system runs next pays for merging
# torch's garbage at its first large allocation. Measured on workload 2 (2000-node MyFunction
# chain, 60 runs each): cgrad's backward took 1.9-3.1 us/node after a torch run, 1.0-1.1 with
# no torch run, and 1.2-1.5 when a 4 KiB malloc/free (which merges the fastbins) came between
# (perf: malloc_consolidate, unlink_chunk, _int_malloc). So before each timed run the heap is
# settled that way, as gc.collect() settles the cycle collector: every system pays for its own
# heap traffic, not its predecessor's. It returns no memory to the system (malloc_trim(0)
# would, and the next run would page it back in: workload 4a got slower with it).
# ``--no-heap-settle`` turns it off to show the interleaving cost.
HEAP_SETTLE = True
_malloc = _free = None
if sys.platform.startswith("linux"):
    try:
        import ctypes
        _libc = ctypes.CDLL(None)
        _malloc, _free = _libc.malloc, _libc.free
        _malloc.restype, _malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
        _free.restype, _free.argtypes = None, (ctypes.c_void_p,)
    except (OSError, AttributeError):
        _malloc = _free = None


def settle():
    """Before a timed run: collect cycles, then (Linux) make malloc merge its free chunks."""
    gc.collect()
    if HEAP_SETTLE and _malloc is not None:
        _free(_malloc(4096))


def interleaved(runners, repeats, warmup=1, before=settle):
    """Call every runner `warmup` + `repeats` times, rotating the order each round (machine
    drift hits every system alike). runner() -> (phases dict of seconds, keepalive). Returns
    ({name: {phase: [seconds]}}, {name: error text}); a failing system drops out."""
    samples = {k: {} for k in runners}
    errors = {}
    order = list(runners)
    for r in range(warmup + repeats):
        k = r % len(order) if order else 0
        for name in order[k:] + order[:k]:
            if name in errors:
                continue
            before()
            try:
                ph, keep = runners[name]()
            except Exception as e:
                errors[name] = err_text(e)
                continue
            del keep
            if r >= warmup:
                for p, v in ph.items():
                    samples[name].setdefault(p, []).append(v)
    for name in errors:
        samples.pop(name, None)
    return samples, errors


# ---------------------------------------------------------------------------------------------
# memory

def rss_bytes():
    """Current resident set size (Linux: /proc/self/statm)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best we have (KiB on Linux, bytes on macOS)
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r if sys.platform == "darwin" else r * 1024


# ---------------------------------------------------------------------------------------------
# the machine

def loadavg():
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        return None


def machine_info(torch_mod=None, hips_mod=None):
    info = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "torch": torch_mod.__version__ if torch_mod is not None else None,
        "hips_autograd": hips_mod.version if hips_mod is not None else None,
        "cpus": os.cpu_count(),
        "threads": {v: os.environ.get(v) for v in
                    ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
    }
    try:
        import scipy
        info["scipy"] = scipy.__version__
    except Exception:
        info["scipy"] = None
    try:
        import cgrad
        info["cgrad"] = getattr(cgrad, "__version__", "?")
    except Exception as e:
        info["cgrad"] = f"unimportable ({err_text(e)})"
    if torch_mod is not None:
        info["torch_threads"] = torch_mod.get_num_threads()
    info["cpu"] = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    info["cpu"] = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal:"):
                    info["mem_gb"] = round(int(ln.split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    try:
        import subprocess
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                    "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            info["git"] = r.stdout.strip() + ("+local changes" if dirty else "")
    except Exception:
        pass
    info["loadavg_start"] = loadavg()
    info["date"] = time.strftime("%Y-%m-%d %H:%M %Z")
    return info
