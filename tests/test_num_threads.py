"""cgrad.set_num_threads / get_num_threads / set_num_interop_threads /
get_num_interop_threads (issue 17; Note [Thread pools] in cgrad/_threads.py): the BLAS that
NumPy and SciPy load and cgrad's sparse kernel follow set_num_threads; the argument checks
are torch's. What changes process-wide state runs in a subprocess or restores it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cgrad
from cgrad import _threads

try:
    import torch
except ImportError:
    torch = None

ROOT = os.path.dirname(os.path.dirname(cgrad.__file__))


def _script(code):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("OPENBLAS_NUM_THREADS", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def restore_threads():
    before = cgrad.get_num_threads(), cgrad.sparse.get_num_threads(), dict(_threads._state)
    yield
    cgrad.set_num_threads(before[0])
    cgrad.sparse.set_num_threads(before[1])
    _threads._state.update(before[2])


def test_set_num_threads_sets_blas_and_sparse(restore_threads):
    assert isinstance(cgrad.get_num_threads(), int) and cgrad.get_num_threads() >= 1
    libs = _threads.blas_threads()
    assert libs, "NumPy's BLAS was not found among the loaded libraries"
    for n in (1, 2):
        cgrad.set_num_threads(n)
        assert cgrad.get_num_threads() == n
        assert cgrad.sparse.get_num_threads() == n
        assert set(_threads.blas_threads().values()) == {n}
    cgrad.sparse.set_num_threads(3)             # the sparse kernel alone, as before
    assert cgrad.sparse.get_num_threads() == 3 and cgrad.get_num_threads() == 2
    cgrad.set_num_threads(np.int64(1))          # NumPy ints are ints (torch takes them)
    assert cgrad.get_num_threads() == 1


def test_results_do_not_depend_on_the_thread_count(restore_threads):
    a = cgrad.randn(300, 200, dtype=cgrad.float64, generator=cgrad.Generator().manual_seed(1))
    b = cgrad.randn(200, 100, dtype=cgrad.float64, generator=cgrad.Generator().manual_seed(2))
    cgrad.set_num_threads(1)
    one = (a @ b).numpy()
    cgrad.set_num_threads(2)
    np.testing.assert_allclose((a @ b).numpy(), one, rtol=1e-12)


def test_default_is_the_blas_count():
    out = _script("""
        import cgrad
        from cgrad import _threads
        print(cgrad.get_num_threads() == list(_threads.blas_threads().values())[0])
        """)
    assert out.split() == ["True"]


def test_scipy_blas_loaded_later_follows():
    """SciPy's BLAS is loaded on first use (an optimizer step's axpy): it gets the count."""
    out = _script("""
        import sys, cgrad
        from cgrad import _threads
        assert "scipy.linalg" not in sys.modules
        cgrad.set_num_threads(1)
        p = cgrad.ones(10000)
        p.add_(cgrad.ones(10000), alpha=-0.1)       # BLAS axpy from SciPy
        counts = _threads.blas_threads()
        print(len(counts) >= 2, set(counts.values()) == {1}, "scipy" in " ".join(counts))
        """)
    assert out.split() == ["True", "True", "True"]


def test_interop_threads():
    out = _script("""
        import os, cgrad
        print(cgrad.get_num_interop_threads() == (os.cpu_count() or 1))
        cgrad.set_num_interop_threads(3)
        print(cgrad.get_num_interop_threads())
        try:
            cgrad.set_num_interop_threads(3)
        except RuntimeError as e:
            print("cannot set number of interop threads after parallel work has started" in str(e))
        """)
    assert out.split() == ["True", "3", "True"]
    if torch is not None:
        # torch: the same default and the same refusal of a second call
        tout = _script("""
            import os, torch
            print(torch.get_num_interop_threads() == (os.cpu_count() or 1))
            torch.set_num_interop_threads(3)
            print(torch.get_num_interop_threads())
            try:
                torch.set_num_interop_threads(3)
            except RuntimeError as e:
                print("cannot set number of interop threads after parallel work has started"
                      in str(e))
            """)
        assert tout.split() == out.split()


BAD = [(0, RuntimeError, "expects a positive integer"),
       (-1, RuntimeError, "expects a positive integer"),
       (1.5, RuntimeError, "expects an int, but got float"),
       ("2", RuntimeError, "expects an int, but got str"),
       (True, RuntimeError, "expects an int, but got bool"),
       (2 ** 40, ValueError, "Overflow when unpacking long"),
       (2 ** 70, ValueError, "Overflow when unpacking long long"),
       (None, RuntimeError, "expects an int, but got NoneType"),
       (np.array([1.0]), RuntimeError, "expects an int, but got numpy.ndarray"),
       (np.float64(2), RuntimeError, "expects an int, but got numpy.float64")]


@pytest.mark.parametrize("value,exc,phrase", BAD, ids=[repr(b[0]) for b in BAD])
@pytest.mark.parametrize("fn", ["set_num_threads", "set_num_interop_threads"])
def test_bad_counts(fn, value, exc, phrase):
    with pytest.raises(exc, match=phrase):
        getattr(cgrad, fn)(value)
    if torch is not None:
        with pytest.raises(exc, match=phrase):
            getattr(torch, fn)(value)


def test_tensor_count_is_refused():
    with pytest.raises(RuntimeError, match="set_num_threads expects an int, but got Tensor"):
        cgrad.set_num_threads(cgrad.tensor(2))
    if torch is not None:
        with pytest.raises(RuntimeError, match="set_num_threads expects an int, but got Tensor"):
            torch.set_num_threads(torch.tensor(2))
