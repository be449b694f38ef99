"""The safetensors format, read and written by cgrad itself (no dependency):
``save_file(tensors, filename, metadata=None)``, ``load_file(filename, device="cpu")``,
``save(tensors, metadata=None) -> bytes`` and ``load(data) -> dict``, as
``safetensors.torch`` names them.

A file is an 8-byte little-endian header length N, N bytes of JSON (``{name: {"dtype": "F32",
"shape": [2, 3], "data_offsets": [begin, end]}, "__metadata__": {str: str}}``, padded with
spaces to a multiple of 8), then the data: each tensor's bytes, C order, little-endian, at
its offsets from the start of the data, with no gaps. The format has no views: each tensor
is written as its own contiguous copy (tensors that shared memory load as separate ones).

Loading checks everything before it allocates: the header's length against the file, the
JSON, each entry's dtype, shape and offsets (in bounds, the size its shape and dtype need, the
entries tiling the data exactly). A malformed file raises :class:`SafetensorError` (a
ValueError) saying what is wrong. Tensors of a dtype cgrad lacks (BF16, F8_*) are refused.
"""
from __future__ import annotations

import json
import math
import os
import struct
import sys

import numpy as np

from cgrad import _C
from cgrad import _device

__all__ = ["save", "save_file", "load", "load_file", "metadata_of", "SafetensorError"]

_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
           "F16": "float16", "I32": "int32", "U32": "uint32", "F32": "float32", "F64": "float64",
           "I64": "int64", "U64": "uint64", "C64": "complex64"}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MISSING = ("BF16", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C32")
_MAX_HEADER = 100_000_000


class SafetensorError(ValueError):
    """A safetensors file cgrad cannot read, or tensors it cannot write."""


def _arrays(tensors):
    if not isinstance(tensors, dict):
        raise TypeError(f"safetensors.save expects a dict of tensors, not "
                        f"{type(tensors).__name__}")
    out = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"safetensors: tensor names must be str, not {type(name).__name__}")
        if not isinstance(t, _C.TensorBase) or getattr(t, "is_sparse", False):
            raise TypeError(f"safetensors: {name!r} is a {type(t).__name__}, not a dense "
                            "tensor")
        arr = t._data
        code = _CODES.get(np.dtype(arr.dtype.str.replace(">", "<")))
        if code is None:
            raise SafetensorError(f"safetensors: {name!r} has dtype {arr.dtype}, which the "
                                  "format has no code for")
        out.append((name, code, arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)))
    return out


