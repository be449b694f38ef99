"""Random sampling with torch's signatures, dtypes and errors: rand, randn, randint, randperm,
rand_like, randn_like, randint_like, multinomial, bernoulli, normal, poisson, and the draws
behind the in-place fills (Tensor.uniform_, normal_, random_, exponential_, geometric_,
log_normal_, cauchy_, bernoulli_).

Every function draws from ``generator=`` (a cgrad.Generator) or from
``cgrad.default_generator``; the same seed gives the same values on every run, which are not
torch's values (Note [Random streams] in cgrad/_generator.py). Where torch records a node
for a random op on a tensor that requires grad (bernoulli, normal, poisson, the in-place
fills), cgrad records one of the same name whose gradient is zero, as torch's is.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad import _creation
from cgrad import _dtype
from cgrad import _generator
from cgrad.autograd.function import Function

__all__ = ["rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
           "multinomial", "bernoulli", "normal", "poisson"]

_tn = _dtype.torch_type_name
# C++ names of the dtypes in torch's bound messages ("to - 1 is out of bounds for short int")
_C_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
            "int16": "short int", "int32": "int", "int64": "long int", "float16": "c10::Half",
            "float32": "float", "float64": "double", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>"}
_MANTISSA = {"float16": 11, "float32": 24, "float64": 53}


def _gen(generator, fname):
    return _generator.numpy_generator(generator, fname)


def _float_kernel(dt, kernel):
    if dt.kind not in "fc":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_tn(dt)}'")


# -- draws: ndarrays of a dtype (the stream does not depend on it but for float32/complex) ----
def uniform(g, shape, dt, low=0.0, high=1.0):
    """Uniform on [low, high) in dtype dt (complex: real and imaginary parts each)."""
    if dt.kind == "c":
        part = np.float32 if dt == np.complex64 else np.float64
        re_, im = uniform(g, shape, np.dtype(part), low, high), uniform(g, shape,
                                                                          np.dtype(part), low,
                                                                          high)
        return (re_ + 1j * im).astype(dt)
    draw = g.random(shape, dtype=np.float32 if dt == np.float32 else np.float64)
    if low != 0.0 or high != 1.0:
        draw = draw * (high - low) + low
    out = draw.astype(dt, copy=False)
    if dt.itemsize < draw.dtype.itemsize and high > low:   # rounding must not reach `high`
        top = np.nextafter(dt.type(high), dt.type(low))
        np.minimum(out, top, out=out)
    return out


def standard_normal(g, shape, dt):
    """N(0, 1) in dtype dt (complex: N(0, 1/2) real and imaginary parts, as torch)."""
    if dt.kind == "c":
        part = np.float32 if dt == np.complex64 else np.float64
        s = np.sqrt(0.5)
        re_ = g.standard_normal(shape, dtype=part) * s
        im = g.standard_normal(shape, dtype=part) * s
        return (re_ + 1j * im).astype(dt)
    return g.standard_normal(shape, dtype=np.float32 if dt == np.float32 else np.float64
                             ).astype(dt, copy=False)


def integers(g, low, high, shape, dt):
    """Integers in [low, high) as dtype dt."""
    return g.integers(low, high, size=shape, dtype=np.int64, endpoint=False).astype(dt,
                                                                                    copy=False)


# -- nodes: random draws have a zero gradient (torch's derivatives.yaml) ----------------------
def _draw_forward(ctx, values, *inputs):
    if ctx is not None:
        ctx._aux = tuple((t._data.shape, t._data.dtype) if isinstance(t, _C.TensorBase)
                         else None for t in inputs)
    return values


def _draw_backward(ctx, g):
    return (None,) + tuple(None if s is None else _C._wrap(np.zeros(s[0], s[1]))
                           for s in ctx._aux)


def _not_implemented_backward(ctx, g):
    raise RuntimeError(f"the derivative for '{ctx._aux}' is not implemented.")


def _node(name, backward=_draw_backward):
    """A Function named `name` in graphs: forward(values, *inputs) returns values."""
    return type(name, (Function,), {"_node_name": name,
                                    "forward": staticmethod(_draw_forward),
                                    "backward": staticmethod(backward),
                                    "__module__": __name__})


NODES = {n: _node(n) for n in (
    "BernoulliBackward0", "BernoulliBackward1", "BernoulliBackward2", "NormalBackward0",
    "NormalBackward1", "NormalBackward2", "NormalBackward3", "PoissonBackward0",
    "UniformBackward0", "RandomBackward0", "RandomBackward1", "RandomBackward2",
    "ExponentialBackward0", "GeometricBackward0", "LogNormalBackward0", "CauchyBackward0")}
# module attributes, so that the classes are rooted (Note [Untracked graphs] in cgrad/_C.pyx)
globals().update(NODES)


class _NotImplementedNode(Function):
    """bernoulli(input, p): torch has no derivative for it (its node is 'NotImplemented')."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, values, name, a):
        if ctx is not None:
            ctx._aux = name
        return values

    backward = staticmethod(_not_implemented_backward)


