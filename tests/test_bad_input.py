"""No crash on bad input: every public (and private compiled) entry point, called with
arguments of the wrong type, raises a Python exception instead of crashing the interpreter.

The sweep runs in a subprocess so that a crash fails this test instead of killing pytest."""
from __future__ import annotations

import inspect
import pickle
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import cgrad
from cgrad import _C

SWEEP = textwrap.dedent(r'''
    import faulthandler, random, warnings
    import numpy as np
    import cgrad
    import cgrad.autograd
    import cgrad.autograd.functional
    import cgrad.linalg
    import cgrad.nn.functional
    import cgrad.sparse
    from cgrad import _C, _sparse

    faulthandler.enable()
    warnings.simplefilter("ignore")
    random.seed(0)

    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    sp = cgrad.sparse_coo_tensor(cgrad.tensor([[0, 1], [1, 0]]), cgrad.tensor([1.0, 2.0]),
                                 (2, 2))
    WEIRD = [None, 0, -1, 2 ** 70, 1.5, float("nan"), "s", b"b", (), [], [1, "a"], {},
             object(), x, y, y.grad_fn, sp, np.array([1.0]), np.array(["a"]), np.zeros((0,)),
             cgrad.tensor([]), cgrad.tensor(3), cgrad.ones(2, 2), type, cgrad.float32,
             slice(None), Ellipsis, (2, 2)]
    # functions that change process-wide state (a wrong value would break later calls)
    STATEFUL = {"manual_seed", "set_default_dtype", "set_printoptions", "save", "load",
                "set_grad_enabled", "use_deterministic_algorithms", "_set_grad_enabled",
                "_fix_binop_slots", "_register", "_register_binops", "_set_anomaly",
                "_set_default_float", "_push_saved_hooks", "_pop_saved_hooks",
                "_set_hooks_disabled", "_register_function", "_register_sparse",
                "_register_view_regen", "set_detect_anomaly"}
    calls = 0

    def sweep(f, max_args, tries):
        global calls
        for k in range(max_args + 1):
            for _ in range(tries):
                calls += 1
                try:
                    repr(f(*[random.choice(WEIRD) for _ in range(k)]))
                except Exception:
                    pass

    def members(obj, private=False):
        for name in dir(obj):
            if name.startswith("__") or (name.startswith("_") and not private):
                continue
            if name in STATEFUL:
                continue
            try:
                f = getattr(obj, name)
            except Exception:
                continue
            if callable(f) and not (isinstance(f, type) and issubclass(f, BaseException)):
                yield f

    for mod, private in ((cgrad, False), (cgrad.nn.functional, False), (cgrad.sparse, False),
                         (cgrad.linalg, False), (cgrad.autograd, False),
                         (cgrad.autograd.functional, False), (_C, True), (_sparse, True)):
        for f in members(mod, private):
            sweep(f, 4, 25)
    for make in (lambda: cgrad.tensor([1.0, 2.0], requires_grad=True) * 1,
                 lambda: (cgrad.tensor([1.0], requires_grad=True) * 2).grad_fn,
                 lambda: sp):
        for f in members(make(), private=True):
            sweep(f, 3, 15)
    cgrad.set_grad_enabled(True)

    class Random(cgrad.autograd.Function):
        """A Function whose forward calls the ctx API and whose backward returns junk."""
        @staticmethod
        def forward(ctx, *args):
            for m in ("save_for_backward", "mark_dirty", "mark_non_differentiable",
                      "set_materialize_grads", "save_for_forward"):
                try:
                    getattr(ctx, m)(*[random.choice(WEIRD) for _ in range(random.randrange(3))])
                except Exception:
                    pass
            a = args[0] if args and isinstance(args[0], cgrad.Tensor) else cgrad.tensor([1.0])
            return a * 1

        @staticmethod
        def backward(ctx, *grads):
            return tuple(random.choice(WEIRD) for _ in range(random.randrange(4)))

    for _ in range(300):
        calls += 1
        try:
            out = Random.apply(*[random.choice(WEIRD) for _ in range(random.randrange(4))])
            if out.requires_grad:
                out.sum().backward()
        except Exception:
            pass
    # the engine still works afterwards
    z = cgrad.tensor([3.0], requires_grad=True)
    (z * z).sum().backward()
    assert z.grad.tolist() == [6.0], z.grad
    print("survived", calls)
''')


def test_wrong_arguments_everywhere_raise_instead_of_crashing():
    r = subprocess.run([sys.executable, "-c", SWEEP], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "survived" in r.stdout


@pytest.mark.parametrize("call", [
    lambda: cgrad.ones(2)._share_version(None),
    lambda: _C._accumulate_into(None, None, False),
])
def test_none_for_a_compiled_tensor_argument_is_a_type_error(call):
    """These two used to dereference None (a segmentation fault)."""
    with pytest.raises(TypeError):
        call()


def _tensor_first():
    import cgrad.nn.functional as F
    return ([(cgrad, n) for n in cgrad._TENSOR_FIRST]
            + [(F, n) for n in F._TENSOR_FIRST])


@pytest.mark.parametrize("mod,name", _tensor_first(),
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_functions_refuse_a_non_tensor_first_argument_as_torch(mod, name):
    """Note [Tensor functions]: torch's TypeError and message, checked in C."""
    import numpy as np
    f = getattr(mod, name)
    for bad, tname in (([1.0], "list"), (1.5, "float"), (np.ones(2), "numpy.ndarray"),
                       (None, "NoneType")):
        with pytest.raises(TypeError, match=re.escape(
                f"{name}(): argument 'input' (position 1) must be Tensor, not {tname}")):
            f(bad)
    assert f.__wrapped__.__name__ == f.__name__
    assert inspect.signature(f) == inspect.signature(f.__wrapped__)
    assert pickle.loads(pickle.dumps(f)) is f


def test_tensor_function_list_matches_torch():
    """The wrapped functions are exactly those for which torch raises that TypeError (for a
    list, a float and an ndarray), among cgrad's public functions that torch also has."""
    torch = pytest.importorskip("torch")
    import numpy as np
    import cgrad.nn.functional as F
    import torch.nn.functional as TF
    for cmod, tmod, listed in ((cgrad, torch, cgrad._TENSOR_FIRST),
                               (F, TF, F._TENSOR_FIRST)):
        found = []
        for n in sorted(dir(cmod)):
            c, t = getattr(cmod, n), getattr(tmod, n, None)
            if n.startswith("_") or t is None or not callable(c) or isinstance(c, type):
                continue
            msgs = []
            for bad in ([1.0], 1.5, np.array([1.0])):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t(bad)
                    msgs.append("")
                except Exception as e:      # noqa: BLE001 (torch raises many kinds)
                    msgs.append(f"{type(e).__name__}: {e}")
            if all(m.startswith("TypeError") and "argument 'input' (position 1) must be "
                   "Tensor" in m for m in msgs):
                found.append(n)
        assert sorted(listed) == found


def test_tensor_functions_pass_calls_through():
    import cgrad.nn.functional as F
    x = cgrad.tensor([1.0, -2.0], requires_grad=True)
    assert F.relu(input=x).tolist() == [1.0, 0.0]             # keyword: passed on unchecked
    y = cgrad.sum(cgrad.exp(x), dim=0, keepdim=True)
    y.backward()
    assert y.grad_fn is not None and x.grad is not None
    assert isinstance(F.relu, type(cgrad.exp)) and repr(cgrad.exp).startswith("<function exp")
