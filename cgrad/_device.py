"""Devices, layouts and memory formats: ``cgrad.device``, ``cgrad.strided``,
``cgrad.contiguous_format``, ... with torch's parsing, equality, hashing and printing.

cgrad computes on the CPU only. A device names where a tensor lives; every tensor is on
``device(type='cpu')``. Other device types parse (``cgrad.device("cuda:1")`` is a device, as
in torch) but using one to place a tensor raises what torch built without accelerators
raises: ``AssertionError("... not compiled with CUDA enabled")`` for CUDA,
``RuntimeError("Cannot access accelerator device when none is available.")`` for a bare
index, and a RuntimeError for the other types (Note [Devices]).

Note [Devices]
~~~~~~~~~~~~~~
``parse(arg, fname)`` turns a ``device=`` argument (None, a str, an int, a cgrad.device or
an object with a str ``type``, such as a torch.device) into a ``device`` or None, raising
torch's errors for a malformed one; ``check(arg, fname)`` also refuses a device that
cgrad cannot place a tensor on. The factories, ``Tensor.to``, ``Tensor.new_*``,
``nn.Module.to`` and ``sparse_coo_tensor`` all go through ``check`` (via
``cgrad._checks.check_device``), so the errors are the same everywhere. torch's one
exception kept: its ``torch.device("cpu", 300)`` wraps the index to 8 bits (44); cgrad keeps
the index given.
"""
from __future__ import annotations

import builtins
import operator
import re
import threading

__all__ = ["device", "layout", "memory_format", "strided", "sparse_coo", "contiguous_format",
           "preserve_format", "channels_last", "channels_last_3d", "set_default_device",
           "get_default_device"]

# c10::DeviceType, in its enum order (the number is used by hash(), as torch's)
DEVICE_TYPES = ("cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "fpga", "maia",
                "xla", "vulkan", "metal", "xpu", "mps", "meta", "hpu", "ve", "lazy", "ipu",
                "mtia", "privateuseone")
# the order torch lists them in its parse error
_LISTED = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
           "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
           "privateuseone")
_TYPE_ID = {t: i for i, t in enumerate(DEVICE_TYPES)}
NO_CUDA = "cgrad not compiled with CUDA enabled (cgrad runs on the CPU only)"
NO_ACCELERATOR = "Cannot access accelerator device when none is available."


def _tname(x):
    """torch's name for an argument's type in messages ('float', 'numpy.int64')."""
    t = type(x)
    mod = t.__module__ or ""
    if mod == "builtins":
        return t.__name__
    if mod.startswith("numpy"):
        return f"numpy.{t.__name__}"
    from cgrad import _C
    return "Tensor" if isinstance(x, _C.TensorBase) else t.__name__


def _invalid_combination(got):
    return TypeError(f"device() received an invalid combination of arguments - got ({got}), "
                     "but expected one of:\n * (cgrad.device device)\n * (str type, int index "
                     "= -1)\n")


_DEVICE_STRING = re.compile(r"([a-zA-Z_]+)(?::(0|[1-9][0-9]*))?")


def _parse_string(s):
    """(type, index) of 'cpu', 'cuda:1', ...: torch's grammar ([a-zA-Z_]+ then, optionally,
    ':' and an index without leading zeros) and its errors."""
    if not s:
        raise RuntimeError("Device string must not be empty")
    m = _DEVICE_STRING.fullmatch(s)
    if m is None or not s.isascii():
        raise RuntimeError(f"Invalid device string: '{s}'")
    kind, index = m.group(1), m.group(2)
    if kind not in _TYPE_ID or kind == "metal":
        raise RuntimeError(f"Expected one of {', '.join(_LISTED)} device type at start of "
                           f"device string: {kind}")
    return kind, None if index is None else builtins.int(index)


class device:
    """cgrad.device(type, index=None) or cgrad.device("type:index"): where a tensor lives.

    >>> import cgrad
    >>> cgrad.device("cpu")
    device(type='cpu')
    >>> cgrad.zeros(2).device == cgrad.device("cpu")
    True
    """

    __slots__ = ("_type", "_index")

    def __init__(self, *args: object, **kwargs: object) -> None:   # typed: users call it
        for k in kwargs:
            if k not in ("type", "index", "device"):
                raise TypeError(f"device() got an unexpected keyword argument '{k}'")
        if len(args) > 2 or len(args) + len(kwargs) > 2:
            got = ", ".join([_tname(a) for a in args] + [f"{k}={_tname(v)}"
                                                          for k, v in kwargs.items()])
            raise _invalid_combination(got)
        if "device" in kwargs:
            if args or len(kwargs) > 1:
                raise _invalid_combination(", ".join(f"{k}={_tname(v)}" for k, v in kwargs.items()))
            args = (kwargs["device"],)
        elif "type" in kwargs:
            if args:
                raise TypeError("device() got multiple values for argument 'type'")
            args = (kwargs["type"],) + ((kwargs["index"],) if "index" in kwargs else ())
        elif "index" in kwargs:
            if len(args) != 1:
                raise _invalid_combination(f"index={_tname(kwargs['index'])}")
            args = args + (kwargs["index"],)
        if not args:
            raise _invalid_combination("")
        first = args[0]
        if isinstance(first, device):
            if len(args) > 1:
                raise TypeError("device(): argument 'type' (position 1) must be str, not "
                                "cgrad.device")
            self._type, self._index = first._type, first._index
            return
        if isinstance(first, bytes):
            first = first.decode()
        if isinstance(first, builtins.int) and not isinstance(first, builtins.bool) \
                and len(args) == 1:
            raise RuntimeError(NO_ACCELERATOR)
        if not isinstance(first, str):
            text = getattr(first, "type", None)
            if isinstance(text, str) and len(args) == 1:       # a torch.device
                first = str(first)
            else:
                raise _invalid_combination(", ".join(_tname(a) for a in args))
        kind, index = _parse_string(first)
        if len(args) == 2 and args[1] is not None:
            i = args[1]
            if isinstance(i, builtins.bool) or not hasattr(i, "__index__"):
                raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                                f"{_tname(i)}")
            i = operator.index(i)
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was "
                                   f"passed explicitly: {first}")
            if i < 0:
                raise RuntimeError("Device index must not be negative")
            index = i
        self._type, self._index = kind, index

    @property
    def type(self) -> str:
        """The device type: 'cpu', 'cuda', ..."""
        return self._type

    @property
    def index(self) -> int | None:
        """The device index, or None."""
        return self._index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, device):
            return NotImplemented
        return not self == other

    def __hash__(self) -> int:
        # std::hash<c10::Device>: the type id in bits 16-23, the index as an 8-bit value
        index = 255 if self._index is None else self._index & 0xFF
        return _TYPE_ID[self._type] << 16 | index

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __format__(self, spec):
        return format(str(self), spec)

    def __reduce__(self):
        return (device, (str(self),))

    def __setattr__(self, name, value):
        if name in ("type", "index"):
            raise AttributeError(f"attribute '{name}' of 'cgrad.device' objects is not "
                                 "writable")
        if name not in device.__slots__ or hasattr(self, name):
            raise AttributeError(f"'cgrad.device' object has no attribute '{name}'")
        object.__setattr__(self, name, value)

    # `with cgrad.device("cpu"):` is a no-op (every tensor is on the CPU); another device
    # raises at once what creating a tensor on it would
    def __enter__(self) -> device:
        check(self, "device")
        return self

    def __exit__(self, *exc: object) -> None:
        return None


