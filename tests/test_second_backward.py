"""A second backward through a graph whose saved values were freed raises as torch's does.

torch frees a node's saved tensors after it runs (unless retain_graph=True) and raises
"Trying to backward through the graph a second time" when a freed node runs again; a node
that saves nothing (AddBackward0, SumBackward0, views, CatBackward0, ...) runs again
silently. Every op in cgrad's op tables (cgrad/ops/*: TENSOR_METHODS and FUNCTIONS, plus
cgrad.functional, the methods cgrad/tensor.py defines, the operators and cgrad.nn.functional)
runs its samples (tests/op_samples.py) through backward() twice and through
autograd.grad() twice, on cgrad and, when importable, on torch; the outcomes must agree.
Without torch, cgrad's outcome is checked against EXPECTED below (the outcomes torch 2.13
gives; ``python tests/test_second_backward.py`` prints both libraries' outcomes per case, and
``--expected`` prints the table).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from op_samples import F_SAMPLES, SAMPLES  # noqa: E402

import cgrad  # noqa: E402
import cgrad.functional as _cfunctional  # noqa: E402
import cgrad.nn.functional as _cF  # noqa: E402
from cgrad.ops import OP_MODULES  # noqa: E402

# cholesky and qr (cgrad's and torch's) warn that they are deprecated: not what these test
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*is deprecated in favor of (torch|cgrad).linalg:UserWarning")

# The methods cgrad/tensor.py defines that record an op (the rest of Tensor's public
# callables are listed in NOT_OPS with the reason they are not).
TENSOR_PY_OPS = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div_", "pow", "pow_", "neg", "neg_", "exp",
    "exp_", "log", "log_", "sum", "mean", "reshape", "view", "expand", "expand_as", "unsqueeze",
    "clone", "contiguous", "to", "float", "double", "half", "long", "int", "bool", "type",
    "zero_", "fill_", "copy_", "masked_fill_", "uniform_", "normal_", "eq", "ne", "lt", "le",
    "gt", "ge",
}
OPERATORS = {
    "__getitem__", "__setitem__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
    "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__neg__", "__pos__",
    "__matmul__", "__rmatmul__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
}
# Public callables of cgrad.Tensor that are not ops (they record no node of their own).
NOT_OPS = {
    "backward": "runs the engine", "register_hook": "hook registration",
    "register_post_accumulate_grad_hook": "hook registration",
    "retain_grad": "autograd flag", "requires_grad_": "autograd flag",
    "detach": "returns a tensor with no history", "detach_": "cuts history in place",
    "numpy": "conversion out of cgrad", "tolist": "conversion out of cgrad",
    "item": "conversion out of cgrad", "size": "metadata", "dim": "metadata",
    "numel": "metadata", "element_size": "metadata", "is_floating_point": "metadata",
    "nelement": "metadata", "ndimension": "metadata", "is_complex": "metadata",
    "stride": "metadata", "is_contiguous": "metadata", "storage_offset": "metadata",
    "data_ptr": "metadata",
    "cpu": "returns self", "to_sparse": "sparse layout (tests/test_sparse.py)",
    "cuda": "raises: no CUDA (tests/test_devices.py)",
    "pin_memory": "raises: no accelerator (tests/test_devices.py)",
    "is_pinned": "metadata", "get_device": "metadata",
    "type_as": "Tensor.to (tests/test_legacy.py)", "new": "legacy constructor (test_legacy.py)",
    **{f"new_{k}": "factory (tests/test_factories.py)"
       for k in ("tensor", "zeros", "ones", "empty", "full")},
    **{k: "random draw, zero gradient (tests/test_factories.py)"
       for k in ("bernoulli", "bernoulli_", "multinomial", "random_", "exponential_",
                 "geometric_", "log_normal_", "cauchy_")},
}
# Module-level table entries that are not callables.
NOT_CALLABLE = {"linalg", "return_types"}
# cgrad functions that torch has only in torch.nn.functional.
TORCH_F_ONLY = {"elu", "gelu", "leaky_relu", "silu", "softplus"}


def _tables():
    fns, methods = set(_cfunctional.__all__), set(TENSOR_PY_OPS) | OPERATORS
    for mod in OP_MODULES:
        fns |= set(mod.FUNCTIONS)
        methods |= set(mod.TENSOR_METHODS)
    return fns - NOT_CALLABLE, methods


def _forms(name):
    fns, methods = _tables()
    if isinstance(getattr(cgrad.Tensor, name, None), property):
        return {"property"}
    forms = set()
    if name in fns:
        forms.add("fn")
    if name in methods:
        forms.add("method")
    return forms


def cases():
    """(id, name, form, sample) for every sample of every op, in each of its forms."""
    out = []
    fns, methods = _tables()
    for name in sorted(fns | methods):
        samples = SAMPLES[name]
        for k, s in enumerate(samples):
            sid = name + (f"/{s.tag}" if s.tag else "")
            forms = {"call"} if s.call is not None else (s.forms or _forms(name)) & (
                _forms(name) | {"property"})
            for form in sorted(forms):
                out.append((f"{sid}:{form}", name, form, s))
    for name in sorted(F_SAMPLES):
        for s in F_SAMPLES[name]:
            out.append((f"F.{name}" + (f"/{s.tag}" if s.tag else "") + ":F", name, "F", s))
    return out


def invoke(m, name, form, args, kw):
    """Call op `name` of library m in `form` with the sample's (already built) arguments."""
    if form == "fn":
        mod = m.nn.functional if (m is not cgrad and name in TORCH_F_ONLY) else m
        return getattr(mod, name)(*args, **kw)
    if form == "F":
        return getattr(m.nn.functional, name)(*args, **kw)
    if form == "property":
        return getattr(args[0], name)
    return getattr(args[0], name)(*args[1:], **kw)


