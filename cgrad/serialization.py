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

Note [Flat structure]: the structure (format version 2) is a flat list of nodes, each
container referring to its items by node index (``{"@": i}``; strings, None, bools, ints and
finite floats are written inline). Saving and loading walk it with loops, never recursion,
so a list nested 100,000 deep is stored and read back (torch's pickle raises RecursionError),
and the JSON document is never deeper than three levels. Containers get their index before
their items (an item's index is larger than its container's), which ``load`` checks; a
reference cycle is refused when saving. Version 1 files (nested nodes) are still read.

Every way an archive can be broken (truncated, not a zip, no structure, malformed JSON, a
node that does not make sense) raises one error type, :class:`LoadError`: a RuntimeError
(what torch.load raises for most corrupted files) that is also a ``pickle.UnpicklingError``
(what torch.load raises for files it refuses to unpickle).
"""
from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from cgrad import _C

__all__ = ["save", "load", "LoadError"]

_STRUCT_KEY = "__cgrad_structure__"
_FORMAT = "cgrad-npz"
_VERSION = 2
_LEAVES = ("tensor", "ndarray", "npscalar", "dtype", "float", "complex")


class LoadError(RuntimeError, pickle.UnpicklingError):
    """cgrad.load could not read the file: it is not a (valid) cgrad archive."""


class _NotAFile(AttributeError, TypeError):
    """torch reads ``f.seek``/``f.write`` first (AttributeError); also a TypeError."""


def _inline(obj):
    """Is obj written inline in the structure (a JSON scalar that reads back as itself)?"""
    if obj is None or isinstance(obj, (bool, str)):
        return True
    if isinstance(obj, int):
        return type(obj) is int
    return type(obj) is float and obj == obj and obj not in (float("inf"), float("-inf"))


class _Writer:
    def __init__(self):
        self.arrays = {}
        self.memo = {}          # id(tensor or array) -> node index (stored once)
        self.keep = []          # keep memoised objects alive while saving
        self.nodes = []
        self.stack = []         # containers whose items are still to be written

    def _node(self, node):
        self.nodes.append(node)
        return {"@": len(self.nodes) - 1}

    def _store(self, obj, arr, node):
        idx = self.memo.get(id(obj))
        if idx is None:
            if arr.dtype == object or arr.dtype.hasobject:
                raise TypeError("cgrad.save cannot store arrays of Python objects "
                                "(dtype=object); that would need pickle")
            key = f"a{len(self.arrays)}"
            self.arrays[key] = arr
            node["k"] = key
            idx = self._node(node)["@"]
            self.memo[id(obj)] = idx
            self.keep.append(obj)
        return {"@": idx}

    def ref(self, obj):
        """The reference to obj in its container: inline, or a new node's index."""
        if _inline(obj):
            return obj
        if isinstance(obj, bool) or isinstance(obj, int):      # an int subclass
            return int(obj)
        if isinstance(obj, float):
            return self._node({"t": "float", "v": repr(float(obj))})
        if isinstance(obj, complex):
            return self._node({"t": "complex", "re": repr(obj.real), "im": repr(obj.imag)})
        if isinstance(obj, str):
            return str(obj)
        if isinstance(obj, _C.TensorBase):
            from cgrad.nn.parameter import Parameter
            node = {"t": "tensor", "rg": bool(obj.requires_grad and obj.is_leaf)}
            if isinstance(obj, Parameter):
                node["param"] = True
            return self._store(obj, obj._data, node)
        if isinstance(obj, np.ndarray):
            return self._store(obj, obj, {"t": "ndarray"})
        if isinstance(obj, np.generic):
            return self._store(obj, np.asarray(obj), {"t": "npscalar"})
        if isinstance(obj, np.dtype):
            return self._node({"t": "dtype", "v": obj.str})
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, OrderedDict) else "dict"
        elif isinstance(obj, list):
            kind = "list"
        elif isinstance(obj, tuple):
            if hasattr(obj, "_fields"):
                raise TypeError(f"cgrad.save cannot store namedtuple {type(obj).__name__} "
                                "(convert it to a tuple or dict)")
            kind = "tuple"
        else:
            raise TypeError(
                f"cgrad.save cannot store an object of type {type(obj).__module__}."
                f"{type(obj).__qualname__}: it stores tensors, NumPy arrays, numbers, strings, "
                "None and dicts/lists/tuples of them (no pickle). Save model.state_dict() "
                "instead of the model.")
        node = {"t": kind}
        r = self._node(node)
        self.stack.append((obj, node))
        return r

    def key_ref(self, k):
        if k is None or isinstance(k, (bool, str, int, float, tuple)):
            return self.ref(k)
        if isinstance(k, np.generic):
            return self.ref(k.item())
        raise TypeError(f"cgrad.save cannot store a dict key of type {type(k).__name__}")

    def encode(self, obj):
        """The structure of obj: Note [Flat structure]."""
        root = self.ref(obj)
        on_path = set()             # containers being written: a cycle would never end
        while self.stack:
            obj, node = self.stack.pop()
            if node is None:                    # a container's items are all written
                on_path.discard(obj)
                continue
            if id(obj) in on_path:
                raise ValueError("cgrad.save cannot store a reference cycle (a container "
                                 "that contains itself)")
            on_path.add(id(obj))
            self.stack.append((id(obj), None))
            if node["t"] in ("dict", "odict"):
                node["items"] = [[self.key_ref(k), self.ref(v)] for k, v in obj.items()]
            else:
                node["v"] = [self.ref(v) for v in obj]
        return root