def _recorded(values, node, *inputs):
    """values (an ndarray) as a tensor: the output of `node` when an input requires grad."""
    if _C.is_grad_enabled() and any(isinstance(t, _C.TensorBase) and t.requires_grad
                                    for t in inputs):
        return NODES[node].apply(values, *inputs)
    return _C._wrap(values)


# -- factories --------------------------------------------------------------------------------
def _factory(fname, kernel, draw, args, size, generator, out, dtype, layout, device,
             pin_memory, requires_grad):
    size = _creation.sizes(fname, args, size)
    dt = _creation.check_out(fname, out, dtype) if out is not None else _creation._dt(dtype,
                                                                                      fname)
    _float_kernel(dt, kernel)
    g = _gen(generator, fname)
    return _creation._make(fname, lambda shape, d: draw(g, shape, d), size, dt, device,
                           requires_grad, out, layout, pin_memory)


def rand(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         pin_memory=False, requires_grad=False):
    """Uniform random numbers on [0, 1): rand(2, 3), rand((2, 3)) or rand(size=(2, 3))."""
    return _factory("rand", "check_uniform_bounds", uniform, args, size, generator, out, dtype,
                    layout, device, pin_memory, requires_grad)


def randn(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          pin_memory=False, requires_grad=False):
    """Standard normal random numbers: randn(2, 3), randn((2, 3)) or randn(size=(2, 3))."""
    return _factory("randn", "normal_kernel_cpu", standard_normal, args, size, generator, out,
                    dtype, layout, device, pin_memory, requires_grad)


