"""cgrad.save / cgrad.load: checkpoints that move between cgrad and torch.

``save`` writes torch's zip format (what ``torch.save`` writes: ``torch.load(f,
weights_only=True)`` reads a cgrad checkpoint of a state dict or an optimizer's state dict),
``load`` reads it back, and reads files written by ``torch.save`` in the zip format and in the
legacy one (``_use_new_zipfile_serialization=False``), without torch, and the NumPy ``.npz``
archives that earlier cgrad versions wrote. The format is told from the file's first bytes.

Loading never runs code from the file: the pickle inside a torch checkpoint is read by
cgrad's own restricted unpickler (Note [Restricted unpickler] in cgrad/_torch_pickle.py),
which accepts what ``torch.load(weights_only=True)`` accepts and refuses anything else with
:class:`LoadError`, naming the global it refused. The containers, their checks, and how shared
storages stay shared are Note [Checkpoint archives] in cgrad/_torch_archive.py.

Every way a file can be broken (truncated, not a checkpoint, a pickle naming code, a record
of the wrong size, a tensor reaching outside its storage) raises one error type,
:class:`LoadError`: a RuntimeError (what torch.load raises for most corrupted files) that is
also a ``pickle.UnpicklingError`` (what torch.load raises for files it refuses to unpickle).
"""
from __future__ import annotations

import io
import mmap as _mmap
import os

from cgrad import _torch_archive as _archive
from cgrad._npz_archive import STRUCT_ENTRY, load_npz
from cgrad._torch_pickle import LoadError, Writer

__all__ = ["save", "load", "LoadError"]


