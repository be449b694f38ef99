"""Tests for cgrad/_tensor_str.py: torch's repr, written out and compared with torch's own.

The module under test is loaded by file path so these tests do not need the rest of
cgrad to be importable. The first section needs no torch: its expected strings are written
out (taken once from torch 2.13, and checked against torch by the test after it whenever
torch is importable). Everything after it compares with torch's repr directly and skips
without torch.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

try:
    import torch
except ImportError:     # the written-out section runs; the comparisons with torch skip
    torch = None

_PATH = pathlib.Path(__file__).resolve().parents[1] / "cgrad" / "_tensor_str.py"
_spec = importlib.util.spec_from_file_location("_cgrad_tensor_str_under_test", _PATH)
ts = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ts
_spec.loader.exec_module(ts)
format_tensor = ts.format_tensor

F = np.float32

# --------------------------------------------------------------------------------------
# Written out (no torch needed): name -> (array, format_tensor keywords, torch's repr)
# --------------------------------------------------------------------------------------

WRITTEN = {
    "scalar": (np.array(3.14159, F), {}, "tensor(3.1416)"),
    "scalar_int_valued": (np.array(1.0, F), {}, "tensor(1.)"),
    "scalar_negzero": (np.array(-0.0, F), {}, "tensor(-0.)"),
    "scalar_nan": (np.array(np.nan, F), {}, "tensor(nan)"),
    "scalar_int64": (np.array(7, np.int64), {}, "tensor(7)"),
    "scalar_bool": (np.array(True), {}, "tensor(True)"),
    "scalar_f64": (np.array(0.1, np.float64), {}, "tensor(0.1000, dtype=cgrad.float64)"),
    "vec_frac": (np.array([1.0, 2.5], F), {}, "tensor([1.0000, 2.5000])"),
    "vec_int_valued": (np.array([-1.0, 20.0, -300.0], F), {}, "tensor([  -1.,   20., -300.])"),
    "vec_sci": (np.array([1e-5, 1e5], F), {}, "tensor([1.0000e-05, 1.0000e+05])"),
    "vec_sci_ratio": (np.array([1.0, 1001.0], F), {}, "tensor([1.0000e+00, 1.0010e+03])"),
    "vec_nonfinite": (np.array([1.5, np.nan, -np.inf], F), {},
                      "tensor([1.5000,    nan,   -inf])"),
    "vec_int32": (np.array([1, 2], np.int32), {}, "tensor([1, 2], dtype=cgrad.int32)"),
    "vec_uint8": (np.array([0, 255], np.uint8), {}, "tensor([  0, 255], dtype=cgrad.uint8)"),
    "vec_bool": (np.array([True, False, True]), {}, "tensor([ True, False,  True])"),
    "vec_f16": (np.array([0.1, 65504.0, -1.0], np.float16), {},
                "tensor([ 9.9976e-02,  6.5504e+04, -1.0000e+00], dtype=cgrad.float16)"),
    "vec_f64_third": (np.array([1.0 / 3, 2.0], np.float64), {},
                      "tensor([0.3333, 2.0000], dtype=cgrad.float64)"),
    "vec_wraps": (np.arange(12, dtype=F) * 1.25, {},
                  "tensor([ 0.0000,  1.2500,  2.5000,  3.7500,  5.0000,  6.2500,  7.5000,  "
                  "8.7500,\n        10.0000, 11.2500, 12.5000, 13.7500])"),
    "vec_summarized": (np.arange(1001, dtype=F), {},
                       "tensor([   0.,    1.,    2.,  ...,  998.,  999., 1000.])"),
    "vec_summarized_int": (np.arange(1001, dtype=np.int64), {},
                           "tensor([   0,    1,    2,  ...,  998,  999, 1000])"),
    "mat_2x3": (np.arange(6, dtype=F).reshape(2, 3) / 3, {},
                "tensor([[0.0000, 0.3333, 0.6667],\n        [1.0000, 1.3333, 1.6667]])"),
    "mat_int": (np.arange(12, dtype=np.int64).reshape(3, 4) - 5, {},
                "tensor([[-5, -4, -3, -2],\n        [-1,  0,  1,  2],\n        [ 3,  4,  5,  6]])"),
    "mat_sci": (np.array([[1e-8, 1.0], [3.0, -1e9]], F), {},
                "tensor([[ 1.0000e-08,  1.0000e+00],\n        [ 3.0000e+00, -1.0000e+09]])"),
    "mat_summarized": (
        np.arange(40 * 40, dtype=F).reshape(40, 40), {},
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 3.7000e+01, 3.8000e+01,\n"
        "         3.9000e+01],\n"
        "        [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 7.7000e+01, 7.8000e+01,\n"
        "         7.9000e+01],\n"
        "        [8.0000e+01, 8.1000e+01, 8.2000e+01,  ..., 1.1700e+02, 1.1800e+02,\n"
        "         1.1900e+02],\n"
        "        ...,\n"
        "        [1.4800e+03, 1.4810e+03, 1.4820e+03,  ..., 1.5170e+03, 1.5180e+03,\n"
        "         1.5190e+03],\n"
        "        [1.5200e+03, 1.5210e+03, 1.5220e+03,  ..., 1.5570e+03, 1.5580e+03,\n"
        "         1.5590e+03],\n"
        "        [1.5600e+03, 1.5610e+03, 1.5620e+03,  ..., 1.5970e+03, 1.5980e+03,\n"
        "         1.5990e+03]])"),
    "t3": (np.arange(12, dtype=F).reshape(2, 3, 2) - 5.5, {},
           "tensor([[[-5.5000, -4.5000],\n         [-3.5000, -2.5000],\n"
           "         [-1.5000, -0.5000]],\n\n        [[ 0.5000,  1.5000],\n"
           "         [ 2.5000,  3.5000],\n         [ 4.5000,  5.5000]]])"),
    "empty": (np.zeros((0,), F), {}, "tensor([])"),
    "empty_2d": (np.zeros((0, 3), F), {}, "tensor([], size=(0, 3))"),
    "empty_int": (np.zeros((2, 0), np.int64), {},
                  "tensor([], size=(2, 0), dtype=cgrad.int64)"),
    "requires_grad": (np.array([1.0, 2.0], F), {"requires_grad": True},
                      "tensor([1., 2.], requires_grad=True)"),
    "requires_grad_f64": (np.array([0.5], np.float64), {"requires_grad": True},
                          "tensor([0.5000], dtype=cgrad.float64, requires_grad=True)"),
    "grad_fn": (np.array(6.0, F), {"grad_fn_name": "SumBackward0"},
                "tensor(6., grad_fn=<SumBackward0>)"),
    "grad_fn_wraps": (np.arange(10, dtype=F) * 1.25, {"grad_fn_name": "MulBackward0"},
                      "tensor([ 0.0000,  1.2500,  2.5000,  3.7500,  5.0000,  6.2500,  7.5000,  "
                      "8.7500,\n        10.0000, 11.2500], grad_fn=<MulBackward0>)"),
}

WRITTEN_OPTIONS = {
    "precision2": (np.arange(6, dtype=F).reshape(2, 3) / 3, {"precision": 2},
                   "tensor([[0.00, 0.33, 0.67],\n        [1.00, 1.33, 1.67]])"),
    "sci_off": (np.array([1e-5, 1e5], F), {"sci_mode": False},
                "tensor([     0.0000, 100000.0000])"),
    "threshold5": (np.arange(10, dtype=np.int64), {"threshold": 5, "edgeitems": 2},
                   "tensor([0, 1,  ..., 8, 9])"),
    "linewidth40": (np.arange(12, dtype=F) * 1.25, {"linewidth": 40},
                    "tensor([ 0.0000,  1.2500,  2.5000,\n         3.7500,  5.0000,  6.2500,\n"
                    "         7.5000,  8.7500, 10.0000,\n        11.2500, 12.5000, 13.7500])"),
}

# with float64 as the default dtype: float64 needs no dtype= and float32 does
WRITTEN_DEFAULT_FLOAT64 = {
    "f64": (np.array([1.0, 2.5]), "tensor([1.0000, 2.5000])"),
    "f32": (np.array([1.0, 2.5], F), "tensor([1.0000, 2.5000], dtype=cgrad.float32)"),
    "int": (np.array([1, 2]), "tensor([1, 2])"),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_written_out(name):
    arr, kw, want = WRITTEN[name]
    assert format_tensor(arr, default_dtype=np.dtype(F), **kw) == want


@pytest.mark.parametrize("name", sorted(WRITTEN_OPTIONS))
def test_written_out_printoptions(name):
    arr, opts, want = WRITTEN_OPTIONS[name]
    with ts.printoptions(**opts):
        assert format_tensor(arr, default_dtype=np.dtype(F)) == want
    assert ts.get_printoptions() == dict(
        precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None
    )


@pytest.mark.parametrize("name", sorted(WRITTEN_DEFAULT_FLOAT64))
def test_written_out_default_float64(name):
    arr, want = WRITTEN_DEFAULT_FLOAT64[name]
    assert format_tensor(arr, default_dtype=np.dtype(np.float64)) == want


def test_written_out_strings_are_torchs():
    """The strings above are torch's (re-derived here whenever torch is importable)."""
    torch = pytest.importorskip("torch")

    def torch_repr(arr, kw):
        t = torch.from_numpy(np.array(arr, copy=True))
        if kw.get("grad_fn_name") == "SumBackward0":
            t = t.reshape(1).requires_grad_().sum()
        elif kw.get("grad_fn_name") == "MulBackward0":
            t = t.requires_grad_() * 1
        elif kw.get("requires_grad"):
            t.requires_grad_()
        if kw.get("grad_fn_name"):
            assert type(t.grad_fn).__name__ == kw["grad_fn_name"]
        return repr(t).replace("torch.", "cgrad.")

    for name, (arr, kw, want) in WRITTEN.items():
        assert torch_repr(arr, kw) == want, name
    for name, (arr, opts, want) in WRITTEN_OPTIONS.items():
        with torch._tensor_str.printoptions(**opts):
            assert torch_repr(arr, {}) == want, name
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for name, (arr, want) in WRITTEN_DEFAULT_FLOAT64.items():
            assert torch_repr(arr, {}) == want, name
    finally:
        torch.set_default_dtype(old)


