"""torch's legacy API (issue 17): cgrad.Tensor(...) as a constructor, Tensor.new, the typed
classes (FloatTensor, ...), the legacy sparse constructors, Tensor.type / type_as and
cgrad.autograd.Variable, against torch 2.13 where importable.

cgrad names its types 'cgrad.FloatTensor' (as it prints cgrad.Size and cgrad.float32) where
torch says 'torch.FloatTensor'; the comparisons map one onto the other. Either spelling is
accepted by Tensor.type(name)."""
from __future__ import annotations

import numpy as np
import pytest

import cgrad
from torch_compare import check, outcome, plain

try:
    import torch
except ImportError:
    torch = None


def _run(code, phrase):
    cg = outcome(cgrad, code)
    if torch is None:
        if phrase is None:
            assert cg[0] == "ok", cg
        else:
            assert cg[0] == "raised" and phrase in cg[2], cg
        return
    check(cg, outcome(torch, code), phrase)


def _cases(rows):
    return pytest.mark.parametrize("code,phrase", rows, ids=[c for c, _ in rows])


@pytest.fixture(autouse=True)
def _default_dtype():
    yield
    cgrad.set_default_dtype(cgrad.float32)
    if torch is not None:
        torch.set_default_dtype(torch.float32)


# -- cgrad.Tensor(...) ---------------------------------------------------------------------------
TENSOR_CASES = [
    ("r = T.Tensor()", None),
    ("r = T.Tensor(2, 3).shape", None),
    ("r = T.Tensor(2, 3).dtype", None),
    ("r = T.Tensor((2, 3))", None),
    ("r = T.Tensor([2, 3])", None),
    ("r = T.Tensor([[1, 2], [3, 4]])", None),
    ("r = T.Tensor(T.Size([2, 3])).shape", None),
    ("r = T.Tensor(3).shape", None),
    ("r = T.Tensor(0).shape", None),
    ("r = T.Tensor([True, False])", None),
    ("r = T.Tensor(T.ones(2, dtype=T.int64))", None),
    ("r = T.Tensor(T.ones(2, dtype=T.float64))", None),
    ("r = T.Tensor([1], device='cpu')", None),
    ("r = T.Tensor(2, device='cpu').shape", None),
    ("r = T.Tensor(size=(2, 3)).shape", None),
    ("r = T.Tensor(np.array([1, 2]))", None),
    ("r = T.Tensor(np.array([1., 2.]))", None),
    ("r = T.Tensor([])", None),
    ("r = T.Tensor(())", None),
    # any sequence is data, as CPython's PySequence_Check says (pygcn: LongTensor(range(140)))
    ("r = T.Tensor(range(3))", None),
    ("r = T.Tensor(range(0))", None),
    ("import array; r = T.Tensor(array.array('d', [1.5, 2]))", None),
    ("import collections; r = T.Tensor(collections.deque([1, 2]))", None),
    ("r = T.Tensor(memoryview(b'ab'))", None),
    ("r = T.Tensor([range(2), range(2)])", None),
    ("r = T.ones(2).new(range(3))", None),
    ("r = isinstance(T.Tensor([1]), T.Tensor)", None),
    ("r = type(T.Tensor([1])) is T.Tensor", None),
    ("a = T.ones(2); b = T.Tensor(a); a.add_(1); r = b", None),
    ("a = T.ones(2, requires_grad=True); r = T.Tensor(a * 2).requires_grad", None),
    ("T.set_default_dtype(T.float64); r = T.Tensor([1]).dtype", None),
    ("T.set_default_dtype(T.float64); r = T.Tensor(2).dtype", None),
    # errors
    ("r = T.Tensor(3.5)", "new(): data must be a sequence (got float)"),
    ("r = T.Tensor(np.float64(2.5))", "new(): data must be a sequence (got numpy.float64)"),
    ("r = T.Tensor(None)", "new(): data must be a sequence (got NoneType)"),
    ("r = T.Tensor({1, 2})", "new(): data must be a sequence (got set)"),
    ("r = T.Tensor({1: 2})", "new(): data must be a sequence (got dict)"),
    ("r = T.Tensor(i for i in range(2))", "new(): data must be a sequence (got generator)"),
    ("r = T.Tensor('a')", "new(): invalid data type 'str'"),
    ("r = T.Tensor([1, 'a'])", ""),
    ("r = T.Tensor(-1)", "Trying to create tensor with negative dimension -1: [-1]"),
    ("r = T.Tensor(2, 3.0)", "new(): argument 'size' failed to unpack the object at pos 2 with "
                             "error \"type must be tuple of ints,but got float\""),
    ("r = T.Tensor([1], dtype=T.float64)", ""),
    ("r = T.Tensor([1], requires_grad=True)", ""),
    ("r = T.Tensor(2, device='cuda')",
     "legacy constructor expects device type: cpu but device type: cuda was passed"),
]


