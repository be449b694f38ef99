"""Semantics of the Tensor surface (creation, metadata, autograd attributes, hooks, grad
modes), mirroring torch 2.13.

Tests that take the ``lib`` fixture run the same scenario with cgrad and, when installed,
with torch, and assert the same observable behaviour on both; strings printed with the
library's name (``cgrad.Size``, ``dtype=cgrad.float64``) are compared after substituting it.
"""
import re
import threading
import warnings

import numpy as np
import pytest

import cgrad


@pytest.fixture(params=["cgrad", "torch"])
def lib(request):
    if request.param == "torch":
        return pytest.importorskip("torch")
    return cgrad


NONLEAF_GRAD = "is not a leaf Tensor is being accessed"
LEAF_ONLY = "you can only change requires_grad flags of leaf variables"
FLOAT_ONLY = "only Tensors of floating point dtype can require gradients"
NUMPY_RG = ("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
            "instead.")


def vals(t):
    return t.detach().numpy().tolist()


def shares_memory(lib, t, arr):
    """Does tensor t share memory with ndarray arr?"""
    return np.shares_memory(t.detach().numpy(), arr)


# --------------------------------------------------------------------------------------
# Creation and dtypes
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype_name, shape", [
    ([1.0, 2.0], "float32", (2,)),
    ([1, 2.0], "float32", (2,)),
    (1.5, "float32", ()),
    ([1, 2, 3], "int64", (3,)),
    (3, "int64", ()),
    ([[1, 2], [3, 4]], "int64", (2, 2)),
    ([True, False], "bool", (2,)),
    (True, "bool", ()),
])
def test_tensor_dtype_inference_from_python(lib, data, dtype_name, shape):
    t = lib.tensor(data)
    assert t.dtype == getattr(lib, dtype_name)
    assert tuple(t.shape) == shape
    assert t.is_leaf and not t.requires_grad and t.grad_fn is None and t.grad is None


@pytest.mark.parametrize("np_dtype, dtype_name", [
    (np.float64, "float64"), (np.float32, "float32"), (np.int32, "int32"),
    (np.int64, "int64"), (np.bool_, "bool"),
])
def test_tensor_from_ndarray_keeps_dtype(lib, np_dtype, dtype_name):
    a = np.array([1, 0, 1], dtype=np_dtype)
    t = lib.tensor(a)
    assert t.dtype == getattr(lib, dtype_name)
    a[0] = 0
    assert vals(t)[0] == 1                      # tensor() copies


def test_tensor_dtype_argument(lib):
    t = lib.tensor([1, 2], dtype=lib.float64)
    assert t.dtype == lib.float64 and vals(t) == [1.0, 2.0]
    t = lib.tensor([1.7, 2.2], dtype=lib.int64)
    assert t.dtype == lib.int64 and vals(t) == [1, 2]
    t = lib.tensor(np.array([1.0, 2.0]), dtype=lib.float32)
    assert t.dtype == lib.float32


def test_tensor_requires_grad_argument(lib):
    t = lib.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad_fn is None and t.grad is None
    with pytest.raises(RuntimeError,
                       match="Only Tensors of floating point and complex dtype can require "
                             "gradients"):
        lib.tensor([1, 2], requires_grad=True)


