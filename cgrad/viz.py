"""A picture of the backward graph: ``make_dot(output, params=None)`` (torchviz's API).

>>> import cgrad
>>> from cgrad.viz import make_dot
>>> w = cgrad.tensor([1.0, 2.0], requires_grad=True)
>>> dot = make_dot((w * 3).sum(), params={"w": w})
>>> print(dot.source.splitlines()[0])
digraph {

The result holds Graphviz DOT text (``.source``, also ``str(dot)``); nothing beyond cgrad is
needed to build it. ``dot.render("graph", format="png")`` writes ``graph.png`` with the
optional ``graphviz`` Python package, or the ``dot`` program alone when only that is
installed; without either it raises a RuntimeError that says what to install.

Nodes: the outputs (green, with their shapes), each backward node by its name
(``MulBackward0``), its saved tensors (orange, with shapes) while the graph is alive, and one
AccumulateGrad per leaf (blue, with the parameter's name from ``params`` and its shape).
The walk is iterative (no recursion), so graphs of any depth can be drawn.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from cgrad._C import AccumulateGrad, TensorBase

__all__ = ["make_dot", "DotGraph"]


def _shape(t):
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def _esc(s):
    return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class DotGraph:
    """DOT text of a graph, renderable to an image."""

    def __init__(self, source):
        self.source = source

    def __str__(self):
        return self.source

    def __repr__(self):
        return f"DotGraph({self.source.count(' -> ')} edges)"

    def _repr_svg_(self):  # pragma: no cover - notebooks
        try:
            return self.pipe("svg").decode()
        except RuntimeError:
            return None

    def pipe(self, format="svg"):
        """The rendered image as bytes."""
        try:
            import graphviz
        except ImportError:
            graphviz = None
        if graphviz is not None:
            try:
                return graphviz.Source(self.source).pipe(format=format)
            except graphviz.ExecutableNotFound as e:
                raise RuntimeError(_NO_DOT) from e
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError(_NO_DOT)
        return subprocess.run([exe, f"-T{format}"], input=self.source.encode(),
                              capture_output=True, check=True).stdout

    def render(self, path, format="png"):
        """Write the graph as an image to ``path.<format>`` (``path`` if it already has that
        extension) and the DOT text to ``path`` + ``.gv``; returns the image's path."""
        out = path if path.endswith("." + format) else f"{path}.{format}"
        data = self.pipe(format)
        with open(out, "wb") as f:
            f.write(data)
        with open(os.path.splitext(out)[0] + ".gv", "w") as f:
            f.write(self.source)
        return out


_NO_DOT = ("rendering needs Graphviz's `dot` program: install it (Debian/Ubuntu: "
           "`apt install graphviz`; macOS: `brew install graphviz`), and optionally the "
           "Python package (`pip install graphviz`). make_dot(...).source works without it.")


def make_dot(var, params=None, show_attrs=False, show_saved=True, max_attr_chars=50):
    """DOT picture of the backward graph of ``var`` (a Tensor or a sequence of Tensors).

    params: dict name -> Tensor (e.g. ``dict(model.named_parameters())``) to label leaves.
    """
    names = {}
    if params is not None:
        for k, v in dict(params).items():
            names[id(v)] = k
    outputs = list(var) if isinstance(var, (list, tuple)) else [var]
    lines = ["digraph {",
             '\tgraph [rankdir=TB size="12,12"]',
             '\tnode [align=left fontname=monospace fontsize=10 height=0.2 ranksep=0.1 '
             'shape=box style=filled]']
    seen = set()

    def node_id(obj):
        return f"n{id(obj)}"

    stack = []
    for o in outputs:
        if not isinstance(o, TensorBase):
            raise TypeError(f"make_dot expects Tensors, got {type(o).__name__}")
        lines.append(f'\t{node_id(o)} [label="output\\n{_shape(o)}" fillcolor=darkolivegreen1]')
        if o.grad_fn is not None:
            lines.append(f"\t{node_id(o.grad_fn)} -> {node_id(o)}")
            stack.append(o.grad_fn)
        elif o.requires_grad:
            acc = o._accumulator()
            if acc is not None:
                lines.append(f"\t{node_id(acc)} -> {node_id(o)}")
                stack.append(acc)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, AccumulateGrad):
            v = fn.variable
            label = names.get(id(v), "")
            label = (label + "\n" if label else "") + _shape(v)
            lines.append(f'\t{node_id(fn)} [label="{_esc(label)}" fillcolor=lightblue]')
            continue
        lines.append(f'\t{node_id(fn)} [label="{_esc(type(fn).__name__)}" '
                     f'fillcolor=lightgrey]')
        if show_saved:
            try:
                saved = fn.saved_tensors
            except (RuntimeError, AttributeError):
                saved = ()
            for i, s in enumerate(saved):
                if s is None:
                    continue
                sid = f"n{id(fn)}s{i}"
                lines.append(f'\t{sid} [label="saved {i}\\n{_shape(s)}" fillcolor=orange]')
                lines.append(f"\t{sid} -> {node_id(fn)} [dir=none]")
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            lines.append(f"\t{node_id(nxt)} -> {node_id(fn)}")
            if id(nxt) not in seen:
                stack.append(nxt)
    lines.append("}")
    return DotGraph("\n".join(lines) + "\n")
