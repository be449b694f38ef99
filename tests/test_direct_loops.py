"""Note [Direct loops] (cgrad/_C_binop.pxi): + - * / on small float arrays call NumPy's inner loop
directly. The values must be bit-identical to the ufunc's (inf and nan included), floating-point
errors give no warning and no error whatever NumPy's settings (Note [Quiet floating point], as
torch), in-place sums must never change their target when they fall back, and everything that
does not qualify must go through the ufunc."""
import warnings

import numpy as np
import pytest

import cgrad
from cgrad import _C

UFUNCS = (np.add, np.subtract, np.multiply, np.true_divide)
OPS = {0: "add", 1: "sub", 2: "mul", 3: "div"}


def _special(dtype, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(dtype)
    tiny = np.finfo(dtype).tiny
    extra = np.array([0.0, -0.0, 1.0, -1.5, tiny / 4, 3.0, np.pi], dtype=dtype)
    a[: min(n, len(extra))] = extra[: min(n, len(extra))]
    return a


def _same_bits(r, e):
    assert r.dtype == e.dtype and r.shape == e.shape
    assert r.tobytes() == np.ascontiguousarray(e).tobytes(), (r, e)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(), (1,), (8,), (3, 4), (2, 1, 5), (1024,), (128, 128),
                                   (0,), (4, 0)])
def test_bit_identical_to_the_ufunc(dtype, code, shape):
    n = int(np.prod(shape))
    a = _special(dtype, n, 1).reshape(shape)
    b = (_special(dtype, n, 2) + dtype(0.25)).reshape(shape)
    ks = (np.array(1.75, dtype=dtype), np.array(-3.0, dtype=dtype))
    cases = [(a, b), (b, a)] + [(a, k) for k in ks] + [(k, a) for k in ks]
    for p, q in cases:
        with np.errstate(all="raise"):            # the direct loop never raises nor warns
            r = _C._direct_binary(code, p, q)
        with np.errstate(all="ignore"):
            expected = np.asarray(UFUNCS[code](p, q))
        assert r is not None
        _same_bits(r, expected)


def test_what_does_not_qualify_goes_to_the_ufunc():
    a = np.ones((3, 4), np.float32)
    assert _C._direct_binary(2, a, a) is not None
    no = [
        (a, np.ones(4, np.float32)),                          # broadcasting
        (a.T.copy().T, a),                                    # not C-contiguous
        (a, a.astype(np.float64)),                            # mixed dtypes
        (a.astype(np.int64), a.astype(np.int64)),             # not float
        (a.astype(np.float16), a.astype(np.float16)),
        (a.astype(">f4"), a.astype(">f4")),                   # byte-swapped
        (np.ones(16385, np.float32), np.ones(16385, np.float32)),  # above _DL_MAX
        (a.view(np.matrix), a),                               # a subclass
        (a, 2.0),                                             # not an array
        (a, np.float32(2.0)),
    ]
    buf = np.zeros(4 * 12 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)   # misaligned
    assert not buf.flags.aligned
    no.append((buf, a))
    for x, y in no:
        assert _C._direct_binary(2, x, y) is None, (x, y)
        assert _C._direct_binary(2, y, x) is None, (y, x)
    # one element repeated (a sum's gradient): walked with step 0; partly broadcast: not
    rep = np.broadcast_to(np.array(2.5, np.float32), (3, 4))
    assert rep.strides == (0, 0)
    for code in range(4):
        _same_bits(_C._direct_binary(code, a + 1, rep), np.asarray(UFUNCS[code](a + 1, rep)))
        _same_bits(_C._direct_binary(code, rep, a + 1), np.asarray(UFUNCS[code](rep, a + 1)))
    part = np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4))
    assert _C._direct_binary(2, a, part) is None and _C._direct_binary(2, part, a) is None
    acc = a.copy()
    assert _C._direct_iadd(acc, rep) is True and acc.tolist() == [[3.5] * 4] * 3
    assert _C._direct_iadd(rep.copy()[:, ::2], a[:, :2]) is False      # target not contiguous
    with pytest.raises(ValueError, match="code must be"):
        _C._direct_binary(4, a, a)