def test_tensor_copies_tensor_input_without_history(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # torch warns to use clone().detach()
        t = lib.tensor(x)
    assert not t.requires_grad and t.is_leaf
    with lib.no_grad():
        x.add_(1)
    assert vals(t) == [1.0, 2.0]


def test_set_default_dtype(lib):
    assert lib.get_default_dtype() == lib.float32
    try:
        lib.set_default_dtype(lib.float64)
        assert lib.get_default_dtype() == lib.float64
        assert lib.tensor([1.0]).dtype == lib.float64
        assert lib.tensor([1, 2]).dtype == lib.int64          # ints unaffected
        assert lib.zeros(2).dtype == lib.float64
        assert lib.ones(2).dtype == lib.float64
        assert lib.rand(2).dtype == lib.float64
        assert lib.arange(0.0, 1.0, 0.5).dtype == lib.float64
        # printing is relative to the default dtype
        assert repr(lib.tensor([1.0, 2.0])) == "tensor([1., 2.])"
        assert (repr(lib.tensor([1.0, 2.0], dtype=lib.float32))
                == f"tensor([1., 2.], dtype={lib.__name__}.float32)")
    finally:
        lib.set_default_dtype(lib.float32)
    assert lib.get_default_dtype() == lib.float32
    assert lib.tensor([1.0]).dtype == lib.float32


def test_set_default_dtype_rejects_integer(lib):
    with pytest.raises(TypeError):
        lib.set_default_dtype(lib.int64)
    assert lib.get_default_dtype() == lib.float32


def test_as_tensor_shares_memory_with_ndarray(lib):
    a = np.array([1.0, 2.0, 3.0])
    t = lib.as_tensor(a)
    assert t.dtype == lib.float64
    a[0] = 10.0
    assert vals(t) == [10.0, 2.0, 3.0]
    assert shares_memory(lib, t, a)
    # a Tensor passes through unchanged
    assert lib.as_tensor(t) is t
    # Python data: default dtypes, a copy
    assert lib.as_tensor([1.0, 2.0]).dtype == lib.float32
    assert lib.as_tensor([1, 2]).dtype == lib.int64


def test_from_numpy_zero_copy(lib):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lib.from_numpy(a)
    assert t.dtype == lib.float32 and tuple(t.shape) == (2, 3)
    a[1, 2] = -1.0
    assert vals(t)[1][2] == -1.0
    t.numpy()[0, 0] = 42.0
    assert a[0, 0] == 42.0
    b = np.array([1, 2], dtype=np.int32)
    assert lib.from_numpy(b).dtype == lib.int32        # keeps the array's dtype
    with pytest.raises(TypeError):
        lib.from_numpy([1.0, 2.0])


def test_factories(lib):
    z = lib.zeros(2, 3)
    assert tuple(z.shape) == (2, 3) and z.dtype == lib.float32 and vals(z) == [[0.0] * 3] * 2
    assert tuple(lib.zeros((2, 3)).shape) == (2, 3)
    o = lib.ones(2, dtype=lib.float64)
    assert o.dtype == lib.float64 and vals(o) == [1.0, 1.0]
    f = lib.full((2,), 3.5)
    assert f.dtype == lib.float32 and vals(f) == [3.5, 3.5]
    assert lib.full((2,), 3).dtype == lib.int64
    assert lib.full((2,), True).dtype == lib.bool
    e = lib.empty(4, 2)
    assert tuple(e.shape) == (4, 2) and e.dtype == lib.float32
    base = lib.tensor([[1, 2], [3, 4]], dtype=lib.float64)
    zl = lib.zeros_like(base)
    assert zl.dtype == lib.float64 and vals(zl) == [[0.0, 0.0], [0.0, 0.0]]
    ol = lib.ones_like(base, dtype=lib.float32)
    assert ol.dtype == lib.float32 and vals(ol) == [[1.0, 1.0], [1.0, 1.0]]
    assert lib.ones(2, requires_grad=True).requires_grad
    assert lib.zeros_like(base, requires_grad=True).requires_grad
    assert not lib.zeros_like(lib.tensor([1.0], requires_grad=True)).requires_grad


def test_arange_linspace_eye(lib):
    a = lib.arange(5)
    assert a.dtype == lib.int64 and vals(a) == [0, 1, 2, 3, 4]
    assert vals(lib.arange(2, 8, 2)) == [2, 4, 6]
    af = lib.arange(0, 1, 0.25)
    assert af.dtype == lib.float32 and vals(af) == [0.0, 0.25, 0.5, 0.75]
    assert lib.arange(3.0).dtype == lib.float32
    ls = lib.linspace(0, 1, 5)
    assert ls.dtype == lib.float32 and vals(ls) == [0.0, 0.25, 0.5, 0.75, 1.0]
    i = lib.eye(3)
    assert i.dtype == lib.float32 and vals(i) == np.eye(3).tolist()
    assert vals(lib.eye(2, 3)) == np.eye(2, 3).tolist()


def test_rand_randn_manual_seed(lib):
    lib.manual_seed(1234)
    a = lib.rand(3, 4)
    b = lib.randn(5)
    c = lib.rand(3, 4)
    lib.manual_seed(1234)
    a2 = lib.rand(3, 4)
    b2 = lib.randn(5)
    assert vals(a) == vals(a2) and vals(b) == vals(b2)
    assert vals(a) != vals(c)
    assert a.dtype == lib.float32 and b.dtype == lib.float32
    assert tuple(a.shape) == (3, 4) and tuple(b.shape) == (5,)
    assert tuple(lib.rand((2, 3)).shape) == (2, 3)
    arr = np.array(vals(lib.rand(1000)))
    assert arr.min() >= 0.0 and arr.max() < 1.0
    n = np.array(vals(lib.randn(4000)))
    assert abs(n.mean()) < 0.1 and 0.9 < n.std() < 1.1
    assert lib.randn(2, dtype=lib.float64).dtype == lib.float64
    assert lib.rand(2, requires_grad=True).requires_grad


def test_dtype_constants(lib):
    assert lib.float is lib.float32 or lib.float == lib.float32
    assert lib.double == lib.float64
    assert lib.half == lib.float16
    assert lib.long == lib.int64
    assert lib.int == lib.int32
    assert lib.short == lib.int16
    assert lib.float32 != lib.float64
    for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                 "uint8", "bool", "complex64", "complex128"):
        assert lib.zeros(1, dtype=getattr(lib, name)).dtype == getattr(lib, name)