def flat_tensors(out, m):
    if isinstance(out, m.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_tensors(o, m)]
    return []


SECOND_TIME = "backward through the graph a second time"


def outcome(m, name, form, s, how):
    """Run the sample on library m, then backward (how="backward") or autograd.grad
    (how="grad") twice.

    Returns (kind, detail): kind "nograd" (no output requires grad), "error1" (the first
    pass raised; detail: the exception type), "raise" (the second pass raised torch's "second
    time" error), "error2" (the second pass raised something else) or "ok" (detail: the
    gradients after the second pass, as float64 arrays)."""
    x = m.tensor(np.array(s.x, dtype=np.float64), requires_grad=True)
    leaves = [x]
    if s.call is not None:
        out = s.call(m, x)
    else:
        args, kw = s.args(m, x), s.kw(m, x)
        leaves += [t for t in flat_tensors(list(args) + list(kw.values()), m)
                   if t.requires_grad and t.is_leaf and t is not x]
        out = invoke(m, name, form, args, kw)
    outs = [o for o in flat_tensors(out, m) if o.requires_grad]
    if not outs:
        return ("nograd", None)
    loss = outs[0].sum()
    for o in outs[1:]:
        loss = loss + o.sum()

    def once():
        if how == "backward":
            loss.backward()
            return [t.grad for t in leaves]
        return list(m.autograd.grad(loss, leaves, allow_unused=True))

    try:
        once()
    except Exception as e:  # noqa: BLE001 - the outcome records it
        return ("error1", type(e).__name__)
    try:
        grads = once()
    except Exception as e:  # noqa: BLE001
        if isinstance(e, RuntimeError) and SECOND_TIME in str(e):
            return ("raise", None)
        return ("error2", f"{type(e).__name__}: {e}")
    return ("ok", [None if g is None else np.array(g.detach().numpy(), dtype=np.float64)
                   for g in grads])


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


CASES = cases()


def _expected_kind(cid):
    for kind, ids in EXPECTED.items():
        if cid in ids:
            return kind
    return None


def test_every_op_has_samples():
    """Every op in the tables has samples (or the name is a listed non-op), so that a new op
    fails here until it is given samples."""
    fns, methods = _tables()
    missing = sorted(n for n in fns | methods if n not in SAMPLES)
    assert not missing, f"ops without a sample in tests/op_samples.py: {missing}"
    public = {n for n in dir(cgrad.Tensor) if not n.startswith("_")}
    attrs = {n for n in public if not callable(getattr(cgrad.Tensor, n))
             or isinstance(getattr(cgrad.Tensor, n), property)}
    unlisted = sorted(public - attrs - methods - set(NOT_OPS))
    assert not unlisted, f"Tensor methods neither sampled nor in NOT_OPS: {unlisted}"
    fnames = {n for n in dir(_cF) if not n.startswith("_") and callable(getattr(_cF, n))
              and getattr(getattr(_cF, n), "__module__", "") == _cF.__name__}
    assert sorted(fnames - set(F_SAMPLES)) == [], "nn.functional ops without samples"
    assert sorted(set(SAMPLES) - fns - methods - {"T", "mT", "H", "mH"}) == []


