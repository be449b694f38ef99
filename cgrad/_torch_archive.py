"""torch's checkpoint containers without torch: the zip archive that ``torch.save`` writes
(read and written) and the legacy stream of ``_use_new_zipfile_serialization=False`` (read).

Note [Checkpoint archives]: a zip checkpoint is ``<name>/data.pkl`` (the pickle,
cgrad/_torch_pickle.py), ``<name>/data/<key>`` (one record per storage: its raw bytes,
stored uncompressed, 64-byte aligned), ``<name>/byteorder``, ``<name>/version``,
``<name>/.format_version``, ``<name>/.storage_alignment`` and ``<name>/.data/serialization_id``.
A legacy file is a run of pickles (a magic number, the protocol 1001, the machine's sys info,
the object, the list of storage keys) followed by each storage as an int64 element count
and the elements.

Storages are NumPy byte buffers; a tensor is a view of one (offset and strides checked to
stay inside it), so tensors that shared a storage in torch share one buffer in cgrad. Before
anything is allocated, a record's size is checked: it must be the size its storage declares
and lie within the file (compressed records: within what deflate can expand to), and legacy
storages together must fit in the bytes that follow the pickle. Storage records are not
CRC-checked (as torch does not: that would double the time of a load); the pickle is.

Saving finds each tensor's storage from its NumPy array: the outermost ndarray it views
(``.base`` chain). A view of it (any offset and non-negative strides within it) is written as
torch writes a view; anything else (negative strides, a misaligned offset) is copied to a
storage of its own.
"""
from __future__ import annotations

import hashlib
import os
import struct
import sys
import zipfile
import zlib

import numpy as np

from cgrad import _device
from cgrad._torch_pickle import (LoadError, Reader, StorageType, Writer, no_dtype_error,
                                 storage_type_of)

__all__ = ["LoadedStorage", "StorageTable", "write_zip", "write_legacy", "read_zip",
           "read_legacy", "LEGACY_MAGIC"]

ALIGN = 64
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
_MAX_VERSION = 10
_DEFLATE_RATIO = 1032          # deflate cannot expand data more than this


def _bad(what):
    return LoadError(f"cgrad.load: {what}; the file is corrupted or not a checkpoint cgrad reads")


class LoadedStorage:
    """A storage being loaded: raw bytes and the dtype its persistent id gave. It is also
    what a callable ``map_location(storage, location)`` receives (return it, or None)."""

    __slots__ = ("_raw", "dtype", "untyped", "location", "_views")

    def __init__(self, raw, dtype, untyped, location, big_endian=False, views=None):
        self._raw, self.dtype, self.untyped, self.location = raw, dtype, untyped, location
        self._views = views if views is not None else {"big": big_endian}

    def as_type(self, dtype, untyped, location):
        return LoadedStorage(self._raw, dtype, untyped, location, views=self._views)

    def typed(self, dtype=None):
        """The storage as a 1-D array of dtype (shared by every tensor that views it)."""
        if dtype is None:
            if self.untyped:
                raise _bad("a tensor over an untyped storage without a dtype")
            dtype = self.dtype
        arr = self._views.get(dtype)
        if arr is None:
            raw = self._raw
            if raw.size % dtype.itemsize:
                raise _bad(f"a storage of {raw.size} bytes read as {dtype}")
            if self._views["big"] and dtype.itemsize > 1:
                arr = raw.view(dtype.newbyteorder(">")).astype(dtype)
            else:
                arr = raw.view(dtype)
            self._views[dtype] = arr
        return arr

    def forget_views(self):
        for k in [k for k in self._views if k != "big"]:
            del self._views[k]

    # what torch's storages answer, for map_location callables
    @property
    def device(self):
        return _device.CPU

    def nbytes(self):
        return int(self._raw.size)

    def size(self):
        return self.nbytes() // (1 if self.untyped else self.dtype.itemsize)

    __len__ = size

    def cpu(self):
        return self

    def element_size(self):
        return 1 if self.untyped else self.dtype.itemsize

    def __repr__(self):
        return (f"<storage of {self.size()} {'bytes' if self.untyped else self.dtype} at "
                f"{self.location!r}>")


