"""torch's pickle dialect without torch: the writer that cgrad.save uses for ``data.pkl`` and
the restricted reader that cgrad.load uses for it (Note [Restricted unpickler]).

A torch checkpoint is a pickle (protocol 2) whose tensors are calls of
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``, the
storage a persistent id ``('storage', torch.FloatStorage, key, location, numel)`` resolved
by the container (cgrad/_torch_archive.py) to the bytes of the record ``data/<key>``.

Note [Restricted unpickler]: :class:`Reader` is a pickle virtual machine of its own, not
``pickle.Unpickler``: it knows the opcodes that torch's pickles use, and a GLOBAL opcode can
only name an entry of :data:`_GLOBALS` (the names torch's ``weights_only`` unpickler accepts
by default). Each entry maps to a cgrad function that checks its arguments and builds the
object itself (a Tensor over a NumPy view of the storage, a dict, a ``cgrad.device``), so
nothing named by a file is imported or run. Any other global is refused with
:class:`LoadError` ("Unsupported global: GLOBAL os.system ..."); so are BUILD on anything but
the few objects that take it, appends to anything but lists, and opcodes outside the set
(INST, OBJ, EXT*, buffers). ``weights_only=False`` adds NumPy arrays, scalars and dtypes
(rebuilt the same way, object arrays refused) and ``frozenset``: still no code from the file.
The machine loops over the opcodes (no recursion, so nesting depth is not limited) and every
length it reads is checked against the bytes that are there before anything is allocated.

The writer (:class:`Writer`) emits the same dialect (what ``torch.save`` writes for the same
objects, memoising containers so shared objects stay shared) with an explicit work stack, so
it does not recurse either.
"""
from __future__ import annotations

import math
import pickle
import re
import struct
from collections import Counter, OrderedDict

import numpy as np

from cgrad import _C
from cgrad import _device
from cgrad.tensor import Size, Tensor

__all__ = ["LoadError", "Writer", "Reader", "TORCH_DTYPES", "storage_type_of"]


class LoadError(RuntimeError, pickle.UnpicklingError):
    """cgrad.load could not read the file: it is corrupted, not a checkpoint, or asks for
    something cgrad does not load (code, a dtype cgrad lacks)."""


# -- dtypes ---------------------------------------------------------------------------------
# torch's dtype name -> NumPy dtype (None: a torch dtype cgrad has no counterpart for)
TORCH_DTYPES = {
    "float32": np.dtype("float32"), "float64": np.dtype("float64"),
    "float16": np.dtype("float16"), "int8": np.dtype("int8"), "int16": np.dtype("int16"),
    "int32": np.dtype("int32"), "int64": np.dtype("int64"), "uint8": np.dtype("uint8"),
    "bool": np.dtype("bool"), "complex64": np.dtype("complex64"),
    "complex128": np.dtype("complex128"), "uint16": np.dtype("uint16"),
    "uint32": np.dtype("uint32"), "uint64": np.dtype("uint64"),
}
_NO_DTYPE = ("bfloat16", "complex32", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz",
             "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "quint8", "qint8",
             "qint32", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
             "bits16") + tuple(f"uint{i}" for i in range(1, 8)) + tuple(
                 f"int{i}" for i in range(1, 8))
_NAME_OF = {dt: name for name, dt in TORCH_DTYPES.items()}
# torch's legacy storage classes (one per dtype); dtypes without one use UntypedStorage
_STORAGE_NAMES = {"Float": "float32", "Double": "float64", "Half": "float16", "Char": "int8",
                  "Short": "int16", "Int": "int32", "Long": "int64", "Byte": "uint8",
                  "Bool": "bool", "ComplexFloat": "complex64", "ComplexDouble": "complex128",
                  "BFloat16": "bfloat16", "QUInt8": "quint8", "QInt8": "qint8",
                  "QInt32": "qint32", "QUInt4x2": "quint4x2", "QUInt2x4": "quint2x4"}
_STORAGE_OF = {TORCH_DTYPES[d]: n + "Storage" for n, d in _STORAGE_NAMES.items()
               if d in TORCH_DTYPES}


def no_dtype_error(name):
    return LoadError(f"cgrad.load: the file holds a torch.{name} tensor or dtype, and cgrad has "
                     f"no {name} dtype (convert it in torch first, e.g. "
                     "tensor.float())")


def storage_type_of(dt):
    """(storage class name, untyped) for a NumPy dtype cgrad.save writes (TypeError if none)."""
    name = _STORAGE_OF.get(dt)
    if name is not None:
        return name, False
    if dt in _NAME_OF:
        return "UntypedStorage", True
    raise TypeError(f"cgrad.save cannot store a tensor of dtype {dt}: torch has no such dtype")


class StorageType:
    """What a storage global (``torch.FloatStorage``) reads as: its dtype."""

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f"torch.{self.name}"