def test_expected_lists_every_case():
    ids = {cid for cid, *_ in CASES}
    listed = set().union(*EXPECTED.values())
    assert sorted(ids - listed) == [], "cases missing from EXPECTED"
    assert sorted(listed - ids) == [], "EXPECTED lists cases that do not exist"


@pytest.mark.parametrize("how", ["backward", "grad"])
@pytest.mark.parametrize("cid,name,form,s", CASES, ids=[c[0] for c in CASES])
def test_second_backward(cid, name, form, s, how):
    got = outcome(cgrad, name, form, s, how)
    torch = _torch()
    if torch is None:
        assert got[0] == _expected_kind(cid), f"{cid} ({how}): cgrad {got}"
        return
    want = outcome(torch, name, form, s, how)
    assert want[0] == _expected_kind(cid), f"EXPECTED is stale for {cid}: torch gives {want}"
    assert got[0] == want[0], f"{cid} ({how}): cgrad {got}, torch {want}"
    if got[0] == "error1":
        assert got[1] == want[1]
    if got[0] == "ok" and not s.random:
        for g, w in zip(got[1], want[1]):
            assert (g is None) == (w is None)
            if g is not None:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


EXPECTED: dict = {  # torch 2.13's outcome per case (regenerate: see the module docstring)
    "ok": set("""
        F.channel_shuffle:F F.pixel_shuffle:F F.pixel_unshuffle:F
        H:property T:property __add__/scalar:call __add__/tensor:call __getitem__/int:call
        __getitem__/slice:call __getitem__/column:call __getitem__/none_ellipsis:call __iadd__:call
        __isub__:call __mod__:method __neg__:call __pos__:call __radd__:call __rsub__:call
        __sub__/scalar:call __sub__/tensor:call add/tensor:fn add/tensor:method add/constant:fn
        add/constant:method add/rconstant:fn add/rconstant:method add/scalar:fn add/scalar:method
        add/alpha:fn add/alpha:method add/ralpha:fn add/ralpha:method add_:method add_/scalar:method
        add_/alpha:method adjoint:fn adjoint:method atleast_1d:fn atleast_2d:fn atleast_3d:fn
        block_diag:fn broadcast_tensors:fn cat:fn cat/constant:fn ceil:fn ceil:method ceil_:method
        chunk:fn chunk:method clone:fn clone:method column_stack:fn column_stack/constant:fn
        concat:fn concat/constant:fn concatenate:fn concatenate/constant:fn contiguous:method
        copy_:method cumsum:fn cumsum:method double:method dstack:fn dstack/constant:fn
        einsum/reduce:fn expand:method expand_as:method fill_:method fix:fn fix:method flatten:fn
        flatten:method flip:fn flip:method float:method floor:fn floor:method floor_:method
        fmod/scalar:fn fmod/scalar:method fmod/constant:fn fmod/constant:method half:method
        hstack:fn hstack/constant:fn index_add/constant:fn index_add/constant:method mH:property
        mT:property mean/all:fn mean/all:method mean/dim:fn mean/dim:method mean/keepdim:fn
        mean/keepdim:method meshgrid:fn moveaxis:fn moveaxis:method movedim:fn movedim:method
        narrow:fn narrow:method neg:fn neg:method neg_:method negative:fn negative:method
        negative_:method normal_:method permute:fn permute:method ravel:fn ravel:method
        remainder/scalar:fn remainder/scalar:method remainder/constant:fn remainder/constant:method
        repeat:method reshape:fn reshape:method reshape_as:method roll:fn roll:method round:fn
        round:method round_:method scatter_add/constant:fn scatter_add/constant:method select:fn
        select:method sign:fn sign:method sign_:method split:fn split:method split_with_sizes:fn
        split_with_sizes:method squeeze/all:fn squeeze/all:method squeeze/dim:fn squeeze/dim:method
        stack:fn stack/constant:fn sub/tensor:fn sub/tensor:method sub/constant:fn
        sub/constant:method sub/rconstant:fn sub/rconstant:method sub/scalar:fn sub/scalar:method
        sub/alpha:fn sub/alpha:method sub/ralpha:fn sub/ralpha:method sub_:method sub_/scalar:method
        sub_/alpha:method subtract/tensor:fn subtract/tensor:method subtract/constant:fn
        subtract/constant:method subtract/rconstant:fn subtract/rconstant:method subtract/scalar:fn
        subtract/scalar:method subtract/alpha:fn subtract/alpha:method subtract/ralpha:fn
        subtract/ralpha:method sum/all:fn sum/all:method sum/dim:fn sum/dim:method sum/keepdim:fn
        sum/keepdim:method swapaxes:fn swapaxes:method swapdims:fn swapdims:method t:fn t:method
        tile:fn tile:method to:method transpose:fn transpose:method trunc:fn trunc:method
        trunc_:method type:method unbind:fn unbind:method unflatten:fn unflatten:method
        uniform_:method unsqueeze:fn unsqueeze:method view:method view_as:method vstack:fn
        vstack/constant:fn zero_:method F.pad:F
        """.split()),
    "raise": set("""
        F.adaptive_avg_pool1d:F F.adaptive_max_pool1d:F F.adaptive_max_pool2d:F
        F.conv_transpose1d:F F.conv_transpose1d/strided:F F.conv_transpose2d:F
        F.conv_transpose2d/strided:F F.lp_pool1d:F F.lp_pool2d:F F.max_unpool1d:F
        F.max_unpool2d:F
        __abs__:method __getitem__/list:call __getitem__/tensor:call __getitem__/mask:call
        __getitem__/advanced:call __imul__:call __itruediv__:call __matmul__:call
        __mul__/scalar:call __mul__/tensor:call __mul__/constant:call __pow__/scalar:call
        __pow__/tensor:call __rmatmul__:call __rmul__:call __rpow__:call __rtruediv__:call
        __setitem__:call __truediv__/scalar:call __truediv__/tensor:call abs:fn abs:method
        abs_:method absolute:fn absolute:method amax:fn amax:method amin:fn amin:method bmm:fn
        bmm:method cholesky:fn cholesky:method clamp/scalars:fn clamp/scalars:method
        clamp/tensors:fn clamp/tensors:method clamp_:method clamp_max:fn clamp_max:method
        clamp_max_:method clamp_min:fn clamp_min:method clamp_min_:method clip/scalars:fn
        clip/scalars:method clip/tensors:fn clip/tensors:method clip_:method cos:fn cos:method
        cos_:method cumprod:fn cumprod:method det:fn det:method div/tensor:fn div/tensor:method
        div/constant:fn div/constant:method div/rconstant:fn div/rconstant:method div/scalar:fn
        div/scalar:method div_:method div_/scalar:method divide/tensor:fn divide/tensor:method
        divide/constant:fn divide/constant:method divide/rconstant:fn divide/rconstant:method
        divide/scalar:fn divide/scalar:method dot:fn dot:method einsum/leaf:fn einsum/constant:fn
        elu:fn exp:fn exp:method exp2:fn exp2:method exp2_:method exp_:method expm1:fn expm1:method
        expm1_:method fmod/tensor:fn fmod/tensor:method fmod/rconstant:fn fmod/rconstant:method
        gather:fn gather:method gelu:fn ger/leaf:fn ger/leaf:method ger/constant:fn
        ger/constant:method index_add/leaf:fn index_add/leaf:method index_select:fn
        index_select:method inverse:fn inverse:method leaky_relu:fn log:fn log:method log10:fn
        log10:method log10_:method log1p:fn log1p:method log1p_:method log2:fn log2:method
        log2_:method log_:method log_softmax:fn log_softmax:method logdet:fn logdet:method
        logsumexp:fn logsumexp:method masked_fill:fn masked_fill:method masked_fill/tensor:fn
        masked_fill/tensor:method masked_fill_:method masked_select:fn masked_select:method
        matmul/leaf:fn matmul/leaf:method matmul/constant:fn matmul/constant:method
        matmul/rconstant:fn matmul/rconstant:method max/all:fn max/all:method max/dim:fn
        max/dim:method max/other:fn max/other:method maximum/tensor:fn maximum/tensor:method
        maximum/constant:fn maximum/constant:method min/all:fn min/all:method min/dim:fn
        min/dim:method min/other:fn min/other:method minimum/tensor:fn minimum/tensor:method
        minimum/constant:fn minimum/constant:method mm/leaf:fn mm/leaf:method mm/constant:fn
        mm/constant:method mm/rconstant:fn mm/rconstant:method mul/tensor:fn mul/tensor:method
        mul/constant:fn mul/constant:method mul/rconstant:fn mul/rconstant:method mul/scalar:fn
        mul/scalar:method mul_:method mul_/scalar:method multiply/tensor:fn multiply/tensor:method
        multiply/constant:fn multiply/constant:method multiply/rconstant:fn
        multiply/rconstant:method multiply/scalar:fn multiply/scalar:method mv/leaf:fn
        mv/leaf:method mv/constant:fn mv/constant:method nan_to_num:fn nan_to_num:method
        nan_to_num_:method nanmean/all:fn nanmean/all:method nanmean/dim:fn nanmean/dim:method
        nanmean/keepdim:fn nanmean/keepdim:method nansum/all:fn nansum/all:method nansum/dim:fn
        nansum/dim:method nansum/keepdim:fn nansum/keepdim:method norm/fro:fn norm/fro:method
        norm/p2dim:fn norm/p2dim:method norm/p1:fn norm/p1:method outer/leaf:fn outer/leaf:method
        outer/constant:fn outer/constant:method pow/tensor:fn pow/tensor:method pow/constant:fn
        pow/constant:method pow/rconstant:fn pow/rconstant:method pow/scalar:fn pow/scalar:method
        pow/rscalar:fn pow_:method prod/all:fn prod/all:method prod/dim:fn prod/dim:method
        prod/keepdim:fn prod/keepdim:method qr:fn qr:method reciprocal:fn reciprocal:method
        reciprocal_:method relu:fn relu:method relu_:method remainder/tensor:fn
        remainder/tensor:method remainder/rconstant:fn remainder/rconstant:method rsqrt:fn
        rsqrt:method rsqrt_:method scatter/src:fn scatter/src:method scatter/constant:fn
        scatter/constant:method scatter/value:fn scatter/value:method scatter_add/leaf:fn
        scatter_add/leaf:method selu:fn sgn:fn sgn:method sigmoid:fn sigmoid:method sigmoid_:method
        silu:fn sin:fn sin:method sin_:method slogdet:fn slogdet:method softmax:fn softmax:method
        softplus:fn sqrt:fn sqrt:method sqrt_:method square:fn square:method square_:method
        std/all:fn std/all:method std/dim:fn std/dim:method take:fn take:method take_along_dim:fn
        take_along_dim:method tan:fn tan:method tan_:method tanh:fn tanh:method tanh_:method
        true_divide/tensor:fn true_divide/tensor:method true_divide/constant:fn
        true_divide/constant:method true_divide/rconstant:fn true_divide/rconstant:method
        true_divide/scalar:fn true_divide/scalar:method var/all:fn var/all:method var/dim:fn
        var/dim:method where/tensors:fn where/constant:fn where/scalar:fn where/method:method
        F.batch_norm:F F.bilinear:F F.binary_cross_entropy:F F.binary_cross_entropy_with_logits:F
        F.cross_entropy:F F.cross_entropy/smooth:F F.cross_entropy/probs:F F.dropout:F F.elu:F
        F.embedding:F F.gelu:F F.huber_loss:F F.l1_loss:F F.layer_norm:F F.layer_norm/plain:F
        F.leaky_relu:F F.linear:F F.linear/constant:F F.log_softmax:F F.mse_loss:F F.nll_loss:F
        F.pad/reflect:F F.pad/replicate:F F.pad/circular:F F.relu:F F.relu_:F F.selu:F F.sigmoid:F
        F.silu:F F.smooth_l1_loss:F F.softmax:F F.softplus:F F.tanh:F
        F.conv1d:F F.conv1d/strided:F F.conv2d:F F.conv2d/same:F F.adaptive_avg_pool2d:F
        F.avg_pool1d:F F.avg_pool2d:F F.avg_pool2d/padded:F F.max_pool1d:F F.max_pool2d:F
        F.max_pool2d/padded:F
        """.split()),
    "nograd": set("""
        __and__:method __invert__:method __or__:method __rand__:method __ror__:method
        __rxor__:method __xor__:method all:fn all:method all/dim:fn all/dim:method allclose:fn
        allclose:method any:fn any:method any/dim:fn any/dim:method argmax:fn argmax:method
        argmax/dim:fn argmax/dim:method argmin:fn argmin:method argmin/dim:fn argmin/dim:method
        argwhere:fn argwhere:method bitwise_and:fn bitwise_and:method bitwise_not:fn
        bitwise_not:method bitwise_or:fn bitwise_or:method bitwise_xor:fn bitwise_xor:method
        bool:method count_nonzero:fn count_nonzero:method count_nonzero/dim:fn
        count_nonzero/dim:method eq:fn eq:method equal:fn equal:method ge:fn ge:method greater:fn
        greater:method greater_equal:fn greater_equal:method gt:fn gt:method int:method isclose:fn
        isclose:method isfinite:fn isfinite:method isinf:fn isinf:method isnan:fn isnan:method
        isneginf:fn isneginf:method isposinf:fn isposinf:method le:fn le:method less:fn less:method
        less_equal:fn less_equal:method logical_and:fn logical_and:method logical_not:fn
        logical_not:method logical_or:fn logical_or:method logical_xor:fn logical_xor:method
        long:method lt:fn lt:method ne:fn ne:method nonzero:fn nonzero:method not_equal:fn
        not_equal:method F.one_hot:F
        """.split()),
    "error1": set("""
        __floordiv__:method __rfloordiv__:method __rmod__:method floor_divide:fn floor_divide:method
        """.split()),
}
# issue 17 (missing ops, set A): the ops of cgrad/ops/special.py
EXPECTED["raise"] |= set("""
    acos:fn acos:method acos_:method acosh:fn acosh:method arccos:fn arccos:method
    arccos_:method arccosh:fn arccosh:method arcsin:fn arcsin:method arcsin_:method arcsinh:fn
    arcsinh:method arctan:fn arctan:method arctan2/tensor:fn arctan2/tensor:method
    arctan2/constant:fn arctan2/constant:method arctan2/rconstant:fn arctan2/rconstant:method
    arctan2_:method arctan_:method arctanh:fn arctanh:method asin:fn asin:method asin_:method
    asinh:fn asinh:method atan:fn atan:method atan2/tensor:fn atan2/tensor:method
    atan2/constant:fn atan2/constant:method atan2/rconstant:fn atan2/rconstant:method
    atan2_:method atan_:method atanh:fn atanh:method copysign/tensor:fn copysign/tensor:method
    copysign/constant:fn copysign/constant:method copysign/rconstant:fn
    copysign/rconstant:method copysign/scalar:fn copysign/scalar:method copysign_:method cosh:fn
    cosh:method cosh_:method erf:fn erf:method erf_:method erfc:fn erfc:method erfc_:method
    erfinv:fn erfinv:method erfinv_:method float_power/tensor:fn float_power/tensor:method
    float_power/constant:fn float_power/constant:method float_power/scalar:fn
    float_power/scalar:method float_power/rscalar:fn float_power_:method
    float_power_/tensor:method hypot/tensor:fn hypot/tensor:method hypot/constant:fn
    hypot/constant:method hypot/rconstant:fn hypot/rconstant:method hypot_:method lerp/tensor:fn
    lerp/tensor:method lerp/rconstant:fn lerp/rconstant:method lerp_/tensor:method
    logaddexp/tensor:fn logaddexp/tensor:method logaddexp/constant:fn logaddexp/constant:method
    logaddexp/rconstant:fn logaddexp/rconstant:method logaddexp2/tensor:fn
    logaddexp2/tensor:method logaddexp2/constant:fn logaddexp2/constant:method
    logaddexp2/rconstant:fn logaddexp2/rconstant:method logit:fn logit:method logit/eps:fn
    logit/eps:method logit_:method sinc:fn sinc:method sinc_:method sinh:fn sinh:method
    sinh_:method xlogy/tensor:fn xlogy/tensor:method xlogy/constant:fn xlogy/constant:method
    xlogy/rconstant:fn xlogy/rconstant:method xlogy/scalar:fn xlogy/scalar:method
    xlogy/rscalar:fn xlogy_:method
    """.split())