def _target_location(location, map_location, fname="cgrad.load"):
    """Where a storage saved at ``location`` goes: 'cpu', or an error as torch gives."""
    if isinstance(map_location, dict):
        location = map_location.get(location, location)
        return _target_location(location, None)
    if map_location is not None and not callable(map_location):
        location = map_location
    if not isinstance(location, str):
        if isinstance(location, _device.device) or isinstance(getattr(location, "type", None),
                                                              str):
            location = str(location)
        else:
            raise TypeError(f"{fname}: map_location should be a str, a device, a dict or a "
                            f"callable, not {type(location).__name__}")
    kind = location.split(":")[0]
    if kind == "cpu":
        return "cpu"
    if kind == "cuda":
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but cgrad.cuda.is_available() "
            "is False. If you are running on a CPU-only machine, please use cgrad.load with "
            "map_location=cgrad.device('cpu') to map your storages to the CPU.")
    raise RuntimeError(f"cgrad.load: a storage saved at {location!r} cannot be restored: cgrad "
                       "runs on the CPU only (pass map_location='cpu')")


def _place(storage, location, map_location):
    """Apply map_location to a freshly read storage."""
    if callable(map_location) and not isinstance(map_location, (dict, str, _device.device)):
        out = map_location(storage, location)
        if out is None:
            _target_location(location, None)
            return storage
        if not isinstance(out, LoadedStorage):
            raise TypeError("cgrad.load: map_location(storage, location) must return the "
                            f"storage it was given (or None), not {type(out).__name__}")
        return out
    _target_location(location, map_location)
    return storage


def _pid_fields(pid, n):
    if type(pid) is not tuple or len(pid) != n or pid[0] != "storage":
        if type(pid) is tuple and pid and pid[0] == "module":
            raise LoadError("Weights only load failed: the file holds a pickled module with its "
                            "source code; cgrad.load never runs code from a file")
        raise _bad(f"unsupported persistent id encountered ({str(pid)[:80]})")
    _, stype, key, location, numel = pid[:5]
    if not isinstance(stype, StorageType):
        raise _bad(f"a storage of type {stype!r}")
    if not isinstance(stype.dtype, np.dtype):
        raise no_dtype_error(stype.dtype)
    if isinstance(location, bytes):
        location = location.decode("ascii", "replace")
    if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int \
            or numel < 0:
        raise _bad(f"a malformed storage id {str(pid)[:80]}")
    return stype, key, location, numel


# -- reading the zip format -------------------------------------------------------------------
def _file_size(f):
    pos = f.tell()
    end = f.seek(0, 2)
    f.seek(pos)
    return end


class _ZipReader:
    def __init__(self, f, zf, prefix, mmap_array=None):
        self.f, self.zf, self.prefix, self.mm = f, zf, prefix, mmap_array
        self.size = _file_size(f)
        self.infos = {zi.filename: zi for zi in zf.infolist()}

    def info(self, name):
        zi = self.infos.get(f"{self.prefix}/{name}")
        if zi is None:
            raise _bad(f"the archive has no record {self.prefix}/{name}")
        return zi

    def small(self, name, limit=1 << 26):
        """A non-storage record (CRC-checked)."""
        zi = self.info(name)
        self._check(zi, zi.file_size)
        if zi.file_size > limit:
            raise _bad(f"record {zi.filename} declares {zi.file_size} bytes")
        try:
            return self.zf.read(zi)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as e:
            raise LoadError(f"cgrad.load: failed reading zip archive: record {zi.filename} is "
                            f"corrupted ({e})") from None

    def _check(self, zi, nbytes):
        if zi.compress_type == zipfile.ZIP_STORED:
            if zi.compress_size != zi.file_size:
                raise _bad(f"record {zi.filename} is stored but its sizes differ")
            if zi.header_offset + 30 + nbytes > self.size:
                raise _bad(f"record {zi.filename} declares {zi.file_size} bytes, more than the "
                           f"file holds ({self.size} bytes)")
        elif zi.compress_type == zipfile.ZIP_DEFLATED:
            if zi.file_size > _DEFLATE_RATIO * zi.compress_size + 64 or \
                    zi.header_offset + zi.compress_size > self.size:
                raise _bad(f"record {zi.filename} declares {zi.file_size} bytes from "
                           f"{zi.compress_size} compressed ones, which deflate cannot produce")
        else:
            raise _bad(f"record {zi.filename} is compressed with method {zi.compress_type}")

    def storage(self, key, nbytes):
        """The bytes of data/<key> as a uint8 array (nbytes checked first)."""
        zi = self.info(f"data/{key}")
        if zi.file_size != nbytes:
            raise _bad(f"storage record {zi.filename} holds {zi.file_size} bytes but the "
                       f"pickle declares a storage of {nbytes} bytes")
        self._check(zi, nbytes)
        if zi.compress_type != zipfile.ZIP_STORED:
            with self.zf.open(zi) as r:
                data = r.read(nbytes)
            if len(data) != nbytes:
                raise _bad(f"storage record {zi.filename} is truncated")
            return np.frombuffer(bytearray(data), np.uint8)
        f = self.f
        f.seek(zi.header_offset)
        head = f.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            raise _bad(f"record {zi.filename} has no local header")
        n, m = struct.unpack("<HH", head[26:30])
        start = zi.header_offset + 30 + n + m
        if start + nbytes > self.size:
            raise _bad(f"storage record {zi.filename} is truncated: {nbytes} bytes declared, "
                       f"{max(self.size - start, 0)} there")
        if self.mm is not None:         # its own root array: saved again, it is one storage
            return np.frombuffer(self.mm, np.uint8, nbytes, start)
        out = np.empty(nbytes, np.uint8)
        f.seek(start)
        got = f.readinto(memoryview(out)) if hasattr(f, "readinto") else None
        if got is None:
            data = f.read(nbytes)
            got = len(data)
            out[:got] = np.frombuffer(data, np.uint8)
        if got != nbytes:
            raise _bad(f"storage record {zi.filename} is truncated")
        return out