# --------------------------------------------------------------------------------------
# Compared with torch's repr (skipped without torch)
# --------------------------------------------------------------------------------------


@pytest.fixture
def oracle():
    return pytest.importorskip("torch")


needs_torch = pytest.mark.usefixtures("oracle")


def _default_np_dtype():
    np_of_torch = {torch.float16: np.float16, torch.float32: np.float32,
                   torch.float64: np.float64}
    return np.dtype(np_of_torch[torch.get_default_dtype()])


def expected(t):
    return repr(t).replace("torch.", "cgrad.")


def check(arr, **kw):
    pytest.importorskip("torch")
    arr = np.ascontiguousarray(arr)
    got = format_tensor(arr, default_dtype=_default_np_dtype(), **kw)
    t = torch.from_numpy(arr.copy())
    if kw.get("requires_grad"):
        t.requires_grad_()
    want = expected(t)
    assert got == want, f"\n--- got ---\n{got}\n--- torch ---\n{want}"


# --------------------------------------------------------------------------------------
# Hand-picked cases
# --------------------------------------------------------------------------------------

CASES = {
    # 0-d
    "scalar_float": np.array(1.0, F),
    "scalar_frac": np.array(3.14159, F),
    "scalar_neg": np.array(-2.5, F),
    "scalar_zero": np.array(0.0, F),
    "scalar_negzero": np.array(-0.0, F),
    "scalar_nan": np.array(np.nan, F),
    "scalar_inf": np.array(np.inf, F),
    "scalar_ninf": np.array(-np.inf, F),
    "scalar_tiny": np.array(1e-7, F),
    "scalar_huge": np.array(1e10, F),
    "scalar_int64": np.array(7, np.int64),
    "scalar_int32": np.array(-7, np.int32),
    "scalar_bool": np.array(True),
    "scalar_f64": np.array(0.1, np.float64),
    "scalar_f16": np.array(0.1, np.float16),
    # 1-d
    "vec_basic": np.array([1.0, 2.5], F),
    "vec_intvalued": np.array([1.0, 2.0, 3.0], F),
    "vec_intvalued_neg": np.array([-1.0, 20.0, -300.0], F),
    "vec_zeros": np.zeros(4, F),
    "vec_negzero": np.array([-0.0, 0.0, 1.0], F),
    "vec_sci": np.array([1e-5, 1e5], F),
    "vec_sci_ratio": np.array([1.0, 1001.0], F),
    "vec_no_sci_ratio": np.array([1.5, 1000.0], F),
    "vec_big": np.array([1e8, 2e8], F),
    "vec_big_int": np.array([123456789.0, 1.0], np.float64),
    "vec_nan": np.array([1.0, np.nan], F),
    "vec_nan_frac": np.array([1.5, np.nan, -np.inf], F),
    "vec_inf_only": np.array([np.inf, -np.inf, np.nan], F),
    "vec_inf_int": np.array([np.inf, 2.0, -3.0], F),
    "vec_sci_nan": np.array([1e-10, np.nan, np.inf, 0.0, -1e10], F),
    "vec_mixed_int_float": np.array([1.0, 2.0, 3.5], F),
    "vec_neg": np.array([-1.25, 3.0, -0.001], F),
    "vec_tiny": np.array([1e-30, -2e-35], F),
    "vec_long": np.arange(100, dtype=F) / 7,
    "vec_long_int": np.arange(60, dtype=np.int64) * 12345,
    "vec_long_neg": -np.arange(40, dtype=F),
    "vec_int64": np.array([1, 2, 3], np.int64),
    "vec_int32": np.array([1, 2], np.int32),
    "vec_int16": np.array([-1, 300], np.int16),
    "vec_int8": np.array([-128, 127], np.int8),
    "vec_uint8": np.array([0, 255], np.uint8),
    "vec_bool": np.array([True, False]),
    "vec_f64": np.array([1.0, 2.0], np.float64),
    "vec_f64_frac": np.array([1.0 / 3, 2.0], np.float64),
    "vec_f16": np.array([0.1, 65504.0, -1.0], np.float16),
    "vec_f16_tiny": np.array([6e-8, 1.0], np.float16),
    "vec_f16_int": np.array([1.0, 2.0], np.float16),
    "vec_one": np.array([5.0], F),
    "vec_1000": np.arange(1000, dtype=F),
    "vec_1001": np.arange(1001, dtype=F),
    "vec_1001_int": np.arange(1001, dtype=np.int64),
    "vec_1001_bool": np.arange(1001) % 3 == 0,
    "vec_huge_sum": np.concatenate([np.array([1e-9], F), np.ones(2000, F), np.array([1e9], F)]),
    "vec_summ_middle_ignored": np.concatenate(
        [np.ones(3, F), np.full(2000, 1e-9, F), np.ones(3, F)]
    ),
    # 2-d
    "mat_2x3": np.arange(6, dtype=F).reshape(2, 3) / 3,
    "mat_int": np.arange(12, dtype=np.int64).reshape(3, 4) - 5,
    "mat_bool": (np.arange(12).reshape(4, 3) % 2 == 0),
    "mat_1x1": np.array([[2.0]], F),
    "mat_col": np.arange(5, dtype=F).reshape(5, 1),
    "mat_wide": np.arange(60, dtype=F).reshape(2, 30) * 1.5,
    "mat_sci": np.array([[1e-8, 1.0], [3.0, -1e9]], F),
    "mat_nan": np.array([[np.nan, 1.0], [np.inf, -2.0]], F),
    "mat_f64": np.eye(3),
    "mat_summ_rows": np.arange(2000, dtype=F).reshape(1000, 2),
    "mat_summ_cols": np.arange(2000, dtype=F).reshape(2, 1000),
    "mat_summ_both": np.arange(40 * 40, dtype=F).reshape(40, 40) / 9,
    "mat_summ_small_rows": np.arange(6 * 200, dtype=np.int64).reshape(6, 200),
    "mat_summ_7rows": np.arange(7 * 200, dtype=np.int32).reshape(7, 200),
    # 3-d and more
    "t3_small": np.arange(24, dtype=F).reshape(2, 3, 4) - 11.5,
    "t3_int": np.arange(24, dtype=np.int64).reshape(2, 3, 4),
    "t3_summ": np.arange(20 * 20 * 20, dtype=F).reshape(20, 20, 20) * 0.1,
    "t3_summ_f64": np.linspace(-1, 1, 11 * 11 * 11).reshape(11, 11, 11),
    "t4": np.arange(16, dtype=F).reshape(2, 2, 2, 2),
    "t5_summ": np.arange(5**5, dtype=F).reshape(5, 5, 5, 5, 5),
    # empty
    "empty_0": np.zeros((0,), F),
    "empty_0_int": np.zeros((0,), np.int64),
    "empty_0_bool": np.zeros((0,), bool),
    "empty_0_f64": np.zeros((0,), np.float64),
    "empty_0_int32": np.zeros((0,), np.int32),
    "empty_0x3": np.zeros((0, 3), F),
    "empty_2x0": np.zeros((2, 0), F),
    "empty_2x0_int": np.zeros((2, 0), np.int64),
    "empty_2x0x3": np.zeros((2, 0, 3), np.float16),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases(name):
    check(CASES[name])


@pytest.mark.parametrize(
    "name",
    ["scalar_float", "vec_basic", "mat_2x3", "empty_0", "empty_0x3", "vec_1001", "vec_f64", "t3_small"],
)
def test_requires_grad_leaf(name):
    check(CASES[name], requires_grad=True)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: (x * 2).sum(),
        lambda x: x * 2,
        lambda x: x + 1,
        lambda x: x.exp(),
        lambda x: x.reshape(-1),
        lambda x: x[0],
        lambda x: x.double() / 3,
        lambda x: x.half(),
        lambda x: x.mean(),
        lambda x: torch.nn.functional.relu(x) * 1e-6,
    ],
)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (10, 20, 10)])
@needs_torch
def test_grad_fn(make, shape):
    x = torch.linspace(-2, 3, int(np.prod(shape)) or 1).reshape(shape).requires_grad_()
    if shape == ():
        x = torch.tensor(1.5, requires_grad=True)
    try:
        y = make(x)
    except (IndexError, RuntimeError):
        pytest.skip("op not applicable to this shape")
    got = format_tensor(
        y.detach().numpy(),
        default_dtype=_default_np_dtype(),
        requires_grad=True,
        grad_fn_name=type(y.grad_fn).__name__,
    )
    assert got == expected(y), f"\n{got}\n{expected(y)}"