def test_dtype_constants_are_numpy_dtypes():
    assert cgrad.float32 is np.dtype("float32")
    assert cgrad.float64 is np.dtype("float64")
    assert cgrad.int64 == np.dtype("int64")
    assert cgrad.bool == np.dtype("bool")
    assert cgrad.tensor([1.0]).dtype is cgrad.float32
    assert cgrad.tensor([1.0]).numpy().dtype == np.float32


# --------------------------------------------------------------------------------------
# data, grad, requires_grad, is_leaf
# --------------------------------------------------------------------------------------

def test_data_shares_storage_and_is_detached(lib):
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    d = p.data
    assert d is not p
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    p.data.add_(1)
    assert vals(p) == [2.0, 3.0]
    assert p._version == 0                      # .data does not share the version counter
    assert p.requires_grad and p.is_leaf
    y = p * 2
    assert not y.data.requires_grad and y.data.grad_fn is None


def test_data_setter_replaces(lib):
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    p.data = lib.tensor([5.0, 6.0])
    assert vals(p) == [5.0, 6.0]
    assert p.requires_grad and p.is_leaf
    (p * p).sum().backward()
    assert vals(p.grad) == [10.0, 12.0]
    p.data = lib.tensor([1.0, 2.0, 3.0])        # shape may change too
    assert tuple(p.shape) == (3,)
    p.grad = None
    (p * p).sum().backward()
    assert vals(p.grad) == [2.0, 4.0, 6.0]


def test_optimizer_step_pattern(lib):
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    with lib.no_grad():
        p.sub_(p.grad * 0.5)
    assert vals(p) == [0.0, 0.0]
    assert p.is_leaf and p.requires_grad and p._version == 1
    p.grad.zero_()
    assert vals(p.grad) == [0.0, 0.0]
    p.data.add_(1)
    assert vals(p) == [1.0, 1.0]