class _Marker:
    """A class named by a pickle that cgrad only recognises (torch.Tensor, nn.Parameter)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_TENSOR = _Marker("torch.Tensor")
_PARAMETER = _Marker("torch.nn.parameter.Parameter")
_NDARRAY = _Marker("numpy.ndarray")


def _bad(what):
    return LoadError(f"cgrad.load: {what}; the file is corrupted or not a checkpoint cgrad reads")


# -- rebuilding (the functions the globals map to) --------------------------------------------
def _int(x, what):
    if type(x) is not int:
        raise _bad(f"{what} is {type(x).__name__}, not an int")
    return x


def _ints(x, what):
    if isinstance(x, Size):
        x = tuple(x)
    if type(x) not in (tuple, list):
        raise _bad(f"{what} is {type(x).__name__}, not a tuple of ints")
    out = tuple(_int(v, what) for v in x)
    if any(v < 0 for v in out):
        raise _bad(f"{what} {out} has a negative entry")
    return out


def view_of(storage, offset, size, stride, dtype=None):
    """The NumPy array of a tensor over storage (an array of ``dtype`` elements sharing its
    buffer), after checking that it stays inside the storage."""
    arr = storage.typed(dtype)
    offset = _int(offset, "a tensor's storage offset")
    size = _ints(size, "a tensor's size")
    stride = _ints(stride, "a tensor's stride")
    if len(size) != len(stride):
        raise _bad(f"a tensor's size {size} and stride {stride} differ in length")
    if offset < 0:
        raise _bad(f"a tensor's storage offset {offset} is negative")
    numel = math.prod(size)
    if numel == 0:
        return np.empty(size, arr.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= arr.size:
        raise _bad(f"a tensor of size {list(size)}, stride {list(stride)} and offset {offset} "
                   f"reaches element {last} of a storage of {arr.size} elements")
    item = arr.dtype.itemsize
    return np.ndarray(size, arr.dtype, buffer=arr, offset=offset * item,
                      strides=tuple(s * item for s in stride))


def _tensor(arr, requires_grad):
    if type(requires_grad) is not bool:
        raise _bad(f"requires_grad is {type(requires_grad).__name__}, not a bool")
    t = _C._wrap(arr)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise _bad(f"a tensor of dtype {arr.dtype} requires grad")
        t.requires_grad_(True)
    return t


def _check_storage(storage):
    if not hasattr(storage, "typed"):
        raise _bad(f"a tensor's storage is a {type(storage).__name__}, not a storage")


def _rebuild_tensor(storage, storage_offset, size, stride):
    _check_storage(storage)
    return _tensor(view_of(storage, storage_offset, size, stride), False)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       metadata=None):
    _check_storage(storage)
    return _tensor(view_of(storage, storage_offset, size, stride), requires_grad)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    _check_storage(storage)
    if not isinstance(dtype, np.dtype):
        raise _bad(f"a tensor's dtype is {type(dtype).__name__}")
    return _tensor(view_of(storage, storage_offset, size, stride, dtype), requires_grad)


def _set_state(obj, state):
    if state is None:
        return obj
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for part in (state, slots):
        if part is None:
            continue
        if not isinstance(part, dict) or not all(isinstance(k, str) for k in part):
            raise _bad("a tensor's state is not a dict of attributes")
        for k, v in part.items():
            if k.startswith("__") or hasattr(type(obj), k):
                raise _bad(f"a tensor's state sets the attribute {k!r}")
            obj.__dict__[k] = v
    return obj


def _parameter(data, requires_grad):
    from cgrad.nn.parameter import Parameter
    if not isinstance(data, Tensor) or data.is_sparse:
        raise _bad(f"a Parameter's data is a {type(data).__name__}, not a tensor")
    if type(requires_grad) is not bool:
        raise _bad("a Parameter's requires_grad is not a bool")
    try:
        return Parameter(data.detach() if data.requires_grad else data, requires_grad)
    except RuntimeError as e:
        raise _bad(str(e)) from None


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return _parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _set_state(_parameter(data, requires_grad), state)


def _rebuild_from_type_v2(func, new_type, args, state):
    if func not in _REBUILDS or new_type not in (_TENSOR, _PARAMETER):
        raise _bad(f"_rebuild_from_type_v2 of {func!r} as {new_type!r}")
    if type(args) is not tuple:
        raise _bad("_rebuild_from_type_v2's arguments are not a tuple")
    out = func(*args)
    if new_type is _PARAMETER and not type(out).__name__ == "Parameter":
        out = _parameter(out, out.requires_grad)
    return _set_state(out, state)


def _get_layout(name):
    if name == "torch.sparse_coo":
        return _device.sparse_coo
    if name == "torch.strided":
        return _device.strided
    raise LoadError(f"cgrad.load: the file holds a tensor of layout {name!r}; cgrad has dense "
                    "and sparse COO tensors only")


def _rebuild_sparse_tensor(layout, data):
    if layout is not _device.sparse_coo:
        raise _bad(f"a sparse tensor of layout {layout!r}")
    if type(data) is not tuple or len(data) not in (3, 4):
        raise _bad("a sparse tensor's data is not (indices, values, size[, is_coalesced])")
    indices, values, size = data[:3]
    coalesced = data[3] if len(data) == 4 else None
    if not (isinstance(indices, Tensor) and isinstance(values, Tensor)):
        raise _bad("a sparse tensor's indices or values are not tensors")
    if indices.dtype != np.dtype("int64") or indices.dim() != 2:
        raise _bad("a sparse tensor's indices are not a 2-D int64 tensor")
    if coalesced is not None and type(coalesced) is not bool:
        raise _bad("a sparse tensor's is_coalesced is not a bool")
    from cgrad.sparse import sparse_coo_tensor
    try:
        out = sparse_coo_tensor(indices, values, _ints(size, "a sparse tensor's size"),
                                is_coalesced=coalesced or None)
    except (RuntimeError, ValueError, TypeError) as e:
        raise _bad(f"an invalid sparse tensor ({e})") from None
    return out


def _unsupported_rebuild(name):
    def refuse(*args):
        raise LoadError(f"cgrad.load: the file holds a tensor rebuilt by torch._utils.{name} "
                        "(a quantized, meta, nested, subclass or device tensor), which cgrad "
                        "does not have")
    return refuse


def _size(arg=()):
    return Size(_ints(arg, "a torch.Size"))


def _make_device(*args):
    if not args or len(args) > 2 or not isinstance(args[0], (str, int)) or (
            len(args) == 2 and not isinstance(args[1], int)):
        raise _bad(f"torch.device{args!r}")
    try:
        return _device.device(*args)
    except (RuntimeError, TypeError, ValueError) as e:
        raise _bad(f"torch.device{args!r}: {e}") from None


def _encode(text, encoding="utf-8"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise _bad("_codecs.encode other than of a str as latin1")
    return text.encode(encoding)


def _bytearray(data=b""):
    if not isinstance(data, (bytes, bytearray)):
        raise _bad("bytearray of something other than bytes")
    return bytearray(data)


def _set(items=()):
    if type(items) not in (list, tuple, set, frozenset):
        raise _bad("set of something other than a list")
    return set(items)


def _frozenset(items=()):
    return frozenset(_set(items))


def _complex(real=0.0, imag=0.0):
    if not all(type(v) in (int, float) for v in (real, imag)):
        raise _bad("complex of something other than two numbers")
    return complex(real, imag)


def _odict(items=()):
    if items != () and type(items) is not list:
        raise _bad("OrderedDict of something other than a list of pairs")
    return OrderedDict(items)


def _counter(items=()):
    if items != () and type(items) is not dict:
        raise _bad("Counter of something other than a dict")
    return Counter(items)


class _Pending:
    """A NumPy object between its REDUCE and its BUILD (Reader replaces it)."""

    __slots__ = ("kind", "arg", "memo")

    def __init__(self, kind, arg):
        self.kind, self.arg, self.memo = kind, arg, []


_NP_SIMPLE = re.compile(r"[<>|=]?([?bhilqpBHILQPefdgFDG]|[biufc]\d{1,2}|[SU]\d{0,9})")


def _np_dtype(spec, align=False, copy=True):
    if not isinstance(spec, str) or not _NP_SIMPLE.fullmatch(spec):
        raise LoadError(f"cgrad.load: the file holds a NumPy dtype {spec!r}; cgrad reads plain "
                        "numeric, bool and string dtypes only")
    return _Pending("dtype", np.dtype(spec))


def _np_reconstruct(cls, shape, typecode):
    if cls is not _NDARRAY:
        raise _bad(f"numpy _reconstruct of {cls!r}")
    return _Pending("ndarray", None)


def _np_scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise _bad("a NumPy scalar without a plain dtype")
    if isinstance(data, str):
        data = data.encode("latin1")
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise _bad("a NumPy scalar whose data does not match its dtype")
    return np.frombuffer(data, dtype)[0]


def _np_build(pending, state):
    """BUILD of a pending NumPy dtype or array: the finished object."""
    if type(state) is not tuple:
        raise _bad("a NumPy object's state is not a tuple")
    if pending.kind == "dtype":
        if len(state) < 5 or state[2] is not None or state[3] is not None or \
                state[4] is not None:
            raise LoadError("cgrad.load: the file holds a structured NumPy dtype; cgrad reads "
                            "plain dtypes only")
        dt, order = pending.arg, state[1]
        if order in ("<", ">") and dt.byteorder not in ("|", order) and dt.itemsize > 1:
            dt = dt.newbyteorder(order)
        return dt
    if len(state) != 5:
        raise _bad("a NumPy array's state is not (version, shape, dtype, fortran, data)")
    _, shape, dt, fortran, raw = state
    shape = _ints(shape, "a NumPy array's shape")
    if not isinstance(dt, np.dtype) or dt.hasobject:
        raise _bad("a NumPy array without a plain dtype")
    if isinstance(raw, str):
        raw = raw.encode("latin1")
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != math.prod(shape) * dt.itemsize:
        raise _bad(f"a NumPy array of shape {shape} and dtype {dt} with {len(raw)} bytes of data")
    arr = np.frombuffer(raw, dt).reshape(shape, order="F" if fortran else "C").copy(
        order="K")
    if not dt.isnative:
        arr = arr.astype(dt.newbyteorder("="))
    return arr


_REBUILDS = {f.__name__: f for f in (
    _rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
    _rebuild_parameter_with_state, _rebuild_sparse_tensor)}
_GLOBALS = {
    "collections.OrderedDict": _odict, "collections.Counter": _counter,
    "torch.nn.parameter.Parameter": _PARAMETER, "torch.Tensor": _TENSOR,
    "torch.serialization._get_layout": _get_layout, "torch.Size": _size,
    "torch.device": _make_device, "_codecs.encode": _encode, "builtins.bytearray": _bytearray,
    "builtins.set": _set, "builtins.complex": _complex,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
}
_GLOBALS.update({f"torch._utils.{n}": f for n, f in _REBUILDS.items()})
_REBUILDS = set(_REBUILDS.values())
for _n in ("_rebuild_qtensor", "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass",
           "_rebuild_nested_tensor", "_rebuild_device_tensor_from_numpy",
           "_rebuild_device_tensor_from_cpu_tensor", "_rebuild_xla_tensor",
           "_rebuild_mtia_tensor", "_rebuild_sparse_csr"):
    _GLOBALS[f"torch._utils.{_n}"] = _unsupported_rebuild(_n)
_GLOBALS.update({f"torch.{n}": dt for n, dt in TORCH_DTYPES.items()})
for _prefix in ("torch.", "torch.cuda."):
    _GLOBALS.update({f"{_prefix}{n}Storage": StorageType(n + "Storage", TORCH_DTYPES.get(d, d))
                     for n, d in _STORAGE_NAMES.items()})
_GLOBALS["torch.storage.UntypedStorage"] = StorageType("UntypedStorage", np.dtype("uint8"))
_GLOBALS["torch.UntypedStorage"] = _GLOBALS["torch.storage.UntypedStorage"]
_CALLABLE = {id(v) for v in _GLOBALS.values() if callable(v) and not isinstance(v, np.dtype)}
_NUMPY = {"numpy.ndarray": _NDARRAY, "numpy.dtype": _np_dtype, "builtins.frozenset": _frozenset}
for _m in ("numpy.core.multiarray", "numpy._core.multiarray"):
    _NUMPY[f"{_m}._reconstruct"] = _np_reconstruct
    _NUMPY[f"{_m}.scalar"] = _np_scalar
_NUMPY_CALLABLE = {id(v) for v in _NUMPY.values() if callable(v)}
_RENAMED = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _unsupported_global(path, weights_only):
    if weights_only:
        hint = (" cgrad.load never runs code named by a file; NumPy arrays and scalars are "
                "read with weights_only=False." if path.startswith("numpy") else
                " cgrad.load never runs code named by a file.")
        return LoadError(
            "Weights only load failed. cgrad.load reads tensors, parameters, containers, "
            "numbers and strings (what torch.load(weights_only=True) reads).\n\nWeightsUnpickler"
            f" error: Unsupported global: GLOBAL {path} was not an allowed global by default."
            + hint)
    return LoadError(f"Weights only load failed: Unsupported global: GLOBAL {path}. cgrad.load "
                     "never runs code named by a file, not even with weights_only=False (which "
                     "adds NumPy arrays, scalars and dtypes to what it reads)")


# -- the reader -----------------------------------------------------------------------------
class _Passthrough(Exception):
    """Carries an error of map_location (not the file's fault) out of the machine."""


class Reader:
    """Run one pickle (Note [Restricted unpickler]). ``persistent_load(pid)`` resolves
    storages; ``data`` is bytes (or a memoryview), read from ``pos``."""

    def __init__(self, data, persistent_load, weights_only=True, pos=0):
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = pos
        self.persistent_load = persistent_load
        self.weights_only = weights_only
        self.skip_sparse = False

    def _take(self, n):
        p = self.pos
        if n < 0 or p + n > len(self.data):
            raise _bad(f"the pickle is truncated (an item of {n} bytes at byte {p} of "
                       f"{len(self.data)})")
        self.pos = p + n
        return self.data[p:p + n]

    def _line(self):
        data, p = self.data, self.pos
        end = bytes(data[p:p + 512]).find(b"\n")
        if end < 0:
            raise _bad("a GLOBAL name is not terminated")
        self.pos = p + end + 1
        return bytes(data[p:p + end]).decode("utf-8")

    def _global(self, module, name):
        module = _RENAMED.get(module, module)
        path = f"{module}.{name}"
        if path in _GLOBALS:
            return _GLOBALS[path]
        if not self.weights_only and path in _NUMPY:
            return _NUMPY[path]
        if path.startswith("torch.") and path[6:] in _NO_DTYPE:
            raise no_dtype_error(path[6:])
        raise _unsupported_global(path, self.weights_only)

    def _callable(self, f):
        if id(f) in _CALLABLE or (not self.weights_only and id(f) in _NUMPY_CALLABLE):
            return f
        raise _bad(f"the pickle calls {type(f).__name__} {f!r}, which is not a function cgrad "
                   "rebuilds objects with")

    def load(self):
        try:
            return self._run()
        except LoadError:
            raise
        except _Passthrough as e:
            raise e.args[0] from None
        except RecursionError:
            raise _bad("the pickle is nested too deeply") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                struct.error, UnicodeDecodeError, MemoryError) as e:
            raise _bad(f"the pickle is malformed ({type(e).__name__}: {e})") from None

    def _pop_mark(self, stack, metastack):
        items = stack
        if not metastack:
            raise _bad("the pickle pops a MARK it never set")
        return items, metastack.pop()

    def _run(self):  # noqa: C901 (one opcode per branch)
        stack, metastack, memo = [], [], {}
        take, unpack = self._take, struct.unpack
        while True:
            op = take(1)[0]
            if op == 0x80:                                  # PROTO
                if take(1)[0] > 5:
                    raise _bad("the pickle protocol is newer than 5")
            elif op == 0x95:                                # FRAME (a length hint)
                take(8)
            elif op == 0x2E:                                # STOP
                if len(stack) != 1 or metastack:
                    raise _bad("the pickle ends with a malformed stack")
                return stack[0]
            elif op == 0x28:                                # MARK
                metastack.append(stack)
                stack = []
            elif op == 0x4E:                                # NONE
                stack.append(None)
            elif op == 0x88:
                stack.append(True)
            elif op == 0x89:
                stack.append(False)
            elif op == 0x4A:                                # BININT
                stack.append(unpack("<i", take(4))[0])
            elif op == 0x4B:                                # BININT1
                stack.append(take(1)[0])
            elif op == 0x4D:                                # BININT2
                stack.append(unpack("<H", take(2))[0])
            elif op == 0x8A:                                # LONG1
                stack.append(int.from_bytes(take(take(1)[0]), "little", signed=True))
            elif op == 0x8B:                                # LONG4
                n = unpack("<i", take(4))[0]
                if n > 4096:
                    raise _bad(f"an integer of {n} bytes")
                stack.append(int.from_bytes(take(n), "little", signed=True))
            elif op == 0x47:                                # BINFLOAT
                stack.append(unpack(">d", take(8))[0])
            elif op in (0x58, 0x8C, 0x8D):                  # BINUNICODE, SHORT_, 8
                n = take(1)[0] if op == 0x8C else unpack("<I" if op == 0x58 else "<Q",
                                                         take(4 if op == 0x58 else 8))[0]
                stack.append(str(take(n), "utf-8", "surrogatepass"))
            elif op in (0x42, 0x43, 0x8E):                  # BINBYTES, SHORT_, 8
                n = take(1)[0] if op == 0x43 else unpack("<I" if op == 0x42 else "<Q",
                                                         take(4 if op == 0x42 else 8))[0]
                stack.append(bytes(take(n)))
            elif op == 0x29:                                # EMPTY_TUPLE
                stack.append(())
            elif op == 0x74:                                # TUPLE
                items, stack = self._pop_mark(stack, metastack)
                stack.append(tuple(items))
            elif op in (0x85, 0x86, 0x87):                  # TUPLE1..3
                n = op - 0x84
                if len(stack) < n:
                    raise _bad("the pickle's stack underflows")
                items = tuple(stack[-n:])
                del stack[-n:]
                stack.append(items)
            elif op == 0x5D:                                # EMPTY_LIST
                stack.append([])
            elif op == 0x6C:                                # LIST
                items, stack = self._pop_mark(stack, metastack)
                stack.append(list(items))
            elif op == 0x7D:                                # EMPTY_DICT
                stack.append({})
            elif op == 0x64:                                # DICT
                items, stack = self._pop_mark(stack, metastack)
                stack.append(self._setitems({}, items))
            elif op == 0x8F:                                # EMPTY_SET
                stack.append(set())
            elif op == 0x61:                                # APPEND
                item = stack.pop()
                if type(stack[-1]) is not list:
                    raise _bad(f"the pickle appends to a {type(stack[-1]).__name__}")
                stack[-1].append(item)
            elif op == 0x65:                                # APPENDS
                items, stack = self._pop_mark(stack, metastack)
                if not stack or type(stack[-1]) is not list:
                    raise _bad("the pickle extends something that is not a list")
                stack[-1].extend(items)
            elif op == 0x73:                                # SETITEM
                v = stack.pop()
                k = stack.pop()
                self._setitems(stack[-1], [k, v])
            elif op == 0x75:                                # SETITEMS
                items, stack = self._pop_mark(stack, metastack)
                if not stack:
                    raise _bad("the pickle's stack underflows")
                self._setitems(stack[-1], items)
            elif op == 0x90:                                # ADDITEMS
                items, stack = self._pop_mark(stack, metastack)
                if not stack or type(stack[-1]) is not set:
                    raise _bad("the pickle adds items to something that is not a set")
                stack[-1].update(items)
            elif op == 0x91:                                # FROZENSET
                items, stack = self._pop_mark(stack, metastack)
                stack.append(frozenset(items))
            elif op == 0x30:                                # POP
                if stack:
                    stack.pop()
                else:
                    _, stack = self._pop_mark(stack, metastack)
            elif op == 0x31:                                # POP_MARK
                _, stack = self._pop_mark(stack, metastack)
            elif op == 0x32:                                # DUP
                stack.append(stack[-1])
            elif op in (0x68, 0x6A):                        # BINGET, LONG_BINGET
                i = take(1)[0] if op == 0x68 else unpack("<I", take(4))[0]
                if i not in memo:
                    raise _bad(f"the pickle refers to memo entry {i}, which it never stored")
                stack.append(memo[i])
            elif op in (0x71, 0x72, 0x94):                  # BINPUT, LONG_BINPUT, MEMOIZE
                i = (take(1)[0] if op == 0x71 else unpack("<I", take(4))[0] if op == 0x72
                     else len(memo))
                if not stack:
                    raise _bad("the pickle memoizes an empty stack")
                memo[i] = stack[-1]
                if type(stack[-1]) is _Pending:
                    stack[-1].memo.append(i)
            elif op in (0x63, 0x93):                        # GLOBAL, STACK_GLOBAL
                if op == 0x63:
                    module = self._line()
                    name = self._line()
                else:
                    name = stack.pop()
                    module = stack.pop()
                    if not (isinstance(module, str) and isinstance(name, str)):
                        raise _bad("STACK_GLOBAL of something other than two strings")
                stack.append(self._global(module, name))
            elif op == 0x52:                                # REDUCE
                args = stack.pop()
                func = self._callable(stack[-1])
                if type(args) is not tuple:
                    raise _bad("REDUCE's arguments are not a tuple")
                stack[-1] = None if self.skip_sparse and func is _rebuild_sparse_tensor \
                    else func(*args)
            elif op == 0x81:                                # NEWOBJ
                args = stack.pop()
                cls = stack.pop()
                if type(args) is not tuple:
                    raise _bad("NEWOBJ's arguments are not a tuple")
                if cls is _PARAMETER:
                    stack.append(_parameter(*args))
                else:
                    stack.append(self._callable(cls)(*args))
            elif op == 0x62:                                # BUILD
                state = stack.pop()
                inst = stack[-1]
                if type(inst) is _Pending:
                    obj = stack[-1] = _np_build(inst, state)
                    for i in inst.memo:
                        memo[i] = obj
                elif type(inst) is OrderedDict and (state is None or isinstance(state, dict)):
                    pass                    # torch writes no state for it; nothing to keep
                else:
                    raise _bad(f"the pickle sets the state of a {type(inst).__name__} (cgrad "
                               "builds only what it rebuilds itself)")
            elif op in (0x51, 0x50):                        # BINPERSID, PERSID
                pid = stack.pop() if op == 0x51 else self._line()
                try:
                    stack.append(self.persistent_load(pid))
                except LoadError:
                    raise
                except Exception as e:      # map_location's own errors reach the caller
                    raise _Passthrough(e) from None
            else:
                raise _bad(f"the pickle uses opcode {bytes([op])!r}, which cgrad does not read "
                           "(it reads what torch.save writes)")

    @staticmethod
    def _setitems(target, items):
        if type(target) not in (dict, OrderedDict, Counter):
            raise _bad(f"the pickle sets items of a {type(target).__name__}")
        if len(items) % 2:
            raise _bad("the pickle sets a key without a value")
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]
        return target


