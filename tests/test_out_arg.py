"""out= of cgrad's functions (Note [out= arguments] in cgrad/_api.py): every function torch
gives an out= argument takes one, writes its result into it in place and returns it, with
torch's checks (no autograd through out=, the dtypes out may have, resizing), against
torch 2.13 where it is importable.

The sweep runs the first sample of each function (tests/op_samples.py) on cgrad and torch:
the plain result written into an out of the same dtype and shape, into an empty out (resized
silently), into an out of another dtype (accepted or refused as torch's kernel does), and the
autograd error when an input requires grad.
"""
from __future__ import annotations

import inspect
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import gen_torch_signatures as gen  # noqa: E402

import cgrad  # noqa: E402
from cgrad import _api  # noqa: E402
from torch_compare import check, outcome  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

NO_AUTOGRAD = ("functions with out=... arguments don't support automatic differentiation, but "
               "one of the arguments requires grad.")
# torch's out= overloads that need an argument the sample leaves out (sum(input, dim, ...),
# median(input, dim, ...), ...): cgrad takes out= in every form of these
TORCH_NEEDS_DIM = {"sum", "prod", "median", "nanmedian", "argsort"}


def _sample(name):
    samples = gen.samples_for("fn", name)
    return samples[0][1] if samples else None


SWEPT = [n for n in sorted(_api.OUT_FUNCTIONS) if _sample(n) is not None]


