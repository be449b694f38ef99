"""bench/models.py (benchmark workload 9, training steps of real models) at --quick sizes:
every model runs on cgrad alone (the CI smoke test needs no torch), and with torch its check
before timing passes on torch's weights and fails when the weights are not copied."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "cgrad_test_bench_models", os.path.join(ROOT, "bench", "models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_models_quick_cgrad_alone():
    b = _bench()
    rows = b.run(quick=True, use_torch=False, profile_steps=1)
    assert [r["id"] for r in rows] == b.DEFAULT
    for r in rows:
        assert "error" not in r, r
        assert list(r["systems"]) == ["cgrad"]
        d = r["systems"]["cgrad"]
        assert d["cpu"]["median"] > 0 and {"fwd", "bwd", "opt", "total"} <= set(d)
        assert r["check"] == "-"
        assert 0 < len(r["profile"]["top"]) <= b.TOP
    assert "rest" in rows[b.DEFAULT.index("gcn")]["systems"]["cgrad"]   # validation forward
    text = b.render(rows)
    assert "nanoGPT-tiny" in text and "cProfile" in text


def test_bench_models_match_torch():
    pytest.importorskip("torch")
    b = _bench()
    rows = b.run(quick=True, only=list(b.MODELS), profile_steps=0)
    for r in rows:
        assert "error" not in r, r
        assert r["check"] == "ok", (r["id"], r["check"])
        assert set(r["systems"]) == {"cgrad", "torch"}


def test_bench_models_check_sees_other_weights(monkeypatch):
    pytest.importorskip("torch")
    b = _bench()
    monkeypatch.setattr(b, "copy_weights", lambda *args: None)    # cgrad keeps its own init
    rows = b.run(quick=True, only=["mm-mlp"], profile_steps=0)
    assert rows[0]["check"].startswith("loss"), rows[0]["check"]
