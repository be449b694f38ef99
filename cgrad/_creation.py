"""Tensor factories with torch's names and dtype defaults."""
from __future__ import annotations

import builtins
import collections.abc
import math

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad import _device
from cgrad import _dtype
from cgrad import _generator
from cgrad._warn import warn as _warn


def _rng():
    """The default generator's NumPy Generator (dropout and the in-place fills draw here)."""
    return _generator.default_generator._np


def _finish(arr, requires_grad):
    t = _C._wrap(arr)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _infer(arr, dtype):
    if dtype is not None:
        return arr.astype(dtype, copy=False)
    k = arr.dtype.kind
    if k == "f" and arr.dtype == np.float64:
        return arr.astype(_dtype.get_default_dtype(), copy=False)
    if k in "iu" and arr.dtype != np.int64 and arr.dtype != np.uint8:
        return arr.astype(np.int64, copy=False)
    return arr


_TORCH_NP_TYPES = ("float64, float32, float16, complex64, complex128, int64, int32, int16, "
                   "int8, uint64, uint32, uint16, uint8, and bool")
_OVERFLOW = "Overflow when unpacking long long"
_ONE_ELEMENT = "only one element tensors can be converted to Python scalars"


def _leaves(data):
    """The non-list items of nested lists/tuples, in order (no recursion)."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            yield x


def _has_f64_leaf(data):
    """Does nested list data hold a float64 NumPy array/scalar or Tensor? torch keeps their
    dtype, while Python floats take the default dtype."""
    for x in _leaves(data):
        if isinstance(x, _C.TensorBase):
            x = x._data
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float64:
            return True
    return False


def _is_floating(x):
    """A leaf that makes a list of numbers floating point in torch (a float or complex
    number, or an array/Tensor whose dtype is not integral)."""
    if isinstance(x, (builtins.float, complex, np.floating, np.complexfloating)):
        return True
    if isinstance(x, _C.TensorBase):
        x = x._data
    return isinstance(x, np.ndarray) and x.dtype.kind in "fc"


def _first_bad_leaf(data):
    return next((x for x in _leaves(data) if not isinstance(
        x, (builtins.bool, builtins.int, builtins.float, complex, np.generic, np.ndarray,
            _C.TensorBase))), None)


def _supported(dt):
    """A dtype torch has (no long double, no strings/objects/dates/records)."""
    return dt.kind in "biu" or (dt.kind == "f" and dt.itemsize <= 8) or (
        dt.kind == "c" and dt.itemsize <= 16)


def _check_kind(arr, data):
    """torch's refusals of data that is not numbers."""
    if _supported(arr.dtype):
        return arr
    if isinstance(data, (np.ndarray, np.generic)) or arr.dtype.kind in "fcV":
        raise TypeError(f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. "
                        f"The only supported types are: {_TORCH_NP_TYPES}.")
    bad = _first_bad_leaf(data) if isinstance(data, (list, tuple)) else data
    if isinstance(bad, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(bad).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(bad).__name__}")


def _check_tensor_leaves(data):
    """torch converts a Tensor inside a list as a number: it must have one element."""
    for x in _leaves(data):
        if isinstance(x, _C.TensorBase) and x._data.size != 1:
            raise ValueError(_ONE_ELEMENT)


def _ragged_error(data, err):
    """torch's error for nested sequences of unequal lengths (NumPy refused them: `err`).
    The expected length at each depth comes from the first element, as in torch."""
    _check_tensor_leaves(data)
    sizes = []
    x = data
    while isinstance(x, (list, tuple)):
        sizes.append(len(x))
        if not x:
            break
        x = x[0]
    stack = [(data, 0)]
    while stack:
        obj, dim = stack.pop()
        if dim == len(sizes):
            continue
        if not isinstance(obj, (list, tuple)):
            return TypeError("not a sequence")
        if len(obj) != sizes[dim]:
            return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} (got "
                              f"{len(obj)})")
        stack.extend((v, dim + 1) for v in reversed(obj))
    return err


