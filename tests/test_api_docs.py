"""help(), inspect and IDEs see cgrad's public functions and methods as torch's: documented
routines with torch's parameter names (Note [Public callables] in cgrad/_api.py); the
autograd.Function base documents its API; messages name cgrad, not torch or pytorch.org."""
from __future__ import annotations

import ast
import inspect
import pickle
import pydoc
import re
from pathlib import Path

import pytest

import cgrad
import cgrad.autograd
import cgrad.nn.functional as F
from cgrad import _api

FUNCTIONS = [(cgrad, n) for n in _api.function_names()] + [(F, n) for n in F.__all__]
METHODS = sorted(n for n, v in vars(cgrad.Tensor).items()
                 if not n.startswith("_") and isinstance(v, _api.TensorFunction))


def _sections(module):
    text = pydoc.render_doc(module, renderer=pydoc.plaintext)
    funcs = text[text.index("\nFUNCTIONS\n"):]
    data = funcs[funcs.index("\nDATA\n"):] if "\nDATA\n" in funcs else ""
    return funcs[: len(funcs) - len(data)], data


def test_help_lists_the_functions_with_signatures():
    funcs, data = _sections(cgrad)
    for text in ("matmul(input, other, *, out=None)",
                 "sum(input, dim=None, keepdim=False, *, dtype=None, out=None)",
                 "sum(input, dim=None, keepdim=False, *, dtype=None, out=None) -> Tensor",
                 "reshape(input, shape)", "tensor(", "zeros(",
                 "absolute = abs(input, *, out=None)"):
        assert text in funcs, text
    listed = set(re.findall(r"^    (\w+)(?:\(| = )", funcs, re.M))
    assert {n for _, n in FUNCTIONS[: len(_api.function_names())]} <= listed
    assert "<function" not in data and "TensorFunction" not in data


def test_help_lists_nn_functional():
    funcs, _ = _sections(F)
    for name in F.__all__:
        assert re.search(rf"^    {name}\(", funcs, re.M), name


@pytest.mark.parametrize("mod,name", FUNCTIONS, ids=[f"{m.__name__}.{n}" for m, n in FUNCTIONS])
def test_function_metadata(mod, name):
    f = getattr(mod, name)
    assert inspect.isroutine(f) and callable(f)
    assert f.__module__ == mod.__name__
    assert f.__qualname__ == name
    sig = inspect.signature(f)
    assert sig == inspect.signature(inspect.unwrap(f))
    doc = f.__doc__
    head, summary = doc.split("\n\n")[:2]
    assert head.startswith(f"{name}{sig} -> "), head
    assert summary.strip() and not summary.startswith(name + "(")
    for p in sig.parameters.values():
        star = "*" if p.kind == p.VAR_POSITIONAL else ("**" if p.kind == p.VAR_KEYWORD else "")
        assert re.search(rf"^    {re.escape(star + p.name)}( \(.*?\))?: \S", doc, re.M), (
            f"{name}: parameter {p.name} is not documented")
    assert pickle.loads(pickle.dumps(f)) is f
    assert pydoc.render_doc(f, renderer=pydoc.plaintext)


@pytest.mark.parametrize("name", METHODS)
def test_method_metadata(name):
    m = getattr(cgrad.Tensor, name)
    assert inspect.isroutine(m) and m.__module__ == "cgrad"
    assert m.__qualname__ == f"Tensor.{name}"
    sig = inspect.signature(m)
    assert next(iter(sig.parameters)) == "self"
    x = cgrad.tensor([1.0, 2.0])
    bound = getattr(x, name)
    assert bound.__self__ is x and "self" not in inspect.signature(bound).parameters
    head, summary = m.__doc__.split("\n\n")[:2]
    assert head.startswith(f"{name}(") and " -> " in head
    assert summary.strip()
    assert pickle.loads(pickle.dumps(m)) is m


def test_methods_bind_like_functions():
    x = cgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.sum(axis=0).tolist() == [4.0, 6.0]
    assert cgrad.Tensor.sum(x).item() == 10.0
    f = x.sum
    assert f(1).tolist() == [3.0, 7.0]
    assert f.__func__ is cgrad.Tensor.sum


FUNCTION_API = ["forward", "backward", "setup_context", "save_for_backward", "mark_dirty",
                "mark_non_differentiable", "set_materialize_grads", "needs_input_grad",
                "saved_tensors", "apply", "vjp", "jvp"]


def test_function_base_is_documented():
    text = pydoc.render_doc(cgrad.autograd.Function, renderer=pydoc.plaintext)
    assert "cython" not in text.lower()
    for name in FUNCTION_API:
        attr = inspect.getattr_static(cgrad.autograd.Function, name)
        doc = inspect.getdoc(getattr(cgrad.autograd.Function, name)) or inspect.getdoc(attr)
        assert doc and len(doc) > 40, name
        first = doc.splitlines()[0]
        assert first in text, name


def test_function_context_methods_work_on_the_ctx():
    class Twice(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            cgrad.autograd.Function.save_for_backward(ctx, x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2

    x = cgrad.tensor([1.0, 3.0], requires_grad=True)
    Twice.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


# -- messages ----------------------------------------------------------------------------------
ROOT = Path(cgrad.__file__).parent
# torch as an API name (torch.cat(), torch.uint8), or torch's web site and tracker
BAD = re.compile(r"pytorch\.org|github\.com/pytorch|\btorch\.\w")


def _string_constants(path):
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)):
            docs.add(id(body[0].value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs):
            yield node.lineno, node.value


def test_messages_name_cgrad():
    """No string in cgrad's Python code (docstrings aside) sends the user to pytorch.org or
    torch's tracker, or names a torch.* API where cgrad's is meant."""
    found = []
    # the modules that read and write torch's checkpoint files name torch's globals and
    # torch.save / torch.load as such (torch's API is what is meant there)
    torch_format = {"serialization.py", "_torch_pickle.py", "_torch_archive.py"}
    for path in sorted(ROOT.rglob("*.py")):
        if str(path.relative_to(ROOT)) in torch_format:
            continue
        for line, s in _string_constants(path):
            if BAD.search(s):
                found.append(f"{path.relative_to(ROOT)}:{line}: {s[:80]!r}")
    for path in sorted([*ROOT.glob("*.pyx"), *ROOT.glob("*.pxi")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if '"' in code and re.search(r"pytorch\.org|github\.com/pytorch", code):
                found.append(f"{path.name}:{n}")
    assert found == []


def test_reworded_messages_keep_torchs_phrases():
    x = cgrad.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"^cgrad\.clamp: At least one of 'min' or 'max' "
                                           r"must not be None"):
        cgrad.clamp(x)
    with pytest.raises(RuntimeError, match=r"cgrad\.meshgrid: indexing must be one of"):
        cgrad.meshgrid(x, indexing="zz")
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward "
                                           "method is deprecated"):
        class Old(cgrad.autograd.Function):
            pass
        Old.__call__(object())