def test_operators_match_numpy_including_fallbacks():
    rng = np.random.default_rng(0)
    for dtype in (cgrad.float32, cgrad.float64):
        for shape in [(), (5,), (3, 4), (1025,), (16385,)]:
            x = cgrad.tensor(rng.standard_normal(shape), dtype=dtype)
            y = cgrad.tensor(rng.standard_normal(shape) + 3.0, dtype=dtype)
            xa, ya = x.numpy(), y.numpy()
            for got, want in [(x + y, xa + ya), (x - y, xa - ya), (x * y, xa * ya),
                              (x / y, xa / ya), (x * 1.0001, xa * np.asarray(1.0001, xa.dtype)),
                              (x + 0.5, xa + xa.dtype.type(0.5)), (2.5 - x, 2.5 - xa),
                              (3.5 / y, 3.5 / ya), (x / 4.0, xa / 4.0)]:
                _same_bits(got.numpy(), np.asarray(want))


@pytest.mark.parametrize("dtype", [cgrad.float32, cgrad.float64])
@pytest.mark.parametrize("n", [2, 20000])        # the direct loop, and the ufunc above _DL_MAX
def test_floating_point_errors_are_silent_as_torch(dtype, n):
    big = float(np.finfo(np.float32 if dtype is cgrad.float32 else np.float64).max)
    x = cgrad.tensor([big, 1.0] * (n // 2), dtype=dtype)
    z = cgrad.zeros(n, dtype=dtype)
    one_zero = cgrad.tensor([1.0, 0.0] * (n // 2), dtype=dtype)
    for setting in ("raise", "warn"):
        with np.errstate(all=setting), warnings.catch_warnings():
            warnings.simplefilter("error")
            r = x * 10.0
            assert r.tolist()[:2] == [float("inf"), 10.0]
            q = one_zero / z
            assert q.tolist()[0] == float("inf") and np.isnan(q.tolist()[1])
            assert (x + x).tolist()[0] == float("inf")
            assert (2.0 / z).tolist()[0] == float("inf")
            assert (x - x * -1.0).tolist()[0] == float("inf")
            i = cgrad.tensor([0, 1] * (n // 2))
            assert (1.0 / i).tolist()[:2] == [float("inf"), 1.0]     # promoted int operand
    # the user's own NumPy code keeps the user's settings
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow"):
            x.numpy() * np.float32(10.0) if dtype is cgrad.float32 else x.numpy() * 10.0


def test_flags_set_before_do_not_leak_into_a_clean_op():
    with np.errstate(all="ignore"):
        np.float32(1e38) * np.float32(1e38)         # leaves the overflow flag set
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cgrad.tensor([1.0, 2.0]) * 3.0               # no stale warning


def test_in_place_sum_falls_back_without_touching_its_target():
    a = np.array([3e38, 1.0], np.float32)
    with np.errstate(all="raise"):
        assert _C._direct_iadd(a, a) is True        # overflows silently, as np.add ignoring
    assert a.tolist() == [float("inf"), 2.0]
    b = np.array([1.0, 2.0], np.float32)
    assert _C._direct_iadd(b, np.array(0.5, np.float32)) is True
    assert b.tolist() == [1.5, 2.5]
    assert _C._direct_iadd(b, b) is True and b.tolist() == [3.0, 5.0]
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    assert _C._direct_iadd(ro, np.ones(3, np.float32)) is False
    assert _C._direct_iadd(np.ones(3, np.float32), np.ones((1, 3), np.float32)) is False
    big = np.ones(1025, np.float32)                 # above the in-place scratch
    assert _C._direct_iadd(big, big) is False and big[0] == 1.0
    assert _C._direct_iadd(big[:1024], big[:1024]) is True
    for junk in (None, 1.0, [1.0], "x"):
        assert _C._direct_iadd(b, junk) is False and _C._direct_iadd(junk, b) is False
        assert _C._direct_binary(0, b, junk) is None and _C._direct_binary(0, junk, b) is None


def test_overlapping_in_place_sum_matches_numpy():
    base = np.arange(10, dtype=np.float64)
    a, b = base[:8], base[2:]          # overlapping contiguous views
    want = a + b
    assert _C._direct_iadd(a, b) is True
    assert np.array_equal(a, want)


def test_leaf_grad_accumulation_keeps_its_array_and_overflows_silently():
    x = cgrad.tensor([3e38, 1.0], requires_grad=True)
    (x * 1.0).sum().backward()
    g = x.grad
    arr = g.numpy()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        (x * 1.0).sum().backward()
    assert x.grad is g and x.grad.numpy() is arr          # accumulated in place
    assert x.grad.tolist() == [2.0, 2.0]
    x.grad = cgrad.tensor([3e38, 1.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        (x * 3e38).sum().backward()
    want = np.array([3e38, 1.0], np.float32)
    with np.errstate(over="ignore"):
        want += np.array([3e38, 3e38], np.float32)
    assert np.array_equal(x.grad.numpy(), want) and want[0] == np.inf
    assert not w                                    # silently, as torch


def test_engine_buffer_sums_match_numpy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(6)
    x = cgrad.tensor(a, requires_grad=True)
    y = x * 1.5 + x * 2.5 - x / 4.0 + (x * x)
    y.sum().backward()
    xa = a
    want = 1.5 + 2.5 - 1 / 4.0 + 2 * xa
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_against_torch_values():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32) + 2
    x, y = cgrad.tensor(a, requires_grad=True), cgrad.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    for lib, p, q in ((cgrad, x, y), (torch, tx, ty)):
        ((p * q + p / q - 0.5 * p) * 1.25).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6)


def _random_operand(rng, shape, dtype):
    """An array of `shape` made in one of the ways that reach the operators: fresh, 0-d,
    broadcast (fully or partly), transposed, sliced, reversed, misaligned, byte-swapped."""
    kind = rng.integers(0, 9)
    base = rng.standard_normal(shape).astype(dtype) + dtype(3)
    if kind == 0 or not shape:
        return base
    if kind == 1:
        return np.broadcast_to(np.array(dtype(rng.standard_normal()), dtype), shape)
    if kind == 2:
        row = rng.standard_normal(shape[-1:]).astype(dtype)
        return np.broadcast_to(row, shape)
    if kind == 3:
        return np.ascontiguousarray(base.T).T
    if kind == 4:
        big = rng.standard_normal(tuple(2 * d for d in shape)).astype(dtype)
        return big[tuple(slice(0, 2 * d, 2) for d in shape)]
    if kind == 5:
        return base[..., ::-1]
    if kind == 6:
        raw = np.zeros(base.nbytes + 1, np.uint8)[1:]
        out = raw.view(dtype).reshape(shape)
        out[...] = base
        return out
    if kind == 7:
        return base.astype(base.dtype.newbyteorder())
    return base[..., :]


def test_random_operands_match_the_ufunc_bit_for_bit():
    """Whatever the operands' layout, the result (direct loop or ufunc) is the ufunc's."""
    rng = np.random.default_rng(20261203)
    shapes = [(), (1,), (7,), (2, 3), (1, 4), (3, 1, 2), (33,)]
    taken = 0
    for _ in range(1500):
        dtype = (np.float32, np.float64)[rng.integers(0, 2)]
        shape = shapes[rng.integers(0, len(shapes))]
        a = _random_operand(rng, shape, dtype)
        b = _random_operand(rng, shape if rng.random() < 0.8 else (), dtype)
        if rng.random() < 0.5:
            a, b = b, a
        code = int(rng.integers(0, 4))
        with np.errstate(all="ignore"):
            want = np.asarray(UFUNCS[code](a, b))
        r = _C._direct_binary(code, a, b)
        if r is not None:
            taken += 1
            _same_bits(r, want.astype(want.dtype.newbyteorder("=")))
        got = (OPS_T[code](cgrad.from_numpy(np.array(a)), cgrad.from_numpy(np.array(b))))
        np.testing.assert_array_equal(got.numpy(), want)
        acc = np.array(a)
        if acc.shape == np.broadcast_shapes(acc.shape, np.shape(b)) and \
                _C._direct_iadd(acc, b):
            with np.errstate(all="ignore"):
                _same_bits(acc, np.asarray(np.add(a, b)).astype(acc.dtype))
    assert taken > 300          # the layouts that qualify do take the direct loop


OPS_T = {0: lambda x, y: x + y, 1: lambda x, y: x - y, 2: lambda x, y: x * y,
         3: lambda x, y: x / y}