def _numbers(arr, flat, data):
    """An object array NumPy made from numbers: Python ints beyond int64 (with floats: as
    floats, as torch)."""
    leaves = list(_leaves(data))
    if any(not isinstance(x, (builtins.int, builtins.float, complex, np.number, np.bool_))
           for x in leaves):
        return arr                  # a non-number: _check_kind says which
    if any(isinstance(x, (complex, np.complexfloating)) for x in leaves):
        return np.array(flat, dtype=np.complex128)
    if any(isinstance(x, (builtins.float, np.floating)) for x in leaves):
        return np.array(flat, dtype=np.float64)
    raise ValueError(_OVERFLOW)


def _depth(data):
    d = 0
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
        d += 1
    return d


def _from_list(data):
    flat = [x._data if isinstance(x, _C.TensorBase) else x for x in data]
    try:
        arr = np.array(flat)
    except ValueError as e:
        if _first_bad_leaf(data) is None:
            raise _ragged_error(data, e) from None
        arr = np.array(flat, dtype=object)
    if arr.dtype == object:
        arr = _numbers(arr, flat, data)
    elif arr.dtype == np.uint64 and not any(
            isinstance(x, np.unsignedinteger) or (isinstance(x, (np.ndarray, _C.TensorBase))
                                                  and x.dtype == np.uint64)
            for x in _leaves(data)):
        raise ValueError(_OVERFLOW)         # Python ints >= 2**63
    elif arr.dtype == np.float64 and not any(_is_floating(x) for x in _leaves(data)) and any(
            type(x) is builtins.int and not -2 ** 63 <= x < 2 ** 63 for x in _leaves(data)):
        raise ValueError(_OVERFLOW)         # ints beyond int64 that NumPy made float64
    if arr.ndim > _depth(data):             # arrays or tensors among the items
        _check_tensor_leaves(data)
        if all(x.size == 1 for x in _leaves(data) if isinstance(x, _C.TensorBase)) and any(
                isinstance(x, _C.TensorBase) for x in _leaves(data)):
            arr = arr.reshape(arr.shape[:_depth(data)])
    return _check_kind(arr, data)


def _python_sequence(data):
    """A sequence torch reads item by item (a Python sequence without NumPy's array
    interface), so that its items get torch's default dtypes."""
    return (isinstance(data, collections.abc.Sequence) and not hasattr(data, "__array__")
            and not hasattr(data, "__array_interface__"))


def _from_data(data):
    """Convert Python data (nested lists of scalars/Tensors) to an ndarray; report whether
    the dtype came from Python scalars (then torch's defaults apply)."""
    if isinstance(data, _C.TensorBase):
        return data._data, False
    if isinstance(data, np.ndarray):
        return _check_kind(data, data), False
    if isinstance(data, np.generic):
        return _check_kind(np.asarray(data), data), False
    if not isinstance(data, (list, tuple, str, bytes)) and _python_sequence(data):
        data = list(data)       # range, deque, array.array, memoryview: Python scalars, as torch
    if isinstance(data, (list, tuple)):
        arr = _from_list(data)
        return arr, not (arr.dtype == np.float64 and _has_f64_leaf(data))
    if isinstance(data, (builtins.bool, builtins.int, builtins.float, complex)):
        if isinstance(data, builtins.int) and not -2 ** 63 <= data < 2 ** 63:
            raise ValueError(_OVERFLOW)
        return np.asarray(data), True
    return _check_kind(np.asarray(data), data), False


_NO_PINNED = ("pin_memory=True requires a CUDA or other accelerator backend; no pinned memory "
              "allocator is available on this system.")