def _prefix(names):
    pkls = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if not pkls:
        pkls = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
    if len(pkls) != 1:
        return None
    return pkls[0][:-len("/data.pkl")] if "/" in pkls[0] else None


def read_zip(f, zf, map_location=None, weights_only=True, mmap_array=None):
    """The object in a torch zip checkpoint (zf: the open ZipFile over f)."""
    prefix = _prefix(zf.namelist())
    if prefix is None:
        raise LoadError("cgrad.load: not a checkpoint: a zip archive without data.pkl (neither "
                        "torch.save's format nor cgrad's)")
    rd = _ZipReader(f, zf, prefix, mmap_array)
    big = False
    if f"{prefix}/byteorder" in rd.infos:
        order = rd.small("byteorder", 16)
        if order not in (b"little", b"big"):
            raise _bad(f"the byteorder record says {order[:16]!r}")
        big = order == b"big"
    if f"{prefix}/version" in rd.infos:
        v = rd.small("version", 64).strip()
        if not v.isdigit() or int(v) > _MAX_VERSION:
            raise LoadError(f"cgrad.load: the archive's format version {v[:16]!r} is newer than "
                            "this cgrad reads")
    pkl = rd.small("data.pkl", max(rd.size, 1 << 20))
    storages = {}

    def persistent_load(pid):
        stype, key, location, numel = _pid_fields(pid, 5)
        untyped = stype.name == "UntypedStorage"
        s = storages.get(key)
        if s is None:
            nbytes = numel * (1 if untyped else stype.dtype.itemsize)
            s = LoadedStorage(rd.storage(key, nbytes), stype.dtype, untyped, location, big)
            s = storages[key] = _place(s, location, map_location)
        if s.dtype != stype.dtype or s.untyped != untyped:
            s = s.as_type(stype.dtype, untyped, location)
        return s

    return Reader(pkl, persistent_load, weights_only).load()


