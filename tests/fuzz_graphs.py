"""Random programs over cgrad's op library for differential fuzzing (tests/test_fuzz.py).

A *program* is a list of steps over a pool of tensors. Each step names one call (a function,
a method, an operator, a custom Function, a hook...) whose tensor arguments are references
to earlier pool entries; it appends its results to the pool. The same program runs on cgrad
or on torch (`run_program(prog, lib)`), in float64, so the two can be compared value for
value, gradient for gradient and exception for exception.

`programs(mode)` is the hypothesis strategy. While it draws a program it tracks, for every
pool entry, its shape, an interval holding its values, whether it requires grad and which
storage it shares (views, in-place ops), and only emits calls that are valid in torch and
numerically tame: denominators, log/sqrt arguments and pow bases stay away from zero,
magnitudes stay below BMAX, exp only sees small arguments. That makes the finite-difference
fallback meaningful and keeps torch's and cgrad's rounding differences far below the
comparison tolerance.

What the generator covers (see `_Gen`): broadcasting binary ops in operator, function and
method form, scalars on either side, unary ops, views (view/reshape/transpose/permute/
expand/slicing/select/narrow/split...) and in-place ops on non-leaves and on views
(`add_`, `mul_`, `y[0] += 1`, setitem with basic, integer-array and boolean indices),
advanced indexing (index_select, gather, take_along_dim, masked_select, take, index_add,
scatter, scatter_add), reductions with dims and keepdim, softmax/log_softmax, matmul of
every rank class, mm/bmm/mv/dot/outer/einsum, wide nodes (cat/stack/hstack/vstack/
broadcast_tensors/einsum/a custom Function with up to 2,000 inputs), custom Functions of
every flavour, tensor hooks and retain_grad, no_grad regions and detach.

Ops that torch has and cgrad lacks are left out; the list is in the module docstring of
tests/test_fuzz.py.
"""
from __future__ import annotations

import math
import operator
import random
import types

import numpy as np
from hypothesis import strategies as st

BMAX = 40.0          # no tensor's values may exceed this in magnitude
AWAY = 0.2           # denominators, reciprocal and negative powers: |x| >= AWAY
WIDTHS = (2, 3, 17, 100, 254, 255, 256, 257, 258, 300, 511, 512, 513, 1000, 1023, 1024,
          1025, 1500, 2000)


# ======================================================================================
# Program representation and the runner (library independent)


class R:
    """A reference to pool entry `i` inside a step's arguments."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"t{self.i}"


class Step:
    """One call. kind: leaf, fn (lib.name), meth (args[0].name), F (lib.nn.functional.name),
    linalg, opr (operator.name), attr (getattr), setitem, setitem_iadd, cf (a custom
    Function's apply), hook, retain. keep: None -> the result is one pool entry; a tuple of
    positions -> those items of the result sequence; () -> nothing is added."""
    __slots__ = ("kind", "name", "args", "kw", "keep", "nograd")

    def __init__(self, kind, name, args=(), kw=None, keep=None, nograd=False):
        self.kind, self.name, self.args = kind, name, tuple(args)
        self.kw = kw or {}
        self.keep = keep
        self.nograd = nograd

    def __repr__(self):
        return _fmt_step(self)


class Program:
    """Steps plus the driver: which roots, grad_outputs and which autograd calls."""

    def __init__(self):
        self.leaf_data = []       # ndarrays (float64), indexed by the leaf steps
        self.steps = []
        self.n_pool = 0
        self.mode = "backward"
        self.roots = []
        self.grad_outputs = []    # ndarray, or None for an implicit scalar gradient
        self.retain = None
        self.second = False       # a second backward (retained graph)
        self.again = False        # a second backward although the graph was freed
        self.inputs = None        # backward(inputs=...) / grad / double inputs (pool ids)
        self.allow_unused = True
        self.materialize = False
        self.weights = []         # double mode: weight per first-order gradient
        self.coefs = []           # double mode: a linear term per input
        self.seed = 0
        self.rg_leaves = []       # pool ids of leaves created with requires_grad=True
        self.leaf_ids = {}        # pool id -> leaf_data index

    def __repr__(self):
        lines = [f"# mode={self.mode} pool={self.n_pool} steps={len(self.steps)}"]
        pid = 0
        for s in self.steps:
            n = _n_out(s)
            lhs = ", ".join(f"t{pid + k}" for k in range(n))
            pid += n
            lines.append((lhs + " = " if lhs else "") + _fmt_step(s, self))
        lines.append(f"# roots={self.roots} retain={self.retain} second={self.second} "
                     f"again={self.again} inputs={self.inputs} allow_unused="
                     f"{self.allow_unused} materialize={self.materialize}")
        for r, g in zip(self.roots, self.grad_outputs):
            lines.append(f"# grad_output t{r}: "
                         + ("implicit" if g is None else np.array2string(
                             g, precision=3, threshold=12)))
        return "\n".join(lines)


def _n_out(s):
    if s.keep is None:
        return 1
    return len(s.keep)


def _fmt_val(v, prog=None):
    if isinstance(v, R):
        return repr(v)
    if isinstance(v, np.ndarray):
        if v.size > 12:
            return f"<{v.dtype} array {v.shape}>"
        return f"tensor({v.tolist()})"
    if isinstance(v, list):
        if len(v) > 6:
            return "[" + ", ".join(_fmt_val(x) for x in v[:3]) + f", ...({len(v)} items)]"
        return "[" + ", ".join(_fmt_val(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt_val(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, slice):
        parts = ["" if v.start is None else str(v.start), "" if v.stop is None else str(v.stop)]
        if v.step is not None:
            parts.append(str(v.step))
        return ":".join(parts)
    if v is Ellipsis:
        return "..."
    return repr(v)


def _fmt_step(s, prog=None):
    a = [_fmt_val(x) for x in s.args]
    kw = [f"{k}={_fmt_val(v)}" for k, v in s.kw.items()]
    inner = ", ".join(a + kw)
    pre = "[no_grad] " if s.nograd else ""
    if s.kind == "leaf":
        data = prog.leaf_data[s.args[0]] if prog is not None else None
        d = _fmt_val(data) if data is not None else f"leaf#{s.args[0]}"
        return f"{pre}tensor({d}, requires_grad={s.args[1]})"
    if s.kind == "fn":
        return f"{pre}lib.{s.name}({inner})"
    if s.kind == "F":
        return f"{pre}F.{s.name}({inner})"
    if s.kind == "linalg":
        return f"{pre}lib.linalg.{s.name}({inner})"
    if s.kind == "meth":
        return f"{pre}{a[0]}.{s.name}({', '.join(a[1:] + kw)})"
    if s.kind == "attr":
        return f"{pre}{a[0]}.{s.name}"
    if s.kind == "opr":
        sym = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**",
               "matmul": "@", "iadd": "+=", "isub": "-=", "imul": "*=", "itruediv": "/="}
        if s.name in sym:
            return f"{pre}{a[0]} {sym[s.name]} {a[1]}"
        if s.name == "neg":
            return f"{pre}-{a[0]}"
        if s.name == "getitem":
            idx = s.args[1]
            inner = ", ".join(_fmt_val(x) for x in idx) if isinstance(idx, tuple) \
                else _fmt_val(idx)
            return f"{pre}{a[0]}[{inner}]"
    if s.kind == "setitem":
        return f"{pre}{a[0]}[{_fmt_idx(s.args[1])}] = {a[2]}"
    if s.kind == "setitem_iadd":
        return f"{pre}{a[0]}[{_fmt_idx(s.args[1])}] += {a[2]}"
    if s.kind == "cf":
        return f"{pre}{s.name}.apply({inner})"
    if s.kind == "hook":
        return f"{a[0]}.register_hook({s.args[2]} {_fmt_val(s.args[3])})  # hook {s.args[1]}"
    if s.kind == "retain":
        return f"{a[0]}.retain_grad()"
    return f"{pre}{s.kind}:{s.name}({inner})"


def _fmt_idx(idx):
    if isinstance(idx, tuple):
        return ", ".join(_fmt_val(x) for x in idx)
    return _fmt_val(idx)


def _resolve(x, pool, lib):
    t = type(x)
    if t is R:
        return pool[x.i]
    if t is list:
        return [_resolve(v, pool, lib) for v in x]
    if t is tuple:
        return tuple(_resolve(v, pool, lib) for v in x)
    if t is np.ndarray:
        if x.dtype.kind in "bi":
            return lib.tensor(x)
        return lib.tensor(x, dtype=lib.float64)
    return x


class Env:
    """What one run of a program needs besides the pool: the library, its custom Functions,
    the leaf data and the hook log."""

    def __init__(self, lib, prog, leaf_data=None, hooks=True):
        self.lib = lib
        self.F = functions_for(lib)
        self.prog = prog
        self.leaf_data = prog.leaf_data if leaf_data is None else leaf_data
        self.hooks = hooks
        self.hook_calls = {}
        self.handles = []
        self.made_by = []         # the step that made each pool entry


def _make_hook(env, hid, kind, c):
    lib = env.lib
    calls = env.hook_calls

    def hook(g):
        if g is None:
            # torch 2.13 calls the hook of an unused output of a multi-output custom Function
            # with None (its zeros are materialized later); cgrad does not call it
            return None
        calls[hid] = calls.get(hid, 0) + 1
        if not env.hooks:
            return None
        if kind == "scale":
            return g * c
        if kind == "replace":
            return lib.full_like(g, c)
        return None
    return hook


def _inplace_step(s):
    return (s.kind in ("setitem", "setitem_iadd") or (s.kind == "cf" and s.name == "Dirty")
            or (s.kind == "meth" and s.name.endswith("_") and s.name != "requires_grad_")
            or (s.kind == "opr" and s.name in ("iadd", "isub", "imul", "itruediv")))


def _regenerate_torch_view(lib, t):
    """torch 2.13 quirks: an in-place op on a view whose base got history after the view was
    made raises "a leaf Variable that requires grad is being used in an in-place operation",
    register_hook on it segfaults (x = leaf * 1; v = x.t(); x.tanh_();
    v.register_hook(f)), and retain_grad() on it does nothing (its C++ is_leaf reads the
    stale, empty grad_fn), unless the view's grad_fn was read first (which regenerates it;
    its requires_grad and is_leaf then say True and False). Reading it changes nothing else;
    cgrad regenerates by itself."""
    if lib.__name__ != "torch":
        return
    try:
        if t._is_view():
            t.grad_fn
    except RuntimeError:
        pass


def _exec(env, pool, s):
    lib = env.lib
    if _inplace_step(s) and type(s.args[0]) is R:
        _regenerate_torch_view(lib, pool[s.args[0].i])
    args = _resolve(s.args, pool, lib)
    kw = {k: _resolve(v, pool, lib) for k, v in s.kw.items()} if s.kw else {}
    k = s.kind
    if k == "leaf":
        idx, rg = args
        return lib.tensor(env.leaf_data[idx].copy(), dtype=lib.float64, requires_grad=rg)
    if k == "fn":
        return getattr(lib, s.name)(*args, **kw)
    if k == "meth":
        return getattr(args[0], s.name)(*args[1:], **kw)
    if k == "opr":
        return getattr(operator, s.name)(*args)
    if k == "F":
        return getattr(lib.nn.functional, s.name)(*args, **kw)
    if k == "linalg":
        return getattr(lib.linalg, s.name)(*args, **kw)
    if k == "attr":
        return getattr(args[0], s.name)
    if k == "setitem":
        args[0][args[1]] = args[2]
        return None
    if k == "setitem_iadd":
        t, idx, v = args
        # t[idx] += v, as Python runs it: the slice's in-place add gives t's base a history
        # after t was made, so torch's quirk applies to the store into t
        tmp = t[idx]
        tmp += v
        _regenerate_torch_view(lib, t)
        t[idx] = tmp
        return None
    if k == "cf":
        return getattr(env.F, s.name).apply(*args, **kw)
    if k == "hook":
        t, hid, kind, c = args
        _regenerate_torch_view(lib, t)
        if env.hooks or kind == "observe":
            env.handles.append(t.register_hook(_make_hook(env, hid, kind, c)))
        return None
    if k == "retain":
        if env.hooks:
            _regenerate_torch_view(lib, args[0])
            args[0].retain_grad()
        return None
    raise ValueError(f"unknown step kind {k}")


class StepError(Exception):
    """Wraps nothing: run_program re-raises the original exception with `.fuzz_step` set."""


def run_program(prog, lib, leaf_data=None, hooks=True):
    """Run the program's steps with `lib` (cgrad or torch); returns (env, pool). An exception
    propagates unchanged with `fuzz_step` (the step's index) set on it."""
    env = Env(lib, prog, leaf_data, hooks)
    pool = []
    for n, s in enumerate(prog.steps):
        if not hooks and s.kind in ("hook", "retain"):
            continue
        try:
            if s.nograd:
                with lib.no_grad():
                    out = _exec(env, pool, s)
            else:
                out = _exec(env, pool, s)
        except Exception as e:
            e.fuzz_step = n
            raise
        if s.keep is None:
            pool.append(out)
            env.made_by.append(s)
        else:
            for p in s.keep:
                pool.append(out[p])
                env.made_by.append(s)
    return env, pool


# ======================================================================================
# Custom Functions, defined once per library with that library's ops


_FN_CACHE = {}


def functions_for(lib):
    """The custom Function classes for `lib` (cgrad or torch): the same code on both."""
    key = lib.__name__
    if key in _FN_CACHE:
        return _FN_CACHE[key]
    Function = lib.autograd.Function
    once_differentiable = lib.autograd.function.once_differentiable

    class MulAdd(Function):
        """x * y + x, saving both inputs; gradients come back in the broadcast shape and
        the engine sums them to each input's shape."""
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y + x

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * (y + 1), g * x

    class TanhOut(Function):
        """Saves its output."""
        @staticmethod
        def forward(ctx, x):
            y = lib.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * (1 - y * y)

    class Dirty(Function):
        """Multiplies its input in place and marks it dirty."""
        @staticmethod
        def forward(ctx, x, c):
            ctx.c = c
            x.mul_(c)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.c, None

    class NonDiff(Function):
        """Two outputs, the second marked non-differentiable (its gradient arrives as
        zeros)."""
        @staticmethod
        def forward(ctx, x):
            a = x * 2
            b = x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb

    class NoneGrad(Function):
        """Non-tensor arguments (an int > 256, a string, a tuple, None) kept on ctx; the
        backward returns None for y."""
        @staticmethod
        def forward(ctx, x, y, n, s, t, z):
            assert z is None
            ctx.n, ctx.s, ctx.t = n, s, t
            ctx.d = {"n": n, "s": s}
            return x * (n / 1000.0) + y * len(s) + t[1]

        @staticmethod
        def backward(ctx, g):
            assert ctx.d["n"] == ctx.n and ctx.d["s"] == ctx.s
            return g * (ctx.n / 1000.0), None, None, None, None, None

    class Multi(Function):
        """Three outputs; with materialize False the unused ones arrive as None."""
        @staticmethod
        def forward(ctx, x, y, materialize):
            ctx.set_materialize_grads(materialize)
            ctx.save_for_backward(x, y)
            return x + y, x * y, x - y

        @staticmethod
        def backward(ctx, g1, g2, g3):
            x, y = ctx.saved_tensors
            gx = gy = None

            def acc(a, b):
                return b if a is None else a + b
            if g1 is not None:
                gx, gy = acc(gx, g1), acc(gy, g1)
            if g2 is not None:
                gx, gy = acc(gx, g2 * y), acc(gy, g2 * x)
            if g3 is not None:
                gx, gy = acc(gx, g3), acc(gy, -g3)
            return gx, gy, None

    class Once(Function):
        """A once_differentiable backward."""
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return lib.sin(x)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * lib.cos(x)

    class Setup(Function):
        """setup_context style with a keyword argument."""
        @staticmethod
        def forward(x, k, scale=1.0):
            return x * k + x * x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k, scale = inputs
            ctx.save_for_backward(x)
            ctx.k, ctx.scale = k, scale

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * (ctx.k + 2 * ctx.scale * x), None, None

    class Wide(Function):
        """Any number of tensor inputs of one shape; the backward returns the same gradient
        object for every input."""
        @staticmethod
        def forward(ctx, *xs):
            ctx.n = len(xs)
            return lib.stack(xs).sum(0)

        @staticmethod
        def backward(ctx, g):
            return (g,) * ctx.n

    class Identity(Function):
        """Returns its input unchanged (no mark_dirty)."""
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    class TrailingNone(Function):
        """The backward returns extra trailing Nones."""
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None

    ns = types.SimpleNamespace(MulAdd=MulAdd, TanhOut=TanhOut, Dirty=Dirty, NonDiff=NonDiff,
                               NoneGrad=NoneGrad, Multi=Multi, Once=Once, Setup=Setup,
                               Wide=Wide, Identity=Identity, TrailingNone=TrailingNone)
    _FN_CACHE[key] = ns
    return ns


# ======================================================================================
# Interval arithmetic for the generator


def _mag(a):
    return max(abs(a[0]), abs(a[1]))


def _ok(a):
    return _mag(a) <= BMAX and a[0] <= a[1] and math.isfinite(a[0]) and math.isfinite(a[1])


def _away(a, m=AWAY):
    return a[0] >= m or a[1] <= -m


def _pos(a, m=0.05):
    return a[0] >= m


def _iv_add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _iv_neg(a):
    return (-a[1], -a[0])


def _iv_sub(a, b):
    return _iv_add(a, _iv_neg(b))


def _iv_mul(a, b):
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return (min(p), max(p))


def _iv_scale(a, c):
    return _iv_mul(a, (c, c))


def _iv_recip(b):
    return (1.0 / b[1], 1.0 / b[0])


def _iv_div(a, b):
    return _iv_mul(a, _iv_recip(b))


def _iv_union(*ivs):
    return (min(v[0] for v in ivs), max(v[1] for v in ivs))


def _iv_abs(a):
    if a[0] >= 0:
        return a
    if a[1] <= 0:
        return (-a[1], -a[0])
    return (0.0, _mag(a))


def _iv_powk(a, k):
    """x ** k for a scalar k (a > 0 unless k is a non-negative integer)."""
    if k == 0:
        return (1.0, 1.0)
    if float(k).is_integer() and k > 0:
        k = int(k)
        if k % 2 == 0:
            lo = 0.0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1])) ** k
            return (lo, _mag(a) ** k)
        return (a[0] ** k, a[1] ** k)
    v = (a[0] ** k, a[1] ** k)
    return (min(v), max(v))


