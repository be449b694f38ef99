# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# The + - * / fast path: the op table registered by cgrad/ops/__init__.py, _binop (called by
# TensorBase's number slots) and _record_binop, torch's broadcasting message, and what
# makes + - * / on small arrays fast: the cache of scalars as 0-d arrays and the direct calls
# of NumPy's inner loops (which the engine's gradient sums use too). Notes here: Note
# [Operator fast path], Note [Scalar cache], Note [Direct loops].


# --------------------------------------------------------------------------------------
# Operator dispatch (registered by cgrad/ops/__init__.py)

cdef list _tt_ops = [None] * 5      # tensor-tensor op per code
cdef list _ts_ops = [None] * 5      # tensor-scalar op per code
cdef list _st_ops = [None] * 5      # scalar-tensor (reflected) op per code, called as (t, s)
cdef _FnInfo _neg_info = None
cdef object _list_to_tensor = None
_BINOP_CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4}


def _register_binops(dict table, neg, list_to_tensor, promote):
    global _neg_info, _list_to_tensor, _promote_py
    _promote_py = promote
    for name, (tt, ts, st) in table.items():
        code = _BINOP_CODES[name]
        _tt_ops[code] = _info_of(tt)
        _ts_ops[code] = _info_of(ts)
        _st_ops[code] = _info_of(st)
    _neg_info = _info_of(neg)
    _list_to_tensor = list_to_tensor


cdef object _promote_py = None     # cgrad.ops.promotion.promote_any(out, x, y_or_scalar)

# Note [Operator fast path]: + - * / between tensors and scalars are the hottest calls in
# any model, so _binop computes them here instead of going through Function.apply and a
# Python forward. The node it records is identical to what the registered Function's
# forward would record (same class, edges, saved tensors, ctx._aux), so that Function's
# backward runs unchanged; tests/test_ops_core.py compares both paths.
_BCAST = "operands could not be broadcast together with shapes "


cdef void _raise_broadcast_error(object e) except *:
    """Turn NumPy's broadcasting ValueError into torch's RuntimeError (same text)."""
    msg = str(e)
    if not msg.startswith(_BCAST):
        return
    import re
    shapes = [tuple(int(d) for d in m.split(",") if d.strip())
              for m in re.findall(r"\(([\d,]*)\)", msg)]
    if len(shapes) < 2:
        return
    sa = shapes[0]
    for sb in shapes[1:]:       # pairwise, as the operands are broadcast in turn
        n = max(len(sa), len(sb))
        acc = []
        for k in range(1, n + 1):
            da = sa[len(sa) - k] if k <= len(sa) else 1
            db = sb[len(sb) - k] if k <= len(sb) else 1
            if da != db and da != 1 and db != 1:
                raise RuntimeError(
                    f"The size of tensor a ({da}) must match the size of tensor b ({db}) at "
                    f"non-singleton dimension {n - k}") from None
            acc.append(da if db == 1 else db)
        sa = tuple(reversed(acc))


def _raise_if_broadcast(e):
    """Raise torch's RuntimeError if `e` is NumPy's broadcasting ValueError (else return)."""
    _raise_broadcast_error(e)


# Note [Scalar cache]: NumPy multiplies a float32 array by a 0-d float32 array ~0.3 us
# faster than by a Python float (no weak-scalar conversion and no scalar-to-array wrapping on
# every call). Python scalars seen by the operators are converted once per float dtype to a
# read-only 0-d array of the array's own dtype and kept in a bounded dict (dict operations
# are atomic under the GIL, so threads are safe); a loop like `y = y * 1.0001; y = y + 0.5`
# hits it every time. Only float32/float64 arrays, and only values whose conversion is exact
# or rounds to a finite number, use it, so the result dtype and values are the same as with
# the Python scalar (NEP 50: the array's dtype). Zeros are never cached: -0.0 == 0.0 as
# dict keys, but x * -0.0 and x * 0.0 differ in sign. The 0-d array only feeds the ufunc;
# nodes keep the Python scalar (ctx._aux), so backward sees a scalar, as torch's does.
cdef dict _sc_f32 = {}
cdef dict _sc_f64 = {}
cdef object _np_float32 = np.float32
cdef object _np_float64 = np.float64
cdef object _np_subtract = np.subtract
cdef object _np_multiply = np.multiply
cdef object _np_divide = np.true_divide
cdef object _dt_f32 = np.dtype(np.float32)
cdef object _dt_f64 = np.dtype(np.float64)
DEF _SC_MAX = 256


