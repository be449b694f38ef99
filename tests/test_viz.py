"""cgrad.viz.make_dot: DOT text of the backward graph, and rendering when Graphviz exists."""
from __future__ import annotations

import re
import shutil
import sys

import pytest

import cgrad
import cgrad.nn as nn
from cgrad.viz import make_dot


def _mlp_graph():
    cgrad.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    out = m(cgrad.randn(5, 3)).sum()
    return m, out, make_dot(out, params=dict(m.named_parameters()))


def test_dot_names_nodes_params_and_saved_shapes():
    m, out, dot = _mlp_graph()
    src = dot.source
    assert src.startswith("digraph {") and src.rstrip().endswith("}")
    assert str(dot) == src
    for name in ("SumBackward0", "TanhBackward0"):
        assert f'label="{name}"' in src
    assert src.count("AddmmBackward0") == 2
    for pname, p in m.named_parameters():
        shape = "(" + ", ".join(str(s) for s in p.shape) + ")"
        assert f'label="{pname}\\n{shape}"' in src
    assert 'label="saved 0\\n(5, 4)"' in src            # tanh's saved output
    assert 'label="output\\n()"' in src


def test_every_edge_joins_declared_nodes():
    _, _, dot = _mlp_graph()
    declared = set(re.findall(r"^\t(\S+) \[label=", dot.source, re.M))
    edges = re.findall(r"^\t(\S+) -> (\S+)", dot.source, re.M)
    assert edges
    for a, b in edges:
        assert a in declared and b in declared


def test_freed_graph_has_no_saved_nodes_and_deep_graphs_work():
    x = cgrad.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(20000):              # deep: the walk must not recurse
        y = y * 1.0
    dot = make_dot(y)
    assert dot.source.count("MulBackward0") == 20000
    y.backward()
    assert "saved" not in make_dot(y).source


def test_render_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    _, _, dot = _mlp_graph()
    monkeypatch.setitem(sys.modules, "graphviz", None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz's `dot` program"):
        dot.render(str(tmp_path / "g"))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_png(tmp_path):
    _, _, dot = _mlp_graph()
    path = dot.render(str(tmp_path / "graph"), format="png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "graph.gv").read_text() == dot.source


def test_rejects_non_tensors():
    with pytest.raises(TypeError, match="make_dot expects Tensors"):
        make_dot(3.0)