EXPECTED["error1"] |= set("""
    acosh_:method arccosh_:method arcsinh_:method arctanh_:method asinh_:method atanh_:method
    heaviside:fn heaviside:method heaviside_:method
    """.split())
EXPECTED["ok"] |= set("""
    F.adaptive_avg_pool2d/mean:F F.fold:F F.unfold:F F.unfold/strided:F F.interpolate:F
    F.interpolate/1d:F F.interpolate/bilinear:F F.interpolate/bicubic:F
    """.split())
EXPECTED["ok"] |= set("""
    deg2rad:fn deg2rad:method deg2rad_:method frac:fn frac:method frac_:method lerp/scalar:fn
    lerp/scalar:method lerp_:method rad2deg:fn rad2deg:method rad2deg_:method
    """.split())
# issue 17 (set A): cgrad/ops/triangular.py, cgrad/ops/products.py, cartesian_prod, rot90, diff
EXPECTED["raise"] |= set("""
    addbmm/leaf:fn addbmm/leaf:method addbmm/batch2:fn addbmm/batch2:method addbmm_:method
    addcdiv/leaf:fn addcdiv/leaf:method addcdiv/value:fn addcdiv/value:method addcdiv_:method
    addcmul/leaf:fn addcmul/leaf:method addcmul/value:fn addcmul/value:method addcmul_:method
    addmm/leaf:fn addmm/leaf:method addmm/mat1:fn addmm/mat1:method addmm_:method addmv/leaf:fn
    addmv/leaf:method addmv/vec:fn addmv/vec:method addmv_:method addr/leaf:fn addr/leaf:method
    addr/vec1:fn addr/vec1:method addr_:method baddbmm/leaf:fn baddbmm/leaf:method
    baddbmm_:method cdist/leaf:fn cdist/p1:fn cdist/mm:fn cross/leaf:fn cross/leaf:method
    cross/constant:fn cross/constant:method
    """.split())