# -- reading the legacy format ----------------------------------------------------------------
def read_legacy(data, map_location=None, weights_only=True):
    """The object in a legacy (non-zip) torch checkpoint: bytes ``data``."""
    def nothing(pid):
        raise _bad("a persistent id in the legacy header")

    pos = 0
    head = []
    for what in ("magic number", "protocol version", "system info"):
        r = Reader(data, nothing, True, pos)
        try:
            head.append(r.load())
        except LoadError as e:
            raise LoadError(f"cgrad.load: not a checkpoint: its {what} is unreadable ({e})") \
                from None
        pos = r.pos
        if head[0] != LEGACY_MAGIC:
            raise LoadError("cgrad.load: not a checkpoint: a pickle that is not torch's legacy "
                            "format (no magic number); cgrad.load reads files written by "
                            "torch.save and cgrad.save")
    if head[1] != LEGACY_PROTOCOL:
        raise LoadError(f"cgrad.load: legacy protocol version {head[1]!r} is not supported")
    info = head[2]
    start = pos
    big = isinstance(info, dict) and info.get("little_endian") is False
    storages, views, order = {}, {}, []
    budget = [len(data) - pos]

    def persistent_load(pid):
        stype, key, location, numel = _pid_fields(pid, 6)
        view = pid[5]
        item = stype.dtype.itemsize
        s = storages.get(key)
        if s is None:
            nbytes = numel * item
            if nbytes > budget[0]:
                raise _bad(f"storage {key} declares {nbytes} bytes, more than the file holds")
            budget[0] -= nbytes
            s = LoadedStorage(np.zeros(nbytes, np.uint8), stype.dtype, False, location, big)
            s = storages[key] = _place(s, location, map_location)
            order.append(key)
        if view is None:
            return s if s.dtype == stype.dtype else s.as_type(stype.dtype, False, location)
        if type(view) is not tuple or len(view) != 3 or not all(
                type(v) is int for v in view[1:]) or view[1] < 0 or view[2] < 0:
            raise _bad("a malformed storage view")
        vkey, offset, size = view
        v = views.get(vkey)
        if v is None:
            if (offset + size) * item > s._raw.size:
                raise _bad(f"a storage view reaches outside storage {key}")
            raw = s._raw[offset * item:(offset + size) * item]
            v = views[vkey] = LoadedStorage(raw, stype.dtype, False, location, big)
        return v

    # the storages' bytes follow the pickle: a first pass finds them (sparse tensors, which
    # copy their indices, are skipped), then the pickle is read again over the filled storages
    r = Reader(data, persistent_load, weights_only, pos)
    r.skip_sparse = True
    r.load()
    r = Reader(data, nothing, True, r.pos)
    keys = r.load()
    pos = r.pos
    if type(keys) is not list or not all(isinstance(k, str) for k in keys):
        raise _bad("the list of storage keys is malformed")
    for key in keys:
        s = storages.get(key)
        if s is None:
            raise _bad(f"storage {key} is listed but never used")
        if pos + 8 > len(data):
            raise _bad(f"storage {key} is truncated")
        numel = struct.unpack(">q" if big else "<q", data[pos:pos + 8])[0]
        nbytes = s._raw.size
        if numel * s.dtype.itemsize != nbytes:
            raise _bad(f"storage {key} has wrong size: expected {nbytes // s.dtype.itemsize} "
                       f"elements, got {numel}")
        pos += 8
        if pos + nbytes > len(data):
            raise _bad(f"storage {key} is truncated")
        s._raw[:] = np.frombuffer(data, np.uint8, nbytes, pos)
        pos += nbytes
    missing = set(order) - set(keys)
    if missing:
        raise _bad(f"storage {sorted(missing)[0]} has no data")
    for s in list(storages.values()) + list(views.values()):
        s.forget_views()            # typed views made in the first pass predate the data
    return Reader(data, persistent_load, weights_only, start).load()