CPU = device("cpu")


def parse(arg, fname="tensor"):
    """A device= argument as a cgrad.device (None stays None); torch's errors for a malformed
    one (Note [Devices])."""
    if arg is None or isinstance(arg, device):
        return arg
    if isinstance(arg, builtins.bool) or not isinstance(arg, (str, builtins.int)):
        text = getattr(arg, "type", None)
        if not isinstance(text, str):       # not a device object (e.g. torch.device)
            raise TypeError(f"{fname}(): argument 'device' must be a device (such as 'cpu'), "
                            f"not {_tname(arg)}")
        arg = str(arg)
    if isinstance(arg, builtins.int):
        raise RuntimeError(NO_ACCELERATOR)
    return device(arg)


def check(arg, fname="tensor"):
    """parse(arg), refusing a device cgrad cannot place a tensor on (anything but the CPU)."""
    d = parse(arg, fname)
    if d is None or d._type == "cpu":
        return d
    if d._type == "cuda":
        raise AssertionError(NO_CUDA)
    raise RuntimeError(f"cgrad is not linked with support for {d._type} devices (cgrad runs "
                       "on the CPU only)")


# -- the default device --------------------------------------------------------------------
_device_class = device
_default = threading.local()        # per thread, as torch's device context


def set_default_device(device):
    """Sets the device new tensors are created on (None: the CPU again). cgrad places every
    tensor on the CPU, so only a CPU device is accepted; another raises at once what creating
    a tensor on it raises (torch, built without CUDA, accepts "cuda" here and raises that
    error at the next tensor it creates)."""
    if device is not None and not isinstance(device, (str, builtins.int, _device_class)) \
            and not isinstance(getattr(device, "type", None), str):
        device = _device_class(device)      # torch.device(...)'s error for a bad argument
    _default.device = check(device, "set_default_device")


def get_default_device():
    """The device new tensors are created on: the one given to set_default_device, or the
    CPU."""
    d = getattr(_default, "device", None)
    return CPU if d is None else d


def refuse_cuda(arg):
    """Tensor.cuda(device) / Module.cuda(device): torch's error without CUDA (a non-CUDA
    device, a bare index, or CUDA itself)."""
    d = parse(arg, "cuda")
    if d is not None and d._type != "cuda":
        raise RuntimeError("Invalid device, must be cuda device")
    raise AssertionError(NO_CUDA)


# -- layouts -----------------------------------------------------------------------------
class layout:
    """A tensor layout: cgrad.strided (dense) or cgrad.sparse_coo."""

    __slots__ = ("name",)

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def __repr__(self):
        return "cgrad." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return self.name


sparse_coo = layout("sparse_coo")
strided = layout("strided")


# -- memory formats ------------------------------------------------------------------------
class memory_format:
    """A memory format (the ``memory_format=`` argument): cgrad.contiguous_format,
    preserve_format, channels_last (rank 4) or channels_last_3d (rank 5)."""

    __slots__ = ("name",)

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def __repr__(self):
        return "cgrad." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
_RANK = {"channels_last": 4, "channels_last_3d": 5}


def check_memory_format(fmt, fname, ndim=None):
    """torch's checks of a memory_format= argument; True when the format asks for a
    channels-last layout (which the caller then produces)."""
    if fmt is None or fmt is preserve_format or fmt is contiguous_format:
        return False
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{fname}(): argument 'memory_format' must be cgrad.memory_format, not "
                        f"{_tname(fmt)}")
    rank = _RANK[fmt.name]
    if ndim is not None and ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    return True


def channels_last_copy(arr):
    """A copy of the rank-4/5 array `arr` with channels-last strides (channels innermost)."""
    import numpy as np
    order = (0,) + tuple(range(2, arr.ndim)) + (1,)
    back = (0, arr.ndim - 1) + tuple(range(1, arr.ndim - 1))
    return np.ascontiguousarray(arr.transpose(order)).transpose(back)