@needs_torch
def test_grad_fn_wins_over_requires_grad():
    x = torch.tensor([1.0], requires_grad=True)
    y = x * 2
    got = format_tensor(
        np.array([2.0], np.float32),
        default_dtype=np.float32,
        requires_grad=True,
        grad_fn_name="MulBackward0",
    )
    assert got == expected(y) == "tensor([2.], grad_fn=<MulBackward0>)"


def test_examples_from_spec():
    f32 = np.float32
    assert format_tensor(np.array([1.0, 2.5], f32), default_dtype=f32) == "tensor([1.0000, 2.5000])"
    assert (
        format_tensor(np.array([2.0], f32), default_dtype=f32, grad_fn_name="MyFunctionBackward")
        == "tensor([2.], grad_fn=<MyFunctionBackward>)"
    )
    assert format_tensor(np.array([1.0], f32), default_dtype=f32, requires_grad=True) == (
        "tensor([1.], requires_grad=True)"
    )
    assert (
        format_tensor(np.array(1.0, f32), default_dtype=f32, grad_fn_name="SumBackward0")
        == "tensor(1., grad_fn=<SumBackward0>)"
    )
    assert format_tensor(np.array([1.0, 2.0]), default_dtype=f32) == (
        "tensor([1., 2.], dtype=cgrad.float64)"
    )
    assert format_tensor(np.zeros((0, 3), f32), default_dtype=f32) == "tensor([], size=(0, 3))"
    assert format_tensor(np.array([1, 2, 3]), default_dtype=f32) == "tensor([1, 2, 3])"
    assert format_tensor(np.array([1, 2], np.int32), default_dtype=f32) == (
        "tensor([1, 2], dtype=cgrad.int32)"
    )
    # torch right-aligns bools to a common width
    assert format_tensor(np.array([True, False]), default_dtype=f32) == "tensor([ True, False])"
    assert format_tensor(np.array([1e-5, 1e5], f32), default_dtype=f32) == (
        "tensor([1.0000e-05, 1.0000e+05])"
    )