def _run(m, name, s, out_of=None, grad=False):
    """The sample's call on library m, plain (out_of None) or with out= made by out_of from
    the plain result; returns (result, out)."""
    x = m.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
    args, kw = s.args(m, x), dict(s.kw(m, x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # cholesky and qr are deprecated
        with m.no_grad():
            plain = getattr(m, name)(*args, **kw)
        if out_of is None:
            return plain, None
        out = (tuple(out_of(m, t) for t in plain) if isinstance(plain, tuple)
               else out_of(m, plain))
        if grad:
            r = getattr(m, name)(*args, out=out, **kw)
        else:
            with m.no_grad():
                r = getattr(m, name)(*args, out=out, **kw)
    return r, out


def _np(t):
    return [_np(u) for u in t] if isinstance(t, (tuple, list)) else t.numpy().copy()


def _same_objects(r, out):
    if isinstance(out, tuple):
        return all(a is b for a, b in zip(r, out))
    return r is out


@pytest.mark.parametrize("name", SWEPT)
def test_out_of_the_result_dtype(name):
    s = _sample(name)
    plain, _ = _run(cgrad, name, s)
    r, out = _run(cgrad, name, s, lambda m, t: m.zeros(t.shape, dtype=t.dtype))
    assert _same_objects(r, out)
    assert gen.same(_np(r), _np(plain))
    r, out = _run(cgrad, name, s, lambda m, t: m.zeros(0, dtype=t.dtype))    # resized
    assert _same_objects(r, out) and gen.same(_np(r), _np(plain))
    if torch is not None and name not in TORCH_NEEDS_DIM:
        tr, _ = _run(torch, name, s, lambda m, t: m.zeros(t.shape, dtype=t.dtype))
        assert gen.same(_np(r), _np(tr))


def _other_dtype(kind):
    def make(m, t):
        if kind == "f32":
            dt = m.float32 if t.dtype == m.float64 else m.float64
        else:
            dt = m.int64 if t.dtype != m.int64 else m.float64
        return m.zeros(t.shape, dtype=dt)
    return make


def _outcome(m, name, s, kind):
    try:
        r, _ = _run(m, name, s, _other_dtype(kind))
    except Exception as e:      # noqa: BLE001 - the outcome is the point
        return ("raised", type(e).__name__, str(e))
    return ("ok", _np(r))


@pytest.mark.parametrize("kind", ["f32", "i64"])
@pytest.mark.parametrize("name", SWEPT)
def test_out_of_another_dtype(name, kind):
    """Accepted (the result cast into out) or refused as torch's kernel does."""
    if torch is None:
        pytest.skip("compares with torch")
    if name in TORCH_NEEDS_DIM:
        pytest.skip("torch's out= overload of this op needs dim")
    s = _sample(name)
    cg, th = _outcome(cgrad, name, s, kind), _outcome(torch, name, s, kind)
    assert cg[0] == th[0], (cg, th)
    if cg[0] == "ok":
        assert gen.same(cg[1], th[1]), (cg, th)
        return
    assert cg[1] == th[1] or {cg[1], th[1]} <= {"RuntimeError", "NotImplementedError"}, (cg, th)
    for phrase in ("can't be cast to the desired output type", "Expected out tensor to have "
                   "dtype"):
        if th[2].startswith(phrase) or phrase in th[2] and "cat()" in th[2]:
            assert phrase in cg[2], (cg, th)


@pytest.mark.parametrize("name", SWEPT)
def test_out_refuses_autograd(name):
    """An input that requires grad (in grad mode) refuses out= for a differentiable op."""
    s = _sample(name)
    x = cgrad.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = getattr(cgrad, name)(*s.args(cgrad, x), **s.kw(cgrad, x))
    differentiable = any(t.requires_grad for t in (r if isinstance(r, tuple) else (r,)))
    zeros = lambda m, t: m.zeros(t.shape, dtype=t.dtype)    # noqa: E731
    if not differentiable:
        _run(cgrad, name, s, zeros, grad=True)
        return
    shown = _api.OUT_NAMES.get(name, name)
    with pytest.raises(RuntimeError) as e:
        _run(cgrad, name, s, zeros, grad=True)
    assert str(e.value) == f"{shown}(): {NO_AUTOGRAD}"
    if torch is None or name in TORCH_NEEDS_DIM:
        return
    try:
        r, _ = _run(torch, name, s, zeros, grad=True)
    except RuntimeError as te:
        assert str(te) == str(e.value)
        return
    # a deliberate difference: for some ops (softmax, diag, floor_divide, ...) torch records
    # a node whose backward raises (NotImplemented), or a copy (quantile); cgrad refuses
    # out= with an input that requires grad for every differentiable op
    nodes = {type(t.grad_fn).__name__ for t in (r if isinstance(r, tuple) else (r,))}
    assert nodes <= {"NotImplemented", "CopyBackwards"}, nodes


def _cases(rows):
    return pytest.mark.parametrize("code,phrase", rows, ids=[c for c, _ in rows])


CASES = [
    # tensorqs_tutorial.py (pytorch/tutorials beginner_source/basics)
    ("a = T.ones(4, 4); a[:, 1] = 0; y = T.rand_like(a); r = (T.matmul(a, a.T, out=y) is y, y)",
     None),
    ("a = T.ones(4, 4); z = T.rand_like(a); r = (T.mul(a, a, out=z) is z, z)", None),
    ("a = T.tensor([1., 2.]); r = (T.add(a, 1, out=a) is a, a)", None),
    ("a = T.ones(2, 2); o = T.zeros(2, 2); v = o[0]; T.mul(a[0], 3, out=v); r = o", None),
    ("a = T.ones(2, 2); o = T.zeros(2, 2); T.mul(a, 2, out=o.t()); r = o", None),
    ("a = T.tensor([1., 2.]); o = T.zeros(2); v = o._version; T.exp(a, out=o); "
     "r = o._version > v", None),
    ("r = T.eq(T.tensor([1., 2.]), T.tensor([1., 3.]), out=T.zeros(2, dtype=T.int64))", None),
    ("r = T.bitwise_and(T.tensor([3, 5]), T.tensor([1, 4]), out=T.zeros(2))", None),
    ("r = T.sum(T.tensor([[0.5, 0.7]]), 1, out=T.zeros(1, dtype=T.int64))", None),
    ("r = T.cumsum(T.tensor([0.5, 0.7]), 0, out=T.zeros(2, dtype=T.int64))", None),
    ("r = T.max(T.tensor([1., 3.]), out=T.zeros((), dtype=T.float64))", None),
    ("r = tuple(T.sort(T.tensor([3., 1.]), out=(T.zeros(2), T.zeros(2, dtype=T.int64))))", None),
    ("o = [T.zeros(2), T.zeros(2, dtype=T.int64)]; r = T.sort(T.tensor([3., 1.]), out=o); "
     "r = (r.values is o[0], r.indices is o[1], tuple(r))", None),
    ("r = tuple(T.max(T.tensor([[3., 1.]]), 1, out=(T.zeros(1), T.zeros(1, dtype=T.int64))))",
     None),
    ("r = tuple(T.topk(T.tensor([3., 1., 2.]), 2, out=(T.zeros(0), T.zeros(0, dtype=T.int64))))",
     None),
    ("r = T.mul(T.ones(2), 2, out=None)", None),
    # errors
    ("T.mul(T.ones(2), 2, out=[1])", "mul(): argument 'out' must be Tensor, not list"),
    ("T.mul(T.ones(2), 2, out=(T.zeros(2),))", "mul(): argument 'out' must be Tensor, not tuple"),
    ("T.mul(T.ones(2), 2, out=np.zeros(2))",
     "mul(): argument 'out' must be Tensor, not numpy.ndarray"),
    ("T.mul(T.ones(2), 2, out=T.zeros(2, dtype=T.int64))",
     "result type Float can't be cast to the desired output type Long"),
    ("T.mul(T.ones(2), 2, out=T.zeros(2, dtype=T.bool))",
     "result type Float can't be cast to the desired output type Bool"),
    ("T.mm(T.ones(2, 2), T.ones(2, 2), out=T.zeros(2, 2, dtype=T.float64))",
     "Expected out tensor to have dtype float, but got double instead"),
    ("T.matmul(T.ones(2, 2), T.ones(2, 2), out=T.zeros(2, 2, dtype=T.int64))",
     "Expected out tensor to have dtype float, but got long int instead"),
    ("T.hstack([T.ones(2), T.ones(2)], out=T.zeros(4, dtype=T.int64))",
     "input types can't be cast to the desired output type Long"),
    ("T.mul(T.ones(2, requires_grad=True), 2, out=T.zeros(2))", "mul(): " + NO_AUTOGRAD),
    ("T.mul(T.ones(2), 2, out=T.zeros(2, requires_grad=True))", "mul(): " + NO_AUTOGRAD),
    ("T.sort(T.tensor([3., 1.]), out=(T.zeros(2),))", "expected tuple of 2 elements but got 1"),
    ("T.sort(T.tensor([3., 1.]), out=(T.zeros(2), 3))",
     "expected Tensor as element 1 in argument"),
]


@_cases(CASES)
def test_out_cases(code, phrase):
    cg = outcome(cgrad, code)
    if torch is None:
        if phrase is None:
            assert cg[0] == "ok", cg
        else:
            assert cg[0] == "raised" and phrase in cg[2], cg
        return
    check(cg, outcome(torch, code), phrase)


def test_no_grad_out_keeps_requires_grad_and_the_call_without_out_is_unchanged():
    o = cgrad.zeros(2, requires_grad=True)
    with cgrad.no_grad():
        r = cgrad.mul(cgrad.ones(2), 3.0, out=o)
    assert r is o and o.requires_grad and o.tolist() == [3.0, 3.0]
    x = cgrad.ones(2, requires_grad=True)
    y = cgrad.mul(x, 3.0)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_out_is_in_the_signature_and_help():
    for name in ("matmul", "mul", "sum", "sort", "exp"):
        f = getattr(cgrad, name)
        assert "out" in inspect.signature(f).parameters, name
        assert "out=None" in f.__doc__.split("\n")[0], name
    assert "out" not in inspect.signature(cgrad.reshape).parameters
    with pytest.raises(TypeError):
        cgrad.reshape(cgrad.ones(2), (2,), out=cgrad.zeros(2))


def test_out_functions_are_torchs():
    """OUT_FUNCTIONS is the set of swept functions that have out= in one of torch's
    overloads (tests/torch_signatures.json)."""
    sigs = json.loads((Path(__file__).parent / "torch_signatures.json").read_text())
    sigs = sigs["signatures"]["fn"]
    torch_out = {n for n, v in sigs.items()
                 if any(any(p[0] == "out" for p in ov) for ov in v["overloads"])}
    assert _api.OUT_FUNCTIONS == torch_out
    assert _api.OUT_CAST | _api.OUT_CAT | _api.OUT_DTYPE <= _api.OUT_FUNCTIONS