# In front of the dicts, a small table per dtype keyed by object identity: a loop
# multiplying by the literal 1.0001 passes the same float object every time, so `is` finds
# it without hashing. A slot's key and value are stored together with no Python call in
# between (atomic under the GIL), and the table holds its keys, so a key's address cannot be
# reused while it is cached. The slot comes from the address: pymalloc puts Python floats in
# 32-byte blocks at the same offset mod 32 and pools 4 KiB apart, so bits 5.. tell apart the
# floats of one pool and bits 11.. the pools (bits 4.. would leave half the slots unused and
# made the two literals of the loop above share one slot, each evicting the other).
DEF _RT_SIZE = 64
cdef list _rk32 = [None] * _RT_SIZE, _rv32 = [None] * _RT_SIZE
cdef list _rk64 = [None] * _RT_SIZE, _rv64 = [None] * _RT_SIZE


cdef inline object _np_scalar(object other, object x):
    cdef int t = cnp.PyArray_TYPE(<cnp.ndarray>x)
    cdef dict d
    cdef list keys, vals
    cdef double v
    cdef size_t a = <size_t><PyObject *>other
    cdef Py_ssize_t h = <Py_ssize_t>(((a >> 5) ^ (a >> 11)) & (_RT_SIZE - 1))
    if t == cnp.NPY_FLOAT:
        d, keys, vals = _sc_f32, _rk32, _rv32
    elif t == cnp.NPY_DOUBLE:
        d, keys, vals = _sc_f64, _rk64, _rv64
    else:
        return other
    if keys[h] is other:
        return vals[h]
    r = d.get(other)
    if r is not None:
        keys[h] = other
        vals[h] = r
        return r
    if len(d) >= _SC_MAX:
        return other
    try:
        v = other
    except OverflowError:
        return other
    if not (-3.0e38 < v < 3.0e38) or v == 0.0:   # inf, nan, beyond float32, or a zero
        return other
    r = np.array(v, dtype=_dt_f32 if t == cnp.NPY_FLOAT else _dt_f64)
    r.flags.writeable = False
    d[other] = r
    return r


# Note [Direct loops]: a NumPy ufunc call on a tiny array costs ~0.3 us, nearly all of it
# dispatch (type resolution, override and wrap checks, error-state lookups) around an inner
# loop that takes ~20 ns for 8 elements. For + - * / on float32/float64 arrays that are
# exact, aligned and native-order, each either C-contiguous or one element repeated (a 0-d
# cached scalar, Note [Scalar cache], or a broadcast view such as a sum's gradient), with
# equal shapes or one side 0-d, the operators and the engine's buffer sums call that same
# inner loop directly: NumPy's own kernel (the `functions` entry of the ufunc for the
# dtype), so the values are bit-identical. Floating-point errors (overflow, division by zero,
# invalid) give their IEEE results silently, as the ufunc does under Note [Quiet floating
# point]. An in-place sum writes through a stack scratch buffer, so an operand that overlaps
# its target is read before the target is written. Up to 16384 elements (1024 for in-place
# sums, the scratch's size) the loop takes a few microseconds at most, for which the GIL is
# kept; larger arrays go through the ufunc (its dispatch is then noise, and it releases the
# GIL).
DEF _DL_MAX = 16384       # elements, for a result in a new array
DEF _DL_MAX_INPLACE = 1024   # elements, for an in-place sum (the scratch buffer's size)
cdef PyUFuncGenericFunction _dl_fn[8]     # [2 * code + (0 float32 | 1 float64)]
cdef void *_dl_data[8]


cdef void _dl_init() except *:
    cdef ufunc uf
    cdef int code, k, i
    cdef char t
    for code, u in enumerate((np.add, np.subtract, np.multiply, np.true_divide)):
        uf = <ufunc>u
        for k in range(2):
            t = cnp.NPY_FLOAT if k == 0 else cnp.NPY_DOUBLE
            _dl_fn[2 * code + k] = NULL
            if uf.nin != 2 or uf.nout != 1:
                continue
            for i in range(uf.ntypes):
                if uf.types[3 * i] == t and uf.types[3 * i + 1] == t and \
                        uf.types[3 * i + 2] == t:
                    _dl_fn[2 * code + k] = uf.functions[i]
                    _dl_data[2 * code + k] = uf.data[i]
                    break


