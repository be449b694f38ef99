"""Checkpoints that move between cgrad and torch (issue 18 section 4): cgrad.load reads
torch.save's zip and legacy files without torch, cgrad.save writes files torch.load reads
with weights_only=True, cgrad.utils.safetensors reads and writes safetensors; bad files give
one clear error each and never run code.

The bad-file tests build their zips and pickles by hand and run without torch; the round
trips against torch use `pytest.importorskip("torch")`, and the torch.save -> cgrad.load one
loads in a subprocess where `import torch` fails."""
from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from collections import OrderedDict

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
from cgrad.serialization import LoadError
from cgrad.utils import safetensors as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- hand-made pickles and archives ------------------------------------------------------------
def G(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def S(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def Int(v):
    return b"\x8a\x08" + struct.pack("<q", v) if abs(v) >= 2 ** 31 else b"J" + struct.pack(
        "<i", v)


def Tup(*parts):
    return b"(" + b"".join(parts) + b"t"


def pkl(body):
    return b"\x80\x02" + body + b"."


def storage_id(stype="FloatStorage", key="0", numel=4, location="cpu", legacy=False):
    return Tup(S("storage"), G("torch", stype), S(key), S(location), Int(numel),
               *([b"N"] if legacy else [])) + b"Q"


def tensor(offset=0, size=(4,), stride=(1,), rg=False, **sid):
    return (G("torch._utils", "_rebuild_tensor_v2") + b"(" + storage_id(**sid) + Int(offset) +
            Tup(*map(Int, size)) + Tup(*map(Int, stride)) + (b"\x88" if rg else b"\x89") +
            G("collections", "OrderedDict") + b")R" + b"tR")


def archive(data_pkl, records=None, prefix="archive", compress=None):
    """A torch-style zip: data.pkl, byteorder, version and data/<key> records."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{prefix}/data.pkl", data_pkl)
        zf.writestr(f"{prefix}/byteorder", "little")
        for key, data in (records or {}).items():
            zf.writestr(f"{prefix}/data/{key}", data, compress_type=compress)
        zf.writestr(f"{prefix}/version", "3\n")
    buf.seek(0)
    return buf


def legacy(main_pkl, keys, data, little=True):
    out = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
    out += pickle.dumps({"protocol_version": 1001, "little_endian": little,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2)
    out += main_pkl + pickle.dumps(keys, protocol=2) + data
    return io.BytesIO(out)


FOUR = np.arange(4, dtype=np.float32).tobytes()


def load_err(buf, match, **kw):
    with pytest.raises(LoadError, match=match) as info:
        cgrad.load(buf, **kw)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, pickle.UnpicklingError)
    return str(info.value)


# -- the hand-made files load ---------------------------------------------------------------------
def test_hand_made_tensor_loads_as_view():
    body = b"}(" + S("w") + tensor() + S("v") + tensor(offset=1, size=(2,), stride=(2,)) + b"u"
    r = cgrad.load(archive(pkl(body), {"0": FOUR}))
    assert r["w"].tolist() == [0, 1, 2, 3] and r["v"].tolist() == [1, 3]
    assert np.shares_memory(r["w"]._data, r["v"]._data) and r["v"]._data.strides == (8,)
    r["w"].data[1] = 10.0                        # one buffer: a write shows through the view
    assert r["v"].tolist() == [10, 3]


def test_map_location():
    body = tensor(location="cuda:0")
    with pytest.raises(RuntimeError, match="CUDA device but cgrad.cuda.is_available"):
        cgrad.load(archive(pkl(body), {"0": FOUR}))
    for ml in ("cpu", cgrad.device("cpu"), {"cuda:0": "cpu"}, {"cuda:0": cgrad.device("cpu")},
               lambda s, loc: s):
        r = cgrad.load(archive(pkl(body), {"0": FOUR}), map_location=ml)
        assert r.tolist() == [0, 1, 2, 3]
    seen = []
    r = cgrad.load(archive(pkl(tensor()), {"0": FOUR}),
                   map_location=lambda s, loc: seen.append((s.size(), str(s.device), loc)) or s)
    assert r.tolist() == [0, 1, 2, 3] and seen == [(4, "cpu", "cpu")]
    with pytest.raises(RuntimeError, match="CUDA"):
        cgrad.load(archive(pkl(body), {"0": FOUR}), map_location=lambda s, loc: None)
    with pytest.raises(TypeError, match="must return the storage"):
        cgrad.load(archive(pkl(body), {"0": FOUR}), map_location=lambda s, loc: 5)
    with pytest.raises(RuntimeError, match="CUDA"):
        cgrad.load(archive(pkl(tensor()), {"0": FOUR}), map_location="cuda:0")


def test_legacy_format_hand_made():
    body = b"](" + tensor(legacy=True) + tensor(offset=2, size=(2,), legacy=True) + b"e"
    data = struct.pack("<q", 4) + FOUR
    r = cgrad.load(legacy(pkl(body), ["0"], data))
    assert r[0].tolist() == [0, 1, 2, 3] and r[1].tolist() == [2, 3]
    assert np.shares_memory(r[0]._data, r[1]._data)
    big = struct.pack(">q", 4) + np.arange(4, dtype=">f4").tobytes()
    assert cgrad.load(legacy(pkl(body), ["0"], big, little=False))[1].tolist() == [2, 3]


# -- bad files: one clear error each, no code run, no huge allocation -----------------------------
@pytest.mark.parametrize("data,match", [
    (b"", "empty"),
    (b"hello world, not a checkpoint", "not a ZIP archive"),
    (os.urandom(64).replace(b"P", b"Q").replace(b"\x80", b"\x81"), "not a ZIP archive"),
    (b"PK\x03\x04garbage", "failed reading zip archive"),
    (b"\x80\x02K\x05.", "not torch's legacy format"),
    (b"\x93NUMPY\x01\x00", "bare .npy"),
])
def test_not_a_checkpoint(data, match):
    load_err(io.BytesIO(data), match)


@pytest.mark.parametrize("cut", [10, 100, "half", -30, -1])
def test_truncated_zip(cut):
    buf = io.BytesIO()
    cgrad.save({"w": cgrad.ones(3), "n": 1}, buf)
    data = buf.getvalue()
    n = len(data) // 2 if cut == "half" else cut
    load_err(io.BytesIO(data[:n]), "zip archive|truncated|corrupted")


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
@pytest.mark.parametrize("module,name", [("os", "system"), ("builtins", "eval"),
                                         ("__builtin__", "exec"), ("subprocess", "call"),
                                         ("posix", "system")])
def test_pickle_naming_code_is_refused(tmp_path, fmt, module, name):
    marker = tmp_path / "ran"
    cmd = f"touch {marker}" if name in ("system", "call") else \
        f"open({str(marker)!r}, 'w').close()"
    body = G(module, name) + S(cmd) + b"\x85R"
    f = archive(pkl(body)) if fmt == "zip" else legacy(pkl(body), [], b"")
    shown = {"__builtin__": "builtins"}.get(module, module)
    msg = load_err(f, f"Unsupported global: GLOBAL {shown}.{name}")
    assert "Weights only load failed" in msg
    f.seek(0)
    load_err(f, f"Unsupported global: GLOBAL {shown}.{name}", weights_only=False)
    assert not marker.exists()


def test_stack_global_and_other_opcodes_are_refused():
    body = b"\x8c\x02os\x8c\x06system\x93" + S("true") + b"\x85R"     # protocol 4 spelling
    load_err(archive(b"\x80\x04" + body + b"."), "GLOBAL os.system")
    load_err(archive(pkl(b"(" + S("x") + b"ios\nsystem\n")), "opcode")              # INST
    load_err(archive(pkl(b"\x82\x01")), "opcode")                                     # EXT1
    load_err(archive(pkl(b"]}b")), "state of a list")
    load_err(archive(pkl(S("x") + b"}b")), "state")                # BUILD on a str
    load_err(archive(pkl(b"}" + S("x") + b"a")), "appends to a dict")
    load_err(archive(pkl(S("x") + S("y") + b"\x85R")), "calls str")  # REDUCE on a non-callable
    load_err(archive(pkl(b"]" + b"]" + b"\x85R")), "calls list")


@pytest.mark.parametrize("body,match", [
    (b"", "truncated"),                                              # no STOP
    (S("abc")[:-1], "truncated"),
    (b"X\xff\xff\xff\x7f", "truncated"),                             # a 2 GB string declared
    (b"h\x07", "memo entry 7"),
    (b"t", "MARK"),
    (b"K\x01K\x02", "malformed stack"),
    (b"Q", "stack|malformed"),
    (Tup(S("storage")) + b"Q", "persistent id"),
    (S("just a string") + b"Q", "persistent id"),
    (b"\x80\x02" + G("torch", "Size") + Tup(S("a")) + b"\x85R", "not an int"),
    (G("torch", "device") + Tup(Int(5), Int(6), Int(7)) + b"R", "device"),
    (G("_codecs", "encode") + S("x") + S("rot13") + b"\x86R", "latin1"),
    (G("builtins", "bytearray") + Int(10 ** 9) + b"\x85R", "bytearray"),
])
def test_malformed_pickles(body, match):
    data = b"\x80\x02" + body + (b"." if body and not body.endswith(b"\x7f") else b"")
    if body == b"":
        data = b"\x80\x02"
    load_err(archive(data), match)


def test_storage_record_of_the_wrong_size():
    load_err(archive(pkl(tensor(numel=10 ** 12)), {"0": FOUR}),
             "holds 16 bytes but the pickle declares a storage of 4000000000000 bytes")
    load_err(archive(pkl(tensor(numel=2, size=(2,))), {"0": FOUR}), "holds 16 bytes")
    load_err(archive(pkl(tensor(key="7")), {"0": FOUR}), "no record archive/data/7")
    load_err(archive(pkl(tensor(stype="LongStorage", numel=-1)), {"0": FOUR}), "malformed")


def _patch_sizes(data, name, size):
    """Set the declared sizes of record `name` in the central directory (and local header)."""
    data = bytearray(data)
    nb = name.encode()
    for sig, at in ((b"PK\x01\x02", 20), (b"PK\x03\x04", 18)):
        i = data.find(sig)
        while i >= 0:
            fn_at = 46 if sig == b"PK\x01\x02" else 30
            n = struct.unpack("<H", data[i + fn_at - (18 if sig == b"PK\x01\x02" else 4):
                                         i + fn_at - (16 if sig == b"PK\x01\x02" else 2)])[0]
            if bytes(data[i + fn_at:i + fn_at + n]) == nb:
                compressed = size if data[i + (10 if sig == b"PK\x01\x02" else 8)] == 0 else None
                if compressed is not None:
                    data[i + at:i + at + 4] = struct.pack("<I", compressed)
                data[i + at + 4:i + at + 8] = struct.pack("<I", size)
            i = data.find(sig, i + 4)
    return io.BytesIO(bytes(data))


def test_zip_bomb_declared_sizes():
    # a stored record declaring ~4 GB in a file of a few hundred bytes
    n = 0xFFFFFFF0
    f = archive(pkl(tensor(stype="ByteStorage", numel=n, size=(1,))), {"0": b"\x00" * 16})
    load_err(_patch_sizes(f.getvalue(), "archive/data/0", n), "more than the file holds")
    # a deflated record declaring 1 GB from a few bytes of compressed data
    f = archive(pkl(tensor(stype="ByteStorage", numel=10 ** 9, size=(1,))),
                {"0": b"\x00" * 1000}, compress=zipfile.ZIP_DEFLATED)
    load_err(_patch_sizes(f.getvalue(), "archive/data/0", 10 ** 9), "deflate cannot produce")
    # a deflated record that is honest loads
    f = archive(pkl(tensor(stype="ByteStorage", numel=1000, size=(3,))),
                {"0": bytes(range(250)) * 4}, compress=zipfile.ZIP_DEFLATED)
    assert cgrad.load(f).tolist() == [0, 1, 2]


@pytest.mark.parametrize("offset,size,stride", [
    (2, (3,), (1,)), (0, (5,), (1,)), (0, (2, 2), (3, 1)), (4, (1,), (1,)), (-1, (1,), (1,)),
    (0, (2,), (-1,)), (0, (2, 2), (1,)),
])
def test_tensor_outside_its_storage(offset, size, stride):
    load_err(archive(pkl(tensor(offset=offset, size=size, stride=stride)), {"0": FOUR}),
             "reaches element|negative|differ in length")


def test_empty_and_broadcast_views_inside_storage():
    body = Tup(tensor(offset=4, size=(0, 3), stride=(3, 1)), tensor(size=(3, 4), stride=(0, 1)))
    e, b = cgrad.load(archive(pkl(body), {"0": FOUR}))
    assert e.shape == (0, 3) and b.tolist() == [[0, 1, 2, 3]] * 3


def test_dtypes_cgrad_lacks_are_refused():
    load_err(archive(pkl(tensor(stype="BFloat16Storage")), {"0": FOUR[:8]}), "no bfloat16 dtype")
    load_err(archive(pkl(G("torch", "bfloat16"))), "no bfloat16 dtype")
    load_err(archive(pkl(tensor(stype="QInt8Storage")), {"0": FOUR}), "no qint8 dtype")
    body = G("torch._utils", "_rebuild_qtensor") + Tup() + b"R"
    load_err(archive(pkl(body)), "quantized")


def test_legacy_bad_files():
    body = tensor(legacy=True)
    load_err(legacy(pkl(body), ["0"], struct.pack("<q", 3) + FOUR), "wrong size")
    load_err(legacy(pkl(body), ["0"], struct.pack("<q", 4) + FOUR[:8]), "truncated")
    load_err(legacy(pkl(body), [], b""), "no data|more than the file")
    load_err(legacy(pkl(tensor(legacy=True, numel=10 ** 12)), ["0"], b""),
             "more than the file holds")
    load_err(legacy(pkl(body), ["1"], struct.pack("<q", 4) + FOUR), "never used")
    f = legacy(pkl(body), ["0"], b"")
    data = f.getvalue().replace(b"\x6a\xa8\x50\x19", b"\x6a\xa8\x50\x18", 1)
    load_err(io.BytesIO(data), "not torch's legacy format|magic")


def test_wrong_structure_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a/data.pkl", pkl(b"N"))
        zf.writestr("b/data.pkl", pkl(b"N"))
    load_err(io.BytesIO(buf.getvalue()), "without data.pkl")
    assert cgrad.load(archive(pkl(b"N"), prefix="any_name")) is None
    f = archive(pkl(b"N"))
    data = f.getvalue().replace(b"3\n", b"99", 1)
    load_err(io.BytesIO(data), "format version|corrupted")


# -- cgrad.save / cgrad.load round trips (no torch) ---------------------------------------------
def _zoo():
    w = cgrad.arange(12, dtype=cgrad.float32).reshape(3, 4)
    return OrderedDict([
        ("w", w), ("t", w.t()), ("row", w[1]), ("col", w[:, 2]),
        ("p", nn.Parameter(cgrad.randn(2, 3))), ("frozen", nn.Parameter(cgrad.ones(2), False)),
        ("g", cgrad.ones(2, requires_grad=True)), ("zero_d", cgrad.tensor(3.5)),
        ("empty", cgrad.zeros(0, 4)), ("f16", cgrad.tensor([1.5, -2.0], dtype=cgrad.float16)),
        ("f64", cgrad.tensor([1e-300], dtype=cgrad.float64)),
        ("b", cgrad.tensor([True, False])),
        *[(str(dt), cgrad.tensor([1, -2, 3], dtype=dt)) for dt in
          (cgrad.int8, cgrad.int16, cgrad.int32, cgrad.int64)],
        ("u8", cgrad.tensor([0, 255], dtype=cgrad.uint8)),
        ("c64", cgrad.tensor([1 + 2j], dtype=cgrad.complex64)),
        ("c128", cgrad.tensor([3 - 4j], dtype=cgrad.complex128)),
        ("sparse", cgrad.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))),
        ("n", 7), ("x", 0.1), ("s", "str"), ("none", None), ("by", b"\x00\xff"),
        ("set", {1, 2}), ("cx", 1 - 1j), ("tuple", (1, (2.5, "a"))), ("dt", cgrad.float64),
        ("size", cgrad.Size([2, 3])), ("dev", cgrad.device("cpu")), ("big", 2 ** 70),
    ])


def _check_same(a, b):
    assert list(a) == list(b)
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, cgrad.Tensor):
            assert type(y) is type(x), k
            assert y.dtype == x.dtype and tuple(y.shape) == tuple(x.shape), k
            assert y.requires_grad == x.requires_grad, k
            if x.is_sparse:
                x, y = x.to_dense(), y.to_dense()
            np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy(), err_msg=k)
        else:
            assert y == x and type(y) is type(x), k


@pytest.mark.parametrize("zip_format", [True, False])
def test_round_trip_zoo(tmp_path, zip_format):
    z = _zoo()
    for target in (tmp_path / "a.pt", str(tmp_path / "b.pt"), io.BytesIO()):
        cgrad.save(z, target, _use_new_zipfile_serialization=zip_format)
        if isinstance(target, io.BytesIO):
            target.seek(0)
        r = cgrad.load(target)
        _check_same(z, r)
        assert np.shares_memory(r["w"]._data, r["t"]._data)
        assert np.shares_memory(r["w"]._data, r["col"]._data)
        assert r["t"]._data.strides == z["t"]._data.strides
        assert r["col"]._data.strides == z["col"]._data.strides


def test_save_writes_torch_layout():
    buf = io.BytesIO()
    cgrad.save({"w": cgrad.ones(3)}, buf)
    with zipfile.ZipFile(buf) as zf:
        names = zf.namelist()
        assert names[0] == "archive/data.pkl" and "archive/data/0" in names
        assert zf.read("archive/byteorder") == sys.byteorder.encode()
        assert zf.read("archive/version") == b"3\n"
        info = zf.getinfo("archive/data/0")
        start = info.header_offset + 30 + len(info.filename) + struct.unpack(
            "<H", buf.getvalue()[info.header_offset + 28:info.header_offset + 30])[0]
        assert start % 64 == 0 and info.compress_type == zipfile.ZIP_STORED
        assert len(zf.read("archive/.data/serialization_id")) == 40


def test_save_refuses_what_it_cannot_rebuild_and_keeps_the_file(tmp_path):
    path = tmp_path / "keep.pt"
    cgrad.save({"a": 1}, path)
    before = path.read_bytes()
    for bad in (nn.Linear(2, 2), len, object(), {"f": lambda: 1}):
        with pytest.raises(TypeError, match="cannot store"):
            cgrad.save(bad, path)
    assert path.read_bytes() == before
    with pytest.raises(TypeError, match="dtype=object"):
        cgrad.save(np.array([object()]), io.BytesIO())


def test_numpy_objects_need_weights_only_false():
    obj = {"a": np.arange(6, dtype=np.int16).reshape(2, 3).T, "s": np.float32(0.25),
           "d": np.dtype("<U3"), "f": np.float64(2.5), "fs": frozenset([1])}
    buf = io.BytesIO()
    cgrad.save(obj, buf)
    buf.seek(0)
    msg = load_err(buf, "Unsupported global: GLOBAL numpy")
    assert "weights_only=False" in msg
    buf.seek(0)
    r = cgrad.load(buf, weights_only=False)
    assert r["a"].tolist() == obj["a"].tolist() and r["a"].dtype == np.int16
    assert type(r["s"]) is np.float32 and r["s"] == 0.25 and type(r["f"]) is np.float64
    assert r["d"] == np.dtype("<U3") and r["fs"] == frozenset([1])
    # object arrays and structured dtypes are refused even then
    bad = pickle.dumps(np.array([object()]), protocol=2)
    load_err(archive(bad), "numpy|NumPy|plain", weights_only=False)


def test_old_npz_archives_still_load():
    # written by cgrad.save before it wrote torch's format (commit e2b271d)
    data = zlib.decompress(base64.b64decode(OLD_NPZ))
    r = cgrad.load(io.BytesIO(data))
    assert r["model"]["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and r["same"] is r["model"]["w"]
    assert type(r["p"]) is nn.Parameter and r["epoch"] == 3 and r["arr"].dtype == np.int16
    assert r["t"] == (1, "x") and r["c"] == 1 + 2j


def test_mmap(tmp_path):
    path = tmp_path / "m.pt"
    cgrad.save({"w": cgrad.arange(10, dtype=cgrad.float32), "b": cgrad.ones(3)}, path)
    before = path.read_bytes()
    r = cgrad.load(path, mmap=True)
    assert r["w"].tolist() == list(range(10)) and isinstance(r["w"]._data.base, np.ndarray)
    r["w"].data[0] = 100.0                       # copy on write: the file is unchanged
    assert path.read_bytes() == before
    again = tmp_path / "again.pt"                # each storage is its own, not the whole map
    cgrad.save(r, again)
    assert again.stat().st_size == len(before)
    assert cgrad.load(again)["w"].tolist()[:2] == [100, 1]
    with pytest.raises(ValueError, match="file path"):
        cgrad.load(io.BytesIO(before), mmap=True)
    cgrad.save({"w": cgrad.ones(1)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="mmap can only be used"):
        cgrad.load(path, mmap=True)


def test_file_objects(tmp_path):
    class Stream(io.RawIOBase):               # readable, not seekable
        def __init__(self, data):
            self.b = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, m):
            return self.b.readinto(m)

    buf = io.BytesIO()
    cgrad.save({"w": cgrad.ones(2)}, buf)
    assert cgrad.load(Stream(buf.getvalue()))["w"].tolist() == [1, 1]
    p = pathlib.Path(tmp_path) / "f.pt"
    cgrad.save([1, 2], os.fspath(p).encode())
    assert cgrad.load(p) == [1, 2]
    with pytest.raises(TypeError, match="unexpected keyword"):
        cgrad.load(p, bogus=1)
    with pytest.raises(ValueError, match="pickle_module"):
        cgrad.load(p, pickle_module=pickle)


# -- safetensors -----------------------------------------------------------------------------------
def _st_tensors():
    return {"a": cgrad.randn(3, 4), "t": cgrad.randn(4, 3).t(), "i": cgrad.arange(5),
            "b": cgrad.tensor([True, False]), "h": cgrad.ones(2, dtype=cgrad.float16),
            "z": cgrad.tensor(2.5), "e": cgrad.zeros(0, 3),
            "c": cgrad.tensor([1 + 1j], dtype=cgrad.complex64),
            "u8": cgrad.tensor([7], dtype=cgrad.uint8)}


def test_safetensors_round_trip(tmp_path):
    t = _st_tensors()
    st.save_file(t, tmp_path / "a.safetensors", metadata={"format": "pt"})
    for r in (st.load_file(tmp_path / "a.safetensors"), st.load(st.save(t))):
        assert sorted(r) == sorted(t)
        for k in t:
            assert r[k].dtype == t[k].dtype and tuple(r[k].shape) == tuple(t[k].shape), k
            np.testing.assert_array_equal(r[k].numpy(), t[k].numpy())
    assert st.metadata_of(tmp_path / "a.safetensors") == {"format": "pt"}
    r = st.load_file(tmp_path / "a.safetensors")
    r["a"].data[0, 0] = 5.0                      # writable, and each tensor its own storage
    buf, ref = io.BytesIO(), io.BytesIO()
    cgrad.save({"a": r["a"]}, buf)
    cgrad.save({"a": r["a"].clone()}, ref)
    assert len(buf.getvalue()) == len(ref.getvalue())
    data = (tmp_path / "a.safetensors").read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    assert n % 8 == 0 and json.loads(data[8:8 + n])["__metadata__"] == {"format": "pt"}


def _st_file(head, data=b""):
    text = json.dumps(head).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize("data,match", [
    (b"\x01\x02", "fewer than its 8-byte"),
    (struct.pack("<Q", 10 ** 12) + b"{}", "limit"),
    (struct.pack("<Q", 1000) + b"{}", "declares 1000 bytes"),
    (struct.pack("<Q", 2) + b"{x", "not valid JSON"),
    (_st_file([]), "not a JSON object"),
    (_st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),
     "ends at byte 8"),
    (_st_file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
     "needs 12 bytes"),
    (_st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
               "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
     "overlap"),
    (_st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
     "gap"),
    (_st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
     "cover 4"),
    (_st_file({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}, b"\0" * 2),
     "BF16"),
    (_st_file({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 2]}}, b"\0" * 2),
     "unknown dtype"),
    (_st_file({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}), "shape"),
    (_st_file({"a": {"dtype": "F32", "shape": [1]}}), "data_offsets"),
    (_st_file({"__metadata__": {"k": 1}}), "__metadata__"),
])
def test_safetensors_bad_files(tmp_path, data, match):
    with pytest.raises(st.SafetensorError, match=match):
        st.load(data)
    p = tmp_path / "bad.safetensors"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=match):
        st.load_file(p)


def test_safetensors_bad_input():
    with pytest.raises(TypeError, match="dict of str to str"):
        st.save({"a": cgrad.ones(1)}, metadata={"k": 1})
    with pytest.raises(TypeError, match="names must be str"):
        st.save({1: cgrad.ones(1)})
    with pytest.raises(TypeError, match="not a dense tensor"):
        st.save({"a": np.ones(2)})
    with pytest.raises(AssertionError):
        st.load_file(__file__, device="cuda")


def test_safetensors_package_interop(tmp_path):
    snp = pytest.importorskip("safetensors.numpy")
    t = _st_tensors()
    st.save_file(t, tmp_path / "c.safetensors", metadata={"k": "v"})
    r = snp.load_file(str(tmp_path / "c.safetensors"))
    for k in t:
        np.testing.assert_array_equal(r[k], t[k].numpy())
        assert r[k].dtype == t[k].numpy().dtype and r[k].shape == tuple(t[k].shape)
    arrays = {k: v.numpy() for k, v in t.items()}
    snp.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                  str(tmp_path / "d.safetensors"), metadata={"x": "y"})
    r = st.load_file(tmp_path / "d.safetensors")
    for k in t:
        np.testing.assert_array_equal(r[k].numpy(), arrays[k])
    assert st.metadata_of(tmp_path / "d.safetensors") == {"x": "y"}
    r = st.load(snp.save({"q": np.arange(3.0)}))
    assert r["q"].tolist() == [0, 1, 2]


def test_safetensors_torch_interop(tmp_path):
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    tt = {"x": torch.randn(2, 3), "i": torch.arange(4, dtype=torch.int32),
          "b": torch.tensor([True, False]), "h": torch.ones(2, dtype=torch.float16)}
    stt.save_file(tt, str(tmp_path / "t.safetensors"))
    r = st.load_file(tmp_path / "t.safetensors")
    for k in tt:
        np.testing.assert_array_equal(r[k].numpy(), tt[k].numpy())
    back = stt.load(st.save(r))
    for k in tt:
        assert torch.equal(back[k], tt[k])
    stt.save_file({"bf": torch.ones(2, dtype=torch.bfloat16)}, str(tmp_path / "bf.safetensors"))
    with pytest.raises(st.SafetensorError, match="BF16"):
        st.load_file(tmp_path / "bf.safetensors")


# -- torch as the oracle -------------------------------------------------------------------------
def _torch_models(torch):
    torch.manual_seed(0)
    tn = torch.nn
    return tn.ModuleDict({"lin": tn.Linear(3, 4), "emb": tn.Embedding(5, 3),
                          "ln": tn.LayerNorm(4), "bn": tn.BatchNorm1d(4)})


def _cgrad_models():
    return nn.ModuleDict({"lin": nn.Linear(3, 4), "emb": nn.Embedding(5, 3),
                          "ln": nn.LayerNorm(4), "bn": nn.BatchNorm1d(4)})


def _forward(m, lib, x, idx):
    h = m["lin"](x) + m["emb"](idx).sum(1).matmul(lib.ones(3, 4))
    return m["bn"](m["ln"](h))


def _train_torch(torch, m):
    m.train()
    for _ in range(3):
        _forward(m, torch, torch.randn(6, 3), torch.randint(0, 5, (6, 2))).sum().backward()


def _optimizers(lib, params):
    return [lib.optim.Adam(params, lr=0.01), lib.optim.AdamW(params, lr=0.01),
            lib.optim.SGD(params, lr=0.01, momentum=0.9)]


CHILD = textwrap.dedent("""
    import sys, json
    sys.modules["torch"] = None                      # prove that no torch is needed
    import numpy as np
    import cgrad
    try:
        import torch
        raise SystemExit("torch importable")
    except ImportError:
        pass
    folder = sys.argv[1]
    want = np.load(folder + "/want.npz")
    meta = json.load(open(folder + "/meta.json"))
    for fmt in ("zip", "legacy"):
        r = cgrad.load(folder + f"/zoo_{fmt}.pt")
        for k, (dtype, shape, stride, offset, rg, kind) in meta.items():
            t = r[k]
            assert type(t).__name__ == kind, (k, type(t))
            assert str(t.dtype) == dtype and list(t.shape) == shape, (k, t.dtype, t.shape)
            assert t.requires_grad == rg, k
            a = t.detach().numpy()
            np.testing.assert_array_equal(a, want[k], err_msg=k)
            if a.size:
                assert [s // a.itemsize for s in t._data.strides] == stride, (k, t._data.strides)
        assert np.shares_memory(r["w"]._data, r["view"]._data)
        assert np.shares_memory(r["w"]._data, r["row"]._data)
        m = cgrad.load(folder + f"/model_{fmt}.pt")
        for k, v in m.items():
            np.testing.assert_array_equal(v.numpy(), want["model." + k], err_msg=k)
            assert str(v.dtype) == str(want["model." + k].dtype), k
    print("OK")
""")


def test_torch_save_then_cgrad_load_without_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    w = torch.arange(12.0).reshape(3, 4)
    zoo = {"w": w, "view": w.t()[1:], "row": w[1], "col": w[:, 2],
           "p": torch.nn.Parameter(torch.randn(2, 3)), "g": torch.ones(2, requires_grad=True),
           "zero_d": torch.tensor(2.5), "empty": torch.zeros(0, 4),
           "f16": torch.tensor([1.5, -2.0], dtype=torch.float16),
           "f64": torch.tensor([1e-300], dtype=torch.float64), "b": torch.tensor([True, False]),
           "u8": torch.tensor([0, 255], dtype=torch.uint8),
           "c64": torch.tensor([1 + 2j], dtype=torch.complex64),
           "c128": torch.tensor([3 - 4j], dtype=torch.complex128)}
    for dt in (torch.int8, torch.int16, torch.int32, torch.int64):
        zoo[str(dt)[6:]] = torch.tensor([1, -2, 3], dtype=dt)
    m = _torch_models(torch)
    _train_torch(torch, m)
    sd = m.state_dict()
    want = {k: v.detach().numpy() for k, v in zoo.items()}
    want.update({"model." + k: v.numpy() for k, v in sd.items()})
    np.savez(tmp_path / "want.npz", **want)
    meta = {k: (str(v.dtype).replace("torch.", ""), list(v.shape), list(v.stride()),
                v.storage_offset(), v.requires_grad,
                "Parameter" if isinstance(v, torch.nn.Parameter) else "Tensor")
            for k, v in zoo.items()}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    for fmt, new in (("zip", True), ("legacy", False)):
        torch.save(zoo, tmp_path / f"zoo_{fmt}.pt", _use_new_zipfile_serialization=new)
        torch.save(sd, tmp_path / f"model_{fmt}.pt", _use_new_zipfile_serialization=new)
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-3000:]


@pytest.mark.parametrize("zip_format", [True, False])
def test_torch_model_into_cgrad_model(tmp_path, zip_format):
    torch = pytest.importorskip("torch")
    tm = _torch_models(torch)
    _train_torch(torch, tm)
    path = tmp_path / "m.pt"
    torch.save(tm.state_dict(), path, _use_new_zipfile_serialization=zip_format)
    sd = cgrad.load(path)
    assert type(sd) is OrderedDict and sd["bn.num_batches_tracked"].dtype == cgrad.int64
    cm = _cgrad_models()
    cm.load_state_dict(sd)
    tm.eval()
    cm.eval()
    x, idx = np.random.randn(4, 3).astype(np.float32), np.random.randint(0, 5, (4, 2))
    with torch.no_grad():
        want = _forward(tm, torch, torch.tensor(x), torch.tensor(idx)).numpy()
    got = _forward(cm, cgrad, cgrad.tensor(x), cgrad.tensor(idx)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cgrad_model_into_torch_model(tmp_path):
    torch = pytest.importorskip("torch")
    cm = _cgrad_models()
    cm.train()
    for _ in range(3):
        _forward(cm, cgrad, cgrad.randn(6, 3), cgrad.randint(0, 5, (6, 2))).sum().backward()
    path = tmp_path / "m.pt"
    cgrad.save(cm.state_dict(), path)
    sd = torch.load(path, weights_only=True)
    assert sd["bn.num_batches_tracked"].dtype == torch.int64 and int(
        sd["bn.num_batches_tracked"]) == 3
    tm = _torch_models(torch)
    tm.load_state_dict(sd)
    for k, v in cm.state_dict().items():
        assert sd[k].dtype == getattr(torch, str(v.dtype)) and tuple(sd[k].shape) == v.shape
        np.testing.assert_array_equal(sd[k].numpy(), v.numpy())
    tm.eval()
    cm.eval()
    x, idx = np.random.randn(4, 3).astype(np.float32), np.random.randint(0, 5, (4, 2))
    with torch.no_grad():
        want = _forward(tm, torch, torch.tensor(x), torch.tensor(idx)).numpy()
    got = _forward(cm, cgrad, cgrad.tensor(x), cgrad.tensor(idx)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("zip_format", [True, False])
def test_cgrad_zoo_into_torch(tmp_path, zip_format):
    torch = pytest.importorskip("torch")
    z = _zoo()
    path = tmp_path / "zoo.pt"
    cgrad.save(z, path, _use_new_zipfile_serialization=zip_format)
    r = torch.load(path, weights_only=True)
    assert list(r) == list(z)
    for k, v in z.items():
        if not isinstance(v, cgrad.Tensor):
            want = {"dt": torch.float64, "size": torch.Size([2, 3]),
                    "dev": torch.device("cpu")}.get(k, v)
            assert r[k] == want, k
            continue
        t = r[k]
        assert t.dtype == getattr(torch, str(v.dtype)) and tuple(t.shape) == tuple(v.shape), k
        assert t.requires_grad == v.requires_grad, k
        assert isinstance(t, torch.nn.Parameter) == isinstance(v, nn.Parameter), k
        if v.is_sparse:
            assert t.is_sparse
            t, v = t.to_dense(), v.to_dense()
        np.testing.assert_array_equal(t.detach().numpy(), v.detach().numpy(), err_msg=k)
        if t.numel() and not t.is_sparse:
            assert list(t.stride()) == [s // v._data.itemsize for s in v._data.strides], k
    ptr = r["w"].untyped_storage().data_ptr()
    for k in ("t", "row", "col"):
        assert r[k].untyped_storage().data_ptr() == ptr, k
    assert r["row"].storage_offset() == 4 and r["col"].storage_offset() == 2
    assert r["t"].stride() == (1, 4)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_optimizer_state_round_trip(tmp_path, which):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(which)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    cp, tp = nn.Parameter(cgrad.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    co, to = _optimizers(cgrad, [cp])[which], _optimizers(torch, [tp])[which]

    def step(o, p, lib, g):
        o.zero_grad()
        (p * lib.tensor(g)).sum().backward()
        o.step()

    for _ in range(3):
        g = rng.standard_normal((3, 2)).astype(np.float32)
        step(co, cp, cgrad, g)
        step(to, tp, torch, g)
    # cgrad -> torch: torch's optimizer accepts cgrad's state dict
    cgrad.save({"opt": co.state_dict(), "w": cp}, tmp_path / "c.pt")
    ck = torch.load(tmp_path / "c.pt", weights_only=True)
    ts = to.state_dict()
    assert ck["opt"]["param_groups"] == ts["param_groups"]
    assert set(ck["opt"]["state"][0]) == set(ts["state"][0])
    for k, v in ts["state"][0].items():
        assert ck["opt"]["state"][0][k].dtype == v.dtype, k
        np.testing.assert_allclose(ck["opt"]["state"][0][k].numpy(), v.numpy(), rtol=1e-6)
    tp2 = torch.nn.Parameter(ck["w"].detach().clone())
    to2 = _optimizers(torch, [tp2])[which]
    to2.load_state_dict(ck["opt"])
    # torch -> cgrad
    torch.save({"opt": to.state_dict(), "w": tp}, tmp_path / "t.pt")
    tk = cgrad.load(tmp_path / "t.pt")
    cp2 = nn.Parameter(tk["w"].detach().clone())
    co2 = _optimizers(cgrad, [cp2])[which]
    co2.load_state_dict(tk["opt"])
    for _ in range(2):
        g = rng.standard_normal((3, 2)).astype(np.float32)
        for o, p, lib in ((co, cp, cgrad), (to, tp, torch), (to2, tp2, torch),
                          (co2, cp2, cgrad)):
            step(o, p, lib, g)
    for p in (tp, tp2, cp2):
        np.testing.assert_allclose(p.detach().numpy(), cp.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_torch_refusals_and_bfloat16(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "bf.pt"
    torch.save({"w": torch.ones(2, dtype=torch.bfloat16)}, path)
    load_err(path, "no bfloat16 dtype")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "mod.pt")
    load_err(tmp_path / "mod.pt", "Unsupported global: GLOBAL torch.nn.modules.linear.Linear")
    torch.save({"a": np.ones(2)}, tmp_path / "np.pt")
    load_err(tmp_path / "np.pt", "GLOBAL numpy")
    assert cgrad.load(tmp_path / "np.pt", weights_only=False)["a"].tolist() == [1, 1]


OLD_NPZ = (
    "eNrNVzFv00AUviQliEggBqQOMJgyBFBaxXYCpUKQCQlFlDB0QFVlGdtJA44d2U6hlEoZUNQRAUPExMrIxgYrC/wO"
    "JhB/AN6Rd+LuZNcuTVGcvFx89773vnf3fH7XahbmFsnkOk+e3Xh57hdeRXKGmNUlr7+dI6fJHuqw9tXq2p3W/RzZ"
    "Ijtl2wmtoLyilK+3a+WKUm77QRSYnuEHtkP7b5lu6EB/uGn2Hbi/qFUuVZRd5RBXiZDhTSotgf/db+SywF9l/Meo"
    "M54Of0U/XASlCQsaA2nAF2QI8rYhxvPw6897Qjwai2eEOqN94+lqmeLRp7EeOZInIvvn7958F9jrs5tNhGbTR5H/"
    "hQ8/XIF/7WD8u8uZ+B+WPfA/jjxE/p+V1+8Z/3ngbxhWJzBtI4yCgRUNAscwWEBzJyYg1sYHtFav1f9LSKUd4LAA"
    "0gbxQQKQHogJEuHYCrYWSAd16LgNQifBA+mDPEW9CrZbIA7qhyBd9OFxdjVOP8BxX/LNODa4virILof1EGejz5DT"
    "XedsyDHZyMvixpjNLvY5OCeyzXW870m+Xc5OHHcVuW+gDrPTT8FpCbgQ16OH/vezoSfYcNC/j3OxydnRY/RdXC+m"
    "Q9djCWOTdU3UDVK41RK4WSm4egIuSsFdScB1MZ/aKfirHH6Dy8ekXPOnlG+P/3GNH6TglhNwXgru2gHngcXoYYy+"
    "lBtsL+hwuAj7BoitcM+Mye1JvQyYRxIfE/N34Yi4t9GHi5g0LmpGLh7mE/980f/bEp84H1pGHxbG2MO5dpH/k5iY"
    "HQmr4p5QjcnznqSrSbpZ1mEgcZLfPfyzo3JjjHuWXG2jfV96J8b5ids7ZiGf9BniUuO4sPlvNXP5xYJ4ONrDoq9I"
    "/l7DHP2dHJVkDD2QjPHYIWI+UYwah6FF/whLexHzAjxNjgAyhpba8dxW8wQLbxlDy9t4zKkCwWJXxtCSktaIVOYF"
    "zBfAJBSYreaxP/aL8LkNIZw9Se9+A+kr2Us="
)