def _int_range(fname, low, high, dt):
    """torch's checks of [low, high) for integer sampling into dtype dt."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if dt.kind in "iubf":
        if dt.kind == "b":
            lo, hi = 0, 1
        else:
            info = np.iinfo(dt) if dt.kind in "iu" else np.finfo(dt)
            lo, hi = info.min, info.max
        name = _C_NAMES[str(dt)]
        if not lo <= low <= hi:
            raise RuntimeError(f"from is out of bounds for {name}")
        if not lo <= high - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {name}")


_RANDINT_NAMES = ("low", "high", "size")


def randint(*args, low=None, high=None, size=None, generator=None, out=None, dtype=None,
            layout=None, device=None, pin_memory=False, requires_grad=False):
    """Random integers in [low, high): randint(high, size) or randint(low, high, size)
    (low defaults to 0; int64 unless dtype says otherwise)."""
    if len(args) > 3:
        raise TypeError(f"randint() takes from 2 to 3 positional arguments but {len(args)} were "
                        "given")
    given = {"low": low, "high": high, "size": size}
    names = {3: _RANDINT_NAMES, 2: ("high", "size") if size is None else ("low", "high"),
             1: ("high",) if high is None else ("low",), 0: ()}[len(args)]
    for name, value in zip(names, args):
        if given[name] is not None:
            raise TypeError(f"randint() got multiple values for argument '{name}'")
        given[name] = value
    low, high, size = given["low"], given["high"], given["size"]
    if size is None:
        raise TypeError("randint() missing 1 required positional argument: \"size\"")
    if high is None:
        raise TypeError("randint() missing 1 required positional argument: \"high\"")
    pos = {n: i + 1 for i, n in enumerate(names)}
    if not isinstance(size, (tuple, list)):
        where = f" (position {pos['size']})" if "size" in pos else ""
        raise TypeError(f"randint(): argument 'size'{where} must be tuple of ints, not "
                        f"{_checks.type_name(size)}")
    high = _checks.check_int(high, "randint", "high", pos.get("high", 2))
    low = 0 if low is None else _checks.check_int(low, "randint", "low", 1)
    dt = (_creation.check_out("randint", out, dtype) if out is not None else
          _checks.dtype_of(dtype, "randint") or np.dtype(np.int64))
    _int_range("randint", low, high, dt)
    g = _gen(generator, "randint")
    return _creation._make("randint", lambda shape, d: integers(g, low, high, shape, d),
                           (tuple(size),), dt, device, requires_grad, out, layout, pin_memory)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             pin_memory=False, requires_grad=False):
    """A random permutation of 0 .. n-1 (int64 unless dtype says otherwise)."""
    n = _checks.check_int(n, "randperm", "n", 1)
    dt = (_creation.check_out("randperm", out, dtype) if out is not None else
          _checks.dtype_of(dtype, "randperm") or np.dtype(np.int64))
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    if dt.kind == "b":
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if dt.kind in "iu" and n > 0 and n - 1 > np.iinfo(dt).max:
        raise RuntimeError(f"value cannot be converted to type {dt.name}_t without overflow"
                           if dt.itemsize < 4 else
                           f"value cannot be converted to type {_C_NAMES[str(dt)]} without "
                           "overflow")
    if dt == np.float16 and n > 2049:
        raise RuntimeError("n cannot be greater than 2049 for Half type.")
    g = _gen(generator, "randperm")
    return _creation._make("randperm", lambda shape, d: g.permutation(shape[0]).astype(d),
                           ((n,),), dt, device, requires_grad, out, layout, pin_memory)


def _like(fname, kernel, draw, input, generator, dtype, layout, device, pin_memory,
          requires_grad, memory_format):
    _checks.check_tensor(input, fname)
    dt = _checks.dtype_of(dtype, fname) if dtype is not None else input._data.dtype
    if kernel is not None:
        _float_kernel(dt, kernel)
    g = _gen(generator, fname)
    return _creation.like(fname, input, lambda shape, d: draw(g, shape, d), dt, device,
                          requires_grad, layout, pin_memory, memory_format)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              pin_memory=False, requires_grad=False, memory_format=None):
    """Uniform random numbers on [0, 1) with the size (and dtype) of input."""
    return _like("rand_like", "check_uniform_bounds", uniform, input, generator, dtype, layout,
                 device, pin_memory, requires_grad, memory_format)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               pin_memory=False, requires_grad=False, memory_format=None):
    """Standard normal random numbers with the size (and dtype) of input."""
    return _like("randn_like", "normal_kernel_cpu", standard_normal, input, generator, dtype,
                 layout, device, pin_memory, requires_grad, memory_format)


def randint_like(input, *args, low=None, high=None, generator=None, dtype=None, layout=None,
                 device=None, pin_memory=False, requires_grad=False, memory_format=None):
    """Random integers in [low, high) with the size (and dtype) of input:
    randint_like(input, high) or randint_like(input, low, high)."""
    if len(args) > 2:
        raise TypeError(f"randint_like() takes from 2 to 3 positional arguments but "
                        f"{len(args) + 1} were given")
    names = ("low", "high") if len(args) == 2 else (("high",) if high is None else ("low",)
                                                    if args else ())
    given = {"low": low, "high": high}
    for name, value in zip(names, args):
        if given[name] is not None:
            raise TypeError(f"randint_like() got multiple values for argument '{name}'")
        given[name] = value
    if given["high"] is None:
        raise TypeError("randint_like() missing 1 required positional argument: \"high\"")
    high = _checks.check_int(given["high"], "randint_like", "high", len(args) + 1)
    low = 0 if given["low"] is None else _checks.check_int(given["low"], "randint_like", "low",
                                                           1)
    _checks.check_tensor(input, "randint_like")
    dt = _checks.dtype_of(dtype, "randint_like") if dtype is not None else input._data.dtype
    _int_range("randint_like", low, high, dt)
    return _like("randint_like", None, lambda g, shape, d: integers(g, low, high, shape, d),
                 input, generator, dt, layout, device, pin_memory, requires_grad, memory_format)


# -- multinomial, bernoulli, normal, poisson ---------------------------------------------------
_BAD_PROBS = "probability tensor contains either `inf`, `nan` or element < 0"
_ZERO_SUM = "invalid multinomial distribution (sum of probabilities <= 0)"


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices sampled from the categorical distributions in the rows of input (1-D or 2-D,
    non-negative weights): num_samples per row, with or without replacement."""
    _checks.check_tensor(input, "multinomial")
    num_samples = _checks.check_int(num_samples, "multinomial", "num_samples", 2)
    replacement = _checks.check_bool(replacement, "multinomial", "replacement")
    p = input._data
    if p.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if p.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_tn(p.dtype)}")
    if out is not None:
        if not isinstance(out, _C.TensorBase):
            raise TypeError(f"multinomial(): argument 'out' must be Tensor, not "
                            f"{_checks.type_name(out)}")
        if out._data.dtype != np.int64:
            raise RuntimeError(f"multinomial expects Long tensor out, got: "
                               f"{_tn(out._data.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = p.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if n > 2 ** 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    rows = p.reshape(-1, n).astype(np.float64)
    shape = p.shape[:-1] + (num_samples,)
    if rows.shape[0] == 0:
        return _out(np.zeros(shape, np.int64), out)
    if not (np.isfinite(rows).all() and (rows >= 0).all()):
        raise RuntimeError(_BAD_PROBS)
    sums = rows.sum(axis=1)
    if (sums <= 0).any():
        raise RuntimeError(_ZERO_SUM)
    g = _gen(generator, "multinomial")
    if replacement:
        m = rows.shape[0]
        cdf = np.cumsum(rows, axis=1) / sums[:, None]
        cdf[:, -1] = 1.0
        u = g.random((m, num_samples))
        # all rows in one search: row i's cdf and draws shifted into [i, i + 1]
        off = np.arange(m, dtype=np.float64)[:, None]
        idx = np.searchsorted((cdf + off).ravel(), (u + off).ravel(), side="right")
        idx = np.minimum(idx.reshape(m, num_samples) - np.arange(m)[:, None] * n, n - 1)
        # never a zero-probability category (rounding at the top of the cdf)
        last = n - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)
        idx = np.minimum(idx, last[:, None])
    else:
        # weighted sampling without replacement: the largest p / Exp(1) keys (torch's method)
        keys = rows / g.standard_exponential(rows.shape)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return _out(idx.reshape(shape).astype(np.int64), out)


