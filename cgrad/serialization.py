"""cgrad.save / cgrad.load: state dicts to a NumPy ``.npz`` archive, never pickle.

``save(obj, f)`` accepts Tensors (and Parameters), NumPy arrays and scalars, Python numbers,
strings, None, and dicts (including OrderedDict, with str/int/float/bool/None/tuple keys),
lists and tuples of these, nested arbitrarily: a module's ``state_dict()``, an optimizer's
``state_dict()``, or a checkpoint dict holding both and an epoch number. Every array is one
entry of the archive (``np.savez``); the nesting is described by a JSON document stored as
the entry ``__cgrad_structure__``. ``load`` reads it back with ``allow_pickle=False``, so
loading a file never runs code. Objects appearing several times (the same Tensor under two
keys) are stored once and come back as one object. Other objects (modules, functions,
arbitrary classes) are refused with a TypeError: save their ``state_dict()`` instead.
"""
from __future__ import annotations

import io
import json
import os
from collections import OrderedDict

import numpy as np

from cgrad import _C

__all__ = ["save", "load"]

_STRUCT_KEY = "__cgrad_structure__"
_FORMAT = "cgrad-npz"
_VERSION = 1


class _Writer:
    def __init__(self):
        self.arrays = {}
        self.memo = {}          # id(obj) -> array key (tensors and arrays stored once)
        self.keep = []          # keep memoised objects alive while saving

    def _store(self, obj, arr):
        key = self.memo.get(id(obj))
        if key is None:
            if arr.dtype == object or arr.dtype.hasobject:
                raise TypeError("cgrad.save cannot store arrays of Python objects "
                                "(dtype=object); that would need pickle")
            key = f"a{len(self.arrays)}"
            self.arrays[key] = arr
            self.memo[id(obj)] = key
            self.keep.append(obj)
        return key

    def encode(self, obj):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int) and not isinstance(obj, bool):
            return obj
        if isinstance(obj, float):
            if obj != obj or obj in (float("inf"), float("-inf")):
                return {"t": "float", "v": repr(obj)}
            return obj
        if isinstance(obj, complex):
            return {"t": "complex", "re": self.encode(obj.real), "im": self.encode(obj.imag)}
        if isinstance(obj, _C.TensorBase):
            from cgrad.nn.parameter import Parameter
            node = {"t": "tensor", "k": self._store(obj, obj._data),
                    "rg": bool(obj.requires_grad and obj.is_leaf)}
            if isinstance(obj, Parameter):
                node["param"] = True
            return node
        if isinstance(obj, np.ndarray):
            return {"t": "ndarray", "k": self._store(obj, obj)}
        if isinstance(obj, np.generic):
            return {"t": "npscalar", "k": self._store(obj, np.asarray(obj))}
        if isinstance(obj, np.dtype):
            return {"t": "dtype", "v": obj.str}
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, OrderedDict) else "dict"
            return {"t": kind, "items": [[self.encode_key(k), self.encode(v)]
                                         for k, v in obj.items()]}
        if isinstance(obj, list):
            return {"t": "list", "v": [self.encode(v) for v in obj]}
        if isinstance(obj, tuple):
            if hasattr(obj, "_fields"):
                raise TypeError(f"cgrad.save cannot store namedtuple {type(obj).__name__} "
                                "(convert it to a tuple or dict)")
            return {"t": "tuple", "v": [self.encode(v) for v in obj]}
        raise TypeError(
            f"cgrad.save cannot store an object of type {type(obj).__module__}."
            f"{type(obj).__qualname__}: it stores tensors, NumPy arrays, numbers, strings, "
            "None and dicts/lists/tuples of them (no pickle). Save model.state_dict() "
            "instead of the model.")

    def encode_key(self, k):
        if k is None or isinstance(k, (bool, str, int, float)):
            return self.encode(k)
        if isinstance(k, tuple):
            return {"t": "tuple", "v": [self.encode_key(v) for v in k]}
        if isinstance(k, np.generic):
            return self.encode(k.item())
        raise TypeError(f"cgrad.save cannot store a dict key of type {type(k).__name__}")