def _options(fname, device, requires_grad, layout=None, pin_memory=False):
    """torch's checks of the tensor options every factory takes: device (Note [Devices] in
    cgrad/_device.py), requires_grad, layout (strided only) and pin_memory (no pinned memory
    without an accelerator). Returns requires_grad as a bool."""
    if device is not None:
        _checks.check_device(device, fname)
    if requires_grad is not False:
        requires_grad = _checks.check_bool(requires_grad, fname)
    if layout is not None and layout is not _device.strided:
        if not isinstance(layout, _device.layout):
            raise TypeError(f"{fname}(): argument 'layout' must be cgrad.layout, not "
                            f"{_checks.type_name(layout)}")
        raise NotImplementedError(f"{fname}(): cgrad's factories make strided tensors; use "
                                  "cgrad.sparse_coo_tensor for a sparse one")
    if pin_memory is not False and _checks.check_bool(pin_memory, fname, "pin_memory"):
        raise RuntimeError(_NO_PINNED)
    return requires_grad


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copy `data` into a new leaf tensor. Python floats become the default dtype (float32),
    ints int64.

    >>> import cgrad
    >>> cgrad.tensor([1.0, 2.5])
    tensor([1.0000, 2.5000])
    """
    requires_grad = _options("tensor", device, requires_grad, None, pin_memory)
    dtype = _checks.dtype_of(dtype, "tensor")
    arr, py = _from_data(data)
    if py:
        arr = _infer(arr, dtype)
    elif dtype is not None:
        arr = arr.astype(dtype, copy=False)
    return _finish(np.array(arr, copy=True), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Convert to a tensor, sharing memory with an ndarray or Tensor when possible."""
    _checks.check_device(device, "as_tensor")
    dtype = _checks.dtype_of(dtype, "as_tensor")
    if isinstance(data, _C.TensorBase):
        return data if dtype is None or dtype == data._data.dtype else data.to(dtype)
    arr, py = _from_data(data)
    arr = _infer(arr, dtype) if py else (
        arr if dtype is None else arr.astype(dtype, copy=False))
    return _C._wrap(arr)