# --------------------------------------------------------------------------------------
# Suffix wrapping, prefixes, default dtype, print options
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 14))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@needs_torch
def test_suffix_wrapping(n, dtype):
    # lengths around the 80-column limit, with and without extra suffixes
    arr = (np.arange(n) * 1.25).astype(dtype)
    check(arr)
    if arr.dtype.kind == "f":
        check(arr, requires_grad=True)
        t = torch.from_numpy(arr.copy()).requires_grad_()
        y = t * 1
        got = format_tensor(
            arr, default_dtype=_default_np_dtype(), grad_fn_name=type(y.grad_fn).__name__
        )
        assert got == expected(y)


@needs_torch
def test_custom_prefix():
    class MyTensor(torch.Tensor):
        pass

    arr = np.arange(60, dtype=np.float64).reshape(3, 20) / 7
    t = torch.from_numpy(arr).as_subclass(MyTensor)
    got = format_tensor(arr, default_dtype=np.float32, prefix="MyTensor(")
    assert got == expected(t)


@pytest.fixture
def default_float64(oracle):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize(
    "name",
    ["vec_basic", "vec_f64", "vec_f16", "vec_int64", "vec_int32", "empty_0", "empty_0_f64", "scalar_f64"],
)
def test_default_dtype_float64(default_float64, name):
    assert _default_np_dtype() == np.float64
    check(CASES[name])


