"""cgrad's functions and methods take torch's parameter names (and, where torch's op is bound
in C, NumPy's names: axis, keepdims, x, x2), positional-or-keyword as in torch.

The torch signatures are stored in tests/torch_signatures.json (written by
tests/gen_torch_signatures.py, which also records every keyword call of the op samples
(tests/op_samples.py) that torch accepts). Every recorded call is replayed on cgrad and must
give what the positional call gives; when torch is importable the file is checked to be
current and each call is compared with torch's result.
"""
from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import gen_torch_signatures as gen  # noqa: E402
from op_samples import F_SAMPLES, SAMPLES  # noqa: E402

import cgrad  # noqa: E402
import cgrad.nn.functional as cF  # noqa: E402

# cholesky and qr (cgrad's and torch's) warn that they are deprecated: not what these test
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*is deprecated in favor of (torch|cgrad).linalg:UserWarning")

DATA = json.loads((Path(__file__).parent / "torch_signatures.json").read_text())
SIGS = DATA["signatures"]

# torch parameters cgrad does not have, with the reason (the parameter is not checked).
UNSUPPORTED = {
    "out": "checked by tests/test_out_arg.py (Note [out= arguments] in cgrad/_api.py)",
    "out_dtype": "mm/bmm's output dtype (torch 2.13): not implemented",
    "generator": "cgrad has one global generator",
    "memory_format": "accepted and ignored where torch has it (one memory format)",
    "self": "torch's deprecated scalar-first overloads (bitwise_and(self: Number, other))",
}


def _sample(form, name, sid):
    for s_id, s in gen.samples_for(form, name):
        if s_id == sid:
            return s
    raise KeyError(sid)


def _call_id(c):
    form, name, sid, k, plan = c
    return f"{form}:{sid}#{k}:" + ",".join(plan[i] for i in sorted(plan))


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


@pytest.mark.parametrize("call", DATA["calls"], ids=[_call_id(c) for c in DATA["calls"]])
def test_keyword_call(call):
    """torch's names as keywords: the result is the positional call's (and torch's)."""
    form, name, sid, _, plan = call
    plan = {int(i): n for i, n in plan.items()}
    s = _sample(form, name, sid)
    x = cgrad.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
    want = gen.to_numpy(gen.call_with(cgrad, form, name, s, x, None), cgrad)
    got = gen.to_numpy(gen.call_with(cgrad, form, name, s, x, plan), cgrad)
    if not s.random:
        assert gen.same(got, want), (got, want)
    torch = _torch()
    if torch is not None and not s.random:
        tx = torch.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
        ref = gen.to_numpy(gen.call_with(torch, form, name, s, tx, plan), torch)
        assert gen.same(got, ref), (got, ref)


def _cgrad_object(form, name):
    if form == "fn":
        return getattr(cgrad, name)
    if form == "F":
        return getattr(cF, name)
    return getattr(cgrad.Tensor, name)


def _impl_params(obj, form):
    """The parameters of the Python function behind obj (following __wrapped__)."""
    fn = inspect.unwrap(obj)
    params = list(inspect.signature(fn).parameters.values())
    return params[1:] if form == "method" else params


def _torch_kinds(form, name):
    """{parameter name: "pos" | "kw_only"} over all of torch's overloads ("pos" if any
    overload takes it positionally)."""
    kinds = {}
    for ov in SIGS[form][name]["overloads"]:
        for pname, kind, _, _ in ov:
            if kind in ("pos", "kw_only") and pname not in UNSUPPORTED:
                if kinds.get(pname) != "pos":
                    kinds[pname] = kind
    return kinds


NAMES = [(f, n) for f, n in gen.names_to_check() if n in SIGS[f]]