def _image(f, iv):
    """f(iv), or an interval _ok rejects if f overflows."""
    try:
        return f(iv)
    except (OverflowError, ValueError, ZeroDivisionError):
        return (-math.inf, math.inf)


def _mono(f):
    return lambda a: (f(a[0]), f(a[1]))


def _sig(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _softplus(x, beta=1.0):
    return math.log1p(math.exp(beta * x)) / beta if beta * x < 30 else x


def _elu(x, alpha=1.0):
    return x if x > 0 else alpha * math.expm1(x)


_SELU_A, _SELU_S = 1.6732632423543772, 1.0507009873554805


def _always(a):
    return True


# name, forms (f: lib.name, m: method, F: nn.functional), domain, image, saves its output
UNARY = [
    ("exp", "fm", lambda a: a[1] <= 3.0, _mono(math.exp), True),
    ("tanh", "fmF", _always, _mono(math.tanh), True),
    ("sigmoid", "fmF", _always, _mono(_sig), True),
    ("sin", "fm", _always, lambda a: (-1.0, 1.0), False),
    ("cos", "fm", _always, lambda a: (-1.0, 1.0), False),
    ("log", "fm", lambda a: _pos(a), _mono(math.log), False),
    ("log2", "fm", lambda a: _pos(a), _mono(math.log2), False),
    ("log10", "fm", lambda a: _pos(a), _mono(math.log10), False),
    ("log1p", "fm", lambda a: a[0] >= -0.8, _mono(math.log1p), False),
    ("expm1", "fm", lambda a: a[1] <= 3.0, _mono(math.expm1), True),
    ("exp2", "fm", lambda a: a[1] <= 4.0, _mono(lambda x: 2.0 ** x), True),
    ("sqrt", "fm", lambda a: _pos(a), _mono(math.sqrt), True),
    ("rsqrt", "fm", lambda a: _pos(a, 0.1), lambda a: (a[1] ** -0.5, a[0] ** -0.5), True),
    ("reciprocal", "fm", _away, _iv_recip, True),
    ("abs", "fm", _always, _iv_abs, False),
    ("relu", "fmF", _always, lambda a: (max(a[0], 0.0), max(a[1], 0.0)), True),
    ("neg", "fm", _always, _iv_neg, False),
    ("square", "fm", lambda a: _mag(a) <= 6.0, lambda a: _iv_powk(a, 2), False),
    ("tan", "fm", lambda a: _mag(a) <= 1.2, _mono(math.tan), True),
    ("sign", "fm", _always, lambda a: (-1.0, 1.0), False),
    ("floor", "fm", _always, lambda a: (math.floor(a[0]), math.floor(a[1])), False),
    ("round", "fm", _always, lambda a: (round(a[0]) - 1.0, round(a[1]) + 1.0), False),
    ("trunc", "fm", _always, lambda a: (a[0] - 1.0, a[1] + 1.0), False),
    ("sin", "F", _always, lambda a: (-1.0, 1.0), False),          # placeholder, filtered
    ("softplus", "F", lambda a: a[1] <= 20, _mono(_softplus), False),
    ("elu", "F", _always, _mono(_elu), False),
    ("leaky_relu", "F", _always, lambda a: (min(a[0], 0.01 * a[0]), max(a[1], 0.0)), False),
    ("gelu", "F", _always, lambda a: (min(-0.2, a[0]) if a[0] < 0 else 0.0, max(a[1], 0.0)),
     False),
    ("silu", "F", _always, lambda a: (-0.3, max(a[1], 0.0)), False),
    ("selu", "fF", _always, _mono(lambda x: _SELU_S * (x if x > 0 else _SELU_A * math.expm1(x))),
     False),
]
UNARY = [u for u in UNARY if not (u[0] == "sin" and u[1] == "F")]


def _iv_cosh(a):
    lo = 0.0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1]))
    return (math.cosh(lo), math.cosh(_mag(a)))


def _erfinv(x):
    from scipy.special import erfinv
    return float(erfinv(x))


# issue 17: cgrad/ops/special.py
UNARY += [
    ("atan", "fm", _always, _mono(math.atan), False),
    ("arctan", "fm", _always, _mono(math.atan), False),
    ("asin", "fm", lambda a: _mag(a) <= 0.9, _mono(math.asin), False),
    ("acos", "fm", lambda a: _mag(a) <= 0.9, lambda a: (math.acos(a[1]), math.acos(a[0])),
     False),
    ("atanh", "fm", lambda a: _mag(a) <= 0.9, _mono(math.atanh), False),
    ("sinh", "fm", lambda a: _mag(a) <= 3.0, _mono(math.sinh), False),
    ("cosh", "fm", lambda a: _mag(a) <= 3.0, _iv_cosh, False),
    ("asinh", "fm", _always, _mono(math.asinh), False),
    ("acosh", "fm", lambda a: a[0] >= 1.2, _mono(math.acosh), False),
    ("erf", "fm", _always, _mono(math.erf), False),
    ("erfc", "fm", _always, lambda a: (math.erfc(a[1]), math.erfc(a[0])), False),
    ("erfinv", "fm", lambda a: _mag(a) <= 0.9, _mono(_erfinv), False),
    ("logit", "fm", lambda a: a[0] >= 0.05 and a[1] <= 0.95,
     _mono(lambda x: math.log(x / (1 - x))), False),
    ("sinc", "fm", _always, lambda a: (-0.22, 1.0), False),
    ("deg2rad", "fm", _always, _mono(math.radians), False),
    ("frac", "fm", _always, lambda a: (-1.0, 1.0), False),
]

# ops whose node saves its output (an in-place op on it breaks their backward)
SAVES_OUT = {u[0] for u in UNARY if u[4]}
_STEP_FUNCTIONS = {"sign", "floor", "round", "trunc", "frac"}     # (frac: jumps at integers)


# ======================================================================================
# The generator


_INHERIT = object()


class M:
    """What the generator knows about one pool entry. contig: True or False when cgrad and
    torch agree on whether its memory is C-contiguous, None when they may not (then no
    view() is drawn on it)."""
    __slots__ = ("shape", "iv", "rg", "kind", "stor", "base", "contig", "leafrg", "isleaf",
                 "numel", "overlap", "cmeta", "born")

    def __init__(self, shape, iv, rg, kind="f", stor=None, base=None, contig=True,
                 leafrg=False, isleaf=False, overlap=False):
        self.shape = tuple(int(s) for s in shape)
        self.numel = math.prod(self.shape)
        self.iv = iv
        self.rg = rg
        self.kind = kind
        self.stor = stor
        self.base = base
        self.contig = contig
        self.leafrg = leafrg
        self.isleaf = isleaf
        self.overlap = overlap      # elements share memory (an expanded view)
        self.cmeta = False          # a view torch forbids to modify (split output, custom)
        self.born = 0               # its storage's write count when it was made

    @property
    def ndim(self):
        return len(self.shape)


def _bshape(a, b):
    """The broadcast shape of a and b, or None."""
    if len(a) < len(b):
        a, b = b, a
    out = list(a)
    off = len(a) - len(b)
    for d, n in enumerate(b):
        m = out[off + d]
        if m == n or n == 1:
            continue
        if m == 1:
            out[off + d] = n
        else:
            return None
    return tuple(out)


class _Storage:
    """What the generator knows about one storage. shaky: an entry may or may not share it,
    depending on the library (a reshape of a tensor whose layout differs between cgrad and
    torch is a view in one and a copy in the other), so nothing writes into it any more."""
    __slots__ = ("consumed", "saved_out", "leafrg", "writes", "shaky")

    def __init__(self, leafrg=False):
        self.consumed = False
        self.saved_out = False
        self.leafrg = leafrg
        self.writes = 0
        self.shaky = False