_dl_init()


cdef inline int _dl_slot(int code, object a) noexcept:
    """The loop slot for a <code> on a's dtype (float32/float64, exact ndarray, native byte
    order, aligned; Note [Direct loops]), or -1."""
    cdef int t, slot
    if not cnp.PyArray_CheckExact(a):
        return -1
    t = cnp.PyArray_TYPE(<cnp.ndarray>a)
    if t == cnp.NPY_FLOAT:
        slot = 2 * code
    elif t == cnp.NPY_DOUBLE:
        slot = 2 * code + 1
    else:
        return -1
    if (_dl_fn[slot] == NULL or not cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)):
        return -1
    return slot


cdef inline cnp.npy_intp _dl_step(object b, object a) noexcept:
    """The step to walk `b` (qualifying like `a`, with a's dtype) as one flat run: its item
    size when C-contiguous, 0 when every element is the same memory (a 0-d array, or a
    broadcast one such as the gradient of a sum), else -1."""
    cdef cnp.ndarray y
    cdef int d
    if not (cnp.PyArray_CheckExact(b)
            and cnp.PyArray_TYPE(<cnp.ndarray>b) == cnp.PyArray_TYPE(<cnp.ndarray>a)
            and cnp.PyArray_ISALIGNED(<cnp.ndarray>b)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>b)):
        return -1
    y = <cnp.ndarray>b
    if cnp.PyArray_IS_C_CONTIGUOUS(y):
        return 0 if cnp.PyArray_NDIM(y) == 0 else cnp.PyArray_ITEMSIZE(y)
    for d in range(cnp.PyArray_NDIM(y)):
        if cnp.PyArray_DIM(y, d) > 1 and cnp.PyArray_STRIDE(y, d) != 0:
            return -1
    return 0


cdef inline void _dl_run(int slot, char *pa, char *pb, char *po, cnp.npy_intp n,
                         cnp.npy_intp sa, cnp.npy_intp sb, cnp.npy_intp so) noexcept:
    """One call of the inner loop."""
    cdef char *args[3]
    cdef cnp.npy_intp steps[3]
    args[0] = pa
    args[1] = pb
    args[2] = po
    steps[0] = sa
    steps[1] = sb
    steps[2] = so
    _dl_fn[slot](args, &n, steps, _dl_data[slot])


cdef inline int _dl_plan(int code, object a, object b, cnp.npy_intp *steps) noexcept:
    """How to run a <code> b as one inner-loop call (Note [Direct loops]): the loop slot, with
    steps[0], steps[1] set to the operands' steps; -1 when it does not apply. The result has
    a's shape unless a is 0-d and b is not (then b's): callers take it from the 0-d test."""
    cdef int slot = _dl_slot(code, a)
    if slot < 0:
        return -1
    steps[0] = _dl_step(a, a)
    steps[1] = _dl_step(b, a)
    if steps[0] < 0 or steps[1] < 0:
        return -1
    if not (_same_shape(<cnp.ndarray>a, <cnp.ndarray>b)
            or cnp.PyArray_NDIM(<cnp.ndarray>a) == 0 or cnp.PyArray_NDIM(<cnp.ndarray>b) == 0):
        return -1
    return slot


cdef object _dl_binary(int code, object a, object b):
    """a <code> b (0 add, 1 sub, 2 mul, 3 div) by NumPy's inner loop, as a new array; None
    when Note [Direct loops] does not apply and the caller must call the ufunc (under Note
    [Quiet floating point]). The operands
    have equal shapes, or one is 0-d; each is contiguous or one repeated element."""
    cdef cnp.npy_intp steps[2]
    cdef int slot = _dl_plan(code, a, b, steps)
    cdef cnp.ndarray shape_of, out
    cdef cnp.npy_intp n
    if slot < 0:
        return None
    shape_of = <cnp.ndarray>(b if cnp.PyArray_NDIM(<cnp.ndarray>a) == 0 else a)
    n = cnp.PyArray_SIZE(shape_of)
    if n > _DL_MAX:
        return None
    out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(shape_of), cnp.PyArray_DIMS(shape_of),
                            cnp.PyArray_TYPE(shape_of), 0)
    _dl_run(slot, <char *>cnp.PyArray_DATA(<cnp.ndarray>a),
            <char *>cnp.PyArray_DATA(<cnp.ndarray>b), <char *>cnp.PyArray_DATA(out),
            n, steps[0], steps[1], cnp.PyArray_ITEMSIZE(out))
    return out


