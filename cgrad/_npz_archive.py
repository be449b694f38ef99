"""Reading the NumPy ``.npz`` archives that cgrad.save wrote before it wrote torch's format.

An archive holds one ``.npy`` entry per array and the entry ``__cgrad_structure__``: a JSON
document describing the nesting (format ``cgrad-npz``). Version 2 (Note [Flat structure]) is a
flat list of nodes, each container referring to its items by node index (``{"@": i}``;
strings, None, bools, ints and finite floats inline); containers come before their items,
which the reader checks, and it walks the list with loops (no recursion). Version 1 nested the
nodes. Arrays are read with ``allow_pickle=False``: reading an archive runs no code.
"""
from __future__ import annotations

import io
import json
import zipfile
from collections import OrderedDict

import numpy as np

from cgrad import _C
from cgrad._torch_pickle import LoadError

__all__ = ["STRUCT_ENTRY", "load_npz"]

STRUCT_ENTRY = "__cgrad_structure__.npy"
_STRUCT_KEY = "__cgrad_structure__"
_FORMAT = "cgrad-npz"
_VERSION = 2
_LEAVES = ("tensor", "ndarray", "npscalar", "dtype", "float", "complex")


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


def load_npz(data):
    """The object in a cgrad ``.npz`` archive (bytes)."""
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise LoadError(f"cgrad.load: failed reading zip archive: not a ZIP archive written "
                        f"by cgrad.save, or a truncated or corrupted one ({e})") from e
    try:
        with archive:
            text = str(archive[_STRUCT_KEY][()])
            arrays = {k: archive[k] for k in archive.files if k != _STRUCT_KEY}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise LoadError(f"cgrad.load: failed reading zip archive: not a ZIP archive written "
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