@pytest.mark.parametrize("form,name", NAMES, ids=[f"{f}:{n}" for f, n in NAMES])
def test_parameter_names(form, name):
    """Every parameter name torch's overloads have (but UNSUPPORTED) is a parameter of
    cgrad's function that can be given by keyword, and one that torch takes only by keyword
    is keyword-only in cgrad. (Where torch has overloads, one Python signature cannot be
    positional in all of their orders: the positional forms are checked by calling, in
    test_keyword_call and the op tests.)"""
    params = _impl_params(_cgrad_object(form, name), form)
    by_name = {p.name: p for p in params}
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    for pname, kind in _torch_kinds(form, name).items():
        if pname not in by_name:
            assert var_kw, f"{form} {name}: no parameter {pname!r} (cgrad: {params})"
            continue
        p = by_name[pname]
        if kind == "pos":
            assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), (form, name, pname)
        else:
            assert p.kind == p.KEYWORD_ONLY, f"{form} {name}: {pname} is {p.kind}"


def test_every_op_is_checked():
    """Every name swept has torch signatures (or is a property), and most have calls."""
    missing = [(f, n) for f, n in gen.names_to_check() if n not in SIGS[f]]
    assert missing == []
    called = {(c[0], c[1]) for c in DATA["calls"]}
    assert len(called) > 0.7 * len(NAMES)


def test_signature_file_is_current():
    torch = pytest.importorskip("torch")
    assert DATA["torch"] == torch.__version__.split("+")[0]
    sigs = gen.torch_signatures(torch, gen.names_to_check())
    assert json.loads(json.dumps(sigs)) == SIGS
    calls = gen.torch_calls(torch, sigs)
    assert json.loads(json.dumps(calls)) == DATA["calls"]


def test_samples_exist_for_every_call():
    for form, name, sid, _, _ in DATA["calls"]:
        table = F_SAMPLES if form == "F" else SAMPLES
        assert name in table
        _sample(form, name, sid)


def test_the_issue_examples():
    x = cgrad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = cgrad.tensor([[0.5, -1.0], [2.0, 0.0]])
    np.testing.assert_allclose(cgrad.matmul(input=x, other=y).detach().numpy(),
                               x.detach().numpy() @ y.numpy())
    assert cgrad.sum(input=x, dim=0).tolist() == [4.0, 6.0]
    assert x.sum(axis=0).tolist() == [4.0, 6.0]
    assert x.sum(axis=1, keepdims=True).tolist() == [[3.0], [7.0]]
    assert cgrad.add(x1=x, x2=y, alpha=2).tolist() == [[2.0, 0.0], [7.0, 4.0]]
    np.testing.assert_allclose(cgrad.pow(self=2.0, exponent=y).numpy(), 2.0 ** y.numpy())
    with pytest.raises(TypeError):
        cgrad.sum(x, dim=0, axis=0)             # one argument given twice


def test_alias_policy_matches_torch():
    """NumPy's names are renamed exactly for the ops torch binds in C."""
    from cgrad import _api
    py_fn = {n for n, e in SIGS["fn"].items() if e["source"] == "python"}
    py_method = {n for n, e in SIGS["method"].items() if e["source"] == "python"}
    c_nn = {n for n, e in SIGS["F"].items() if e["source"] == "c"}
    assert _api.PYTHON_IN_TORCH["function"] == py_fn
    assert _api.PYTHON_IN_TORCH["method"] == py_method
    assert _api.C_IN_TORCH_NN == c_nn


PYTHON_CALLS = [c for c in DATA["calls"]
                if SIGS[c[0]][c[1]]["source"] == "python"
                and any(v in gen.ALIASES for v in c[4].values())]


@pytest.mark.parametrize("call", PYTHON_CALLS, ids=[_call_id(c) for c in PYTHON_CALLS])
def test_python_ops_take_no_numpy_names(call):
    """torch's Python-written ops (split, norm, nn.functional.softmax, ...) refuse axis=,
    x=, ...: so does cgrad."""
    form, name, sid, _, plan = call
    plan = {int(i): gen.ALIASES.get(n, n) for i, n in plan.items()}
    s = _sample(form, name, sid)
    x = cgrad.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
    with pytest.raises(TypeError):
        gen.call_with(cgrad, form, name, s, x, plan)