cdef bint _dl_iadd(object a, object b) noexcept:
    """a += b in place by NumPy's inner loop (a writeable and C-contiguous, b of a's shape or
    0-d); False when Note [Direct loops] does not apply (a is then unchanged) and the caller
    must call np.add (under Note [Quiet floating point])."""
    cdef cnp.npy_intp steps[2]
    cdef int slot = _dl_plan(0, a, b, steps)
    cdef cnp.npy_intp n, isz
    cdef double scratch[_DL_MAX_INPLACE]
    if (slot < 0 or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a)
            or not (_same_shape(<cnp.ndarray>a, <cnp.ndarray>b)
                    or cnp.PyArray_NDIM(<cnp.ndarray>b) == 0)):
        return False
    n = cnp.PyArray_SIZE(<cnp.ndarray>a)
    if n > _DL_MAX_INPLACE:
        return False
    isz = cnp.PyArray_ITEMSIZE(<cnp.ndarray>a)
    _dl_run(slot, <char *>cnp.PyArray_DATA(<cnp.ndarray>a),
            <char *>cnp.PyArray_DATA(<cnp.ndarray>b), <char *>scratch, n,
            steps[0], steps[1], isz)
    memcpy(cnp.PyArray_DATA(<cnp.ndarray>a), scratch, <size_t>(n * isz))
    return True


def _direct_binary(int code, a, b):
    """Tests: a <code> b (0 add, 1 sub, 2 mul, 3 div) through Note [Direct loops], or None
    where the operators would call the ufunc instead."""
    if not 0 <= code <= 3:
        raise ValueError(f"code must be 0..3, got {code}")
    return _dl_binary(code, a, b)


def _direct_iadd(a, b):
    """Tests: a += b through Note [Direct loops]; False where np.add would be called."""
    return _dl_iadd(a, b)


cdef inline bint _descr_differs(object out, object x) except -1:
    """out.dtype is not x.dtype, without attribute lookups when both are arrays."""
    if cnp.PyArray_Check(out):
        return <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>out) != \
            <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>x)
    return out.dtype is not (<object>x).dtype


cdef object _ts_ufunc(int code, object x, object k, bint reflected):
    """x <code> k (k <code> x if reflected) by the ufunc, for a scalar or 0-d k."""
    if code == 0:
        return _np_add(x, k)
    if code == 1:
        return _np_subtract(k, x) if reflected else _np_subtract(x, k)
    if code == 2:
        return _np_multiply(x, k)
    return _np_divide(k, x) if reflected else _np_divide(x, k)


cdef object _tt_ufunc(int code, object x, object y):
    """x <code> y by the ufunc, with torch's message for shapes that do not broadcast."""
    try:
        if code == 0:
            return _np_add(x, y)
        if code == 1:
            return _np_subtract(x, y)
        if code == 2:
            return _np_multiply(x, y)
        return _np_divide(x, y)
    except ValueError as e:
        _raise_broadcast_error(e)
        raise