@pytest.mark.parametrize(
    "opts",
    [
        dict(precision=2),
        dict(precision=8),
        dict(threshold=5),
        dict(threshold=5, edgeitems=1),
        dict(threshold=5, edgeitems=0),
        dict(linewidth=40),
        dict(sci_mode=True),
        dict(sci_mode=False),
        dict(profile="short"),
        dict(profile="full"),
    ],
)
@pytest.mark.parametrize(
    "name", ["vec_long", "mat_2x3", "t3_small", "vec_sci", "vec_int64", "mat_summ_both", "vec_1001", "scalar_frac"]
)
@needs_torch
def test_printoptions(opts, name):
    with torch._tensor_str.printoptions(**opts), ts.printoptions(**opts):
        check(CASES[name])
    assert ts.get_printoptions() == dict(
        precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None
    )


# --------------------------------------------------------------------------------------
# Randomised comparison
# --------------------------------------------------------------------------------------

_SHAPES = [(), (1,), (5,), (17,), (2, 3), (4, 1), (1, 9), (3, 4, 5), (2, 1, 3, 2), (1200,), (30, 50), (3, 7, 60)]
_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


def _random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(10 ** int(rng.integers(1, 12)))), min(info.max, 10 ** int(rng.integers(1, 12)))
        return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True)).astype(dtype)
    kind = rng.integers(0, 6)
    if kind == 0:  # plain normal
        x = rng.standard_normal(shape)
    elif kind == 1:  # integer valued
        x = np.round(rng.standard_normal(shape) * 50)
    elif kind == 2:  # wide magnitude range
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-12, 12, size=shape)
    elif kind == 3:  # single scale
        x = rng.standard_normal(shape) * 10.0 ** int(rng.integers(-10, 10))
    elif kind == 4:  # sprinkled non-finite values
        x = rng.standard_normal(shape)
        x = np.where(rng.random(shape) < 0.2, np.nan, x)
        x = np.where(rng.random(shape) < 0.1, np.inf, x)
        x = np.where(rng.random(shape) < 0.1, -np.inf, x)
    else:  # zeros and small ints
        x = rng.integers(-2, 3, size=shape).astype(np.float64)
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(dtype)