def test_grad_setter(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    g = lib.tensor([0.5, 0.5])
    x.grad = g
    assert x.grad is g
    (x * 1).sum().backward()
    assert vals(x.grad) == [1.5, 1.5]
    x.grad = None
    assert x.grad is None
    with pytest.raises(RuntimeError, match=re.escape(
            "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'")):
        x.grad = lib.zeros(3)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient with dtype"):
        x.grad = lib.zeros(2, dtype=lib.float64)
    with pytest.raises(TypeError):
        x.grad = [1.0, 2.0]


def test_requires_grad_setter_on_leaf(lib):
    x = lib.tensor([1.0, 2.0])
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    x.requires_grad = False
    assert not x.requires_grad
    assert x.requires_grad_() is x and x.requires_grad
    assert x.requires_grad_(False) is x and not x.requires_grad


def test_requires_grad_false_on_non_leaf_raises(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    msg = (LEAF_ONLY + ". If you want to use a computed variable in a subgraph that doesn't "
           "require differentiation use var_no_grad = var.detach().")
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        y.requires_grad_(False)
    assert y.requires_grad


def test_requires_grad_true_on_non_leaf(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.requires_grad_() is y                   # requires_grad_(True): a no-op
    assert y.requires_grad_(True) is y
    with pytest.raises(RuntimeError, match=LEAF_ONLY):
        y.requires_grad = True                       # the attribute setter raises


def test_requires_grad_integer_dtype(lib):
    t = lib.tensor([1, 2])
    with pytest.raises(RuntimeError, match=FLOAT_ONLY):
        t.requires_grad_()
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        t.requires_grad = True                      # torch adds "and complex" here
    t.requires_grad = False                         # setting False is always fine
    with pytest.raises(RuntimeError, match=FLOAT_ONLY):
        lib.tensor([True]).requires_grad_()


def test_is_leaf_rules(lib):
    a = lib.tensor([1.0, 2.0])
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    assert a.is_leaf and b.is_leaf
    c = a * 2                                      # ops on tensors not requiring grad
    assert c.is_leaf and c.grad_fn is None and not c.requires_grad
    d = a * b
    assert not d.is_leaf and type(d.grad_fn).__name__ == "MulBackward0" and d.requires_grad
    with lib.no_grad():
        e = b * 2
    assert e.is_leaf and not e.requires_grad
    assert d.detach().is_leaf
    assert d.sum().grad_fn.name() == "SumBackward0"


# --------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------

def test_shape_size_and_friends(lib):
    t = lib.zeros(2, 3)
    assert repr(t.shape) == f"{lib.__name__}.Size([2, 3])"
    assert str(t.shape) == f"{lib.__name__}.Size([2, 3])"
    assert repr(lib.tensor(1.0).shape) == f"{lib.__name__}.Size([])"
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert isinstance(t.shape, lib.Size)
    assert t.size() == t.shape and repr(t.size()) == repr(t.shape)
    assert t.size(0) == 2 and t.size(1) == 3 and t.size(-1) == 3
    assert t.shape[0] == 2 and t.shape.numel() == 6
    assert t.dtype == lib.float32
    assert t.ndim == 2 and t.dim() == 2
    assert t.numel() == 6
    assert len(t) == 2
    s = lib.tensor(2.5)
    assert s.ndim == 0 and s.dim() == 0 and s.numel() == 1 and s.shape == ()


def test_item_and_tolist(lib):
    assert lib.tensor(2.5).item() == 2.5 and type(lib.tensor(2.5).item()) is float
    assert lib.tensor([3]).item() == 3 and type(lib.tensor([3]).item()) is int
    assert type(lib.tensor(True).item()) is bool
    x = lib.tensor([2.0], requires_grad=True)
    assert x.item() == 2.0                         # item() works on tensors requiring grad
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted "
                                           "to Scalar"):
        lib.tensor([1.0, 2.0]).item()
    assert lib.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert lib.tensor([0.5, 1.5], requires_grad=True).tolist() == [0.5, 1.5]
    assert lib.tensor(7).tolist() == 7
    assert type(lib.tensor([1.0]).tolist()[0]) is float


def test_numpy(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(NUMPY_RG)):
        x.numpy()
    a = x.detach().numpy()
    assert a.dtype == np.float32 and a.tolist() == [1.0, 2.0]
    t = lib.tensor([1.0, 2.0])
    n = t.numpy()
    n[0] = 9.0
    assert vals(t) == [9.0, 2.0]                    # shared memory
    assert isinstance(n, np.ndarray)
    y = (x * 2).detach()
    assert y.numpy().tolist() == [2.0, 4.0]


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # torch
def test_array_protocol(lib):
    t = lib.tensor([1.0, 2.0])
    a = np.asarray(t)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.tolist() == [1.0, 2.0]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    a[1] = 5.0
    assert vals(t) == [1.0, 5.0]                    # np.asarray shares memory
    assert np.array(t).tolist() == [1.0, 5.0]
    x = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(NUMPY_RG)):
        np.asarray(x)


# --------------------------------------------------------------------------------------
# detach, version counter
# --------------------------------------------------------------------------------------

def test_detach_shares_data_and_version_counter(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert d is not x
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert x._version == 0 and d._version == 0
    d.add_(1)
    assert vals(x) == [2.0, 3.0]
    assert d._version == 1 and x._version == 1
    y = x * 2
    yd = y.detach()
    assert yd.is_leaf and not yd.requires_grad and y.requires_grad


def test_detach_in_place(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    r = y.detach_()
    assert r is y
    assert y.is_leaf and y.grad_fn is None and not y.requires_grad
    assert vals(y) == [2.0, 4.0]
    assert x.requires_grad and x.is_leaf


def test_version_counter(lib):
    x = lib.tensor([1.0, 2.0])
    assert x._version == 0
    y = x + 1
    x * 2
    assert x._version == 0 and y._version == 0        # out-of-place ops don't touch it
    x.add_(1)
    assert x._version == 1
    x.mul_(2)
    assert x._version == 2
    x.sub_(1)
    x.div_(2)
    assert x._version == 4
    x.zero_()
    assert x._version == 5
    w = lib.tensor([1.0], requires_grad=True)
    with lib.no_grad():
        w.add_(1)
    assert w._version == 1


def test_in_place_on_leaf_requiring_grad_raises(lib):
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "a leaf Variable that requires grad is being used in an in-place operation.")):
        w.add_(1)
    assert w._version == 0 and vals(w) == [1.0]


def test_saved_tensor_version_check_builtin_op(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = x + 1
    b = a * a                                       # saves a
    with lib.no_grad():
        a.add_(1)
    with pytest.raises(RuntimeError, match=re.escape(
            "one of the variables needed for gradient computation has been modified by an "
            "inplace operation: [" + lib.__name__ + ".FloatTensor [3]], which is output 0 "
            "of Add")) as ei:
        b.sum().backward()
    assert "is at version 1; expected version 0 instead." in str(ei.value)


# --------------------------------------------------------------------------------------
# grad on non-leaves, retain_grad, hooks
# --------------------------------------------------------------------------------------

def test_retain_grad(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert not y.retains_grad and not x.retains_grad
    y.retain_grad()
    assert y.retains_grad
    y.retain_grad()                                 # idempotent
    x.retain_grad()                                 # no-op on leaves
    assert not x.retains_grad
    z = (y * y).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None                       # no warning once retained
        z.backward()
        assert vals(y.grad) == [4.0, 8.0]
    assert vals(x.grad) == [8.0, 16.0]
    assert y.grad.is_leaf and not y.grad.requires_grad
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        lib.tensor([1.0]).retain_grad()


def test_retain_grad_accumulates(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    s = (y * 3).sum()
    s.backward(retain_graph=True)
    s.backward()
    assert vals(y.grad) == [6.0, 6.0]


def test_non_leaf_grad_access_warns(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match=NONLEAF_GRAD):
        g = y.grad
    assert g is None
    y.sum().backward()
    with pytest.warns(UserWarning, match=NONLEAF_GRAD):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vals(x.grad) == [2.0, 2.0]          # leaves don't warn
        assert lib.tensor([1.0]).grad is None       # nor do tensors not requiring grad


def test_register_hook_on_leaf_replaces_gradient_before_accumulation(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def hook(g):
        seen.append(vals(g))
        return g * 10

    h = x.register_hook(hook)
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    assert vals(x.grad) == [30.0, 30.0]
    # the hook sees the incoming gradient, not the accumulated one
    (x * 1).sum().backward()
    assert seen[-1] == [1.0, 1.0]
    assert vals(x.grad) == [40.0, 40.0]
    h.remove()
    (x * 1).sum().backward()
    assert len(seen) == 2
    assert vals(x.grad) == [41.0, 41.0]


def test_register_hook_returning_none_observes(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(vals(g)))
    (x * x).sum().backward()
    assert seen == [[2.0, 4.0]] and vals(x.grad) == [2.0, 4.0]


def test_register_hook_on_non_leaf(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []

    def hook(g):
        seen.append(vals(g))
        return g * 2

    h = y.register_hook(hook)
    (y * y).sum().backward()
    assert seen == [[4.0, 8.0]]
    assert vals(x.grad) == [16.0, 32.0]
    h.remove()
    x.grad = None
    y2 = x * 2
    y2.register_hook(lambda g: g * 0)
    y2.sum().backward()
    assert vals(x.grad) == [0.0, 0.0]


def test_multiple_hooks_chain_in_registration_order(lib):
    x = lib.tensor([1.0], requires_grad=True)
    y = x * 1
    order = []
    y.register_hook(lambda g: (order.append("a"), g + 1)[1])
    y.register_hook(lambda g: (order.append("b"), g * 10)[1])
    y.sum().backward()
    assert order == ["a", "b"]
    assert vals(x.grad) == [20.0]


def test_register_hook_errors(lib):
    t = lib.tensor([1.0])
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        t.register_hook(lambda g: g)
    x = lib.tensor([1.0, 2.0], requires_grad=True)

    def bad(g):
        return g.sum()

    x.register_hook(bad)
    with pytest.raises(RuntimeError, match="hook 'bad' has changed the size of value"):
        (x * 2).sum().backward()


@pytest.mark.parametrize("retain_first", [True, False])
def test_retain_grad_sees_hooked_value(lib, retain_first):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    if retain_first:
        y.retain_grad()
    y.register_hook(lambda g: g * 3)
    if not retain_first:
        y.retain_grad()
    y.sum().backward()
    assert vals(y.grad) == [3.0, 3.0]
    assert vals(x.grad) == [6.0, 6.0]


def test_hook_handle_context_manager(lib):
    x = lib.tensor([1.0], requires_grad=True)
    with x.register_hook(lambda g: g * 5):
        (x * 1).sum().backward()
    assert vals(x.grad) == [5.0]
    (x * 1).sum().backward()
    assert vals(x.grad) == [6.0]


def test_backward_returns_none(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    assert (x * x).sum().backward() is None
    assert lib.autograd.backward([(x * 2).sum()]) is None


# --------------------------------------------------------------------------------------
# repr
# --------------------------------------------------------------------------------------

def test_repr_cases(lib):
    n = lib.__name__
    x = lib.tensor([1.0], requires_grad=True)
    assert repr(x) == "tensor([1.], requires_grad=True)"
    assert str(x) == repr(x)
    assert repr(x.sum()) == "tensor(1., grad_fn=<SumBackward0>)"
    assert repr(x * 2) == "tensor([2.], grad_fn=<MulBackward0>)"
    assert repr(lib.tensor([1.0, 2.0], dtype=lib.float64)) == \
        f"tensor([1., 2.], dtype={n}.float64)"
    assert repr(lib.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(lib.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(lib.tensor([True, False])) == "tensor([ True, False])"
    assert repr(lib.tensor(3)) == "tensor(3)"
    assert repr(lib.tensor([1, 2], dtype=lib.int32)) == f"tensor([1, 2], dtype={n}.int32)"
    x64 = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
    assert repr(x64) == f"tensor([1.], dtype={n}.float64, requires_grad=True)"
    assert repr(x64 * 2) == f"tensor([2.], dtype={n}.float64, grad_fn=<MulBackward0>)"
    assert repr(lib.zeros(2, 2)) == "tensor([[0., 0.],\n        [0., 0.]])"
    assert repr(lib.zeros(0)) == "tensor([])"


# --------------------------------------------------------------------------------------
# Grad modes
# --------------------------------------------------------------------------------------

def test_no_grad_context_and_decorator(lib):
    x = lib.tensor([1.0], requires_grad=True)
    assert lib.is_grad_enabled()
    with lib.no_grad():
        assert not lib.is_grad_enabled()
        y = x * 2
    assert lib.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None

    @lib.no_grad()
    def f(t):
        assert not lib.is_grad_enabled()
        return t * 2

    assert not f(x).requires_grad
    assert lib.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with lib.no_grad():
            1 / 0
    assert lib.is_grad_enabled()


def test_enable_grad_inside_no_grad(lib):
    x = lib.tensor([1.0], requires_grad=True)
    with lib.no_grad():
        with lib.enable_grad():
            assert lib.is_grad_enabled()
            y = x * 2
        assert not lib.is_grad_enabled()

        @lib.enable_grad()
        def g():
            return lib.is_grad_enabled()

        assert g() is True
        assert not lib.is_grad_enabled()
    assert y.requires_grad and type(y.grad_fn).__name__ == "MulBackward0"


def test_set_grad_enabled_function_context_decorator(lib):
    x = lib.tensor([1.0], requires_grad=True)
    try:
        lib.set_grad_enabled(False)                 # plain call
        assert not lib.is_grad_enabled()
        assert not (x * 2).requires_grad
        lib.set_grad_enabled(True)
        assert lib.is_grad_enabled()
    finally:
        lib.set_grad_enabled(True)
    with lib.set_grad_enabled(False):
        assert not lib.is_grad_enabled()
        with lib.set_grad_enabled(True):
            assert lib.is_grad_enabled()
            assert (x * 2).requires_grad
        assert not lib.is_grad_enabled()
    assert lib.is_grad_enabled()

    @lib.set_grad_enabled(False)
    def f():
        return lib.is_grad_enabled()

    assert lib.is_grad_enabled()                   # decorating does not change the mode
    assert f() is False
    assert lib.is_grad_enabled()


def test_inference_mode(lib):
    x = lib.tensor([1.0], requires_grad=True)
    with lib.inference_mode():
        assert not lib.is_grad_enabled()
        y = x * 2
    assert lib.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    with lib.inference_mode(False):
        assert lib.is_grad_enabled()
        assert (x * 2).requires_grad

    @lib.inference_mode()
    def f():
        return lib.is_grad_enabled()

    assert f() is False and lib.is_grad_enabled()


def test_grad_mode_is_thread_local(lib):
    result = {}

    def worker():
        result["enabled"] = lib.is_grad_enabled()
        x = lib.tensor([1.0], requires_grad=True)
        result["requires_grad"] = (x * 2).requires_grad

    with lib.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not lib.is_grad_enabled()
    assert result == {"enabled": True, "requires_grad": True}

    def disabler():
        lib.set_grad_enabled(False)
        result["inner"] = lib.is_grad_enabled()

    t = threading.Thread(target=disabler)
    t.start()
    t.join()
    assert result["inner"] is False
    assert lib.is_grad_enabled()                   # the main thread is unaffected


def test_view_dtype_reinterprets_bytes(lib):
    x = lib.tensor([1.0, 2.0])
    i = x.view(lib.int32)
    assert i.dtype == lib.int32 and i.tolist() == [1065353216, 1073741824]
    h = x.view(lib.float16)
    assert h.shape == (4,) and h.tolist() == [0.0, 1.875, 0.0, 2.0]
    d = lib.ones(2, 4).view(lib.float64)
    assert d.shape == (2, 2) and d.dtype == lib.float64
    assert lib.tensor(1.0).view(lib.int32).item() == 1065353216
    r = lib.tensor([1.0, 2.0], requires_grad=True)
    for t in (r.view(lib.int32), r.view(lib.float32), (r * 1).view(lib.float32)):
        assert not t.requires_grad and t.grad_fn is None       # not differentiable
    y = lib.zeros(2)
    v = y.view(lib.int32)
    v[0] = 1                                                   # same storage and version
    assert y[0].item() > 0 and y._version == v._version == 1
    for fn, msg in [
            (lambda: lib.ones(3).view(lib.float64),
             "self.size(-1) must be divisible by 2 to view Float as Double (different element "
             "sizes), but got 3"),
            (lambda: lib.ones(4, 2).t().view(lib.float16),
             "self.stride(-1) must be 1 to view Float as Half (different element sizes), but "
             "got 2"),
            (lambda: lib.tensor(1.0).view(lib.float16),
             "self.dim() cannot be 0 to view Float as Half (different element sizes)")]:
        with pytest.raises(RuntimeError, match=re.escape(msg)):
            fn()


def test_typename(lib):
    assert lib.typename(lib.ones(2)) == f"{lib.__name__}.FloatTensor"
    assert lib.typename(lib.ones(2, dtype=lib.float64)) == f"{lib.__name__}.DoubleTensor"
    assert lib.typename(lib.nn.Linear(2, 2)) == f"{lib.__name__}.nn.modules.linear.Linear"
    assert [lib.typename(o) for o in (3, "a", [1], None, int)] == [
        "int", "str", "list", "NoneType", "int"]


@pytest.mark.parametrize("data,exc,phrase", [
    ([1, "a"], TypeError, "new(): invalid data type 'str'"),
    ("abc", TypeError, "new(): invalid data type 'str'"),
    (b"ab", TypeError, "new(): invalid data type 'bytes'"),
    ([object()], RuntimeError, "Could not infer dtype of object"),
    ([1.0, None], RuntimeError, "Could not infer dtype of NoneType"),
    ({1: 2}, RuntimeError, "Could not infer dtype of dict"),
    (np.array(["a"]), TypeError, "can't convert np.ndarray of type numpy.str_"),
    (np.array([object()]), TypeError, "can't convert np.ndarray of type numpy.object_"),
    (np.datetime64("2020-01-01"), TypeError, "can't convert np.ndarray of type numpy.datetime64"),
    ([[1, 2], [3]], ValueError, None),
], ids=lambda v: repr(v)[:20])
def test_tensor_refuses_data_that_is_not_numbers(lib, data, exc, phrase):
    with pytest.raises(exc, match=None if phrase is None else re.escape(phrase)):
        lib.tensor(data)


@pytest.mark.parametrize("data,dtype", [
    ([1.0, 2.0], "float32"), ([np.float64(1.0), 2.0], "float64"), ([1, np.float64(2.0)], "float64"),
    ([[np.float64(1.0)]], "float64"), ([np.float32(1.0), 2.0], "float32"),
    ([np.array([1.0]), np.array([2.0])], "float64"), ([np.int32(1), 2], "int64"),
    ([True, False], "bool"), (np.float64(2.0), "float64"), (3.5, "float32"),
], ids=lambda v: repr(v)[:20])
def test_tensor_dtype_inference_keeps_numpy_float64(lib, data, dtype):
    """Python floats take the default dtype; NumPy float64 values keep theirs (torch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch: a list of ndarrays is slow
        assert str(lib.tensor(data).dtype).endswith(dtype)


# Memory-layout queries programs make (``x.is_contiguous()`` before ``view``, strides in
# custom kernels, ``nelement()`` in parameter counts): the values torch gives for the same
# views, including broadcast (stride 0), empty and 0-d tensors and channels_last.
_LAYOUT_VIEWS = [
    "ones(2, 3, 4)", "ones(2, 3, 4)[:, 1]", "ones(2, 3, 4).transpose(0, 2)",
    "ones(2, 1, 4)[:, :, ::2]", "ones(4)[1:]", "ones(3, 1).expand(3, 5)", "ones(0, 3)",
    "ones(3, 0)", "ones(1, 4)[:, ::2]", "ones(2, 3, 4, 5).permute(0, 2, 3, 1)",
    "ones(2, 3, 4, 5).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)",
    "ones(2, 3, 4, 5, 6).permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)",
    "tensor(1.0)", "ones(2, 3, 4)[1]", "arange(24.0).view(2, 3, 4)[:, :, 1:3]",
]


@pytest.mark.parametrize("expr", _LAYOUT_VIEWS)
def test_layout_queries_match_torch(expr):
    torch = pytest.importorskip("torch")
    c, t = eval("cgrad." + expr), eval("torch." + expr)
    assert c.stride() == t.stride()
    for d in range(-c.dim(), c.dim()):
        assert c.stride(d) == t.stride(d)
    assert c.is_contiguous() == t.is_contiguous()
    for fmt in ("channels_last", "channels_last_3d"):
        assert (c.is_contiguous(memory_format=getattr(cgrad, fmt))
                == t.is_contiguous(memory_format=getattr(torch, fmt)))
    assert c.storage_offset() == t.storage_offset()
    assert (c.nbytes, c.itemsize, c.nelement(), c.ndimension()) == (
        t.nbytes, t.itemsize, t.nelement(), t.ndimension())
    assert c.is_complex() is False


def test_layout_queries_without_torch():
    x = cgrad.arange(24.0).view(2, 3, 4)
    assert x.stride() == (12, 4, 1) and x.stride(-1) == 1 and x.is_contiguous()
    y = x.transpose(1, 2)
    assert y.stride() == (12, 1, 4) and not y.is_contiguous()
    assert y.contiguous().is_contiguous()
    z = x[1, :, 2:]
    assert z.storage_offset() == 14 and z.data_ptr() == x.data_ptr() + 14 * 4
    assert x.nbytes == 96 and x.itemsize == 4 and x.nelement() == 24 and x.ndimension() == 3
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.stride(3)
    with pytest.raises(IndexError, match="no dimensions"):
        cgrad.tensor(1.0).stride(0)
    assert x.is_contiguous(memory_format=cgrad.preserve_format)          # as torch
    assert not x.permute(0, 2, 1).is_contiguous(memory_format=cgrad.preserve_format)
    with pytest.raises(TypeError, match="memory_format"):
        x.is_contiguous(memory_format="channels_last")
    # a program's idiom: view needs contiguous memory
    v = y.contiguous().view(2, -1) if not y.is_contiguous() else y.view(2, -1)
    assert v.shape == (2, 12)
    assert cgrad.zeros(2, dtype=cgrad.complex64).is_complex()