def _target(f, mode):
    """A path, or a file object with read (load) / write (save)."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return os.fsdecode(f)
    attr = "write" if mode == "w" else "read"
    if not hasattr(f, attr):
        if mode == "w":
            raise _NotAFile("expected 'f' to be string, path, or a file-like object with a "
                            "'write' attribute")
        raise _NotAFile(f"'{type(f).__name__}' object has no attribute '{attr}': cgrad.load "
                        "takes a path or a readable binary file")
    return None


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
    path = _target(f, "w")
    if path is not None:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise RuntimeError(f"Parent directory {os.path.dirname(path) or parent} does not "
                               "exist.")
    w = _Writer()
    structure = {"format": _FORMAT, "version": _VERSION, "root": w.encode(obj),
                 "nodes": w.nodes}
    text = json.dumps(structure, allow_nan=False, separators=(",", ":"))
    arrays = dict(w.arrays)
    arrays[_STRUCT_KEY] = np.array(text)
    if path is not None:
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


# ------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------
def _bad(detail):
    return LoadError(f"cgrad.load: the archive's structure entry is malformed ({detail}); the "
                     "file is corrupted or was not written by cgrad.save")


def _flatten_v1(root):
    """A version-1 structure (nested nodes) as version-2 nodes (iteratively)."""
    nodes = []

    def ref(x):
        if not isinstance(x, dict):
            return x
        nodes.append(dict(x))
        todo.append(len(nodes) - 1)
        return {"@": len(nodes) - 1}

    todo = []
    r = ref(root)
    while todo:
        node = nodes[todo.pop()]
        t = node.get("t")
        if t in ("list", "tuple"):
            node["v"] = [ref(v) for v in node["v"]]
        elif t in ("dict", "odict"):
            node["items"] = [[ref(k), ref(v)] for k, v in node["items"]]
        elif t == "complex":
            re_, im_ = node["re"], node["im"]
            node["re"] = re_["v"] if isinstance(re_, dict) else repr(float(re_))
            node["im"] = im_["v"] if isinstance(im_, dict) else repr(float(im_))
    return r, nodes


class _Reader:
    def __init__(self, arrays, nodes):
        self.arrays = arrays
        self.nodes = nodes
        self.objs = [None] * len(nodes)

    def ref(self, x, parent):
        if isinstance(x, dict):
            i = x.get("@")
            if type(i) is not int or not 0 <= i < len(self.nodes):
                raise _bad(f"a reference to node {i!r} of {len(self.nodes)}")
            if i <= parent and self.nodes[i].get("t") not in _LEAVES:
                raise _bad(f"node {parent} refers back to the container {i}")
            return self.objs[i]
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        raise _bad(f"an item of type {type(x).__name__}")

    def leaf(self, node):
        t = node["t"]
        if t == "float":
            return float(node["v"])
        if t == "complex":
            return complex(float(node["re"]), float(node["im"]))
        if t == "dtype":
            return np.dtype(node["v"])
        arr = self.arrays[node["k"]]
        if t == "ndarray":
            return arr
        if t == "npscalar":
            return arr[()]
        if node.get("param"):
            from cgrad.nn.parameter import Parameter
            return Parameter(_C._wrap(arr), requires_grad=node.get("rg", True))
        out = _C._wrap(arr)
        if node.get("rg"):
            out.requires_grad_(True)
        return out

    def decode(self, root):
        nodes = self.nodes
        for i, node in enumerate(nodes):        # leaves first: they may be shared
            if not isinstance(node, dict) or "t" not in node:
                raise _bad(f"node {i} is not an entry")
            if node["t"] in _LEAVES:
                self.objs[i] = self.leaf(node)
        for i in range(len(nodes) - 1, -1, -1):    # containers: items have larger indices
            node = nodes[i]
            t = node["t"]
            if t in _LEAVES:
                continue
            if t in ("dict", "odict"):
                d = OrderedDict() if t == "odict" else {}
                for k, v in node["items"]:
                    d[self.ref(k, i)] = self.ref(v, i)
                self.objs[i] = d
            elif t == "list":
                self.objs[i] = [self.ref(v, i) for v in node["v"]]
            elif t == "tuple":
                self.objs[i] = tuple(self.ref(v, i) for v in node["v"])
            else:
                raise LoadError(f"cgrad.load: unknown entry type {t!r} in the archive's "
                                "structure")
        return self.ref(root, -1)


def _open_archive(f):
    path = _target(f, "r")
    if path is not None:
        with open(path, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise _NotAFile("cgrad.load takes a path or a binary file (its read() returned "
                        f"{type(data).__name__})")
    if not data:
        raise LoadError("cgrad.load: the file is empty")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise LoadError(f"cgrad.load: failed reading the archive: not a ZIP archive written "
                        f"by cgrad.save, or a truncated or corrupted one ({e})") from e
    if not hasattr(archive, "files"):
        raise LoadError("cgrad.load: not a cgrad archive (a bare .npy array, not an .npz "
                        "written by cgrad.save)")
    return archive


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Load an object written by :func:`save` from ``f`` (a path or a readable binary file).
    Tensors come back as cgrad Tensors (Parameters as Parameters), containers with their
    types (dict, OrderedDict, list, tuple). ``map_location`` is accepted for torch
    compatibility (everything is on the CPU). A file that is not a valid cgrad archive
    raises :class:`LoadError`."""
    if pickle_module is not None:
        raise ValueError("cgrad.load does not use pickle; pickle_module is not supported")
    archive = _open_archive(f)
    try:
        with archive:
            files = archive.files
            if _STRUCT_KEY not in files:
                if any(n.endswith("data.pkl") or n.endswith("data") for n in files) or any(
                        n.endswith("version") for n in files):
                    raise LoadError("cgrad.load: not a cgrad archive: a checkpoint written by "
                                    "PyTorch's save (a pickle), which cgrad does not read; load "
                                    "it with PyTorch and save its tensors as NumPy arrays")
                raise LoadError("cgrad.load: not a cgrad archive (no structure entry); a "
                                "plain .npz can be read with numpy.load")
            text = str(archive[_STRUCT_KEY][()])
            arrays = {k: archive[k] for k in files if k != _STRUCT_KEY}
    except LoadError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise LoadError(f"cgrad.load: failed reading the archive: not a ZIP archive written "
                        f"by cgrad.save, or a truncated or corrupted one ({e})") from e
    try:
        structure = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _bad(f"not JSON: {e}") from None
    if not isinstance(structure, dict):
        raise _bad(f"a JSON {type(structure).__name__}, not an object")
    if structure.get("format") != _FORMAT:
        raise LoadError("cgrad.load: unknown archive format")
    version = structure.get("version", 0)
    if not isinstance(version, int) or version > _VERSION:
        raise LoadError(f"cgrad.load: archive version {version} is newer than this cgrad "
                        f"supports ({_VERSION})")
    try:
        if version >= 2:
            root, nodes = structure["root"], structure["nodes"]
        else:
            root, nodes = _flatten_v1(structure["root"])
        if not isinstance(nodes, list):
            raise _bad("the node list is not a list")
        return _Reader(arrays, nodes).decode(root)
    except LoadError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise _bad(f"{type(e).__name__}: {e}") from None