class _NotAFile(AttributeError, TypeError):
    """torch reads ``f.seek``/``f.write`` first (AttributeError); also a TypeError."""


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
    """Save ``obj`` to ``f`` (a path, str, ``os.PathLike`` or writable binary file) in
    torch's zip format, so that ``torch.load(f, weights_only=True)`` reads it.

    ``obj`` is any nesting of dicts (and OrderedDicts), lists, tuples and sets of tensors,
    Parameters, sparse COO tensors, numbers, strings, bytes, None, dtypes, devices and
    ``cgrad.Size``: a module's ``state_dict()``, an optimizer's, or a checkpoint dict holding
    both. Tensors are written as torch writes them (each storage once, views of one storage
    as views, with their strides; ``requires_grad`` kept; a Parameter as a Parameter). NumPy
    arrays and scalars are written as torch.save pickles them, which ``torch.load`` and
    ``cgrad.load`` read only with ``weights_only=False``. Other objects (modules, functions,
    classes) are refused with a TypeError: save their ``state_dict()`` instead.
    ``_use_new_zipfile_serialization=False`` writes torch's legacy format. The pickle is
    protocol 2 whatever ``pickle_protocol`` says (torch's default; every reader reads it).

    >>> import cgrad, io
    >>> buf = io.BytesIO()
    >>> cgrad.save({"w": cgrad.ones(2), "step": 3}, buf)
    >>> _ = buf.seek(0)
    >>> cgrad.load(buf)
    {'w': tensor([1., 1.]), 'step': 3}
    """
    if pickle_module is not None:
        raise ValueError("cgrad.save writes its own pickle; pickle_module is not supported")
    if pickle_protocol is not None and pickle_protocol not in (2, 3, 4, 5):
        raise ValueError(f"cgrad.save: pickle_protocol must be 2 to 5, not {pickle_protocol!r}")
    path = _target(f, "w")
    if path is not None:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise RuntimeError(f"Parent directory {os.path.dirname(path) or parent} does not "
                               "exist.")
    table = _archive.StorageTable()           # pickled first: a refused object leaves f as is
    legacy = not _use_new_zipfile_serialization
    pkl = Writer(_archive.legacy_ids(table) if legacy else table).dump(obj)
    write = _archive.write_legacy if legacy else _archive.write_zip
    if path is None:
        write(f, pkl, table)
        return
    with open(path, "wb") as fh:
        write(fh, pkl, table)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Load an object saved by :func:`save` or by ``torch.save`` (zip or legacy format) from
    ``f`` (a path, str, ``os.PathLike`` or readable binary file), or an ``.npz`` archive
    written by earlier cgrad versions. torch is not needed.

    Tensors come back as cgrad Tensors sharing storage as they did when saved (views keep
    their offsets and strides), Parameters as Parameters, ``requires_grad`` as saved; dtypes
    as cgrad dtypes, ``torch.Size`` as ``cgrad.Size``, ``torch.device`` as ``cgrad.device``.
    A tensor whose dtype cgrad lacks (bfloat16, quantized, float8) is refused.

    ``map_location``: everything is loaded on the CPU. Storages saved on a CUDA device are
    refused (as torch refuses them without CUDA) unless ``map_location`` maps them to the CPU:
    ``'cpu'``, ``cgrad.device('cpu')``, a dict ``{'cuda:0': 'cpu'}``, or a callable
    ``map_location(storage, location)`` returning the storage it was given (or None).

    ``weights_only=True`` (the default): the file's pickle may name only tensors, parameters,
    containers, numbers, strings, bytes, sets, complex numbers, dtypes, ``torch.Size`` and
    ``torch.device``, as torch's ``weights_only`` unpickler; anything else raises
    :class:`LoadError` ("Unsupported global: GLOBAL os.system ...").

    ``weights_only=False`` does not switch to Python's pickle: cgrad.load never runs code
    named by a file. What torch files need beyond ``weights_only=True`` is mostly torch's own
    classes (pickled modules, optimizers), which cgrad could not build anyway, and NumPy
    objects, which cgrad rebuilds itself; so ``weights_only=False`` adds NumPy arrays, scalars
    and dtypes (not object arrays) and frozensets, and still refuses any other global.

    ``mmap=True`` maps the storages of a zip checkpoint from the file (copy on write: writes
    to the tensors do not reach the file) instead of reading them; ``f`` must be a path.
    """
    if pickle_module is not None:
        raise ValueError("cgrad.load uses its own restricted unpickler; pickle_module is not "
                         "supported")
    unknown = set(pickle_load_args) - {"encoding", "errors"}
    if unknown:
        raise TypeError(f"cgrad.load() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    weights_only = True if weights_only is None else bool(weights_only)
    path = _target(f, "r")
    if mmap and path is None:
        raise ValueError("f must be a file path in order to use the mmap argument")
    if path is not None:
        with open(path, "rb") as fh:
            return _load(fh, map_location, weights_only, path if mmap else None)
    if not (hasattr(f, "seek") and hasattr(f, "tell") and
            (not hasattr(f, "seekable") or f.seekable())):
        data = f.read()
        if not isinstance(data, (bytes, bytearray)):
            raise _NotAFile("cgrad.load takes a path or a binary file (its read() returned "
                            f"{type(data).__name__})")
        f = io.BytesIO(data)
    return _load(f, map_location, weights_only, None)


def _load(fh, map_location, weights_only, mmap_path):
    start = fh.tell()
    head = fh.read(512)
    if not isinstance(head, (bytes, bytearray)):
        raise _NotAFile("cgrad.load takes a path or a binary file (its read() returned "
                        f"{type(head).__name__})")
    fh.seek(start)
    if not head:
        raise LoadError("cgrad.load: the file is empty")
    if head[:2] == b"PK":
        zf = _archive.open_zip(fh)
        names = zf.namelist()
        if STRUCT_ENTRY in names:
            if mmap_path is not None:
                raise ValueError("mmap can only be used with zip checkpoints (torch.save's "
                                 "format), not with cgrad's older .npz archives")
            fh.seek(start)
            return load_npz(fh.read())
        if not any(n.endswith("data.pkl") for n in names):
            if names and all(n.endswith(".npy") for n in names):
                raise LoadError("cgrad.load: not a cgrad archive: a plain .npz (no structure "
                                "entry, no data.pkl); read it with numpy.load")
            raise LoadError("cgrad.load: not a cgrad archive nor a torch checkpoint: a zip "
                            "archive without data.pkl")
        mm = None
        if mmap_path is not None:         # copy on write; each storage a root array over it
            mm = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_COPY)
        return _archive.read_zip(fh, zf, map_location, weights_only, mm)
    if mmap_path is not None:
        raise RuntimeError("mmap can only be used with files saved with "
                           "`torch.save(_use_new_zipfile_serialization=True)`, please "
                           "torch.save your checkpoint with this option in order to use mmap.")
    if head[:1] == b"\x80":
        return _archive.read_legacy(fh.read(), map_location, weights_only)
    if head[:6] == b"\x93NUMPY":
        raise LoadError("cgrad.load: not a cgrad archive: a bare .npy array (read it with "
                        "numpy.load)")
    if head[257:262] == b"ustar":
        raise LoadError("cgrad.load: a tar checkpoint (torch's format before 0.4); cgrad reads "
                        "the zip and legacy formats only: load and re-save it with torch")
    raise LoadError("cgrad.load: failed reading zip archive: not a ZIP archive (torch.save's or "
                    "cgrad.save's format) nor a legacy torch file: the file starts with "
                    f"{bytes(head[:8])!r}")