def _out(arr, out):
    return _C._wrap(arr) if out is None else _creation.write_out(out, arr)


_P_RANGE = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
            "message be improved?  If so, please report an enhancement request to cgrad.)")


def check_p_tensor(p):
    a = p._data
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise RuntimeError(_P_RANGE)


def check_p_scalar(p, fname="bernoulli_"):
    p = _checks.check_number(p, fname, "p", 1)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    return p


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws: bernoulli(input) with input as the probabilities (a float tensor), or
    bernoulli(input, p) with probability p and input's size and dtype."""
    _checks.check_tensor(input, "bernoulli")
    a = input._data
    g = _gen(generator, "bernoulli")
    if p is not None:
        if isinstance(p, _C.TensorBase) or out is not None:
            what = "Tensor" if isinstance(p, _C.TensorBase) else _checks.type_name(p)
            raise TypeError(f"bernoulli() received an invalid combination of arguments - got "
                            f"(Tensor, p={what}{', out=Tensor' if out is not None else ''})")
        p = check_p_scalar(p)
        values = (g.random(a.shape) < p).astype(a.dtype)
        if _C.is_grad_enabled() and input.requires_grad:
            return _NotImplementedNode.apply(values, "bernoulli", input)
        return _C._wrap(values)
    if a.dtype.kind not in "fc":
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for "
                                  f"'{_tn(a.dtype)}'")
    check_p_tensor(input)
    values = (g.random(a.shape) < a.real).astype(a.dtype)
    if out is not None:
        _creation.check_out("bernoulli", out)
        return _creation.write_out(out, values)
    return _recorded(values, "BernoulliBackward0", input)