EXPECTED["ok"] |= set("""
    addmm/constant:fn addmm/constant:method baddbmm/constant:fn baddbmm/constant:method
    cartesian_prod:fn diag/matrix:fn diag/matrix:method diag/vector:fn diag/vector:method
    diag_embed:fn diag_embed:method diag_embed/dims:fn diag_embed/dims:method diagonal:fn
    diagonal:method diagonal/dims:fn diagonal/dims:method diff:fn diff:method diff/prepend:fn
    diff/prepend:method diff/append:fn diff/append:method rot90:fn rot90:method rot90/k2:fn
    rot90/k2:method trace:fn trace:method tril:fn tril:method tril/k:fn tril/k:method
    tril/batched:fn tril/batched:method tril_:method triu:fn triu:method triu/k:fn triu/k:method
    triu/batched:fn triu/batched:method triu_:method
    """.split())
EXPECTED["nograd"] |= set("""
    tril_indices:fn triu_indices:fn
    """.split())
# torch 2.13's outcomes for the sorting and selection, statistics and scan ops
EXPECTED["raise"] |= set("""
    kthvalue:fn kthvalue:method median/all:fn median/all:method median/dim:fn median/dim:method
    mode:fn mode:method msort:fn msort:method nanmedian/all:fn nanmedian/all:method
    nanmedian/dim:fn nanmedian/dim:method nanquantile/scalar:fn nanquantile/scalar:method
    nanquantile/tensor:fn nanquantile/tensor:method quantile/scalar:fn quantile/scalar:method
    quantile/tensor:fn quantile/tensor:method sort/dim:fn sort/dim:method sort/stable:fn
    sort/stable:method topk:fn topk:method topk/smallest:fn topk/smallest:method
    cummax:fn cummax:method cummin:fn cummin:method logcumsumexp:fn logcumsumexp:method
    aminmax/all:fn aminmax/all:method aminmax/dim:fn aminmax/dim:method std_mean/all:fn
    std_mean/dim:fn var_mean/all:fn var_mean/dim:fn
    """.split())