class _Gen:
    """Draws one program. Every `g_*` method tries to append steps for one category and
    returns False when nothing fitting exists in the pool."""

    def __init__(self, draw, mode, min_nodes, max_nodes, wide=True, fd=False):
        self.draw = draw
        self.mode = mode
        # fd: checked against finite differences (no torch), so only programs whose gradients
        # are the derivative of what they compute: no detach or no_grad steps, no custom
        # Function whose backward ignores an input by design (NoneGrad, NonDiff; Once in
        # double mode), no step functions (sign, floor, round, trunc)
        self.fd = fd
        self.prog = Program()
        self.meta = []
        self.fl = []              # pool ids of non-empty float entries
        self.stor = []
        seed = draw(st.integers(0, 2 ** 32 - 1))
        self.rng = np.random.default_rng(seed)
        self.r = random.Random(seed)
        self.prog.seed = int(self.rng.integers(2 ** 31))
        self.hub = None
        self.allow_bad = False
        self.n_hooks = 0
        self.wide_left = 2 if wide else 0
        self.ties = self.coin(0.15)
        r = self.i(2, 4)
        self.universe = tuple(int(self.rng.integers(2, 5)) for _ in range(r))
        lo = min_nodes
        hi = max_nodes if draw(st.booleans()) else min(max_nodes, max(lo, 80))
        self.target = draw(st.integers(lo, hi))

    # --- drawing helpers ---------------------------------------------------------------
    # Hypothesis draws two numbers per step (the category and a seed); every other choice of
    # the step comes from a random.Random seeded with it: a hypothesis draw costs ~0.2 ms,
    # and a 300-step program would otherwise make thousands of them.
    def reseed(self):
        self.r.seed(self.draw(st.integers(0, 2 ** 32 - 1)))

    def i(self, lo, hi):
        return self.r.randint(lo, hi)

    def coin(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def choose(self, cands):
        """A pool entry from cands, biased toward recent ones and the hub (diamonds and
        heavily reused intermediates)."""
        if not cands:
            return None
        how = self.i(0, 3)
        if how == 0:
            return cands[-1 - self.i(0, min(3, len(cands) - 1))]
        if how == 1 and self.hub is not None and self.hub in cands:
            return self.hub
        return cands[self.i(0, len(cands) - 1)]

    def mask(self, shape, p=0.5):
        return np.asarray(self.rng.random(shape) < p, dtype=bool)

    def floats(self, pred=None):
        meta, stor = self.meta, self.stor
        if self.allow_bad:
            ok = self.fl
        else:
            # a view torch forbids to modify (split output, custom Function output) whose base
            # changed after it was made: torch raises on every use
            ok = [k for k in self.fl if not (meta[k].cmeta and stor[meta[k].stor].writes >
                                             meta[k].born)]
        if pred is None:
            return list(ok)
        return [k for k in ok if pred(meta[k])]

    # --- pool bookkeeping --------------------------------------------------------------
    def emit(self, kind, name, args=(), kw=None, outs=(), keep=None, nograd=False,
             uses=()):
        """Append a step whose results are described by the M's in outs."""
        self.prog.steps.append(Step(kind, name, args, kw, keep, nograd))
        ids = []
        for m in outs:
            ids.append(len(self.meta))
            if m.kind == "f" and m.numel:
                self.fl.append(len(self.meta))
            if m.stor is not None and m.stor < len(self.stor):
                m.born = self.stor[m.stor].writes
            self.meta.append(m)
        for u in uses:
            self.stor[self.meta[u].stor].consumed = True
        return ids

    def new_stor(self, leafrg=False):
        self.stor.append(_Storage(leafrg))
        return len(self.stor) - 1

    def fresh(self, shape, iv, rg, saves_out=False, contig=True, kind="f"):
        """M for a new tensor with its own storage."""
        s = self.new_stor()
        self.stor[s].saved_out = saves_out
        return M(shape, iv, rg, kind=kind, stor=s, base=s, contig=contig)

    def view_of(self, k, shape, contig=_INHERIT, overlap=False):
        m = self.meta[k]
        if m.contig is None:        # layout unknown (see g_binary): so is every view's
            contig = None
        out = M(shape, m.iv, m.rg, m.kind, stor=m.stor, base=m.base,
                contig=m.contig if contig is _INHERIT else contig,
                overlap=m.overlap or overlap)
        out.cmeta = m.cmeta
        return out

    def rg_of(self, *ks):
        return any(self.meta[k].rg for k in ks if isinstance(k, int))

    def new_leaf(self, shape, kind="sym", rg=None):
        shape = tuple(shape)
        if kind == "pos":
            data = self.rng.uniform(0.5, 2.0, shape)
        elif kind == "near1":
            data = 1.0 + self.rng.uniform(-1e-3, 1e-3, shape)
        else:
            data = self.rng.uniform(-1.5, 1.5, shape)
            if self.ties:
                data = np.round(data * 2) / 2
        data = np.asarray(data, dtype=np.float64)
        if rg is None:
            rg = self.coin(0.75)
        iv = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
        idx = len(self.prog.leaf_data)
        self.prog.leaf_data.append(data)
        s = self.new_stor(leafrg=rg)
        k = self.emit("leaf", "leaf", (idx, rg),
                      outs=[M(shape, iv, rg, stor=s, base=s, leafrg=rg, isleaf=True)])[0]
        self.prog.leaf_ids[k] = idx
        if rg:
            self.prog.rg_leaves.append(k)
        return k

    def sub_shape(self, shape=None):
        """A shape that broadcasts against `shape` (default: the program's universe)."""
        shape = self.universe if shape is None else shape
        r = self.i(0, len(shape))
        out = list(shape[len(shape) - r:])
        for d in range(len(out)):
            if self.coin(0.2):
                out[d] = 1
        return tuple(out)

    def touch(self, k, iv, rg=False, saves_out=False):
        """Record an in-place write into pool entry k (and everything sharing its
        storage)."""
        m = self.meta[k]
        for mj in self.meta:
            if mj.stor == m.stor:
                mj.iv = _iv_union(mj.iv, iv)
                if rg and mj.base == m.base:
                    mj.rg = True
        m.iv = _iv_union(m.iv, iv)
        if rg:
            m.rg = True
        st = self.stor[m.stor]
        st.saved_out = saves_out
        st.writes += 1
        m.born = st.writes          # modified directly: its own history is current

    # --- operand helpers ---------------------------------------------------------------
    def partner(self, k, pred=None, leaf_kind="sym", exact=False):
        """A pool entry broadcast-compatible with k (or of k's shape), else a new leaf."""
        shape = self.meta[k].shape
        if exact:
            c = self.floats(lambda m: m.shape == shape and (pred is None or pred(m)))
        else:
            def fits(m):
                b = _bshape(m.shape, shape)
                return (b is not None and len(b) <= 4 and math.prod(b) <= 256
                        and (pred is None or pred(m)))
            c = self.floats(fits)
        if c and self.coin(0.8):
            return self.choose(c)
        return self.new_leaf(shape if exact else self.sub_shape(shape), leaf_kind)

    def positive(self):
        """A pool entry whose values are >= 0.2, making one if needed."""
        c = self.floats(lambda m: m.iv[0] >= AWAY and m.numel <= 256)
        if c and self.coin(0.85):
            return self.choose(c)
        src = self.choose(self.floats(lambda m: m.numel <= 256))
        if src is None or self.coin(0.3):
            return self.new_leaf(self.sub_shape(), "pos")
        m = self.meta[src]
        # (a one-tensor op keeps its input's layout in both libraries)
        s = self.emit("fn", "sigmoid", (R(src),), outs=[self.fresh(m.shape, _mono(_sig)(m.iv),
                                                                   m.rg, saves_out=True,
                                                                   contig=m.contig)],
                      uses=[src])[0]
        iv = _iv_add(self.meta[s].iv, (0.5, 0.5))
        return self.emit("opr", "add", (R(s), 0.5), outs=[self.fresh(m.shape, iv, m.rg,
                                                                     contig=m.contig)],
                         uses=[s])[0]

    def operand(self, pred=None, maxn=256):
        c = self.floats(lambda m: m.numel <= maxn and (pred is None or pred(m)))
        return self.choose(c)

    # --- categories --------------------------------------------------------------------
    def g_leaf(self):
        kind = self.pick(["sym", "sym", "pos"])
        shape = self.sub_shape() if self.coin(0.85) else tuple(
            self.i(1, 4) for _ in range(self.i(0, 3)))
        self.new_leaf(shape, kind)
        return True

    def g_unary(self):
        k = self.operand()
        if k is None:
            return False
        m = self.meta[k]
        opts = [u for u in UNARY if u[2](m.iv) and _ok(_image(u[3], m.iv))
                and not (self.fd and u[0] in _STEP_FUNCTIONS)]
        if not opts:
            return False
        name, forms, _, image, saves = self.pick(opts)
        form = self.pick(forms)
        kw = {}
        iv = image(m.iv)
        args = (R(k),)
        if name == "softplus" and self.coin(0.5):
            kw["beta"] = 2.0
            iv = (_softplus(m.iv[0], 2.0), _softplus(m.iv[1], 2.0))
        elif name == "elu" and self.coin(0.5):
            kw["alpha"] = 0.5
        elif name == "leaky_relu" and self.coin(0.5):
            args = (R(k), 0.2)
            iv = (min(m.iv[0], 0.2 * m.iv[0]), max(m.iv[1], 0.0))
        elif name == "gelu" and self.coin(0.5):
            kw["approximate"] = "tanh"
        kind = {"f": "fn", "m": "meth", "F": "F"}[form]
        if kind == "meth" and name == "neg" and self.coin(0.5):
            kind, name, args = "opr", "neg", (R(k),)
        ng = self.coin(0.03) and not self.fd
        out = self.fresh(m.shape, iv, m.rg and not ng, saves_out=saves,
                         contig=m.contig)
        if ng:
            out.isleaf = True
        self.emit(kind, name, args, kw, outs=[out], nograd=ng, uses=[k])
        return True

    def g_clamp(self):
        k = self.operand()
        if k is None:
            return False
        m = self.meta[k]
        lo, hi = m.iv
        a = round(lo + (hi - lo) * self.i(0, 10) / 10.0, 2)
        b = round(a + (hi - a) * self.i(1, 10) / 10.0 + 0.01, 2)
        which = self.i(0, 4)
        if which == 0:
            step = ("meth", "clamp", (R(k),), {"min": a, "max": b}, (max(lo, a), min(hi, b)))
        elif which == 1:
            step = ("fn", "clamp", (R(k), a, b), {}, (max(lo, a), min(hi, b)))
        elif which == 2:
            step = ("meth", "clamp_min", (R(k), a), {}, (max(lo, a), max(hi, a)))
        elif which == 3:
            step = ("fn", "clamp_max", (R(k), b), {}, (min(lo, b), min(hi, b)))
        else:
            step = ("meth", "clip", (R(k),), {"min": a}, (max(lo, a), max(hi, a)))
        kind, name, args, kw, iv = step
        iv = (min(iv), max(iv))
        self.emit(kind, name, args, kw, outs=[self.fresh(m.shape, iv, m.rg, contig=m.contig)],
                  uses=[k])
        return True

    def g_binary(self):
        a = self.operand()
        if a is None:
            return False
        name = self.pick(["add", "sub", "mul", "div", "pow", "maximum", "minimum", "where",
                          "add", "mul", "clamp_t", "atan2", "hypot", "logaddexp"])
        ma = self.meta[a]
        if name in ("atan2", "hypot"):
            # a positive second operand: atan2 is continuous there, hypot differentiable
            b = self.partner(a, pred=lambda m: m.iv[0] >= AWAY, leaf_kind="pos")
            if self.meta[b].iv[0] < AWAY:
                return False
        elif name == "div":
            b = self.partner(a, pred=lambda m: _away(m.iv), leaf_kind="pos")
            if not _away(self.meta[b].iv):
                return False
        elif name == "pow":
            if ma.iv[0] < AWAY:
                a = self.positive()
                ma = self.meta[a]
            b = self.partner(a, pred=lambda m: _mag(m.iv) <= 2.5)
            if _mag(self.meta[b].iv) > 2.5:
                return False
        else:
            b = self.partner(a)
        mb = self.meta[b]
        shape = _bshape(ma.shape, mb.shape)
        if shape is None:
            return False
        if self.coin(0.5) and name in ("add", "sub", "mul", "maximum", "minimum"):
            a, b, ma, mb = b, a, mb, ma
        A, B = ma.iv, mb.iv
        kw = {}
        if name == "add":
            iv = _iv_add(A, B)
            if self.coin(0.2):
                kw["alpha"] = 2.0
                iv = _iv_add(A, _iv_scale(B, 2.0))
        elif name == "sub":
            iv = _iv_sub(A, B)
            if self.coin(0.2):
                kw["alpha"] = 0.5
                iv = _iv_sub(A, _iv_scale(B, 0.5))
        elif name == "mul":
            iv = _iv_mul(A, B)
        elif name == "div":
            iv = _iv_div(A, B)
        elif name == "pow":
            v = [A[0] ** B[0], A[0] ** B[1], A[1] ** B[0], A[1] ** B[1]]
            iv = (min(v), max(v))
        elif name in ("maximum", "minimum"):
            f = max if name == "maximum" else min
            iv = (f(A[0], B[0]), f(A[1], B[1]))
        elif name == "atan2":
            iv = (-math.pi / 2, math.pi / 2)
        elif name == "hypot":
            iv = (B[0], math.hypot(_mag(A), _mag(B)))
        elif name == "logaddexp":
            iv = (max(A[0], B[0]), max(A[1], B[1]) + math.log(2.0))
        elif name == "where":
            iv = _iv_union(A, B)
        else:   # clamp with a tensor bound
            iv = _iv_union(A, B)
        if not _ok(iv):
            return False
        rg = ma.rg or mb.rg
        # A known difference in layout: torch's result follows the first operand's memory
        # layout (TensorIterator), NumPy's ufuncs give C order when the operands' layouts
        # differ, so a.mT * b is C-contiguous in cgrad, not in torch (view() raises there).
        # Both agree when both operands are C-contiguous.
        out = self.fresh(shape, iv, rg, contig=True if ma.contig is True and mb.contig is True
                         else None)
        if name == "where":
            mask = self.mask(self.sub_shape(shape))
            form = self.i(0, 2)
            if form == 0:
                self.emit("fn", "where", (mask, R(a), R(b)), outs=[out], uses=[a, b])
            elif form == 1:
                self.emit("meth", "where", (R(a), mask, R(b)), outs=[out], uses=[a, b])
            else:
                c = round(float(self.rng.uniform(-1, 1)), 2)
                args = (mask, R(a), c) if self.coin(0.5) else (mask, c, R(a))
                out = self.fresh(_bshape(ma.shape, mask.shape), _iv_union(A, (c, c)), ma.rg,
                                 contig=True if ma.contig is True else None)
                self.emit("fn", "where", args, outs=[out], uses=[a])
            return True
        if name == "clamp_t":
            kw = {"min": R(b)} if self.coin(0.5) else {"max": R(b)}
            if kw.get("min") is not None:
                iv = (max(A[0], B[0]), max(A[1], B[1]))
            else:
                iv = (min(A[0], B[0]), min(A[1], B[1]))
            self.emit(self.pick(["fn", "meth"]), "clamp", (R(a),), kw, outs=[out], uses=[a, b])
            return True
        form = self.pick(["opr", "fn", "meth"]) if not kw else self.pick(["fn", "meth"])
        if name in ("maximum", "minimum", "atan2", "hypot", "logaddexp"):
            form = self.pick(["fn", "meth"])
        fname = name
        if form == "opr":
            fname = {"div": "truediv"}.get(name, name)
        ng = self.coin(0.03) and not self.fd
        if ng:
            out.rg, out.isleaf = False, True
        self.emit(form, fname, (R(a), R(b)), kw, outs=[out], uses=[a, b], nograd=ng)
        return True

    def g_scalar(self):
        k = self.operand()
        if k is None:
            return False
        m = self.meta[k]
        A = m.iv
        c = self.pick([2.0, 0.5, -1.5, 3.0, 2, -0.25])
        which = self.i(0, 11)
        if which == 0:
            args, name, iv = (R(k), c), "add", _iv_add(A, (c, c))
        elif which == 1:
            args, name, iv = (c, R(k)), "add", _iv_add(A, (c, c))
        elif which == 2:
            args, name, iv = (R(k), c), "sub", _iv_sub(A, (c, c))
        elif which == 3:
            args, name, iv = (c, R(k)), "sub", _iv_sub((c, c), A)
        elif which == 4:
            args, name, iv = (R(k), c), "mul", _iv_scale(A, c)
        elif which == 5:
            args, name, iv = (c, R(k)), "mul", _iv_scale(A, c)
        elif which == 6:
            args, name, iv = (R(k), c), "truediv", _iv_scale(A, 1.0 / c)
        elif which == 7:
            if not _away(A):
                return False
            args, name, iv = (c, R(k)), "truediv", _iv_scale(_iv_recip(A), c)
        elif which == 8:
            e = self.pick([2, 3, 2.0, 0.5, -1, 1.5, 0, -0.5])
            if (not float(e).is_integer() or e < 0) and A[0] < AWAY:
                return False
            args, name, iv = (R(k), e), "pow", _iv_powk(A, e)
        elif which == 9:
            base = self.pick([2.0, 0.5, 3.0])
            if _mag(A) > 3:
                return False
            v = (base ** A[0], base ** A[1])
            args, name, iv = (base, R(k)), "pow", (min(v), max(v))
        elif which == 10:
            args, name, iv = (R(k), c), "mul", _iv_scale(A, c)
        else:
            args, name, iv = (R(k), c), "sub", _iv_sub(A, (c, c))
        if not _ok(iv):
            return False
        form = self.pick(["opr", "opr", "fn", "meth"])
        if form != "opr":
            name = {"truediv": "div"}.get(name, name)
            if args[0].__class__ is not R:       # scalar first: only lib.fn(scalar, t)
                if name in ("add", "mul"):
                    args = (args[1], args[0])
                elif name == "pow" and form == "fn":
                    pass
                else:
                    form = "opr"
                    name = {"div": "truediv"}.get(name, name)
            if form == "meth" and args[0].__class__ is not R:
                form = "fn"
        # the result keeps the operand's layout, but scalar ** t is C-contiguous (both libs)
        out = self.fresh(m.shape, iv, m.rg, contig=True if which == 9 else m.contig)
        self.emit(form, name, args, outs=[out], uses=[k])
        return True

    # --- views -------------------------------------------------------------------------
    def _reshape_target(self, shape):
        n = int(np.prod(shape, dtype=np.int64))
        opts = ["flat", "one"]
        if len(shape) >= 2:
            opts.append("merge")
        if any(s in (4, 6, 8, 9, 12) for s in shape):
            opts.append("split")
        kind = self.pick(opts)
        if kind == "flat":
            out = [n]
        elif kind == "merge":
            d = self.i(0, len(shape) - 2)
            out = list(shape[:d]) + [shape[d] * shape[d + 1]] + list(shape[d + 2:])
        elif kind == "split":
            ds = [d for d, s in enumerate(shape) if s in (4, 6, 8, 9, 12)]
            d = self.pick(ds)
            s = shape[d]
            f = self.pick([q for q in (2, 3) if s % q == 0])
            out = list(shape[:d]) + [f, s // f] + list(shape[d + 1:])
        else:
            d = self.i(0, len(shape))
            out = list(shape[:d]) + [1] + list(shape[d:])
        if len(out) > 5:
            out = [n]
        shape_out = tuple(out)
        if out and self.coin(0.3):
            out[self.i(0, len(out) - 1)] = -1
        return shape_out, tuple(out)

    def _maybe_copy(self, k, shape):
        """M for reshape/flatten of pool entry k that is not known to be C-contiguous: a view
        or a copy, as its strides allow. Both libraries decide alike when they agree on k's
        layout (contig False); when they may not (contig None: a mixed-layout binary op, see
        g_binary) the result may alias k in one library and not in the other, so its layout
        is unknown too and its storage is never written again (a write to k or to the result
        would show in the other in one library only)."""
        m = self.meta[k]
        out = self.fresh(shape, m.iv, m.rg)     # may copy: treat as new storage...
        out.stor, out.base = m.stor, m.base     # ...but it may alias too
        out.overlap = m.overlap         # (an expand's reshape to its shape is a view)
        if m.contig is None:
            out.contig = None
            self.stor[m.stor].shaky = True
        return out

    def g_view(self):
        k = self.operand(maxn=512)
        if k is None:
            return False
        m = self.meta[k]
        sh, nd = m.shape, m.ndim
        choices = ["reshape", "view", "unsqueeze", "slice", "expand", "flatten"]
        if nd >= 2:
            choices += ["transpose", "permute", "mT", "movedim", "swapaxes"]
        if nd <= 2:
            choices.append("t")
        if nd == 2:
            choices.append("T")
        if 1 in sh:
            choices.append("squeeze")
        if nd >= 1:
            choices += ["select", "narrow", "slice", "int_index"]
            if any(s >= 2 for s in sh):
                choices.append("split")
        if any(s in (4, 6, 8, 9, 12) for s in sh):
            choices.append("unflatten")
        c = self.pick(choices)
        contig = m.contig
        keep = None
        outs_shapes = None
        if c in ("reshape", "view"):
            shape_out, arg = self._reshape_target(sh)
            if c == "view" and (m.contig is None or not m.contig and not self.coin(0.1)):
                c = "reshape"
            if c == "reshape" and not m.contig:
                out = self._maybe_copy(k, shape_out)
            else:
                out = self.view_of(k, shape_out)
            form = self.pick([0, 1, 2])
            args = (R(k),) + arg if form == 0 else (R(k), arg)
            if c == "reshape" and form == 2:
                self.emit("fn", "reshape", (R(k), arg), outs=[out], uses=[])
            else:
                self.emit("meth", c, args, outs=[out])
            return True
        if c == "unsqueeze":
            d = self.i(-nd - 1, nd)
            dd = d if d >= 0 else d + nd + 1
            shape = sh[:dd] + (1,) + sh[dd:]
            self.emit(self.pick(["meth", "fn"]), "unsqueeze", (R(k), d),
                      outs=[self.view_of(k, shape)])
            return True
        if c == "squeeze":
            ones = [d for d, s in enumerate(sh) if s == 1]
            form = self.i(0, 2)
            if form == 0:
                shape = tuple(s for s in sh if s != 1)
                args = (R(k),)
            elif form == 1:
                d = self.pick(ones)
                shape = sh[:d] + sh[d + 1:]
                args = (R(k), d - nd if self.coin(0.5) else d)
            else:
                ds = tuple(sorted(set(self.pick(ones) for _ in range(2))))
                shape = tuple(s for d, s in enumerate(sh) if d not in ds)
                args = (R(k), ds)
            self.emit("meth", "squeeze", args, outs=[self.view_of(k, shape)])
            return True
        if c == "flatten":
            if nd == 0:
                self.emit("meth", "flatten", (R(k),), outs=[self.view_of(k, (1,))])
                return True
            s0 = self.i(0, nd - 1)
            s1 = self.i(s0, nd - 1)
            shape = sh[:s0] + (int(np.prod(sh[s0:s1 + 1])),) + sh[s1 + 1:]
            if not m.contig and s1 > s0:
                out = self._maybe_copy(k, shape)
            else:
                out = self.view_of(k, shape)
            self.emit("meth", "flatten", (R(k), s0, s1), outs=[out])
            return True
        if c == "unflatten":
            ds = [d for d, s in enumerate(sh) if s in (4, 6, 8, 9, 12)]
            d = self.pick(ds)
            f = self.pick([q for q in (2, 3) if sh[d] % q == 0])
            sizes = (f, sh[d] // f) if self.coin(0.7) else (f, -1)
            shape = sh[:d] + (f, sh[d] // f) + sh[d + 1:]
            self.emit("meth", "unflatten", (R(k), d, sizes), outs=[self.view_of(k, shape)])
            return True
        if c == "expand":
            lead = tuple(self.i(1, 3) for _ in range(self.i(0, 2 if nd < 3 else 1)))
            tgt = []
            arg = []
            for s in sh:
                if s == 1 and self.coin(0.6):
                    n = self.i(2, 4)
                    tgt.append(n)
                    arg.append(n)
                else:
                    tgt.append(s)
                    arg.append(-1 if self.coin(0.3) else s)
            if not lead and not tgt:
                lead = (2,)
            shape = lead + tuple(tgt)
            if int(np.prod(shape)) > 512:
                return False
            arg = lead + tuple(arg)
            args = (R(k),) + arg if self.coin(0.5) else (R(k), arg)
            self.emit("meth", "expand", args,
                      outs=[self.view_of(k, shape, contig=False,
                                         overlap=math.prod(shape) > m.numel)])
            return True
        if c in ("transpose", "swapaxes"):
            d0, d1 = self.i(-nd, nd - 1), self.i(-nd, nd - 1)
            p = list(range(nd))
            p[d0], p[d1] = p[d1], p[d0]
            shape = tuple(sh[q] for q in p)
            self.emit(self.pick(["meth", "fn"]), c, (R(k), d0, d1),
                      outs=[self.view_of(k, shape, contig=m.contig and d0 % nd == d1 % nd)])
            return True
        if c == "permute":
            p = [int(v) for v in self.rng.permutation(nd)]
            shape = tuple(sh[q] for q in p)
            args = (R(k),) + tuple(p) if self.coin(0.5) else (R(k), tuple(p))
            self.emit("meth", "permute", args,
                      outs=[self.view_of(k, shape, contig=m.contig and p == sorted(p))])
            return True
        if c == "movedim":
            s, d = self.i(0, nd - 1), self.i(0, nd - 1)
            p = list(range(nd))
            p.insert(d, p.pop(s))
            shape = tuple(sh[q] for q in p)
            self.emit("meth", "movedim", (R(k), s, d),
                      outs=[self.view_of(k, shape, contig=m.contig and s == d)])
            return True
        if c in ("t", "T", "mT"):
            shape = sh[::-1] if c != "mT" else sh[:-2] + (sh[-1], sh[-2])
            kind = "meth" if c == "t" else "attr"
            if c == "t" and self.coin(0.3):
                kind = "fn"
            self.emit(kind, c, (R(k),), outs=[self.view_of(k, shape, contig=nd < 2)])
            return True
        if c == "select":
            d = self.i(0, nd - 1)
            j = self.i(-sh[d], sh[d] - 1)
            shape = sh[:d] + sh[d + 1:]
            self.emit(self.pick(["meth", "fn"]), "select", (R(k), d, j),
                      outs=[self.view_of(k, shape, contig=m.contig and d == 0)])
            return True
        if c == "narrow":
            d = self.i(0, nd - 1)
            start = self.i(0, sh[d] - 1)
            length = self.i(1, sh[d] - start)
            shape = sh[:d] + (length,) + sh[d + 1:]
            self.emit("meth", "narrow", (R(k), d, start, length),
                      outs=[self.view_of(k, shape, contig=m.contig and d == 0)])
            return True
        if c == "int_index":
            j = self.i(-sh[0], sh[0] - 1)
            self.emit("opr", "getitem", (R(k), j), outs=[self.view_of(k, sh[1:])])
            return True
        if c == "slice":
            idx = self._basic_index(sh)
            try:
                shape = np.empty(sh)[idx].shape
            except (IndexError, ValueError):
                return False
            self.emit("opr", "getitem", (R(k), idx),
                      outs=[self.view_of(k, shape, contig=False)])
            return True
        if c == "split":
            ds = [d for d, s in enumerate(sh) if s >= 2]
            d = self.pick(ds)
            n = sh[d]
            how = self.i(0, 2)
            if how == 0:
                size = self.i(1, n - 1)
                sizes = [size] * (n // size) + ([n % size] if n % size else [])
                args, name = (R(k), size, d), "split"
            elif how == 1:
                a = self.i(1, n - 1)
                sizes = [a, n - a]
                args, name = (R(k), sizes, d), "split"
            else:
                chunks = self.i(2, n)
                per = -(-n // chunks)
                sizes = [per] * (n // per) + ([n % per] if n % per else [])
                args, name = (R(k), chunks, d), "chunk"
            if self.coin(0.2):
                name, args, sizes = "unbind", (R(k), d), [None] * n
            keep = tuple(range(min(len(sizes), 4)))
            outs = []
            for p in keep:
                if sizes[p] is None:
                    shape = sh[:d] + sh[d + 1:]
                else:
                    shape = sh[:d] + (sizes[p],) + sh[d + 1:]
                outs.append(self.view_of(k, shape, contig=m.contig and d == 0))
                outs[-1].cmeta = True
            self.emit("meth", name, args, keep=keep, outs=outs)
            return True
        return False

    def _basic_index(self, sh):
        """A basic index (ints, slices with step 1 or 2, None, Ellipsis). No negative step:
        torch raises ValueError, cgrad deliberately supports it (ops/indexing.py::index)."""
        items = []
        ell = False
        for d, n in enumerate(sh):
            r = self.i(0, 6)
            if r <= 2:
                items.append(slice(None))
            elif r == 3:
                a = self.i(0, n - 1)
                b = self.i(a + 1, n)
                items.append(slice(a if a else None, b if b < n else None,
                                   2 if self.coin(0.3) else None))
            elif r == 4:
                items.append(self.i(-n, n - 1))
            elif r == 5:
                items.append(None)
                items.append(slice(None))
            else:
                if not ell:
                    items.append(Ellipsis)
                    ell = True
                    break
                items.append(slice(None))
        if not items:
            items = [None]
        return tuple(items)

    # --- in-place ----------------------------------------------------------------------
    def _inplace_target(self, index_put=False):
        """A float entry that may be modified in place (rarely one that may not). Never an
        expanded view for an advanced-index assignment (index_put): torch and cgrad write
        through one with a deprecation warning, but several elements of the value may land
        in one memory location, and which one stays is unspecified. Never one whose storage
        is shaky (see _maybe_copy), not even a bad step."""
        bad = self.allow_bad

        def ok(m):
            if index_put and m.overlap or self.stor[m.stor].shaky:
                return False
            if bad:
                return True
            return (not m.leafrg and not self.stor[m.stor].leafrg and not m.cmeta
                    and not m.overlap)
        c = self.floats(lambda m: ok(m) and m.numel <= 256)
        fresh = [k for k in c if not self.stor[self.meta[k].stor].consumed
                 and not self.stor[self.meta[k].stor].saved_out]
        if fresh and self.coin(0.8):
            return self.choose(fresh)
        return self.choose(c)

    def g_inplace(self):
        k = self._inplace_target()
        if k is None:
            return False
        m = self.meta[k]
        A = m.iv
        shape = m.shape
        op = self.pick(["add_", "sub_", "mul_", "div_", "iadd", "imul", "isub", "itruediv",
                        "clamp_", "relu_", "tanh_", "sigmoid_", "exp_", "neg_", "abs_",
                        "zero_", "fill_", "copy_", "masked_fill_", "pow_", "sqrt_", "add_",
                        "atan_", "sinh_", "erf_"])
        rg = False
        saves = False
        ng = self.coin(0.03) and not self.fd
        # (an expanded target, only for a bad step: zero_, fill_ and masked_fill_ write
        # through it, and under autograd its CopySlices raises in the backward; the other
        # ops raise the overlap error, as its basic-index assignments where the region has
        # repeats: Note [Expanded memory] in cgrad/ops/inplace.py)

        def alias_ok(mm):
            # An operand sharing memory with the written tensor: only where torch's overlap
            # check decides (both dense, same shape: full overlap runs, partial overlap
            # raises in both). Elsewhere (a broadcast column of the target, non-dense views)
            # torch reads values its own loop already overwrote, NumPy reads a copy: the
            # results differ by design, and neither library raises.
            return mm.stor != m.stor or (mm.shape == shape and mm.contig is True
                                         and m.contig is True)

        def other(pred=None, kind="sym"):
            c = self.floats(lambda mm: _bshape(mm.shape, shape) == shape and mm.numel <= 256
                            and alias_ok(mm) and (pred is None or pred(mm)))
            if c and self.coin(0.8):
                return self.choose(c)
            return self.new_leaf(self.sub_shape(shape) if shape else (), kind)
        if op in ("add_", "sub_", "iadd", "isub", "mul_", "imul"):
            if self.coin(0.3):
                o = self.pick([2.0, -0.5, 1.5])
                B = (o, o)
                args = (R(k), o)
            else:
                o = other()
                B = self.meta[o].iv
                rg = self.meta[o].rg
                args = (R(k), R(o))
            f = {"add_": _iv_add, "iadd": _iv_add, "sub_": _iv_sub, "isub": _iv_sub,
                 "mul_": _iv_mul, "imul": _iv_mul}[op]
            iv = f(A, B)
            kind = "meth" if op.endswith("_") else "opr"
        elif op in ("div_", "itruediv"):
            if self.coin(0.4):
                o = self.pick([2.0, -4.0, 0.5])
                B = (o, o)
                args = (R(k), o)
            else:
                o = other(lambda mm: _away(mm.iv), "pos")
                B = self.meta[o].iv
                if not _away(B):
                    return False
                rg = self.meta[o].rg
                args = (R(k), R(o))
            iv = _iv_div(A, B)
            kind = "meth" if op.endswith("_") else "opr"
        elif op == "clamp_":
            a = round(A[0] + (A[1] - A[0]) * 0.3, 2)
            iv = (max(A[0], a), max(A[1], a))
            args, kind = (R(k),), "meth"
            kw = {"min": a}
            self.emit("meth", "clamp_", args, kw, keep=(), nograd=ng)
            self.touch(k, iv)
            return True
        elif op in ("relu_", "tanh_", "sigmoid_", "exp_", "neg_", "abs_", "sqrt_", "atan_",
                    "sinh_", "erf_"):
            u = {x[0]: x for x in UNARY}[op[:-1]]
            if not u[2](A):
                return False
            iv = u[3](A)
            saves = u[4]
            args, kind = (R(k),), "meth"
        elif op == "pow_":
            iv = _iv_powk(A, 2)
            args, kind = (R(k), 2), "meth"
        elif op == "zero_":
            iv, args, kind = (0.0, 0.0), (R(k),), "meth"
        elif op == "fill_":
            c = self.pick([1.5, -0.5])
            iv, args, kind = (c, c), (R(k), c), "meth"
        elif op == "copy_":
            o = other()
            iv, args, kind = self.meta[o].iv, (R(k), R(o)), "meth"
            rg = self.meta[o].rg
        else:  # masked_fill_
            mask = self.mask(self.sub_shape(shape) if shape else (), 0.4)
            c = self.pick([0.0, 1.25])
            iv, args, kind = (c, c), (R(k), mask, c), "meth"
        if not _ok(iv):
            return False
        uses = [a.i for a in args[1:] if isinstance(a, R)]
        self.emit(kind, op, args, keep=(), nograd=ng, uses=uses)
        self.touch(k, _iv_union(iv, A), rg=rg and not ng, saves_out=saves)
        return True

    def g_setitem(self):
        how = self.i(0, 3)
        k = self._inplace_target(index_put=how >= 2)
        if k is None:
            return False
        m = self.meta[k]
        sh = m.shape
        if not sh:
            return False
        if how <= 1:
            idx = self._basic_index(sh)
            if Ellipsis not in idx and len([x for x in idx if x is not None]) > len(sh):
                return False
        elif how == 2:
            n = sh[0]
            cnt = self.i(1, n)
            idx = np.asarray(self.rng.permutation(n)[:cnt], dtype=np.int64)
            if self.coin(0.3):
                idx = idx - n
        else:
            mask = self.mask(sh[:self.i(1, len(sh))])
            if not mask.any():
                mask.flat[0] = True
            idx = mask
        try:
            region = np.empty(sh)[idx].shape
        except (IndexError, ValueError):
            return False
        if self.coin(0.35):
            v = self.pick([0.5, -1.0, 2.0])
            B = (v, v)
            rg = False
            varg = v
            uses = []
        else:
            c = self.floats(lambda mm: _bshape(mm.shape, region) == tuple(region)
                            and mm.numel <= 256 and mm.stor != m.stor)
            if c and self.coin(0.7):
                o = self.choose(c)
            else:
                o = self.new_leaf(self.sub_shape(region) if region else ())
            B = self.meta[o].iv
            rg = self.meta[o].rg
            varg = R(o)
            uses = [o]
        aug = self.coin(0.4)
        if aug:
            iv = _iv_union(m.iv, _iv_add(m.iv, B))
        else:
            iv = _iv_union(m.iv, B)
        if not _ok(iv):
            return False
        self.emit("setitem_iadd" if aug else "setitem", "setitem", (R(k), idx, varg),
                  keep=(), uses=uses)
        self.touch(k, iv, rg=rg)
        return True

    # --- advanced indexing -------------------------------------------------------------
    def g_index(self):
        k = self.operand(lambda m: m.ndim >= 1 and all(s >= 1 for s in m.shape))
        if k is None:
            return False
        m = self.meta[k]
        sh, nd = m.shape, m.ndim
        rng = self.rng
        c = self.pick(["arr0", "arr1", "arr2", "mask", "list", "index_select", "gather",
                       "take_along_dim", "masked_select", "take", "index_add", "scatter",
                       "scatter_add", "masked_fill", "gather_max"])
        if c in ("arr1",) and nd < 2 or c == "arr2" and nd < 2:
            c = "arr0"
        iv = m.iv
        uses = [k]
        if c == "arr0":
            ishape = self.pick([(3,), (2, 2), (1,), (5,)])
            idx = rng.integers(-sh[0], sh[0], ishape)
            key = idx
        elif c == "arr1":
            idx = rng.integers(0, sh[1], (self.i(1, 4),))
            key = (slice(None), idx)
        elif c == "arr2":
            n = self.i(1, 3)
            i0 = rng.integers(0, sh[0], (n,))
            i1 = rng.integers(0, sh[1], (1,) if self.coin(0.3) else (n,))
            key = (i0, i1) if nd == 2 or self.coin(0.5) else (i0, slice(None), i1[:1] * 0)
            if len(key) == 3 and nd < 3:
                key = (i0, i1)
        elif c == "mask":
            mask = self.mask(sh[:self.i(1, nd)], 0.6)
            key = mask
        elif c == "list":
            key = [int(v) for v in rng.integers(0, sh[0], (self.i(1, 3),))]
        if c in ("arr0", "arr1", "arr2", "mask", "list"):
            try:
                shape = np.empty(sh)[key if not isinstance(key, list) else key].shape
            except (IndexError, ValueError):
                return False
            if isinstance(key, np.ndarray) and key.dtype.kind == "i":
                key = np.asarray(key, dtype=np.int64)
            if isinstance(key, tuple):
                key = tuple(np.asarray(x, dtype=np.int64) if isinstance(x, np.ndarray)
                            else x for x in key)
            # torch's result of a non-contiguous input follows the kept dims' strides (its
            # TensorIterator), NumPy's follows its own rule: a known layout difference
            self.emit("opr", "getitem", (R(k), key),
                      outs=[self.fresh(shape, iv, m.rg, contig=True if m.contig else None)],
                      uses=uses)
            return True
        d = self.i(0, nd - 1)
        if c == "index_select":
            idx = rng.integers(0, sh[d], (self.i(1, 5),)).astype(np.int64)
            shape = sh[:d] + (len(idx),) + sh[d + 1:]
            self.emit(self.pick(["fn", "meth"]), "index_select", (R(k), d, idx),
                      outs=[self.fresh(shape, iv, m.rg)], uses=uses)
            return True
        if c in ("gather", "take_along_dim"):
            ishape = tuple(self.i(1, s) if q != d else self.i(1, 4) for q, s in enumerate(sh))
            idx = rng.integers(0, sh[d], ishape).astype(np.int64)
            if c == "gather":
                self.emit(self.pick(["fn", "meth"]), "gather", (R(k), d, idx),
                          outs=[self.fresh(ishape, iv, m.rg)], uses=uses)
            else:
                ishape = tuple(s if q != d else ishape[q] for q, s in enumerate(sh))
                idx = rng.integers(0, sh[d], ishape).astype(np.int64)
                self.emit("fn", "take_along_dim", (R(k), idx), {"dim": d},
                          outs=[self.fresh(ishape, iv, m.rg)], uses=uses)
            return True
        if c == "gather_max":
            j = self.emit("meth", "max", (R(k), d), {"keepdim": True}, keep=(1,),
                          outs=[M(sh[:d] + (1,) + sh[d + 1:], (0, 0), False, kind="i")],
                          uses=uses)[0]
            self.emit("meth", "gather", (R(k), d, R(j)),
                      outs=[self.fresh(self.meta[j].shape, iv, m.rg)], uses=uses)
            return True
        if c == "masked_select":
            mask = self.mask(self.sub_shape(sh))
            n = int(np.broadcast_to(mask, np.broadcast_shapes(mask.shape, sh)).sum())
            self.emit(self.pick(["fn", "meth"]), "masked_select", (R(k), mask),
                      outs=[self.fresh((n,), iv, m.rg)], uses=uses)
            return True
        if c == "take":
            ishape = self.pick([(4,), (2, 3), ()])
            idx = rng.integers(-m.numel, m.numel, ishape).astype(np.int64)
            self.emit(self.pick(["fn", "meth"]), "take", (R(k), idx),
                      outs=[self.fresh(ishape, iv, m.rg)], uses=uses)
            return True
        if c == "masked_fill":
            mask = self.mask(self.sub_shape(sh))
            v = self.pick([0.0, -2.0])
            self.emit(self.pick(["fn", "meth"]), "masked_fill", (R(k), mask, v),
                      outs=[self.fresh(sh, _iv_union(iv, (v, v)), m.rg)], uses=uses)
            return True
        # index_add / scatter / scatter_add: a source tensor
        if c == "index_add":
            n = self.i(1, 5)
            idx = rng.integers(0, sh[d], (n,)).astype(np.int64)
            sshape = sh[:d] + (n,) + sh[d + 1:]
            src = self.new_leaf(sshape) if self.coin(0.5) else None
            if src is None:
                cand = self.floats(lambda mm: mm.shape == sshape)
                src = self.choose(cand) if cand else self.new_leaf(sshape)
            S = self.meta[src].iv
            alpha = self.pick([1, 2.0])
            out_iv = _iv_add(iv, _iv_scale(S, alpha * n))
            if not _ok(out_iv):
                return False
            kw = {"alpha": alpha} if alpha != 1 else {}
            self.emit(self.pick(["fn", "meth"]), "index_add", (R(k), d, idx, R(src)), kw,
                      outs=[self.fresh(sh, out_iv, m.rg or self.meta[src].rg)],
                      uses=uses + [src])
            return True
        # scatter family: index shape <= self shape in every dim, <= src shape
        ishape = tuple(self.i(1, s) for s in sh)
        if c == "scatter":
            # no duplicate targets along d (torch leaves their order unspecified)
            perms = np.stack([rng.permutation(sh[d])[:ishape[d]]
                              for _ in range(int(np.prod(ishape)) // ishape[d])])
            idx = np.moveaxis(perms.reshape(tuple(s for q, s in enumerate(ishape) if q != d)
                                            + (ishape[d],)), -1, d).astype(np.int64)
        else:
            idx = rng.integers(0, sh[d], ishape).astype(np.int64)
        if c == "scatter" and self.coin(0.3):
            v = self.pick([0.5, -1.0])
            self.emit("meth", "scatter", (R(k), d, idx, v),
                      outs=[self.fresh(sh, _iv_union(iv, (v, v)), m.rg)], uses=uses)
            return True
        src = self.new_leaf(ishape)
        S = self.meta[src].iv
        if c == "scatter":
            out_iv = _iv_union(iv, S)
        else:
            out_iv = _iv_add(iv, _iv_scale(S, ishape[d]))
            out_iv = _iv_union(out_iv, iv)
        if not _ok(out_iv):
            return False
        self.emit(self.pick(["fn", "meth"]), c, (R(k), d, idx, R(src)),
                  outs=[self.fresh(sh, out_iv, m.rg or self.meta[src].rg)], uses=uses + [src])
        return True

    # --- reductions --------------------------------------------------------------------
    def _dims(self, nd):
        """(arg for dim, reduced dims set) or (None, all)."""
        if nd == 0 or self.coin(0.2):
            return None, set(range(nd))
        if self.coin(0.6):
            d = self.i(-nd, nd - 1)
            return d, {d % nd}
        ds = sorted(set(self.i(0, nd - 1) for _ in range(self.i(1, nd))))
        arg = tuple(d - nd if self.coin(0.3) else d for d in ds)
        return arg, set(ds)

    def g_reduce(self):
        k = self.operand(maxn=512)
        if k is None:
            return False
        m = self.meta[k]
        sh, nd = m.shape, m.ndim
        A = m.iv
        name = self.pick(["sum", "mean", "amax", "amin", "max_dim", "prod", "logsumexp",
                          "var", "std", "norm", "sum", "softmax", "log_softmax", "cumsum",
                          "cumprod", "max_all", "vector_norm", "nansum"])
        keepdim = self.coin(0.4)
        arg, red = self._dims(nd)
        n = int(np.prod([sh[d] for d in red])) if red else 1
        if name in ("softmax", "log_softmax", "cumsum", "cumprod", "max_dim"):
            if nd == 0:
                return False
            arg = self.i(-nd, nd - 1)
            red = {arg % nd}
            n = sh[arg % nd]

        def outshape():
            if keepdim:
                return tuple(1 if d in red else s for d, s in enumerate(sh))
            return tuple(s for d, s in enumerate(sh) if d not in red)
        kw = {}
        saves = False
        args = (R(k),)
        if name in ("sum", "nansum"):
            iv = (n * A[0], n * A[1])
        elif name == "mean":
            iv = A
        elif name in ("amax", "amin"):
            iv, saves = A, True
        elif name == "prod":
            if _mag(A) > 2.5 or n > 4 or (arg is not None and not isinstance(arg, int)):
                return False
            b = _mag(A) ** n
            iv, saves = (-b, b), True
        elif name == "logsumexp":
            if arg is None:
                arg = tuple(range(nd)) if nd else 0
                if nd == 0:
                    arg = 0
            iv, saves = (A[0], A[1] + math.log(max(n, 1))), True
        elif name in ("var", "std"):
            if n < 2:
                return False
            v = (A[1] - A[0]) ** 2 * n / (2.0 * (n - 1)) + 1e-12
            iv = (0.0, v if name == "var" else math.sqrt(v))
            saves = name == "std"
            if self.coin(0.3):
                kw["correction"] = 0
            elif self.coin(0.2):
                kw["unbiased"] = False
        elif name in ("norm", "vector_norm"):
            p = self.pick([2, 1, 3, float("inf")])
            iv = (0.0, (n ** (1.0 / p) if p != float("inf") else 1.0) * _mag(A))
            saves = True
            if name == "norm":
                kw["p"] = p
            else:
                kw["ord"] = p
        elif name in ("softmax", "log_softmax"):
            if name == "softmax":
                iv = (math.exp(A[0] - A[1]) / n, 1.0)
            else:
                iv = (A[0] - A[1] - math.log(n), 0.0)
            self.emit(self.pick(["fn", "meth", "F"]), name, (R(k), arg),
                      outs=[self.fresh(sh, iv, m.rg, saves_out=True)], uses=[k])
            return True
        elif name in ("cumsum", "cumprod"):
            if name == "cumprod" and (_mag(A) > 2.5 or n > 4):
                return False
            iv = (n * min(A[0], 0), n * max(A[1], 0)) if name == "cumsum" else \
                (-_mag(A) ** n - 1, _mag(A) ** n + 1)
            self.emit(self.pick(["fn", "meth"]), name, (R(k), arg),
                      outs=[self.fresh(sh, iv, m.rg, saves_out=name == "cumprod")],
                      uses=[k])
            return True
        elif name == "max_dim":
            f = self.pick(["max", "min"])
            shape = outshape()
            keep = (0, 1) if self.coin(0.6) else (0,)
            outs = [self.fresh(shape, A, m.rg)]
            if len(keep) == 2:
                outs.append(M(shape, (0, 0), False, kind="i"))
            self.emit(self.pick(["fn", "meth"]), f, (R(k), arg),
                      {"keepdim": keepdim} if keepdim or self.coin(0.5) else {},
                      keep=keep, outs=outs, uses=[k])
            return True
        else:  # max_all
            self.emit("meth", self.pick(["max", "min"]), (R(k),),
                      outs=[self.fresh((), A, m.rg, saves_out=True)], uses=[k])
            return True
        if not _ok(iv):
            return False
        if arg is None and name in ("amax", "amin") and nd == 0:
            arg = ()
        if arg is not None:
            if name in ("norm",):
                kw["dim"] = arg
            elif name == "vector_norm":
                kw["dim"] = arg
            else:
                args = (R(k), arg)
            kw["keepdim"] = keepdim
            shape = outshape()
        else:
            shape = ()
            if name in ("amax", "amin"):
                shape = () if not keepdim else tuple(1 for _ in sh)
                if keepdim:
                    kw["keepdim"] = True
                args = (R(k), tuple(range(nd)))
            if name in ("var", "std") and "unbiased" in kw:
                kw.pop("unbiased")
        if name == "vector_norm":
            self.emit("linalg", "vector_norm", (R(k),), kw,
                      outs=[self.fresh(shape, iv, m.rg, saves_out=saves)], uses=[k])
            return True
        form = self.pick(["fn", "meth"])
        self.emit(form, name, args, kw, outs=[self.fresh(shape, iv, m.rg, saves_out=saves)],
                  uses=[k])
        return True

    # --- matmul family -----------------------------------------------------------------
    def g_matmul(self):
        a = self.operand(lambda m: 1 <= m.ndim <= 4 and _mag(m.iv) <= 6)
        if a is None:
            return False
        ma = self.meta[a]
        sa = ma.shape
        kdim = sa[-1]
        # the partner's shape
        nd_b = self.pick([1, 2, 2, 3])
        if nd_b == 1:
            sb = (kdim,)
        else:
            batch = ()
            if len(sa) > 2 and self.coin(0.6):
                batch = tuple(1 if self.coin(0.3) else s for s in sa[:-2])[-self.i(0, 2):] \
                    if self.coin(0.5) else sa[:-2]
            elif nd_b == 3:
                batch = (self.i(1, 3),)
            sb = batch + (kdim, self.i(1, 4))
        cands = self.floats(lambda m: m.shape == sb and _mag(m.iv) <= 6)
        b = self.choose(cands) if cands and self.coin(0.6) else self.new_leaf(sb)
        mb = self.meta[b]
        try:
            shape = np.matmul(np.zeros(sa), np.zeros(sb)).shape
        except ValueError:
            return False
        if int(np.prod(shape)) > 512:
            return False
        iv_ = _iv_mul(ma.iv, mb.iv)
        iv = (kdim * iv_[0], kdim * iv_[1])
        if not _ok(iv):
            return False
        if self.coin(0.5) and len(sa) >= 2:
            # swap the roles: b^T-ish partner on the left (1-D @ 2-D etc.)
            pass
        forms = ["matmul_fn", "matmul_opr", "matmul_meth"]
        if len(sa) == 2 and len(sb) == 2:
            forms += ["mm", "mm"]
        if len(sa) == 1 and len(sb) == 1:
            forms += ["dot"]
        if len(sa) == 2 and len(sb) == 1:
            forms += ["mv"]
        if len(sa) == 3 and len(sb) == 3 and sa[0] == sb[0]:
            forms += ["bmm"]
        f = self.pick(forms)
        out = self.fresh(shape, iv, ma.rg or mb.rg)
        uses = [a, b]
        if f == "matmul_fn":
            self.emit("fn", "matmul", (R(a), R(b)), outs=[out], uses=uses)
        elif f == "matmul_opr":
            self.emit("opr", "matmul", (R(a), R(b)), outs=[out], uses=uses)
        elif f == "matmul_meth":
            self.emit("meth", "matmul", (R(a), R(b)), outs=[out], uses=uses)
        else:
            self.emit(self.pick(["fn", "meth"]), f, (R(a), R(b)), outs=[out], uses=uses)
        return True

    def g_vecmat(self):
        """1-D @ 2-D / batched, and outer products."""
        a = self.operand(lambda m: m.ndim == 1 and _mag(m.iv) <= 6 and m.shape[0] <= 8)
        if a is None:
            return False
        ma = self.meta[a]
        n = ma.shape[0]
        if self.coin(0.3):
            b = self.operand(lambda m: m.ndim == 1 and _mag(m.iv) <= 6 and m.shape[0] <= 8)
            if b is None:
                return False
            mb = self.meta[b]
            iv = _iv_mul(ma.iv, mb.iv)
            self.emit(self.pick(["fn", "meth"]), "outer", (R(a), R(b)),
                      outs=[self.fresh((n, mb.shape[0]), iv, ma.rg or mb.rg)], uses=[a, b])
            return True
        sb = self.pick([(n, self.i(1, 4)), (self.i(1, 3), n, self.i(1, 3))])
        b = self.new_leaf(sb) if self.coin(0.5) else self.choose(
            self.floats(lambda m: m.shape == sb) or [self.new_leaf(sb)])
        mb = self.meta[b]
        iv_ = _iv_mul(ma.iv, mb.iv)
        iv = (n * iv_[0], n * iv_[1])
        if not _ok(iv):
            return False
        shape = np.matmul(np.zeros((n,)), np.zeros(sb)).shape
        self.emit("fn", "matmul", (R(a), R(b)), outs=[self.fresh(shape, iv, ma.rg or mb.rg)],
                  uses=[a, b])
        return True

    def g_einsum(self):
        a = self.operand(lambda m: 1 <= m.ndim <= 3 and _mag(m.iv) <= 6)
        if a is None:
            return False
        ma = self.meta[a]
        sa = ma.shape
        letters = "ijk"[:len(sa)]
        t = self.i(0, 5)
        ops = [a]
        if t == 0:                                     # permutation / reduction of one
            out = "".join(self.rng.permutation(list(letters)))[:self.i(0, len(sa))]
            eq = f"{letters}->{out}"
        elif t == 1 and len(sa) == 2 and sa[0] == sa[1]:
            eq = self.pick(["ii->i", "ii->", "ij->ji"])
        elif t == 2:                                   # elementwise with a same-shape tensor
            b = self.partner(a, exact=True)
            ops.append(b)
            eq = f"{letters},{letters}->{letters}"
        elif t == 3:                                   # contraction over the last letter
            n = sa[-1]
            sb = (n, self.i(1, 4))
            b = self.choose(self.floats(lambda m: m.shape == sb)) if self.coin(0.4) else None
            b = b if b is not None else self.new_leaf(sb)
            ops.append(b)
            eq = f"{letters},{letters[-1]}z->{letters[:-1]}z"
        elif t == 4:                                   # outer product
            sb = (self.i(1, 3),)
            b = self.new_leaf(sb)
            ops.append(b)
            eq = f"{letters},z->{letters}z"
        else:                                          # ellipsis batch matmul
            if len(sa) < 2:
                return False
            sb = (sa[-1], self.i(1, 3))
            b = self.new_leaf(sb)
            ops.append(b)
            eq = "...ij,jk->...ik"
        try:
            arrs = [np.empty(self.meta[o].shape) for o in ops]
            shape = np.einsum(eq.replace("z", "y"), *arrs).shape
        except ValueError:
            return False
        n = 1
        for o in ops[1:]:
            n *= max(self.meta[o].shape) if self.meta[o].shape else 1
        iv = self.meta[ops[0]].iv
        for o in ops[1:]:
            iv = _iv_mul(iv, self.meta[o].iv)
        red = max(1, int(np.prod(sa)))
        iv = (red * min(iv[0], 0) * n, red * max(iv[1], 0) * n)
        if not _ok(iv) or int(np.prod(shape)) > 512:
            return False
        rg = any(self.meta[o].rg for o in ops)
        args = (eq,) + tuple(R(o) for o in ops)
        if self.coin(0.2):
            args = (eq, [R(o) for o in ops])
        lhs, rhs = eq.split("->")
        if "," not in lhs and len(rhs) == len(set(lhs)):
            # one operand, nothing summed: torch returns a view (permute / diagonal)
            out = self.view_of(a, shape, contig=False)
            out.iv = iv
            self.emit("fn", "einsum", args, outs=[out])
            return True
        # torch's einsum is a mul / bmm of permuted operands: its result's layout follows
        # theirs (a transposed operand gives a transposed product), cgrad's is contiguous
        contig = True if all(self.meta[o].contig is True for o in ops) else None
        self.emit("fn", "einsum", args, outs=[self.fresh(shape, iv, rg, contig=contig)],
                  uses=ops)
        return True

    # --- wide nodes --------------------------------------------------------------------
    def width(self):
        return self.pick(WIDTHS) if self.coin(0.8) else self.i(2, 2000)

    def g_wide(self):
        if self.wide_left <= 0:
            return False
        self.wide_left -= 1
        kind = self.pick(["cat", "stack", "hstack", "vstack", "broadcast_tensors", "einsum",
                          "cf_wide", "cat", "stack", "einsum"])
        w = self.width()
        if kind == "einsum":
            return self._wide_einsum(w)
        t = self.operand(lambda m: m.numel <= 12 and (m.ndim >= 1 or kind not in ("cat",)))
        if t is None:
            return False
        m = self.meta[t]
        sh = m.shape
        if kind == "broadcast_tensors":
            cands = self.floats(lambda mm: _bshape(mm.shape, sh) == sh and mm.numel <= 12)
        else:
            cands = self.floats(lambda mm: mm.shape == sh)
        cands = cands[-6:] if len(cands) > 6 else cands
        if t not in cands:
            cands.append(t)
        sel = [int(v) for v in self.rng.choice(cands, size=w)]
        refs = [R(j) for j in sel]
        rg = any(self.meta[j].rg for j in set(sel))
        iv = _iv_union(*[self.meta[j].iv for j in set(sel)])
        uses = sorted(set(sel))
        cat_lay, stack_lay = self._joined_layout(uses)
        if kind == "cat":
            d = self.i(-len(sh), len(sh) - 1)
            shape = list(sh)
            shape[d] *= w
            self.emit("fn", self.pick(["cat", "cat", "concat"]), (refs, d),
                      outs=[self.fresh(tuple(shape), iv, rg, contig=cat_lay)], uses=uses)
        elif kind == "stack":
            d = self.i(0, len(sh))
            shape = sh[:d] + (w,) + sh[d:]
            self.emit("fn", "stack", (refs,), {"dim": d} if d else {},
                      outs=[self.fresh(shape, iv, rg, contig=stack_lay)], uses=uses)
        elif kind == "hstack":
            shape = np.hstack([np.empty(sh)] * w).shape
            self.emit("fn", "hstack", (refs,), outs=[self.fresh(shape, iv, rg,
                                                                contig=cat_lay)], uses=uses)
        elif kind == "vstack":
            shape = np.vstack([np.empty(sh)] * w).shape
            self.emit("fn", "vstack", (refs,), outs=[self.fresh(shape, iv, rg,
                                                                contig=cat_lay)], uses=uses)
        elif kind == "broadcast_tensors":
            keep = tuple(sorted({0, w // 2, w - 1}))
            outs = [self.view_of(sel[p], sh, contig=False,
                                 overlap=self.meta[sel[p]].shape != sh) for p in keep]
            for o, p in zip(outs, keep):
                o.iv = self.meta[sel[p]].iv
            self.emit("fn", "broadcast_tensors", tuple(refs), keep=keep, outs=outs, uses=uses)
        else:
            self.emit("cf", "Wide", tuple(refs), outs=[self.fresh(sh, (w * min(iv[0], 0),
                                                                       w * max(iv[1], 0)),
                                                                  rg)], uses=uses)
            if not _ok(self.meta[-1].iv):
                # the sum over many inputs can be large: scale it back at once
                last = len(self.meta) - 1
                mm = self.meta[last]
                self.emit("opr", "truediv", (R(last), float(w)),
                          outs=[self.fresh(sh, _iv_scale(mm.iv, 1.0 / w), mm.rg)],
                          uses=[last])
        return True

    def _wide_einsum(self, w):
        """A product of w operands near one (each within 1e-3 of 1)."""
        t = self.operand(lambda m: 1 <= m.ndim <= 2 and m.numel <= 12)
        if t is None or w > 2000:
            return False
        m = self.meta[t]
        sh = m.shape
        # near-one operands: 1 + 0.001 * tanh(t), and a near-one leaf
        lay = m.contig                  # (one-tensor ops: the layout is kept)
        th = self.emit("fn", "tanh", (R(t),), outs=[self.fresh(sh, (-1.0, 1.0), m.rg, True,
                                                               contig=lay)], uses=[t])[0]
        sc = self.emit("opr", "mul", (R(th), 0.001),
                       outs=[self.fresh(sh, (-1e-3, 1e-3), m.rg, contig=lay)], uses=[th])[0]
        n1 = self.emit("opr", "add", (R(sc), 1.0),
                       outs=[self.fresh(sh, (1 - 1e-3, 1 + 1e-3), m.rg, contig=lay)],
                       uses=[sc])[0]
        cands = [n1]
        if self.coin(0.5):
            cands.append(self.new_leaf(sh, "near1"))
        sel = [int(v) for v in self.rng.choice(cands, size=w)]
        letters = "ab"[:len(sh)]
        out = letters if self.coin(0.6) else letters[:-1]
        eq = ",".join([letters] * w) + "->" + out
        red = int(np.prod(sh[len(out):])) if len(out) < len(sh) else 1
        iv = (red * (1 - 1e-3) ** w, red * (1 + 1e-3) ** w)
        shape = sh[:len(out)]
        rg = any(self.meta[j].rg for j in set(sel))
        # (einsum's layout rule, g_einsum: unknown when an operand's is not C-contiguous)
        contig = True if all(self.meta[j].contig is True for j in set(sel)) else None
        self.emit("fn", "einsum", (eq,) + tuple(R(j) for j in sel),
                  outs=[self.fresh(shape, iv, rg, contig=contig)], uses=sorted(set(sel)))
        return True

    def g_small_list(self):
        """cat/stack of a few tensors of different shapes, and other shape ops."""
        k = self.operand(lambda m: m.ndim >= 1)
        if k is None:
            return False
        m = self.meta[k]
        sh = m.shape
        c = self.pick(["cat", "stack", "flip", "roll", "tile", "repeat", "clone", "contiguous",
                       "detach", "detach_rg", "double", "block_diag", "atleast_2d"])
        if self.fd and c in ("detach", "detach_rg"):
            c = "clone"
        if c == "contiguous" and m.contig is None:
            # layout unknown (cgrad's and torch's may differ): contiguous() may return the
            # tensor itself in one library and a copy in the other, so writes would differ
            c = "clone"
        if c == "cat":
            d = self.i(0, len(sh) - 1)
            others = []
            for _ in range(self.i(1, 3)):
                s2 = list(sh)
                s2[d] = self.i(1, 3)
                cand = self.floats(lambda mm: mm.shape == tuple(s2))
                others.append(self.choose(cand) if cand and self.coin(0.5)
                              else self.new_leaf(tuple(s2)))
            ops = [k] + others
            if self.coin(0.5):
                ops = ops[::-1]
            shape = list(sh)
            shape[d] = sum(self.meta[o].shape[d] for o in ops)
            self.emit("fn", "cat", ([R(o) for o in ops], d),
                      outs=[self.fresh(tuple(shape), _iv_union(*[self.meta[o].iv for o in ops]),
                                       self.rg_of(*ops), contig=self._joined_layout(ops)[0])],
                      uses=ops)
        elif c == "stack":
            b = self.partner(k, exact=True)
            d = self.i(-len(sh) - 1, len(sh))
            shape = np.stack([np.empty(sh)] * 2, axis=d).shape
            self.emit("fn", "stack", ([R(k), R(b)], d),
                      outs=[self.fresh(shape, _iv_union(m.iv, self.meta[b].iv),
                                       self.rg_of(k, b), contig=self._joined_layout([k, b])[1])],
                      uses=[k, b])
        elif c == "flip":
            ds = tuple(sorted(set(self.i(0, len(sh) - 1) for _ in range(self.i(1, 2)))))
            # (torch's preserve_format, as cgrad's: the input's layout)
            self.emit("meth", "flip", (R(k), ds) if self.coin(0.5) else (R(k),) + ds,
                      outs=[self.fresh(sh, m.iv, m.rg, contig=m.contig)], uses=[k])
        elif c == "roll":
            if self.coin(0.5):
                args = (R(k), self.i(-3, 3), self.i(0, len(sh) - 1))
            else:
                args = (R(k), self.i(-5, 5))
            # C-contiguous, or channels-last like a channels-last input: cgrad and torch
            # agree where they agree on the input's layout
            self.emit(self.pick(["fn", "meth"]), "roll", args,
                      outs=[self.fresh(sh, m.iv, m.rg,
                                       contig=None if m.contig is None else True)], uses=[k])
        elif c in ("tile", "repeat"):
            reps = tuple(self.i(1, 2) for _ in range(len(sh) + (1 if c == "repeat" and
                                                                 self.coin(0.5) else 0)))
            shape = np.tile(np.empty(sh), reps).shape
            if int(np.prod(shape)) > 512:
                return False
            self.emit("meth", c, (R(k), reps), outs=[self.fresh(shape, m.iv, m.rg)], uses=[k])
        elif c == "clone":
            # torch's preserve_format, as cgrad's: the copy keeps the input's stride order
            # (an overlapping input, e.g. expanded, gives a contiguous copy)
            contig = True if m.overlap else m.contig
            self.emit(self.pick(["fn", "meth"]), "clone", (R(k),),
                      outs=[self.fresh(sh, m.iv, m.rg, contig=contig)], uses=[k])
        elif c == "double":         # float64 already: the tensor itself, as torch
            out = self.view_of(k, sh)
        elif c == "contiguous":
            out = self.view_of(k, sh, contig=True) if m.contig else self.fresh(sh, m.iv, m.rg)
            if not m.contig:
                out.stor, out.base = m.stor, m.base
            self.emit("meth", c, (R(k),), outs=[out], uses=[k])
        elif c in ("detach", "detach_rg"):
            out = M(sh, m.iv, c == "detach_rg", stor=m.stor, base=len(self.stor) + 1000 +
                    len(self.meta), contig=m.contig, leafrg=c == "detach_rg", isleaf=True)
            if c == "detach":
                self.emit("meth", "detach", (R(k),), outs=[out])
            else:
                d = self.emit("meth", "detach", (R(k),),
                              outs=[M(sh, m.iv, False, stor=m.stor, base=out.base,
                                      contig=m.contig, isleaf=True)])[0]
                self.emit("meth", "requires_grad_", (R(d),), outs=[out])
                self.prog.rg_leaves.append(len(self.meta) - 1)
                self.stor[m.stor].leafrg = True
        elif c == "block_diag":
            if len(sh) > 2:
                return False
            b = self.operand(lambda mm: mm.ndim <= 2 and mm.numel <= 64)
            s1 = sh if len(sh) == 2 else (1, sh[0])
            mb = self.meta[b]
            s2 = mb.shape if mb.ndim == 2 else ((1, mb.shape[0]) if mb.ndim else (1, 1))
            shape = (s1[0] + s2[0], s1[1] + s2[1])
            self.emit("fn", "block_diag", (R(k), R(b)),
                      outs=[self.fresh(shape, _iv_union(m.iv, mb.iv, (0, 0)),
                                       self.rg_of(k, b))], uses=[k, b])
        else:
            shape = np.atleast_2d(np.empty(sh)).shape
            self.emit("fn", "atleast_2d", (R(k),), outs=[self.view_of(k, shape)])
        return True

    def _joined_layout(self, ops):
        """(cat's, stack's) result layout for these operands: cat is C-contiguous in both
        libraries (channels-last when every operand is, which they agree on where they agree
        on the operands' layouts); stack of channels-last operands is not C-contiguous in
        torch and is in cgrad, so it is known only when every operand is C-contiguous."""
        known = all(self.meta[o].contig is not None for o in ops)
        return (True if known else None,
                True if all(self.meta[o].contig is True for o in ops) else None)

    # --- custom Functions --------------------------------------------------------------
    def g_custom(self):
        name = self.pick(["MulAdd", "TanhOut", "Dirty", "NonDiff", "NoneGrad", "Multi", "Once",
                          "Setup", "Identity", "TrailingNone", "MulAdd", "Setup"])
        if self.fd and (name in ("NonDiff", "NoneGrad")
                        or name == "Once" and self.mode == "double"):
            name = "MulAdd"     # (once_differentiable has no second derivative by design)
        if name == "Dirty":
            k = self._inplace_target()
            if k is None:
                return False
            m = self.meta[k]
            c = self.pick([2.0, -0.5])
            iv = _iv_scale(m.iv, c)
            if not _ok(iv):
                return False
            self.emit("cf", "Dirty", (R(k), c), keep=())
            self.touch(k, _iv_union(iv, m.iv))
            return True
        k = self.operand(lambda m: _mag(m.iv) <= 6)
        if k is None:
            return False
        m = self.meta[k]
        A = m.iv
        if name in ("MulAdd", "NoneGrad", "Multi"):
            b = self.partner(k, pred=lambda mm: _mag(mm.iv) <= 6)
            mb = self.meta[b]
            shape = _bshape(m.shape, mb.shape)
            B = mb.iv
            rg = m.rg or mb.rg
            # elementwise in the forward: the binary-op layout rule of g_binary applies
            lay = True if m.contig is True and mb.contig is True else None
            if name == "MulAdd":
                iv = _iv_add(_iv_mul(A, B), A)
                self.emit("cf", name, (R(k), R(b)), outs=[self.fresh(shape, iv, rg,
                                                                      contig=lay)],
                          uses=[k, b])
            elif name == "NoneGrad":
                n = self.pick([257, 1000, 300000, 4096])
                s = self.pick(["ab", "xyz"])
                t = (1, self.pick([0.5, -1.0]))
                iv = _iv_add(_iv_add(_iv_scale(A, n / 1000.0), _iv_scale(B, len(s))),
                             (t[1], t[1]))
                if not _ok(iv):
                    return False
                self.emit("cf", name, (R(k), R(b), n, s, t, None),
                          outs=[self.fresh(shape, iv, rg, contig=lay)], uses=[k, b])
            else:
                mat = self.coin(0.5)
                keep = tuple(sorted(set(self.i(0, 2) for _ in range(self.i(1, 3)))))
                ivs = [_iv_add(A, B), _iv_mul(A, B), _iv_sub(A, B)]
                self.emit("cf", name, (R(k), R(b), mat), keep=keep,
                          outs=[self.fresh(shape, ivs[p], rg, contig=lay) for p in keep],
                          uses=[k, b])
            return True
        lay = m.contig      # (their forwards are one-tensor ops: the input's layout is kept)
        if name == "TanhOut":
            self.emit("cf", name, (R(k),), outs=[self.fresh(m.shape, _mono(math.tanh)(A), m.rg,
                                                            saves_out=True, contig=lay)],
                      uses=[k])
        elif name == "NonDiff":
            keep = (0, 1) if self.coin(0.7) else (0,)
            outs = [self.fresh(m.shape, _iv_scale(A, 2.0), m.rg, contig=lay),
                    self.fresh(m.shape, _iv_scale(A, 3.0), False, contig=lay)][:len(keep)]
            if len(keep) == 2:
                outs[1].isleaf = True
            self.emit("cf", name, (R(k),), keep=keep, outs=outs, uses=[k])
        elif name == "Once":
            self.emit("cf", name, (R(k),), outs=[self.fresh(m.shape, (-1.0, 1.0), m.rg,
                                                            contig=lay)], uses=[k])
        elif name == "Setup":
            kk = self.pick([2, 0.5, 300])
            if kk == 300:
                kk = 3
            kw = {"scale": 0.5} if self.coin(0.5) else {}
            sc = kw.get("scale", 1.0)
            iv = _iv_add(_iv_scale(A, kk), _iv_scale(_iv_powk(A, 2), sc))
            if not _ok(iv):
                return False
            self.emit("cf", name, (R(k), kk), kw, outs=[self.fresh(m.shape, iv, m.rg,
                                                                   contig=lay)], uses=[k])
        elif name == "Identity":
            out = self.view_of(k, m.shape)
            out.cmeta = True
            self.emit("cf", name, (R(k),), outs=[out], uses=[k])
        else:
            self.emit("cf", name, (R(k),), outs=[self.fresh(m.shape, _iv_scale(A, 2.0), m.rg,
                                                            contig=lay)], uses=[k])
        return True

    # --- hooks -------------------------------------------------------------------------
    def g_hook(self):
        c = self.floats(lambda m: m.rg)
        if not c or self.n_hooks >= 6:
            return False
        k = self.choose(c)
        self.n_hooks += 1
        if self.coin(0.25):
            self.emit("retain", "retain_grad", (R(k),), keep=())
            return True
        kind = self.pick(["scale", "scale", "replace", "observe"])
        val = self.pick([2.0, -0.5, 0.0]) if kind == "scale" else self.pick([1.0, 0.25])
        self.emit("hook", "register_hook", (R(k), self.n_hooks, kind, val), keep=())
        return True

    # --- the whole program -------------------------------------------------------------
    CATEGORIES = (["unary"] * 12 + ["binary"] * 14 + ["scalar"] * 8 + ["view"] * 12 +
                  ["inplace"] * 7 + ["setitem"] * 4 + ["index"] * 6 + ["reduce"] * 9 +
                  ["matmul"] * 5 + ["vecmat"] * 2 + ["einsum"] * 3 + ["custom"] * 6 +
                  ["hook"] * 2 + ["small_list"] * 4 + ["leaf"] * 3 + ["clamp"] * 2 +
                  ["wide"])

    def build(self):
        for _ in range(self.i(1, 3)):
            self.new_leaf(self.sub_shape(), "sym", rg=True if not self.prog.rg_leaves else None)
        tries = 0
        while len(self.meta) < self.target and tries < 4 * self.target + 50:
            tries += 1
            cat = self.CATEGORIES[self.draw(st.integers(0, len(self.CATEGORIES) - 1))]
            self.reseed()
            self.allow_bad = self.coin(0.003)    # a step that may be invalid in torch
            if cat == "wide" and not self.coin(0.5):
                continue
            getattr(self, "g_" + cat)()
            if self.hub is None and len(self.meta) > 3 and self.coin(0.3):
                self.hub = len(self.meta) - 1
            elif self.coin(0.02):
                self.hub = len(self.meta) - 1
        self.driver()
        p = self.prog
        p.n_pool = len(self.meta)
        p.meta = self.meta
        return p

    def driver(self):
        self.reseed()
        p = self.prog
        p.mode = self.mode
        cands = self.floats(lambda m: m.rg)
        if not cands or self.coin(0.01):
            cands = self.floats()
        n_roots = self.i(1, 3)
        roots = []
        for _ in range(n_roots):
            r = cands[-1 - self.i(0, min(5, len(cands) - 1))] if self.coin(0.7) else \
                self.pick(cands)
            if r not in roots:
                roots.append(r)
        p.roots = roots
        p.grad_outputs = []
        for r in roots:
            sh = self.meta[r].shape
            if len(roots) == 1 and sh == () and self.coin(0.5):
                p.grad_outputs.append(None)
            else:
                p.grad_outputs.append(self.rng.uniform(-1, 1, sh))
        rg_all = self.floats(lambda m: m.rg)
        rg_leaves = [k for k in p.rg_leaves if self.meta[k].rg]
        if self.mode == "backward":
            p.retain = self.pick([None, False, True, True])
            p.second = bool(p.retain)
            p.again = not p.retain and self.coin(0.2)
            if self.coin(0.2) and rg_all:
                p.inputs = sorted({self.pick(rg_all) for _ in range(self.i(1, 3))})
        elif self.mode == "grad":
            pool = rg_all if self.coin(0.5) else rg_leaves or rg_all
            if not pool:
                pool = self.floats()
            p.inputs = sorted({self.pick(pool) for _ in range(self.i(1, 5))})
            if self.coin(0.02):
                nrg = self.floats(lambda m: not m.rg)
                if nrg:
                    p.inputs.append(self.pick(nrg))
            p.allow_unused = self.coin(0.9)
            p.materialize = self.coin(0.15)
            if p.materialize:
                p.allow_unused = None
            p.retain = self.pick([None, True])
        else:  # double
            pool = rg_leaves or rg_all or self.floats()
            p.inputs = sorted({self.pick(pool) for _ in range(self.i(1, 4))})
            p.weights = [self.rng.uniform(-1, 1, self.meta[k].shape) for k in p.inputs]
            p.coefs = [float(self.rng.uniform(0.5, 1.5)) for _ in p.inputs]


@st.composite
def programs(draw, mode="backward", min_nodes=20, max_nodes=300, wide=True, fd=False):
    """A random program (see the module docstring) with a driver for `mode`: backward,
    grad or double. fd: only programs that finite differences can check (see _Gen)."""
    return _Gen(draw, mode, min_nodes, max_nodes, wide, fd).build()


def first_divergence(prog, lib_a, lib_b, rtol=1e-10):
    """Debugging aid: run the program step by step on two libraries and return (step index,
    description) of the first step after which some pool entry's value differs (or only one
    library raised), or None."""
    import warnings
    envs, pools = [], []
    for lib in (lib_a, lib_b):
        envs.append(Env(lib, prog))
        pools.append([])
    for n, s in enumerate(prog.steps):
        outs = []
        for env, pool in zip(envs, pools):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if s.nograd:
                        with env.lib.no_grad():
                            out = _exec(env, pool, s)
                    else:
                        out = _exec(env, pool, s)
                outs.append(out)
            except Exception as e:
                outs.append(e)
        errs = [isinstance(o, Exception) for o in outs]
        if any(errs):
            if all(errs):
                return n, f"both raise: {outs[0]!r} / {outs[1]!r}"
            return n, f"only one raises: {outs[0]!r} / {outs[1]!r}"
        for out, pool in zip(outs, pools):
            if s.keep is None:
                pool.append(out)
            else:
                for p in s.keep:
                    pool.append(out[p])
        for k, (a, b) in enumerate(zip(*pools)):
            va, vb = a.detach().numpy(), b.detach().numpy()
            if va.shape != vb.shape or not np.allclose(va, vb, rtol=rtol, atol=rtol,
                                                       equal_nan=True):
                return n, f"t{k} differs after step {n}: {_fmt_step(s, prog)}\n{va}\n{vb}"
            fa, fb = _flags(a), _flags(b)
            if fa != fb:
                return n, f"t{k} (requires_grad, is_leaf) after step {n}: {fa} / {fb}"
    return None


def _flags(t):
    out = []
    for name in ("requires_grad", "is_leaf"):
        try:
            out.append(getattr(t, name))
        except Exception as e:
            out.append(type(e).__name__)
    return tuple(out)


def _refs(x, out):
    t = type(x)
    if t is R:
        out.add(x.i)
    elif t in (list, tuple):
        for v in x:
            _refs(v, out)
    elif t is dict:
        for v in x.values():
            _refs(v, out)
    return out


def _remap(x, m):
    t = type(x)
    if t is R:
        return R(m[x.i])
    if t is list:
        return [_remap(v, m) for v in x]
    if t is tuple:
        return tuple(_remap(v, m) for v in x)
    return x


def subprogram(prog, keep_steps):
    """The program made of the steps in keep_steps (indices), pool references renumbered;
    None if a kept step (or the driver) refers to an entry of a dropped step."""
    import copy
    new = copy.copy(prog)
    new.steps, m, pid, npid = [], {}, 0, 0
    for n, s in enumerate(prog.steps):
        k = _n_out(s)
        if n in keep_steps:
            used = _refs(s.args, set()) | _refs(s.kw, set())
            if not used <= m.keys():
                return None
            new.steps.append(Step(s.kind, s.name, _remap(s.args, m),
                                  {a: _remap(v, m) for a, v in s.kw.items()}, s.keep, s.nograd))
            for j in range(k):
                m[pid + j] = npid + j
            npid += k
        pid += k
    for ids in (prog.roots, prog.inputs or []):
        if not set(ids) <= m.keys():
            return None
    new.roots = [m[r] for r in prog.roots]
    new.inputs = None if prog.inputs is None else [m[i] for i in prog.inputs]
    new.rg_leaves = [m[i] for i in prog.rg_leaves if i in m]
    new.leaf_ids = {m[i]: v for i, v in prog.leaf_ids.items() if i in m}
    new.n_pool = npid
    return new


def shrink(prog, still_fails, rounds=3):
    """Greedy step deletion (a debugging aid; hypothesis does its own shrinking): drop every
    step whose removal keeps `still_fails(program)` true."""
    keep = list(range(len(prog.steps)))
    best = prog
    for _ in range(rounds):
        changed = False
        for n in reversed(list(keep)):
            trial = [k for k in keep if k != n]
            cand = subprogram(prog, set(trial))
            if cand is not None and still_fails(cand):
                keep, best, changed = trial, cand, True
        if not changed:
            break
    return best