@_cases(TENSOR_CASES)
def test_tensor_constructor(code, phrase):
    _run(code, phrase)


def test_tensor_constructor_zero_fills_and_aliases():
    """torch.Tensor(2, 3) is uninitialised; cgrad's is zeros. Tensor(other) shares data and
    version counter with other, and its history (AliasBackward0)."""
    assert cgrad.Tensor(2, 3).tolist() == [[0.0] * 3] * 2
    a = cgrad.ones(3, requires_grad=True)
    b = cgrad.Tensor(a)
    assert type(b.grad_fn).__name__ == "AliasBackward0" and b is not a
    assert np.shares_memory(a.numpy(force=True), b.numpy(force=True))
    (b * 2).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
    c = cgrad.Tensor(a.detach())
    v = a._version
    c.add_(1)
    assert a._version == v + 1 and a.tolist() == [2.0, 2.0, 2.0]


def test_subclasses_construct_like_tensor():
    class Mine(cgrad.Tensor):
        pass

    m = Mine([1.0, 2.0])
    assert type(m) is Mine and m.tolist() == [1.0, 2.0] and m.dtype == cgrad.float32
    assert isinstance(m * 2, cgrad.Tensor)
    p = cgrad.nn.Parameter(cgrad.ones(2))        # Parameter keeps its own constructor
    assert p.requires_grad and type(p) is cgrad.nn.Parameter
    with pytest.raises(TypeError, match="sparse_coo_tensor"):
        cgrad.sparse.SparseTensor([1.0])


def test_internal_creation_does_not_run_the_constructor():
    """Ops and factories make tensors with TensorBase's tp_new, never Tensor.__new__ (Note
    [Direct tp_new] in cgrad/_C.pyx)."""
    calls = []
    orig = vars(cgrad.Tensor)["__new__"]

    def spy(cls, *a, **k):
        calls.append(a)
        return orig.__func__(cls, *a, **k)

    cgrad.Tensor.__new__ = staticmethod(spy)
    try:
        x = cgrad.ones(3, requires_grad=True)
        ((x * 2 + 1).exp().sum()).backward()
        cgrad.tensor([1.0]).to(cgrad.float64)
        cgrad.ones(2).to_sparse().to_dense()
        assert calls == []
        assert cgrad.Tensor(2).shape == (2,)
        assert calls == [(2,)]
    finally:
        cgrad.Tensor.__new__ = orig


@pytest.mark.parametrize("T", [cgrad] + ([torch] if torch is not None else []),
                         ids=lambda m: m.__name__)
def test_subclass_idioms(T):
    """The ways torch programs subclass Tensor construct the same in cgrad."""
    class WithNew(T.Tensor):
        @staticmethod
        def __new__(cls, data, tag):
            return super().__new__(cls, data)

        def __init__(self, data, tag):
            super().__init__()
            self.tag = tag

    w = WithNew([1.0, 2.0], "t")
    assert type(w) is WithNew and w.tolist() == [1.0, 2.0] and w.tag == "t"
    assert w.dtype == T.float32

    class Made(T.Tensor):
        def __new__(cls, data, requires_grad=True):
            return T.Tensor._make_subclass(cls, data, requires_grad)

    base = T.ones(2)
    m = Made(base)
    assert type(m) is Made and m.requires_grad and m.is_leaf and m.grad_fn is None
    base.add_(1)
    assert m.tolist() == [2.0, 2.0]             # shares the data
    (m * 3).sum().backward()
    assert m.grad.tolist() == [3.0, 3.0]


# -- Tensor.new ---------------------------------------------------------------------------------
NEW_CASES = [
    ("r = x.new(2, 3).shape", None),
    ("r = x.new([1, 2])", None),
    ("r = T.ones(2, dtype=T.int64).new([1, 2])", None),
    ("r = x.new()", None),
    ("r = x.new(size=(2,)).shape", None),
    ("r = x.new(T.ones(2, dtype=T.int64))", "expected TensorOptions(dtype=float, device=cpu"),
]


@_cases(NEW_CASES)
def test_tensor_new(code, phrase):
    _run("x = T.ones(2)\n" + code, phrase)