EXPECTED["nograd"] |= set("""
    argsort:fn argsort:method bincount/counts:fn bincount/counts:method histc:fn histc:method
    bucketize:fn searchsorted:fn searchsorted/sorter:fn
    """.split())
EXPECTED["error1"] |= set("""
    bincount/weights:fn bincount/weights:method histogram/bins:fn histogram/bins:method
    histogram/edges:fn histogram/edges:method unique:fn unique:method unique/dim:fn
    unique/dim:method unique_consecutive:fn unique_consecutive:method unique_consecutive/dim:fn
    unique_consecutive/dim:method
    """.split())
# the norm, activation, loss, embedding_bag and attention functions of issue 18
EXPECTED["raise"] |= set("""
    F.celu:F F.cosine_embedding_loss:F F.cosine_similarity:F F.ctc_loss:F F.embedding_bag:F
    F.gaussian_nll_loss:F F.glu:F F.group_norm:F F.hardshrink:F F.hardsigmoid:F
    F.hardswish:F F.hardtanh:F F.hardtanh_:F F.hinge_embedding_loss:F F.instance_norm:F
    F.kl_div:F F.local_response_norm:F F.logsigmoid:F F.margin_ranking_loss:F F.mish:F
    F.multi_head_attention_forward:F F.multi_margin_loss:F F.multilabel_margin_loss:F
    F.multilabel_soft_margin_loss:F F.normalize:F F.pairwise_distance:F F.poisson_nll_loss:F
    F.prelu/channels:F F.prelu:F F.relu6:F F.rms_norm:F F.rrelu:F
    F.scaled_dot_product_attention/causal:F F.scaled_dot_product_attention:F
    F.soft_margin_loss:F F.softmin:F F.softshrink:F F.softsign:F F.tanhshrink:F
    F.threshold:F F.threshold_:F F.triplet_margin_loss:F
    F.triplet_margin_with_distance_loss:F
    """.split())