def from_numpy(arr):
    """Zero-copy: the tensor shares memory with `arr`."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {_checks.type_name(arr)})")
    if not _supported(arr.dtype):
        raise TypeError(f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. "
                        f"The only supported types are: {_TORCH_NP_TYPES}.")
    return _C._wrap(arr)


def _dt(dtype, fname="tensor"):
    return _checks.dtype_of(dtype, fname) if dtype is not None else _dtype.get_default_dtype()


# -- out= ---------------------------------------------------------------------------------
def check_out(fname, out, dtype=None):
    """torch's checks of an out= tensor before a factory writes into it; returns the dtype
    to compute in (dtype, else out's)."""
    if not isinstance(out, _C.TensorBase):
        raise TypeError(f"{fname}(): argument 'out' must be Tensor, not "
                        f"{_checks.type_name(out)}")
    odt = out._data.dtype
    if dtype is not None and _checks.dtype_of(dtype, fname) != odt:
        tn = _dtype.torch_type_name
        raise RuntimeError(f"dtype {tn(_checks.dtype_of(dtype, fname))} does not match dtype "
                           f"of out parameter ({tn(odt)})")
    if out.requires_grad and _C.is_grad_enabled():
        raise RuntimeError(f"{fname}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    return odt


def write_out(out, arr, requires_grad=False):
    """Write the factory's result `arr` into out and return out. A different shape resizes out
    (its data is replaced: a view stops sharing memory with its base, where torch would
    resize the storage it shares)."""
    if out._data.shape == arr.shape:
        try:
            np.copyto(out._data, arr, casting="unsafe")
        except ValueError as e:
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               f"tensor refers to a single memory location ({e})") from None
    else:
        out._data = np.array(arr, dtype=out._data.dtype, order="C")    # 0-d stays 0-d
    out._bump_version()
    if requires_grad:
        out.requires_grad_(True)
    return out


# -- out= of the ops (Note [out= arguments] in cgrad/_api.py) --------------------------------
_OUT_NO_AUTOGRAD = ("{}(): functions with out=... arguments don't support automatic "
                    "differentiation, but one of the arguments requires grad.")


def can_cast(src, dst):
    """torch's canCast: no complex to real, no floating point to integral, nothing but bool
    to bool."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.kind == "c" and dst.kind != "c":
        return False
    if src.kind == "f" and dst.kind in "iub":
        return False
    return not (src.kind != "b" and dst.kind == "b")


def _check_out_dtype(fname, r, o, policy):
    rd, od = r._data.dtype, o._data.dtype
    if rd == od:
        return
    tn = _dtype.torch_type_name
    if policy == "cast" and not can_cast(rd, od):
        raise RuntimeError(f"result type {tn(rd)} can't be cast to the desired output type "
                           f"{tn(od)}")
    if policy == "cat" and not can_cast(rd, od):
        raise TypeError(f"cat(): input types can't be cast to the desired output type "
                        f"{tn(od)}")
    if policy not in ("cast", "cat"):
        raise RuntimeError(f"Expected out tensor to have dtype {_dtype.c10_name(rd)}, but got "
                           f"{_dtype.c10_name(od)} instead")


def _outs_for(fname, out, result):
    """The tensors to write result into: [out] for a single result, the items of out (a
    tuple or list) for a function of several outputs; torch's TypeErrors otherwise."""
    if not isinstance(result, tuple):
        if not isinstance(out, _C.TensorBase):
            raise TypeError(f"{fname}(): argument 'out' must be Tensor, not "
                            f"{_checks.type_name(out)}")
        return [out], [result]
    if not isinstance(out, (tuple, list)):
        raise TypeError(f"{fname}(): argument 'out' must be tuple of Tensors, not "
                        f"{_checks.type_name(out)}")
    if len(out) != len(result):
        raise TypeError(f"expected tuple of {len(result)} elements but got {len(out)}")
    for i, o in enumerate(out):
        if not isinstance(o, _C.TensorBase):
            raise TypeError(f"expected Tensor as element {i} in argument 'out', but got "
                            f"{_checks.type_name(o)}")
    return list(out), list(result)


def op_out(fname, fn, args, kwargs, out, policy):
    """fn(*args, **kwargs) written into out (a tensor, or a sequence of them for a function of
    several outputs) as torch's out= variants do; returns out (several: the result's named
    tuple type over them). policy: how the result's dtype may differ from out's ("cast":
    torch's canCast, "cat": the same for cat and its relatives, "dtype": the op computes in
    out's dtype, "exact": it may not)."""
    if not isinstance(out, (_C.TensorBase, tuple, list)):
        raise TypeError(f"{fname}(): argument 'out' must be Tensor, not "
                        f"{_checks.type_name(out)}")
    given = list(out) if isinstance(out, (tuple, list)) else [out]
    grad = _C.is_grad_enabled()
    if grad and any(isinstance(o, _C.TensorBase) and o.requires_grad for o in given):
        raise RuntimeError(_OUT_NO_AUTOGRAD.format(fname))
    if policy == "dtype" and isinstance(out, _C.TensorBase) and kwargs.get("dtype") is None:
        kwargs = dict(kwargs, dtype=out._data.dtype)
    result = fn(*args, **kwargs)
    outs, results = _outs_for(fname, out, result)
    if grad and any(r.requires_grad for r in results):
        raise RuntimeError(_OUT_NO_AUTOGRAD.format(fname))
    for r, o in zip(results, outs):
        _check_out_dtype(fname, r, o, policy)
    for r, o in zip(results, outs):
        if o._data.shape != r._data.shape and o._data.size != 0:
            _warn(f"An output with one or more elements was resized since it had shape "
                  f"{list(o._data.shape)}, which does not match the required output shape "
                  f"{list(r._data.shape)}. This behavior is deprecated, and in a future "
                  "release outputs will not be resized unless they have zero elements. You "
                  "can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                  "elements with t.resize_(0).")
        write_out(o, r._data)
    if not isinstance(result, tuple):
        return out
    return type(result)(*outs) if hasattr(type(result), "_fields") else tuple(outs)


def _make(fname, maker, size, dtype, device, requires_grad, out=None, layout=None,
          pin_memory=False):
    """maker(shape, dtype) as a leaf tensor (or written into out); torch's errors for a bad
    size, device or flag. NumPy checks the shape on the fast path; its refusal is translated
    afterwards."""
    requires_grad = _options(fname, device, requires_grad, layout, pin_memory)
    dt = _dt(dtype, fname) if out is None else check_out(fname, out, dtype)
    shape = _shape(size)
    try:
        arr = maker(shape, dt)
    except (TypeError, ValueError, OverflowError, MemoryError) as e:
        raise _checks.size_error(fname, size, dt, e) from None
    if out is not None:
        return write_out(out, arr, requires_grad)
    return _finish(arr, requires_grad)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def sizes(fname, args, size):
    """The size of a factory: ints as varargs, one sequence, or size= (torch's three
    spellings); torch's TypeErrors for none or two of them."""
    if size is not None:
        if args:
            raise TypeError(f"{fname}() got multiple values for argument 'size'")
        return (size,)
    if not args:
        raise TypeError(f"{fname}() missing 1 required positional argument: \"size\"")
    if len(args) > 1 and isinstance(args[0], (tuple, list)):
        raise TypeError(f"{fname}() takes 1 positional argument but {len(args)} were given")
    return args


def zeros(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
          requires_grad=False):
    """A tensor of zeros: zeros(2, 3), zeros((2, 3)) or zeros(size=(2, 3))."""
    return _make("zeros", np.zeros, sizes("zeros", args, size), dtype, device, requires_grad,
                 out, layout, pin_memory)


def ones(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
         requires_grad=False):
    """A tensor of ones: ones(2, 3), ones((2, 3)) or ones(size=(2, 3))."""
    return _make("ones", np.ones, sizes("ones", args, size), dtype, device, requires_grad, out,
                 layout, pin_memory)


def empty(*args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
          requires_grad=False, memory_format=None):
    """An uninitialised tensor: empty(2, 3), empty((2, 3)) or empty(size=(2, 3))."""
    size = sizes("empty", args, size)
    t = _make("empty", np.empty, size, dtype, device, requires_grad, out, layout, pin_memory)
    if _device.check_memory_format(memory_format, "empty", t._data.ndim):
        t._data = _device.channels_last_copy(t._data)
    return t


def _fill_value(value, fname):
    if isinstance(value, _C.TensorBase) and value._data.ndim == 0:
        return value._data[()]
    return _checks.check_number(value, fname, "fill_value", 2)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None,
         pin_memory=False, requires_grad=False):
    """A tensor of the given size filled with fill_value (a bool or int value gives a bool or
    int64 tensor unless dtype says otherwise)."""
    if not isinstance(size, (tuple, list)):
        raise TypeError("full(): argument 'size' (position 1) must be tuple of ints, not "
                        f"{_checks.type_name(size)}")
    fill_value = _fill_value(fill_value, "full")
    if dtype is None and out is None:
        if isinstance(fill_value, (builtins.bool, np.bool_)):
            dtype = np.bool_
        elif isinstance(fill_value, (builtins.int, np.integer)):
            dtype = np.int64
    return _make("full", lambda shape, dt: np.full(shape, fill_value, dt), (tuple(size),), dtype,
                 device, requires_grad, out, layout, pin_memory)


def like(fname, t, maker, dtype, device, requires_grad, layout=None, pin_memory=False,
         memory_format=None):
    """maker(shape, dtype) shaped like t (with t's dtype unless given)."""
    _checks.check_tensor(t, fname)
    requires_grad = _options(fname, device, requires_grad, layout, pin_memory)
    dt = _checks.dtype_of(dtype, fname) if dtype is not None else t._data.dtype
    arr = maker(t._data.shape, dt)
    if _device.check_memory_format(memory_format, fname, arr.ndim):
        arr = _device.channels_last_copy(arr)
    return _finish(arr, requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False, *, layout=None,
               pin_memory=False, memory_format=None):
    """A tensor of zeros with the size (and, unless given, the dtype) of input."""
    return like("zeros_like", input, np.zeros, dtype, device, requires_grad, layout,
                pin_memory, memory_format)


def ones_like(input, dtype=None, device=None, requires_grad=False, *, layout=None,
              pin_memory=False, memory_format=None):
    """A tensor of ones with the size (and, unless given, the dtype) of input."""
    return like("ones_like", input, np.ones, dtype, device, requires_grad, layout, pin_memory,
                memory_format)


def empty_like(input, dtype=None, device=None, requires_grad=False, *, layout=None,
               pin_memory=False, memory_format=None):
    """An uninitialised tensor with the size (and, unless given, the dtype) of input."""
    return like("empty_like", input, np.empty, dtype, device, requires_grad, layout,
                pin_memory, memory_format)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, *, layout=None,
              pin_memory=False, memory_format=None):
    """A tensor filled with fill_value with the size (and, unless given, the dtype) of
    input."""
    _checks.check_tensor(input, "full_like")
    fill_value = _fill_value(fill_value, "full_like")
    return like("full_like", input, lambda shape, dt: np.full(shape, fill_value, dt), dtype,
                device, requires_grad, layout, pin_memory, memory_format)