# -- the typed classes --------------------------------------------------------------------------
TYPED = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", TYPED)
def test_typed_classes(name):
    for code in (f"r = T.{name}([1, 0])", f"r = T.{name}(2, 3).shape",
                 f"r = T.{name}(2, 3).dtype", f"r = T.{name}()", f"r = T.{name}.dtype",
                 f"r = T.{name}.is_sparse", f"r = T.{name}.is_cuda", f"r = T.{name}.__name__",
                 f"r = repr(T.{name})", f"r = issubclass(T.{name}, T.Tensor)",
                 f"r = type(T.{name}([1])) is T.Tensor",
                 f"r = isinstance(T.{name}([1]), T.{name})",
                 f"r = isinstance(T.ones(1), T.{name})",
                 f"r = isinstance(T.ones(1, dtype=T.int64), T.{name})",
                 f"r = isinstance(T.{name}([1]), T.Tensor)",
                 f"r = T.{name}([1], device='cpu')",
                 f"r = T.{name}([1]).type()"):
        _run(code, None)
    _run(f"r = T.{name}(2, device='cuda')", "legacy constructor expects device type: cpu")
    _run(f"r = T.{name}('a')", "new(): invalid data type 'str'")
    _run(f"r = T.{name}([1], dtype=T.float64)", "")


TYPED_CASES = [
    ("r = T.LongTensor([1.7, 2])", None),
    ("r = T.LongTensor(range(200, 205))", None),
    ("r = T.LongTensor(range(0))", None),
    ("r = T.FloatTensor(range(3))", None),
    ("r = T.LongTensor({1, 2})", "new(): data must be a sequence (got set)"),
    ("r = T.BoolTensor([2, 0])", None),
    ("r = T.LongTensor(T.ones(2, dtype=T.int64))", None),
    ("r = T.LongTensor(T.ones(2))", "expected TensorOptions(dtype=long int, device=cpu, "
                                    "layout=Strided, requires_grad=false (default), "
                                    "pinned_memory=false (default), memory_format=(nullopt)) "
                                    "(got TensorOptions(dtype=float"),
    ("r = T.FloatTensor(T.ones(2, dtype=T.float64))",
     "expected TensorOptions(dtype=float, device=cpu"),
    ("r = isinstance(T.ones(2).to_sparse(), T.FloatTensor)", None),
]


@_cases(TYPED_CASES)
def test_typed_class_cases(code, phrase):
    _run(code, phrase)


# -- legacy sparse constructors ----------------------------------------------------------------
SPARSE_CASES = [
    "r = T.sparse.FloatTensor(i, v, T.Size([2, 2]))",
    "r = T.sparse.FloatTensor(i, v, (2, 2))",
    "r = T.sparse.FloatTensor(i, v)",
    "r = T.sparse.FloatTensor(2, 3)",
    "r = T.sparse.FloatTensor()",
    "r = T.sparse.DoubleTensor(i, v, (2, 2))",
    "r = T.sparse.FloatTensor(i, v.double(), (2, 2))",
    "r = T.sparse.LongTensor(i, T.tensor([1, 2]), (2, 2))",
]


@pytest.mark.parametrize("code", SPARSE_CASES)
def test_legacy_sparse_constructors(code):
    """Each form warns (as torch's) and builds what torch's builds."""
    setup = "i = T.tensor([[0, 1], [1, 0]]); v = T.tensor([1., 2.])\n"
    env = {"T": cgrad}
    with pytest.warns(UserWarning, match=r"cgrad\.sparse\.SparseTensor\(.*\) is deprecated"):
        exec(setup + code, env)
    cg = ("ok", plain(env["r"], cgrad))
    if torch is not None:
        th = outcome(torch, setup + code)
        assert cg == th, (cg, th)


def test_legacy_sparse_isinstance_and_type():
    s = cgrad.ones(2).to_sparse()
    assert isinstance(s, cgrad.sparse.FloatTensor) and not isinstance(s, cgrad.FloatTensor)
    assert not isinstance(cgrad.ones(2), cgrad.sparse.FloatTensor)
    assert s.type() == "cgrad.sparse.FloatTensor"
    assert repr(cgrad.sparse.FloatTensor) == "<class 'cgrad.sparse.FloatTensor'>"
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        cgrad.sparse.FloatTensor(2, 2, device="cuda")
    if torch is not None:
        ts = torch.ones(2).to_sparse()
        assert isinstance(ts, torch.sparse.FloatTensor) and not isinstance(ts, torch.FloatTensor)
        assert ts.type() == "torch.sparse.FloatTensor"