# -- writing ------------------------------------------------------------------------------------
def _contiguous_strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class StorageTable:
    """Storages of the tensors being saved: ``table(array)`` gives the persistent id and the
    layout of the array in its storage (see Note [Checkpoint archives])."""

    def __init__(self):
        self.records = []            # (key, uint8 array of the storage's bytes)
        self.index = {}              # (id of the root array, dtype) -> (pid)
        self.keep = []

    def _pid(self, root_key, root, raw, dt):
        pid = self.index.get((root_key, dt))
        if pid is None:
            name, untyped = storage_type_of(dt)
            key = str(len(self.records))
            numel = raw.size if untyped else raw.size // dt.itemsize
            module = "torch.storage" if untyped else "torch"
            pid = ("storage", (module, name), key, "cpu", numel)
            self.records.append((key, raw, numel))
            self.index[(root_key, dt)] = pid
            self.keep.append(root)
        return pid

    def __call__(self, arr):
        dt = arr.dtype
        if not dt.isnative:
            arr = arr.astype(dt.newbyteorder("="))
            dt = arr.dtype
        storage_type_of(dt)
        untyped = storage_type_of(dt)[1]
        item = dt.itemsize
        if arr.size == 0:
            raw = np.empty(0, np.uint8)
            pid = self._pid(id(raw), raw, raw, dt)
            return pid, 0, arr.shape, _contiguous_strides(arr.shape), dt if untyped else None
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        layout = self._view(arr, root, item)
        if layout is None:
            root = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
            layout = (0, _contiguous_strides(arr.shape))
        offset, strides = layout
        raw = root.reshape(-1, order="A").view(np.uint8)
        pid = self._pid(id(root), root, raw, dt)
        return pid, offset, arr.shape, strides, dt if untyped else None

    @staticmethod
    def _view(arr, root, item):
        """(offset, strides) in elements of arr within root's memory, or None."""
        if root.dtype.hasobject or not (root.flags.c_contiguous or root.flags.f_contiguous):
            return None
        base = root.__array_interface__["data"][0]
        off = arr.__array_interface__["data"][0] - base
        if off < 0 or off % item or root.nbytes % item:
            return None
        strides = arr.strides
        if any(s < 0 or s % item for s in strides):
            return None
        end = off + sum((n - 1) * s for n, s in zip(arr.shape, strides)) + item
        if end > root.nbytes:
            return None
        return off // item, tuple(s // item for s in strides)


def _aligned_info(zf, name, nbytes):
    zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    zi.compress_type = zipfile.ZIP_STORED
    zi.file_size = nbytes
    zip64 = nbytes * 1.05 > zipfile.ZIP64_LIMIT
    header = 30 + len(name.encode("utf-8")) + (20 if zip64 else 0)
    pad = (-(zf.fp.tell() + header + 4)) % ALIGN
    zi.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    return zi, zip64


def write_zip(f, pkl, table, name="archive"):
    """Write a pickle (Writer's) and its storages (table) to the binary file f in torch's zip
    format."""
    crcs = []
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        def record(rname, data):
            nbytes = data.nbytes if isinstance(data, np.ndarray) else len(data)
            zi, zip64 = _aligned_info(zf, f"{name}/{rname}", nbytes)
            with zf.open(zi, "w", force_zip64=zip64) as w:
                if nbytes:
                    w.write(memoryview(data) if isinstance(data, np.ndarray) else data)
            crcs.append(zi.CRC)

        record("data.pkl", pkl)
        record(".format_version", b"1")
        record(".storage_alignment", str(ALIGN).encode())
        record("byteorder", sys.byteorder.encode())
        for key, raw, _ in table.records:
            record(f"data/{key}", raw)
        record("version", b"3\n")
        digest = hashlib.sha1(struct.pack(f"<{len(crcs)}I", *crcs)).digest()
        record(".data/serialization_id",
               str(int.from_bytes(digest[:16], "little") % 10 ** 40).zfill(40).encode())


def write_legacy(f, pkl, table):
    """torch's legacy stream (``_use_new_zipfile_serialization=False``): pkl was written with
    6-field storage ids (``legacy_ids(table)``)."""
    for head in (LEGACY_MAGIC, LEGACY_PROTOCOL,
                 {"protocol_version": LEGACY_PROTOCOL, "little_endian": sys.byteorder == "little",
                  "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        f.write(Writer(None).dump(head))
    f.write(pkl)
    f.write(Writer(None).dump([key for key, _, _ in table.records]))
    for _, raw, numel in table.records:
        f.write(struct.pack("<q" if sys.byteorder == "little" else ">q", numel))
        if raw.size:
            f.write(memoryview(raw))


def legacy_ids(table):
    """table's storage_of with the legacy format's 6-field storage ids."""
    def storage_of(arr):
        pid, *rest = table(arr)
        if rest[-1] is not None:
            raise TypeError(f"cgrad.save: torch's legacy format has no storage type for "
                            f"{rest[-1]} tensors; save with the zip format (the default)")
        return (pid + (None,), *rest)
    return storage_of


def open_zip(f):
    """zipfile.ZipFile over f, or LoadError."""
    try:
        return zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error) as e:
        raise LoadError(f"cgrad.load: failed reading zip archive: not a ZIP archive, or a "
                        f"truncated or corrupted one ({e})") from None


def is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))