# -- the writer -----------------------------------------------------------------------------
class _Raw(bytes):
    """Opcode bytes queued on the writer's work stack."""


class _Done:
    __slots__ = ("obj", "key")

    def __init__(self, obj, key):
        self.obj, self.key = obj, key


class _Np:
    """An object inside a NumPy reduce (dtypes written NumPy's way, classes as globals)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


_MARK_B, _TUPLE_B, _REDUCE_B = _Raw(b"("), _Raw(b"t"), _Raw(b"R")
_BATCH = 1000


class Writer:
    """Pickle obj in torch's dialect. ``tensor(t)`` returns the persistent id and layout of a
    tensor's storage: ``(pid, offset, size, stride, dtype_global_or_None)``."""

    def __init__(self, storage_of):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}
        self.keep = []
        self.storage_of = storage_of
        self.open_tuples = set()

    # -- low level
    def _put(self, key):
        i = len(self.memo)
        self.memo[key] = i
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)

    def _get(self, key):
        i = self.memo.get(key)
        if i is None:
            return False
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)
        return True

    def _global(self, module, name):
        key = ("g", module, name)
        if not self._get(key):
            self.out += b"c" + f"{module}\n{name}\n".encode()
            self._put(key)

    def _str(self, s):
        key = ("s", s)
        if not self._get(key):
            b = s.encode("utf-8", "surrogatepass")
            self.out += b"X" + struct.pack("<I", len(b)) + b
            if len(b) < 256:
                self._put(key)

    def _int(self, v):
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -2 ** 31 <= v < 2 ** 31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            self.out += (b"\x8a" + bytes([len(b)]) if len(b) < 256 else
                         b"\x8b" + struct.pack("<i", len(b))) + b

    def _scalar(self, obj):
        """Write a scalar; False when obj is not one."""
        t = type(obj)
        if obj is None:
            self.out += b"N"
        elif t is bool:
            self.out += b"\x88" if obj else b"\x89"
        elif t is int:
            self._int(obj)
        elif t is float:
            self.out += b"G" + struct.pack(">d", obj)
        elif t is str:
            self._str(obj)
        else:
            return False
        return True

    # -- the work loop
    def dump(self, obj):
        todo = [obj]
        while todo:
            x = todo.pop()
            t = type(x)
            if t is _Raw:
                self.out += x
            elif t is _Done:
                self.open_tuples.discard(x.key)
                self._put(x.key)
                self.keep.append(x.obj)
            elif t is _Np:
                self._save_np(x.obj, todo)
            elif not self._scalar(x):
                self._save(x, todo)
        self.out += b"."
        return bytes(self.out)

    def _items(self, todo, items, op):
        """Queue MARK item... op in batches (items: a list, in order)."""
        for start in range(((len(items) - 1) // _BATCH) * _BATCH, -1, -_BATCH):
            batch = items[start:start + _BATCH]
            todo.append(_Raw(op))
            todo.extend(reversed(batch))
            todo.append(_MARK_B)

    def _save(self, obj, todo):  # noqa: C901
        key = id(obj)
        if self._get(key):
            return
        if isinstance(obj, _C.TensorBase):
            self.keep.append(obj)
            self._tensor(obj, todo)
            return
        if isinstance(obj, (np.ndarray, np.generic, np.dtype)) and not (
                isinstance(obj, np.dtype) and obj in _NAME_OF):
            self._save_np(obj, todo)
        elif isinstance(obj, (bool, int)):
            self._int(int(obj))
        elif isinstance(obj, float):
            self.out += b"G" + struct.pack(">d", float(obj))
        elif isinstance(obj, str):
            self._str(str(obj))
        elif isinstance(obj, (bytes, bytearray)):
            if isinstance(obj, bytearray):
                self._global("__builtin__", "bytearray")
            self._global("_codecs", "encode")
            self._str(bytes(obj).decode("latin1"))
            self._str("latin1")
            self.out += b"\x86R"
            if isinstance(obj, bytearray):
                self.out += b"\x85R"
        elif isinstance(obj, complex):
            self._global("__builtin__", "complex")
            self.out += (b"G" + struct.pack(">d", obj.real) + b"G" + struct.pack(">d", obj.imag)
                         + b"\x86R")
        elif isinstance(obj, Size):
            self._global("torch", "Size")
            self.out += b"("
            for v in obj:
                self._int(int(v))
            self.out += b"t\x85R"
        elif isinstance(obj, np.dtype) and obj in _NAME_OF:
            self._global("torch", _NAME_OF[obj])
        elif isinstance(obj, _device.device):
            self._global("torch", "device")
            self._str(str(obj))
            self.out += b"\x85R"
        elif isinstance(obj, _device.layout):
            self._global("torch.serialization", "_get_layout")
            self._str("torch." + obj.name)
            self.out += b"\x85R"
        elif isinstance(obj, dict):
            self.keep.append(obj)
            if isinstance(obj, OrderedDict):
                self._global("collections", "OrderedDict")
                self.out += b")R"
            else:
                self.out += b"}"
            self._put(key)
            if obj:
                self._items(todo, [x for kv in obj.items() for x in kv], b"u")
        elif isinstance(obj, list):
            self.keep.append(obj)
            self.out += b"]"
            self._put(key)
            if obj:
                self._items(todo, list(obj), b"e")
        elif isinstance(obj, tuple):
            if hasattr(obj, "_fields"):
                raise TypeError(f"cgrad.save cannot store namedtuple {type(obj).__name__} "
                                "(convert it to a tuple or dict)")
            if not obj:
                self.out += b")"
                return
            if key in self.open_tuples:
                raise ValueError("cgrad.save cannot store a tuple that contains itself")
            self.open_tuples.add(key)
            todo.append(_Done(obj, key))
            todo.append(_TUPLE_B)
            todo.extend(reversed(obj))
            todo.append(_MARK_B)
        elif isinstance(obj, (set, frozenset)):
            self.keep.append(obj)
            self._global("__builtin__", "frozenset" if isinstance(obj, frozenset) else "set")
            self.out += b"]"
            todo.append(_Done(obj, key))
            todo.append(_Raw(b"\x85R"))
            if obj:
                self._items(todo, list(obj), b"e")
        else:
            raise TypeError(
                f"cgrad.save cannot store an object of type {type(obj).__module__}."
                f"{type(obj).__qualname__}: it stores tensors, NumPy arrays, numbers, strings, "
                "bytes, None and dicts/lists/tuples/sets of them (never pickling code). Save "
                "model.state_dict() instead of the model.")

    def _tensor(self, t, todo):
        from cgrad.nn.parameter import Parameter
        key = id(t)
        if getattr(t, "is_sparse", False):
            self._global("torch._utils", "_rebuild_sparse_tensor")
            self._global("torch.serialization", "_get_layout")
            self._str("torch.sparse_coo")
            self.out += b"\x85R("
            todo.append(_Done(t, key))
            todo.append(_Raw(b"t\x86R"))
            todo += [bool(t.is_coalesced()), Size(t.shape), _C._wrap(t._vals),
                     _C._wrap(t._pattern.idx)]
            return
        attrs = _C._attrs_copy(t)
        param = isinstance(t, Parameter)
        if param:
            self._global("torch._utils", "_rebuild_parameter_with_state" if attrs else
                         "_rebuild_parameter")
            self.out += b"("
            self._dense(t, False)
            self.out += b"\x89" if not t.requires_grad else b"\x88"
            self._global("collections", "OrderedDict")
            self.out += b")R"
            if attrs:
                todo.append(_Done(t, key))
                todo.append(_Raw(b"tR"))
                todo.append(dict(attrs))
            else:
                self.out += b"tR"
                self._put(key)
            return
        if attrs:
            layout = self.storage_of(t._data)
            self._global("torch._tensor", "_rebuild_from_type_v2")
            self.out += b"("
            self._global("torch._utils", "_rebuild_tensor_v3" if layout[4] else
                         "_rebuild_tensor_v2")
            self._global("torch", "Tensor")
            self.out += b"("
            self._dense_args(t, t.requires_grad, layout)
            self.out += b"t"
            todo.append(_Done(t, key))
            todo.append(_Raw(b"tR"))
            todo.append(dict(attrs))
            return
        self._dense(t, t.requires_grad)
        self._put(key)

    def _dense(self, t, requires_grad):
        pid, offset, size, stride, dtype = self.storage_of(t._data)
        self._global("torch._utils", "_rebuild_tensor_v3" if dtype else "_rebuild_tensor_v2")
        self.out += b"("
        self._dense_args(t, requires_grad, (pid, offset, size, stride, dtype))
        self.out += b"tR"

    def _dense_args(self, t, requires_grad, layout):
        pid, offset, size, stride, dtype = layout
        tag, stype, skey, loc, numel = pid[:5]
        self.out += b"("
        self._str(tag)
        self._global(*stype)
        self._str(skey)
        self._str(loc)
        self._int(numel)
        if len(pid) == 6:                       # the legacy format's view metadata
            self.out += b"N"
        self.out += b"tQ"
        self._int(offset)
        for tup in (size, stride):
            self.out += b"("
            for v in tup:
                self._int(v)
            self.out += b"t"
        self.out += b"\x88" if requires_grad else b"\x89"
        self._global("collections", "OrderedDict")
        self.out += b")R"
        if dtype:
            self._global("torch", _NAME_OF[dtype])

    def _save_np(self, obj, todo):
        """A NumPy object the way pickle writes it (numpy's __reduce__)."""
        if isinstance(obj, type):
            self._global(obj.__module__, obj.__qualname__)
            return
        if type(obj) in (tuple, list) or self._scalar(obj) or isinstance(obj, bytes):
            if isinstance(obj, bytes):
                self._save(obj, todo)
            elif type(obj) is tuple:
                todo.append(_TUPLE_B)
                todo.extend(_Np(v) for v in reversed(obj))
                todo.append(_MARK_B)
            elif type(obj) is list:
                raise TypeError("cgrad.save: unexpected list in a NumPy object's state")
            return
        if not isinstance(obj, (np.ndarray, np.generic, np.dtype)):
            raise TypeError(f"cgrad.save cannot store {type(obj).__name__} inside a NumPy "
                            "object")
        if self._get(id(obj)):
            return
        if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
            raise TypeError("cgrad.save cannot store arrays of Python objects (dtype=object); "
                            "that would need pickle")
        if isinstance(obj, np.ndarray) and type(obj) is not np.ndarray:
            obj = np.asarray(obj)
        rv = obj.__reduce_ex__(2)
        func, args = rv[0], rv[1]
        state = rv[2] if len(rv) > 2 else None
        self.keep.append(obj)
        self._global(func.__module__, func.__qualname__)
        todo.append(_Done(obj, id(obj)) if state is None else _Raw(b"b"))
        if state is not None:
            todo.append(_Np(state))
            todo.append(_Done(obj, id(obj)))
        todo.append(_REDUCE_B)
        todo.append(_Np(args))