# -- Tensor.type, type_as, typename --------------------------------------------------------------
TYPE_CASES = [
    ("r = x.type()", None),
    ("r = T.typename(x)", None),
    ("r = x.type(None)", None),
    ("r = x.type(T.float64)", None),
    ("r = x.type('torch.DoubleTensor')", None),
    ("r = x.type('torch.HalfTensor').dtype", None),
    ("r = x.type('torch.FloatTensor') is x", None),
    ("r = x.type(T.DoubleTensor)", None),
    ("r = x.type(T.FloatTensor) is x", None),
    ("r = x.type(T.float32) is x", None),
    ("r = x.type('torch.Tensor')", None),
    ("r = x.type(T.Tensor)", None),
    ("r = x.type(T.int64, non_blocking=True).dtype", None),
    ("r = x.type(T.float64, True)", None),
    ("r = x.type(dtype=T.int64)", None),
    ("r = [T.ones(1, dtype=d).type() for d in (T.float64, T.float16, T.int64, T.int32, "
     "T.int16, T.int8, T.uint8, T.bool, T.complex64, T.complex128)]", None),
    ("r = T.typename(T.ones(1, dtype=T.bool))", None),
    ("w = T.ones(2, requires_grad=True); r = w.type(T.float64)", None),
    ("r = x.type('float')", "invalid type: 'float'"),
    ("r = x.type('foo')", "invalid type: 'foo'"),
    ("r = x.type(1)", "dtype must be a type, str, or dtype object"),
    ("r = x.type(foo=1)", "type() got an unexpected keyword argument 'foo'"),
    ("r = x.type('torch.cuda.FloatTensor')", "Cannot initialize CUDA"),
    # type_as
    ("r = x.type_as(T.ones(1, dtype=T.int32))", None),
    ("r = x.type_as(T.ones(1)) is x", None),
    ("w = T.ones(2, requires_grad=True); r = w.type_as(T.ones(1, dtype=T.float64))", None),
    ("r = x.type_as(1)", "type_as(): argument 'other' (position 1) must be Tensor, not int"),
    ("r = x.type_as(T.ones(2).to_sparse())",
     "to(options) doesn't support converting to a different layout, but got self.layout being "
     "Strided and options.layout set as Sparse"),
]


@_cases(TYPE_CASES)
def test_type(code, phrase):
    _run("x = T.ones(2)\n" + code, phrase)


def test_type_names_are_cgrads():
    assert cgrad.ones(1).type() == "cgrad.FloatTensor"
    assert cgrad.ones(1).type("cgrad.DoubleTensor").dtype == cgrad.float64
    assert cgrad.ones(1).type("torch.LongTensor").dtype == cgrad.int64


# -- Variable -----------------------------------------------------------------------------------
VARIABLE_CASES = [
    ("r = T.autograd.Variable(T.ones(2), requires_grad=True)", None),
    ("r = T.autograd.Variable(T.ones(2))", None),
    ("r = T.autograd.Variable(T.ones(2), True, False)", None),
    ("r = T.autograd.Variable()", None),
    ("r = type(T.autograd.Variable(T.ones(2))) is T.Tensor", None),
    ("r = isinstance(T.ones(2), T.autograd.Variable)", None),
    ("r = isinstance([1], T.autograd.Variable)", None),
    ("a = T.ones(2); r = T.autograd.Variable(a) is a", None),
    ("a = T.ones(2, requires_grad=True); r = T.autograd.Variable(a * 2).grad_fn", None),
    ("a = T.ones(2); v = T.autograd.Variable(a, requires_grad=True); a.add_(1); r = v", None),
    ("r = T.autograd.Variable([1.])", "Variable data has to be a tensor, but got list"),
    ("r = T.autograd.Variable(T.ones(2, dtype=T.int64), requires_grad=True)",
     "Only Tensors of floating point and complex dtype can require gradients"),
]


@_cases(VARIABLE_CASES)
def test_variable(code, phrase):
    _run(code, phrase)


def test_variable_volatile_warns():
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        v = cgrad.autograd.Variable(cgrad.ones(2), volatile=True)
    assert not v.requires_grad and v.tolist() == [1.0, 1.0]


def test_variable_gradients_reach_it():
    v = cgrad.autograd.Variable(cgrad.tensor([1.0, 2.0]), requires_grad=True)
    (v * v).sum().backward()
    assert v.grad.tolist() == [2.0, 4.0]