# -- the mechanism (Note [Freed saved values] in cgrad/_C_engine.pxi) -------------------------
def _x():
    return cgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)


@pytest.mark.parametrize("make", [
    lambda x: x * 2.0, lambda x: 2.0 * x, lambda x: x / 2.0, lambda x: x[[0, 2]],
    lambda x: x.max(0)[0], lambda x: x.masked_fill(cgrad.tensor([True, False, True]), 0.0),
], ids=["mul_scalar", "rmul_scalar", "div_scalar", "index", "max_dim", "masked_fill"])
def test_backward_frees_what_torch_saves(make):
    """A node that keeps in ctx._aux what torch saves as a tensor drops it after backward and
    then refuses to run, through backward, autograd.grad and a direct call; with
    retain_graph=True it keeps it and runs again."""
    x = _x()
    y = make(x)
    node = y.grad_fn
    assert node._aux is not None
    y.sum().backward(retain_graph=True)
    assert node._aux is not None
    y.sum().backward()
    assert node._aux is None
    for again in (lambda: y.sum().backward(), lambda: cgrad.autograd.grad(y.sum(), x),
                  lambda: node(cgrad.ones_like(y))):
        with pytest.raises(RuntimeError, match=SECOND_TIME):
            again()
    np.testing.assert_allclose(x.grad.numpy(), 2 * _grad(make))    # two runs accumulated


