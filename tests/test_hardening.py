"""Limits found by auditing csrc/ and the .pyx for fixed-size buffers, narrow integers and
unchecked indices (the audit that followed the wide-node crash, tests/test_wide.py)."""
from __future__ import annotations

import numpy as np
import pytest

import cgrad


def test_set_grad_fn_rejects_an_output_number_out_of_range():
    # the engine indexes a node's gradient buffers by a tensor's output number
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = cgrad.tensor([1.0, 2.0])
    for bad in (1, 5, -1, 2**62):
        with pytest.raises(IndexError, match="out of range"):
            z._set_grad_fn(y.grad_fn, bad)
    assert z.grad_fn is None and not z.requires_grad
    with pytest.raises(TypeError):
        z._set_grad_fn(object(), 0)
    # a multi-output node takes each of its output numbers
    a, b = cgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True).split(2)
    w = cgrad.tensor([0.0, 0.0])
    w._set_grad_fn(b.grad_fn, 1)
    assert w.output_nr == 1


def _unaligned(dtype, n):
    item = np.dtype(dtype).itemsize
    raw = np.zeros(item * n + 1, dtype=np.uint8)
    a = np.frombuffer(raw.data, dtype=dtype, count=n, offset=1)
    assert not a.flags.aligned
    return a


def test_sddmm_takes_unaligned_arrays():
    # the C kernel reads whole int64/float elements: misaligned inputs are copied first
    # (UBSan reports a misaligned load otherwise)
    _sparse = pytest.importorskip("cgrad._sparse")
    rng = np.random.default_rng(0)
    G = rng.standard_normal((4, 5))
    B = rng.standard_normal((6, 5))
    Gu = _unaligned(np.float64, 20).reshape(4, 5)
    Gu[...] = G
    Bu = _unaligned(np.float64, 30).reshape(6, 5)
    Bu[...] = B
    r = _unaligned(np.int64, 3)
    r[...] = [0, 3, 2]
    c = _unaligned(np.int64, 3)
    c[...] = [5, 0, 1]
    expect = np.einsum("kf,kf->k", G[[0, 3, 2]], B[[5, 0, 1]])
    np.testing.assert_allclose(_sparse.sddmm(r, c, Gu, Bu), expect, rtol=1e-12)
    np.testing.assert_allclose(_sparse.sddmm(r, c, Gu.astype(np.float32),
                                             Bu.astype(np.float32)), expect, rtol=1e-5)
    r[1] = 4
    with pytest.raises(IndexError, match="out of range"):
        _sparse.sddmm(r, c, Gu, Bu)


# --------------------------------------------------------------------------------------
# Note [Accumulation lock]: threads accumulating into one leaf. NumPy releases the GIL in
# a large add, so an unguarded read-modify-write of .grad lost updates (8 threads x 30
# backwards into a 200,000-element leaf summed to 233-236 instead of 240).

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402


def _hammer(fn, n_threads=8):
    barrier = threading.Barrier(n_threads)
    errors = []

    def work():
        try:
            barrier.wait()
            fn()
        except BaseException as e:        # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("size", [8, 1024, 200_000])
def test_threads_accumulate_into_one_leaf_exactly(size):
    w = cgrad.tensor(np.zeros(size), requires_grad=True)
    reps = 20

    def fn():
        for k in range(reps):
            (w * float(k % 3 + 1)).sum().backward()

    _hammer(fn)
    expect = 8 * sum(float(k % 3 + 1) for k in range(reps))
    g = w.grad.numpy()
    assert g.min() == g.max() == expect
    assert cgrad._C._acc_lock_state() == (0, 0)


def test_threads_accumulate_into_a_retained_non_leaf_exactly():
    x = cgrad.tensor(np.ones(200_000), requires_grad=True)
    h = x * 1.0
    h.retain_grad()
    reps = 10

    def fn():
        for _ in range(reps):
            (h * 2.0).sum().backward(retain_graph=True)

    _hammer(fn)
    assert h.grad.numpy().min() == h.grad.numpy().max() == 8 * reps * 2.0
    assert x.grad.numpy().min() == x.grad.numpy().max() == 8 * reps * 2.0


def test_accumulation_lock_is_released_when_the_add_raises():
    from cgrad import nn

    class Boom(nn.Parameter):
        def __add__(self, other):
            assert cgrad._C._acc_lock_state()[1] == 1      # inside the guarded region
            raise ValueError("boom")

    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    x.grad = Boom(cgrad.tensor([0.0, 0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # the create_graph cycle warning
        with pytest.raises(ValueError, match="boom"):
            (x * 2).sum().backward(create_graph=True)
    assert cgrad._C._acc_lock_state() == (0, 0)
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


_FORK_WHILE_LOCKED = textwrap.dedent("""
    import os, sys, threading, time, warnings
    import cgrad
    from cgrad import nn
    warnings.simplefilter("ignore")
    inside = threading.Event()
    release = threading.Event()

    class Slow(nn.Parameter):
        def __add__(self, other):           # runs with the accumulation lock held
            inside.set()
            release.wait(10)
            return nn.Parameter.__add__(self, other)

    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    x.grad = Slow(cgrad.tensor([0.0, 0.0]))
    th = threading.Thread(target=lambda: (x * 2).sum().backward(create_graph=True))
    th.start()
    assert inside.wait(10)
    assert cgrad._C._acc_lock_state()[1] == 1
    pid = os.fork()
    if pid == 0:
        # the holder thread does not exist here: the child must get a free lock
        try:
            assert cgrad._C._acc_lock_state() == (0, 0)
            y = cgrad.tensor([3.0], requires_grad=True)
            (y * y).sum().backward()
            os._exit(0 if y.grad.tolist() == [6.0] else 3)
        except BaseException:
            os._exit(4)
    release.set()
    th.join()
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), x.grad.tolist())
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_holds_the_accumulation_lock():
    r = subprocess.run([sys.executable, "-c", _FORK_WHILE_LOCKED], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    code, grad = r.stdout.split(" ", 1)
    assert code == "0", r.stdout + r.stderr
    assert grad.strip() == "[2.0, 2.0]"