@pytest.mark.parametrize("seed", range(40))
def test_random(seed):
    rng = np.random.default_rng(seed)
    for shape in _SHAPES:
        for dtype in _DTYPES:
            arr = _random_array(rng, shape, dtype)
            check(arr)


# --------------------------------------------------------------------------------------
# Misc
# --------------------------------------------------------------------------------------


@needs_torch
def test_huge_array_is_summarised():
    # (no timing assertion: speed belongs to bench/)
    arr = np.arange(4_000_000, dtype=np.float32).reshape(2000, 2000) / 3
    got = format_tensor(arr, default_dtype=np.float32)
    assert got == expected(torch.from_numpy(arr))

    arr1 = np.arange(10_000_000, dtype=np.int64)
    got = format_tensor(arr1, default_dtype=np.float32)
    assert got == expected(torch.from_numpy(arr1))


@needs_torch
def test_non_contiguous_and_non_native():
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::2] / 7
    got = format_tensor(arr, default_dtype=np.float32)
    assert got == expected(torch.from_numpy(arr.copy()))
    be = np.arange(5, dtype=">f4") / 3
    assert format_tensor(be, default_dtype=np.float32) == expected(
        torch.from_numpy(be.astype("<f4"))
    )


def test_unsupported_dtype():
    with pytest.raises(TypeError):
        format_tensor(np.array(["a"]), default_dtype=np.float32)