class _Reader:
    def __init__(self, archive):
        self.archive = archive
        self.cache = {}

    def _array(self, key):
        return self.archive[key]

    def decode(self, node):
        if not isinstance(node, dict):
            return node
        t = node["t"]
        if t == "float":
            return float(node["v"])
        if t == "complex":
            return complex(self.decode(node["re"]), self.decode(node["im"]))
        if t in ("tensor", "ndarray", "npscalar"):
            k = node["k"]
            ck = (t, k, node.get("param", False))
            if ck in self.cache:
                return self.cache[ck]
            arr = self._array(k)
            if t == "ndarray":
                out = arr
            elif t == "npscalar":
                out = arr[()]
            else:
                if node.get("param"):
                    from cgrad.nn.parameter import Parameter
                    out = Parameter(_C._wrap(arr), requires_grad=node.get("rg", True))
                else:
                    out = _C._wrap(arr)
                    if node.get("rg"):
                        out.requires_grad_(True)
            self.cache[ck] = out
            return out
        if t == "dtype":
            return np.dtype(node["v"])
        if t in ("dict", "odict"):
            d = OrderedDict() if t == "odict" else {}
            for k, v in node["items"]:
                d[self.decode_key(k)] = self.decode(v)
            return d
        if t == "list":
            return [self.decode(v) for v in node["v"]]
        if t == "tuple":
            return tuple(self.decode(v) for v in node["v"])
        raise ValueError(f"cgrad.load: unknown entry type {t!r} in the archive's structure")

    def decode_key(self, node):
        if isinstance(node, dict) and node.get("t") == "tuple":
            return tuple(self.decode_key(v) for v in node["v"])
        return self.decode(node)


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Save ``obj`` (a state dict, or any nesting of dicts/lists/tuples of tensors, arrays,
    numbers, strings and None) to ``f`` (a path or a writable binary file) as a NumPy
    ``.npz`` archive. The file is written at exactly ``f`` (no ``.npz`` suffix is added).

    >>> import cgrad, io
    >>> from cgrad.serialization import save, load    # also cgrad.save / cgrad.load
    >>> buf = io.BytesIO()
    >>> save({"w": cgrad.ones(2), "step": 3}, buf)
    >>> _ = buf.seek(0)
    >>> load(buf)
    {'w': tensor([1., 1.]), 'step': 3}
    """
    if pickle_module is not None:
        raise ValueError("cgrad.save does not use pickle; pickle_module is not supported")
    w = _Writer()
    structure = {"format": _FORMAT, "version": _VERSION, "root": w.encode(obj)}
    text = json.dumps(structure, allow_nan=False, separators=(",", ":"))
    arrays = dict(w.arrays)
    arrays[_STRUCT_KEY] = np.array(text)
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Load an object written by :func:`save` from ``f`` (a path or a readable binary file).
    Tensors come back as cgrad Tensors (Parameters as Parameters), containers with their
    types (dict, OrderedDict, list, tuple). ``map_location`` is accepted for torch
    compatibility (everything is on the CPU)."""
    if pickle_module is not None:
        raise ValueError("cgrad.load does not use pickle; pickle_module is not supported")
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
        src = io.BytesIO(data)
    else:
        src = f
    try:
        archive = np.load(src, allow_pickle=False)
    except ValueError as e:
        raise RuntimeError(f"cgrad.load: not a cgrad archive ({e})") from e
    if not hasattr(archive, "files"):
        raise RuntimeError("cgrad.load: not a cgrad archive (a bare .npy array, not an .npz "
                           "written by cgrad.save)")
    with archive:
        if _STRUCT_KEY not in archive.files:
            raise RuntimeError("cgrad.load: not a cgrad archive (no structure entry); a plain "
                               ".npz can be read with numpy.load")
        structure = json.loads(str(archive[_STRUCT_KEY][()]))
        if structure.get("format") != _FORMAT:
            raise RuntimeError("cgrad.load: unknown archive format")
        if structure.get("version", 0) > _VERSION:
            raise RuntimeError(f"cgrad.load: archive version {structure['version']} is newer "
                               f"than this cgrad supports ({_VERSION})")
        arrays = {k: archive[k] for k in archive.files if k != _STRUCT_KEY}
    return _Reader(arrays).decode(structure["root"])
