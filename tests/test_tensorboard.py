"""cgrad.utils.tensorboard.SummaryWriter: cgrad tensors logged through tensorboardX, read back
from the event files (TFRecord framing, tensorboardX's own Event protobuf: no TensorBoard
needed to check them)."""
from __future__ import annotations

import glob
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import cgrad

tbx = pytest.importorskip("tensorboardX")
from tensorboardX.proto import event_pb2  # noqa: E402

from cgrad.utils.tensorboard import SummaryWriter  # noqa: E402


def _events(log_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(log_dir, "**", "events.out.tfevents.*"),
                                 recursive=True)):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack_from("<Q", data, pos)
            rec = data[pos + 12:pos + 12 + n]
            pos += 12 + n + 4
            out.append((os.path.relpath(path, log_dir), event_pb2.Event.FromString(rec)))
    return out


def _values(log_dir):
    vals = {}
    for path, ev in _events(log_dir):
        for v in ev.summary.value:
            vals.setdefault(v.tag, []).append((path, ev.step, v))
    return vals


def test_scalars_histograms_text_and_hparams_from_cgrad_tensors(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        assert w.get_logdir() == str(tmp_path)
        for step in range(3):
            w.add_scalar("loss/train", cgrad.tensor(1.5 - step, dtype=cgrad.float64), step)
        w.add_scalar("lr", 0.25, 7)
        w.add_scalars("run", {"a": cgrad.tensor(2.0), "b": 3.0}, 1)
        w.add_histogram("weights", cgrad.arange(10, dtype=cgrad.float32), 5)
        w.add_histogram("params", cgrad.nn.Linear(4, 3).weight, 6)   # requires grad: detached
        w.add_text("note", "hello", 2)
        w.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hp/acc": cgrad.tensor(0.75)})
    vals = _values(str(tmp_path))
    loss = [(s, v.simple_value) for p, s, v in vals["loss/train"]]
    assert loss == [(0, 1.5), (1, 0.5), (2, -0.5)]
    assert [(s, v.simple_value) for _, s, v in vals["lr"]] == [(7, 0.25)]
    # add_scalars: one sub-directory per key, as torch
    sub = {p.split(os.sep)[0]: v.simple_value for p, _, v in vals["run"]}
    assert sub == {"run_a": 2.0, "run_b": 3.0}
    (_, step, h), = vals["weights"]
    assert step == 5 and h.histo.num == 10 and h.histo.min == 0.0 and h.histo.max == 9.0
    assert h.histo.sum == 45.0
    assert vals["params"][0][2].histo.num == 12
    assert "note/text_summary" in vals
    assert np.isclose(vals["hp/acc"][0][2].simple_value, 0.75)


def test_embedding_and_nested_tensors(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_embedding(cgrad.randn(6, 4), metadata=[str(i) for i in range(6)], tag="emb")
        w.add_pr_curve("pr", cgrad.tensor([1, 0, 1, 1]), cgrad.tensor([0.9, 0.2, 0.6, 0.4]), 0)
    files = os.listdir(str(tmp_path))
    assert "projector_config.pbtxt" in files
    tsv = glob.glob(os.path.join(str(tmp_path), "**", "tensors.tsv"), recursive=True)
    with open(tsv[0]) as f:
        assert len(f.read().strip().splitlines()) == 6
    assert "pr" in _values(str(tmp_path))


def test_default_log_dir_comment_and_unsupported_graph(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp1")
    try:
        d = w.get_logdir()
        assert d.startswith("runs" + os.sep) and d.endswith("_exp1")
        assert "cgrad.utils.tensorboard.SummaryWriter" in repr(w)
        with pytest.raises(NotImplementedError, match="TorchScript"):
            w.add_graph(cgrad.nn.Linear(2, 2), cgrad.ones(1, 2))
    finally:
        w.close()


def test_missing_writer_says_what_to_install(tmp_path):
    # tensorboardX made unimportable in a fresh interpreter
    code = ("import sys; sys.modules['tensorboardX'] = None\n"
            "try:\n    import cgrad.utils.tensorboard\n"
            "except ImportError as e:\n    print('ERR', e)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path), timeout=120)
    assert "ERR" in r.stdout and "pip install tensorboardX" in r.stdout, r.stdout + r.stderr
