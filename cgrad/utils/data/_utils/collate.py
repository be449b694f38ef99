"""Collation: a list of samples into a batch (``default_collate``) and a sample's NumPy
parts into tensors (``default_convert``), with torch's rules.

``collate(batch, collate_fn_map=...)`` looks up the type of the batch's first element in
collate_fn_map (exactly, then by isinstance in the map's order) and otherwise recurses into
mappings, namedtuples and sequences. ``default_collate_fn_map`` (which users may extend)
holds torch's leaf rules:

* cgrad Tensors are stacked along a new first dimension;
* NumPy arrays become tensors of their dtype and are stacked (string and object arrays
  raise TypeError);
* NumPy scalars become a 1-D tensor of their dtype;
* Python floats a float64 tensor, ints an int64 tensor (bools a bool tensor);
* str and bytes stay a list.

Stacking samples that do not require grad (the usual case) copies their arrays into the
batch directly; samples that require grad (with grad mode on) go through ``cgrad.stack`` and
the batch has a ``StackBackward0`` node, as in torch.
"""
from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from cgrad import _C
from cgrad import _creation
from cgrad.ops import joining
from cgrad.tensor import Tensor

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map",
           "collate_tensor_fn", "collate_numpy_array_fn", "collate_numpy_scalar_fn",
           "collate_float_fn", "collate_int_fn", "collate_str_fn"]

# dtype.str of NumPy arrays of strings, bytes and objects: not turned into tensors
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, "
                                  "numbers, dicts or lists; found {}")


def _is_numpy_value(x):
    """A NumPy array or NumPy scalar other than a string scalar."""
    t = type(x)
    return t.__module__ == "numpy" and t.__name__ not in ("str_", "string_", "bytes_")


def _rebuild_mapping(proto, values):
    """A mapping like proto (same type, extra attributes kept when it is mutable) with
    values (a dict); a plain dict when the type cannot be rebuilt."""
    try:
        if isinstance(proto, collections.abc.MutableMapping):
            clone = copy.copy(proto)
            clone.update(values)
            return clone
        return type(proto)(values)
    except TypeError:
        return values


def _rebuild_sequence(proto, values):
    """A sequence like proto (same type where possible) holding values (a list)."""
    try:
        if isinstance(proto, collections.abc.MutableSequence):
            clone = copy.copy(proto)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(proto)(values)
    except TypeError:
        return values


def default_convert(data: Any) -> Any:
    """Turn the NumPy arrays and scalars in data (recursively inside mappings, namedtuples
    and sequences; a tuple becomes a list) into cgrad tensors; anything else is returned
    as is. The DataLoader's collate_fn when automatic batching is off (batch_size=None)."""
    if isinstance(data, _C.TensorBase):
        return data
    if _is_numpy_value(data):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return _creation.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(data[k]) for k in data})
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):                               # namedtuple
            return type(data)(*(default_convert(d) for d in data))
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch: Any, *, collate_fn_map: dict | None = None) -> Any:
    """Collate batch (a list of samples): by collate_fn_map's function for the type of the
    first sample (exact type first, then the first key it is an instance of), else by
    recursing into mappings, namedtuples and sequences (whose samples must have equal
    lengths); TypeError for anything else."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        fn = collate_fn_map.get(elem_type)
        if fn is None:
            fn = next((f for key, f in collate_fn_map.items() if isinstance(elem, key)), None)
        if fn is not None:
            return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {k: collate([d[k] for d in batch],
                                                  collate_fn_map=collate_fn_map)
                                       for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):       # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        # each column a tuple (torch's zip): a column of strings stays a tuple
        columns = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        return _rebuild_sequence(elem, columns)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Stack a batch of tensors along a new first dimension."""
    elem = batch[0]
    if elem.is_sparse:
        raise RuntimeError("Batches of sparse tensors are not currently supported by the "
                           "default collate_fn; please provide a custom collate_fn to handle "
                           "them appropriately.")
    direct = all(isinstance(t, _C.TensorBase) for t in batch) and not (
        _C.is_grad_enabled() and any([t.requires_grad for t in batch]))
    if direct:
        arrays = [t._data for t in batch]
        first = arrays[0]
        shape, dt = first.shape, first.dtype
        for a in arrays:
            if a.__class__ is not np.ndarray or a.shape != shape or a.dtype != dt:
                direct = False
                break
    if not direct:             # mixed shapes or dtypes, a graph to record: the op, its errors
        return joining.stack(batch, 0)
    if not shape:
        return _C._wrap(np.fromiter(arrays, dtype=dt, count=len(arrays)))
    return _C._wrap(np.concatenate(arrays).reshape((len(arrays),) + shape))


def collate_numpy_array_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Stack a batch of NumPy arrays into a tensor of their dtype."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([_creation.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """A batch of NumPy scalars as a 1-D tensor of their dtype."""
    return _creation.as_tensor(np.asarray(batch))


def collate_float_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """A batch of Python floats as a float64 tensor."""
    try:
        return _C._wrap(np.array(batch, dtype=np.float64))
    except (TypeError, ValueError):
        return _creation.tensor(batch, dtype=np.float64)       # torch's error for the mix


def collate_int_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """A batch of Python ints as an int64 tensor (of bools: a bool tensor)."""
    try:
        arr = np.array(batch)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is not None and (arr.dtype == np.int64 or arr.dtype == np.bool_):
        return _C._wrap(arr)
    return _creation.tensor(batch)           # ints beyond int64, mixed types: its errors


def collate_str_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """A batch of strings (or bytes) stays a list."""
    return batch


default_collate_fn_map: dict[type | tuple[type, ...], Callable] = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,                  # and subclasses (memmap)
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch: Any) -> Any:
    """Collate a list of samples into a batch with torch's rules: tensors, NumPy arrays and
    numbers become tensors with a new first dimension (Python float -> float64, int ->
    int64, NumPy -> its dtype), strings stay lists, and mappings, namedtuples and sequences
    are collated field by field (a tuple sample gives a list)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