def _grad(make):
    x = _x()
    make(x).sum().backward()
    return x.grad.numpy()


def test_nodes_that_save_nothing_run_again():
    x = _x()
    y = (x + 1.0 - 2.0).reshape(3, 1).sum()
    for _ in range(3):
        y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])


@pytest.mark.filterwarnings("ignore:Using backward")
def test_create_graph_keeps_the_graph():
    x = _x()
    y = (x * 2.0).sum()
    y.backward(create_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.detach().numpy(), [4.0, 4.0, 4.0])


def test_custom_function_raises_only_when_it_reads_saved_tensors():
    """torch: a custom Function's node raises on a second run only if backward reads
    ctx.saved_tensors (its saved values are freed either way)."""
    class Reads(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2

    class Ignores(Reads):
        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = _x()
    y = Ignores.apply(x).sum()
    y.backward()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0, 4.0])
    y = Reads.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        y.backward()


def _main(argv):
    """Print torch's and cgrad's outcome per case; with --expected, the EXPECTED table."""
    import collections
    import textwrap
    torch = _torch()
    kinds = collections.defaultdict(list)
    differ = 0
    for cid, name, form, s in CASES:
        row = []
        for m in (torch, cgrad):
            for how in ("backward", "grad"):
                try:
                    r = outcome(m, name, form, s, how)
                except Exception as e:  # noqa: BLE001
                    r = ("forward-error", f"{type(e).__name__}: {e}"[:80])
                row.append(r[0] + (f"({r[1]})" if r[0] not in ("ok", "nograd", "raise")
                                   else ""))
        kinds[row[0].split("(")[0]].append(cid)
        mark = "" if row[:2] == row[2:] else "  <-- DIFFERS"
        differ += bool(mark)
        if "--expected" not in argv:
            print(f"{cid:40s} torch {row[0]:8s} {row[1]:8s} cgrad {row[2]:8s} {row[3]}{mark}")
    if "--expected" in argv:
        print("EXPECTED: dict = {  # torch 2.13 (regenerate: see the module docstring)")
        for kind, ids in kinds.items():
            print(f'    "{kind}": set("""')
            print(textwrap.indent(textwrap.fill(" ".join(ids), 92, break_on_hyphens=False,
                                                break_long_words=False), " " * 8))
            print('        """.split()),')
        print("}")
    else:
        print(f"{len(CASES)} cases, {differ} differ")


if __name__ == "__main__":
    _main(sys.argv[1:])