def _header(arrays, metadata):
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors: metadata must be a dict of str to str")
    arrays = sorted(arrays, key=lambda a: (-a[2].dtype.itemsize, a[0]))
    head, pos = {}, 0
    if metadata:
        head["__metadata__"] = dict(metadata)
    for name, code, arr in arrays:
        head[name] = {"dtype": code, "shape": list(arr.shape),
                      "data_offsets": [pos, pos + arr.nbytes]}
        pos += arr.nbytes
    text = json.dumps(head, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, arrays


def save(tensors, metadata=None):
    """The safetensors bytes of a dict of tensors (names to tensors)."""
    head, arrays = _header(_arrays(tensors), metadata)
    return head + b"".join(arr.tobytes() for _, _, arr in arrays)


def save_file(tensors, filename, metadata=None):
    """Write a dict of tensors to ``filename`` (a path) in the safetensors format."""
    head, arrays = _header(_arrays(tensors), metadata)
    with open(os.fspath(filename), "wb") as f:
        f.write(head)
        for _, _, arr in arrays:
            if arr.size:
                f.write(memoryview(arr.reshape(-1)).cast("B"))


def _bad(what):
    return SafetensorError(f"safetensors: {what}")


def _parse(buf):
    """(entries [(name, dtype, shape, begin, end)], data start) of the bytes in buf."""
    if len(buf) < 8:
        raise _bad(f"the file has {len(buf)} bytes, fewer than its 8-byte header length")
    n = struct.unpack("<Q", bytes(buf[:8]))[0]
    if n > _MAX_HEADER:
        raise _bad(f"the header declares {n} bytes (the limit is {_MAX_HEADER})")
    if 8 + n > len(buf):
        raise _bad(f"the header declares {n} bytes but the file has {len(buf) - 8} after "
                   "the length")
    try:
        head = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _bad(f"the header is not valid JSON ({e})") from None
    if not isinstance(head, dict):
        raise _bad("the header is not a JSON object")
    meta = head.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(v, str) for v in meta.values())):
        raise _bad("__metadata__ is not an object of strings")
    data_len = len(buf) - 8 - n
    entries = []
    for name, info in head.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise _bad(f"entry {name!r} is not {{dtype, shape, data_offsets}}")
        code, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if code in _MISSING:
            raise _bad(f"tensor {name!r} has dtype {code}, which cgrad has no dtype for")
        if code not in _DTYPES:
            raise _bad(f"tensor {name!r} has unknown dtype {code!r}")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
            raise _bad(f"tensor {name!r} has a malformed shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and
                all(type(o) is int and o >= 0 for o in offs) and offs[0] <= offs[1]):
            raise _bad(f"tensor {name!r} has malformed data_offsets {offs!r}")
        dt = np.dtype(_DTYPES[code])
        if sys.byteorder != "little":
            dt = dt.newbyteorder("<")
        need = math.prod(shape) * dt.itemsize
        if offs[1] - offs[0] != need:
            raise _bad(f"tensor {name!r} of shape {shape} and dtype {code} needs {need} bytes "
                       f"but its data_offsets span {offs[1] - offs[0]}")
        if offs[1] > data_len:
            raise _bad(f"tensor {name!r} ends at byte {offs[1]} of a data section of "
                       f"{data_len} bytes")
        entries.append((name, dt, tuple(shape), offs[0], offs[1]))
    pos = 0
    for name, _, _, begin, end in sorted(entries, key=lambda e: (e[3], e[4])):
        if begin != pos:
            raise _bad(f"tensor {name!r} starts at byte {begin} where {pos} was expected "
                       "(the tensors overlap or leave a gap)")
        pos = end
    if pos != data_len:
        raise _bad(f"the data section has {data_len} bytes but the tensors cover {pos}")
    return entries, 8 + n, meta


def _build(data, entries, start):
    """The tensors over bytearray data: each its own array over the buffer (aligned ones
    are views; saved again with cgrad.save, each is its own storage)."""
    out = {}
    for name, dt, shape, begin, end in sorted(entries, key=lambda e: e[0]):
        count = (end - begin) // dt.itemsize
        if (start + begin) % dt.itemsize == 0:
            arr = np.frombuffer(data, dt, count, start + begin)
        else:
            arr = np.frombuffer(bytes(data[start + begin:start + end]), dt, count).copy()
        arr = arr.reshape(shape)
        if not dt.isnative:
            arr = arr.astype(dt.newbyteorder("="))
        out[name] = _C._wrap(arr)
    return out


def load(data):
    """The dict of tensors in safetensors bytes ``data``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"safetensors.load expects bytes, not {type(data).__name__}")
    data = bytearray(data)
    entries, start, _ = _parse(data)
    return _build(data, entries, start)


def load_file(filename, device="cpu"):
    """The dict of tensors in the safetensors file ``filename`` (on the CPU: ``device``
    must be the CPU)."""
    _device.check(device, "load_file")
    with open(os.fspath(filename), "rb") as f:
        data = bytearray(os.fstat(f.fileno()).st_size)
        n = f.readinto(data)
    del data[n:]
    entries, start, _ = _parse(data)
    return _build(data, entries, start)


def metadata_of(filename):
    """The ``__metadata__`` of a safetensors file (None when it has none)."""
    with open(os.fspath(filename), "rb") as f:
        head = f.read(8)
        if len(head) == 8:
            n = struct.unpack("<Q", head)[0]
            if n <= _MAX_HEADER:
                head += f.read(n)
    try:
        return json.loads(head[8:].decode("utf-8")).get("__metadata__")
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise _bad("the header is not valid JSON") from None