def _alloc(fname, make, nbytes_hint):
    """make() with NumPy's size/memory refusals turned into torch's RuntimeErrors."""
    try:
        return make()
    except MemoryError:
        raise _checks.alloc_error(nbytes_hint) from None
    except ValueError as e:
        if "too big" in str(e) or "Maximum allowed" in str(e):
            raise RuntimeError(f"{fname}: Storage size calculation overflowed ({e})") from None
        raise


def _result(arr, requires_grad, out):
    return _finish(arr, requires_grad) if out is None else write_out(out, arr, requires_grad)


def arange(start, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """Values from start (default 0) to end (excluded), step apart: int64 when all three are
    integers, else the default dtype."""
    if end is None:
        start, end = 0, _checks.check_number(start, "arange", "end", 1)
    else:
        start = _checks.check_number(start, "arange", "start", 1)
        end = _checks.check_number(end, "arange", "end", 2)
    step = _checks.check_number(step, "arange", "step", 3)
    requires_grad = _options("arange", device, requires_grad, layout, pin_memory)
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if out is not None:
        dtype = check_out("arange", out, dtype)
    elif dtype is None:
        is_int = all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
        dtype = np.int64 if is_int else _dtype.get_default_dtype()
    dtype = _checks.dtype_of(dtype, "arange")
    if dtype.kind == "b":
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    n = max(0, math.ceil((end - start) / step))
    arr = _alloc("arange", lambda: np.arange(start, end, step).astype(dtype), n * dtype.itemsize)
    if out is not None and out._data.size == arr.size:
        arr = arr.reshape(out._data.shape)        # torch keeps out's shape when numel fits
    elif out is not None and out._data.size:
        _warn(f"The number of elements in the out tensor of shape {list(out._data.shape)} is "
              f"{out._data.size} which does not match the computed number of elements "
              f"{arr.size}. Note that this may occur as a result of rounding error. The out "
              f"tensor will be resized to a tensor of shape ({arr.size},).")
    return _result(arr, requires_grad, out)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             pin_memory=False, requires_grad=False):
    """steps values evenly spaced from start to end (both included)."""
    start = _checks.check_number(start, "linspace", "start", 1)
    end = _checks.check_number(end, "linspace", "end", 2)
    steps = _checks.check_int(steps, "linspace", "steps", 3)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    requires_grad = _options("linspace", device, requires_grad, layout, pin_memory)
    dt = _dt(dtype, "linspace") if out is None else check_out("linspace", out, dtype)
    return _result(_alloc("linspace", lambda: np.linspace(start, end, steps).astype(dt),
                          steps * 8), requires_grad, out)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
        requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere (n rows, m columns)."""
    n = _checks.check_int(n, "eye", "n", 1)
    if m is not None:
        m = _checks.check_int(m, "eye", "m", 2)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    requires_grad = _options("eye", device, requires_grad, layout, pin_memory)
    dt = _dt(dtype, "eye") if out is None else check_out("eye", out, dtype)
    dims = [n, n if m is None else m]
    if math.prod(dims) * dt.itemsize > 2 ** 63 - 1:
        raise RuntimeError(f"numel: integer multiplication overflow (sizes={dims})")
    return _result(_alloc("eye", lambda: np.eye(n, m, dtype=dt), math.prod(dims) * dt.itemsize),
                   requires_grad, out)