cdef object _binop(int code, object self, object other, bint reflected):
    cdef object tp = type(other)
    cdef bint scalar
    cdef TensorBase a = <TensorBase>self
    cdef TensorBase b
    cdef _FnInfo info
    if tp is float or tp is int or tp is bool:
        scalar = True
    elif isinstance(other, TensorBase):
        scalar = False
    elif isinstance(other, np.generic):
        # a NumPy scalar of the array's own float dtype (e.g. from Note [Scalar cache]) is
        # used as is; others become Python scalars (torch: weak, dtype from the tensor)
        if not (tp is _np_float32 or tp is _np_float64) or \
                <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>a._data) != \
                <PyObject *>(<object>other).dtype:
            other = other.item()
        scalar = True
    elif cnp.PyArray_Check(other):
        other = _new_tensor(_as_array(other))
        scalar = False
    else:
        return NotImplemented       # lists, tuples, None, str...: TypeError, as in torch
    if code == 4:    # pow: no fast path
        if scalar:
            return _apply(<_FnInfo>(_st_ops[code] if reflected else _ts_ops[code]), (self, other))
        return _apply(<_FnInfo>_tt_ops[code], (other, self) if reflected else (self, other))
    x = a._data
    if scalar:
        info = <_FnInfo>(_st_ops[code] if reflected else _ts_ops[code])
        k = _np_scalar(other, x) if (tp is float or tp is int) else other
        out = None
        if cnp.PyArray_CheckExact(k):       # a cached 0-d array: Note [Direct loops]
            out = _dl_binary(code, k, x) if reflected else _dl_binary(code, x, k)
        if out is None or _descr_differs(out, x):
            quiet = _quiet_on()             # Note [Quiet floating point]
            try:
                if out is None:
                    out = _ts_ufunc(code, x, k, reflected)
                if _descr_differs(out, x):
                    out = _promote_py(code, out, x, other)
            finally:
                _quiet_off(quiet)
        if cg_grad_enabled():
            _refresh(a)
        if not (a._requires_grad and cg_grad_enabled()):
            return _new_tensor(_as_array(out))
        if code == 3 and reflected:
            # s / a is recorded as torch records it, reciprocal(a) * s: the reciprocal is
            # saved, not a, so an in-place op on a afterwards does not break backward
            return _binop(2, a.reciprocal(), other, False)
        return _record_binop(info, code, out, a, None, other)
    b = <TensorBase>other
    if reflected:
        a, b = b, a
        x = a._data
    y = b._data
    info = <_FnInfo>_tt_ops[code]
    out = _dl_binary(code, x, y)            # Note [Direct loops]
    if out is None or _descr_differs(out, x) or _descr_differs(out, y):
        quiet = _quiet_on()                 # Note [Quiet floating point]
        try:
            if out is None:
                out = _tt_ufunc(code, x, y)
            if _descr_differs(out, x) or _descr_differs(out, y):
                out = _promote_py(code, out, x, y)
        finally:
            _quiet_off(quiet)
    if cg_grad_enabled():
        _refresh(a)
        _refresh(b)
    if not ((a._requires_grad or b._requires_grad) and cg_grad_enabled()):
        return _new_tensor(_as_array(out))
    return _record_binop(info, code, out, a, b, None)


cdef object _record_binop(_FnInfo info, int code, object out, TensorBase a, TensorBase b,
                          object scalar):
    """Record the node that info.cls.forward would record; see Note [Operator fast path]."""
    cdef Node ctx = <Node>cg_tp_new(info.node_cls, _empty_tuple)     # Note [Direct tp_new]
    cdef TensorBase t
    ctx._fn = info
    ctx._n_args = 2
    if b is None:
        cg_node_alloc_edges(&ctx.c, 1)
        _set_edge(ctx, 0, a)
        ctx._arg_pos = _ARG_POS_0
        if code == 2 or code == 3:
            ctx._aux = scalar
    else:
        cg_node_alloc_edges(&ctx.c, 2)
        _set_edge(ctx, 0, a)
        _set_edge(ctx, 1, b)
        # what torch saves: a * b keeps b for a's gradient and a for b's; a / b keeps b,
        # and a for b's gradient (an in-place op on an unsaved operand is allowed)
        if code == 2:
            _save(ctx, (a if b._requires_grad else None, b if a._requires_grad else None))
        elif code == 3:
            _save(ctx, (a if b._requires_grad else None, b))
    cg_node_alloc_outputs(&ctx.c, 1)
    if _anomaly_on:
        _anomaly_record(ctx)
    t = _new_tensor(_as_array(out))
    _set_meta(&ctx.c, 0, t._data)
    _settle_node(ctx)                       # Note [Untracked graphs]
    if _is_float(t._data):
        t._grad_fn = ctx
        t._requires_grad = True
        _adopt(t, ctx)
    return t


cdef tuple _ARG_POS_0 = (0,)