def _std_error(std):
    return RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def normal(mean=None, std=None, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, pin_memory=False, requires_grad=False):
    """Normal draws with the given mean and standard deviation: normal(Tensor, Tensor),
    normal(Tensor, float=1), normal(float, Tensor) (broadcast; the dtype of the tensor
    argument, mean's when both are) or normal(float, float, size)."""
    mt, st = isinstance(mean, _C.TensorBase), isinstance(std, _C.TensorBase)
    g = _gen(generator, "normal")
    if not mt and not st:
        if mean is None or size is None:
            got = ", ".join(_checks.type_name(v) for v in (mean, std) if v is not None)
            raise TypeError(f"normal() received an invalid combination of arguments - got "
                            f"({got})")
        mean = _checks.check_number(mean, "normal", "mean", 1)
        std = 1.0 if std is None else _checks.check_number(std, "normal", "std", 2)
        if std < 0:
            raise _std_error(std)
        dt = _creation.check_out("normal", out, dtype) if out is not None else \
            _creation._dt(dtype, "normal")
        _float_kernel(dt, "normal_kernel_cpu")
        if not isinstance(size, (tuple, list)):
            raise TypeError(f"normal(): argument 'size' must be tuple of ints, not "
                            f"{_checks.type_name(size)}")
        return _creation._make("normal", lambda shape, d: (standard_normal(g, shape, d) * std
                                                           + mean).astype(d),
                               (tuple(size),), dt, device, requires_grad, out, layout,
                               pin_memory)
    if size is not None or dtype is not None or requires_grad or device is not None:
        raise TypeError("normal() received an invalid combination of arguments: size, dtype, "
                        "device and requires_grad go with a float mean and std")
    if mt and st:
        dt, node = mean._data.dtype, "NormalBackward3"
    elif mt:
        dt, node = mean._data.dtype, "NormalBackward1"
        std = 1.0 if std is None else _checks.check_number(std, "normal", "std", 2)
    else:
        mean = _checks.check_number(mean, "normal", "mean", 1)
        dt, node = std._data.dtype, "NormalBackward2"
    _float_kernel(dt, "normal_kernel_cpu")
    if st:
        if std._data.size and (std._data < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
        _float_kernel(std._data.dtype, "normal_kernel_cpu")
    elif std < 0:
        raise _std_error(std)
    m = mean._data if mt else mean
    s = std._data if st else std
    try:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    except ValueError:
        a, b = np.shape(m), np.shape(s)
        raise RuntimeError(f"The size of tensor a ({a[-1] if a else 1}) must match the size of "
                           f"tensor b ({b[-1] if b else 1}) at non-singleton dimension "
                           f"{max(len(a), len(b)) - 1}") from None
    values = (standard_normal(g, shape, dt) * s + m).astype(dt)
    if out is not None:
        _creation.check_out("normal", out)
        if out._data.shape != shape and out._data.size:
            raise RuntimeError(f"The size of tensor a ({shape[-1] if shape else 1}) must match "
                               f"the size of tensor b ({out._data.shape[-1]}) at non-singleton "
                               "dimension 0")
        return _creation.write_out(out, values)
    return _recorded(values, node, mean, std)


def poisson(input, generator=None):
    """Poisson draws with the rates in input (a float tensor)."""
    _checks.check_tensor(input, "poisson")
    a = input._data
    if a.dtype.kind != "f":
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_tn(a.dtype)}'")
    if a.size and not (a >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    g = _gen(generator, "poisson")
    try:
        values = g.poisson(a.astype(np.float64)).astype(a.dtype)
    except ValueError as e:     # NumPy's limit (rate > ~9.2e18); torch returns garbage there
        raise RuntimeError(f"invalid Poisson rate: {e}") from None
    return _recorded(values, "PoissonBackward0", input)


# -- the in-place fills: (node name, draw) for Tensor's methods (cgrad/tensor.py) -------------
def _number(v, fname, name, pos):
    return _checks.check_number(v, fname, name, pos)


def uniform_values(t, low, high, generator):
    dt = t._data.dtype
    _float_kernel(dt, "check_uniform_bounds")
    low, high = _number(low, "uniform_", "from", 1), _number(high, "uniform_", "to", 2)
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={low:g} > to={high:g}")
    if dt.kind == "f" and (abs(low) > np.finfo(dt).max or abs(high) > np.finfo(dt).max):
        raise RuntimeError(f"{'from' if abs(low) > np.finfo(dt).max else 'to'} is out of "
                           f"bounds for {_C_NAMES[str(dt)]}")
    return "UniformBackward0", uniform(_gen(generator, "uniform_"), t._data.shape, dt, low, high)


def normal_values(t, mean, std, generator):
    dt = t._data.dtype
    _float_kernel(dt, "normal_kernel_cpu")
    mean, std = _number(mean, "normal_", "mean", 1), _number(std, "normal_", "std", 2)
    if std < 0:
        raise _std_error(std)
    values = standard_normal(_gen(generator, "normal_"), t._data.shape, dt) * std + mean
    return "NormalBackward0", values.astype(dt)


def _parse_int(v, fname, name, pos):
    if isinstance(v, builtins.bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{fname}(): argument '{name}' (position {pos}) must be int, not "
                        f"{_checks.type_name(v)}")
    return _checks.check_int(operator.index(v), fname, name, pos)


def random_values(t, args, to, generator):
    """Tensor.random_(from=0, to=None): integers in [from, to) (torch's default range: up to
    the dtype's largest value, or 2**mantissa for floating dtypes)."""
    dt = t._data.dtype
    if len(args) > 2:
        raise TypeError(f"random_() takes from 0 to 2 positional arguments but {len(args)} "
                        "were given")
    if len(args) == 2 and to is not None:
        raise TypeError("random_() got multiple values for argument 'to'")
    if len(args) == 2:
        low, to, node = args[0], args[1], "RandomBackward0"
    elif len(args) == 1 and to is None:
        low, to, node = 0, args[0], "RandomBackward1"
    elif len(args) == 1:
        low, node = args[0], "RandomBackward0"
    else:
        low, node = 0, "RandomBackward1" if to is not None else "RandomBackward2"
    low = _parse_int(low, "random_", "from", 1)
    if dt.kind == "c":
        raise NotImplementedError(f"\"random_from_to\" not implemented for '{_tn(dt)}'")
    if to is None:
        if dt.kind == "b":
            high = 2
        elif dt.kind in "iu":
            high = builtins.int(np.iinfo(dt).max) + 1
        else:
            high = 2 ** _MANTISSA[str(dt)] + 1
        if node == "RandomBackward0" and low >= high:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={low} >= to={high}")
    else:
        high = _parse_int(to, "random_", "to", 2)
    _int_range("random_", low, high, dt)
    g = _gen(generator, "random_")
    return node, integers(g, low, high, t._data.shape, dt)


def exponential_values(t, lambd, generator):
    dt = t._data.dtype
    if dt.kind != "f":
        raise RuntimeError("Exponential distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {_tn(dt)}")
    lambd = _number(lambd, "exponential_", "lambd", 1)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    g = _gen(generator, "exponential_")
    return "ExponentialBackward0", (g.standard_exponential(t._data.shape) / lambd).astype(dt)


def geometric_values(t, p, generator):
    p = _number(p, "geometric_", "p", 1)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if t._data.dtype.kind == "c":
        raise NotImplementedError(f"\"geometric_cpu\" not implemented for "
                                  f"'{_tn(t._data.dtype)}'")
    g = _gen(generator, "geometric_")
    return "GeometricBackward0", g.geometric(p, t._data.shape).astype(t._data.dtype)


def log_normal_values(t, mean, std, generator):
    dt = t._data.dtype
    _float_kernel(dt, "log_normal_cpu")
    mean, std = _number(mean, "log_normal_", "mean", 1), _number(std, "log_normal_", "std", 2)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    g = _gen(generator, "log_normal_")
    return "LogNormalBackward0", g.lognormal(mean, std, t._data.shape).astype(dt)


def cauchy_values(t, median, sigma, generator):
    dt = t._data.dtype
    if dt.kind != "f":
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified "
                           f"{_C_NAMES.get(str(dt), str(dt))}")
    median = _number(median, "cauchy_", "median", 1)
    sigma = _number(sigma, "cauchy_", "sigma", 2)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    g = _gen(generator, "cauchy_")
    return "CauchyBackward0", (median + sigma * g.standard_cauchy(t._data.shape)).astype(dt)


def bernoulli_values(t, p, generator):
    """Tensor.bernoulli_(p=0.5): p a number or a tensor broadcast to t (BernoulliBackward2 /
    BernoulliBackward1, as torch names them)."""
    shape = t._data.shape
    g = _gen(generator, "bernoulli_")
    if isinstance(p, _C.TensorBase):
        try:
            pa = np.broadcast_to(p._data, shape)
        except ValueError:
            ps = p._data.shape
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[-1] if shape else 1}) must match the "
                f"existing size ({ps[-1] if ps else 1}) at non-singleton dimension "
                f"{max(len(shape) - 1, 0)}.  Target sizes: {list(shape)}.  Tensor sizes: "
                f"{list(ps)}") from None
        check_p_tensor(p)
        return "BernoulliBackward1", (g.random(shape) < pa.real).astype(t._data.dtype)
    p = check_p_scalar(p)
    return "BernoulliBackward2", (g.random(shape) < p).astype(t._data.dtype)


def record_fill(t, values, node):
    """The out-of-place result of a recorded fill: values, with a zero gradient."""
    return NODES[node].apply(values, t)
