"""The index structure of a sparse COO tensor, built once and shared.

A ``Pattern`` holds the indices (int64, shape (sparse_dim, nnz)) and the shape, and caches
what the products need, computed on first use:

* the CSR structure of a 2-D pattern (``perm`` that sorts the entries by row, the column
  indices in that order, ``indptr``), so that each product only gathers ``values[perm]``
  (O(nnz)) and wraps a ``scipy.sparse.csr_array``;
* the transposed pattern, whose matrix is the CSC reading of the same arrays (free); its
  products scatter over the source's CSR rows on one sparse thread, and gather over a
  transposed CSR (built on first use) on more;
* the coalesced pattern (sorted unique positions) and ``inverse`` (entry -> unique position).

Every tensor built on the same indices (a tensor, its gradient, ``t()``, the results of
values-only ops) shares one Pattern, so identity (``a._pattern is b._pattern``) says that
two tensors have the same structure.

A Pattern never changes: its index array is its own (a private copy of the user's indices,
never a view of them) and read-only, so the structures cached on it stay true. Patterns for
index *tensors* (and read-only index arrays) are cached weakly by object, never by ``id``
alone (ids are reused), and a cached Pattern is reused only when the object's indices are
still equal to the Pattern's, element by element (Note [Index cache]).
"""
from __future__ import annotations

import weakref

import numpy as np

from cgrad.sparse import _kernels

_I32_MAX = np.iinfo(np.int32).max

# scipy.sparse and its compiled kernels are imported on first use, not by `import cgrad`:
# scipy.sparse is about half of cgrad's import time and most programs never go sparse.
_sp = None
_st = None
_fast = [None]


def _load_scipy():
    """scipy.sparse (imported on the first call; sets _sp and _st)."""
    global _sp, _st
    if _sp is None:
        import scipy.sparse as sp
        try:        # scipy's compiled sparse kernels (private module, stable for many releases)
            from scipy.sparse import _sparsetools as st
        except ImportError:  # pragma: no cover
            st = None
        _st = st
        _sp = sp
    return _sp


def _fast_ok():
    """Use _sparsetools directly? Checked once against the public API."""
    if _fast[0] is None:
        _load_scipy()
        _fast[0] = False
        if _st is not None:
            try:
                idx = np.array([[0, 1, 1], [1, 0, 1]])
                vals = np.array([1.0, 2.0, 3.0])
                B = np.arange(6.0).reshape(2, 3)
                ref = _sp.coo_array((vals, (idx[0], idx[1])), shape=(2, 2)).toarray()
                p = Pattern(idx, (2, 2))
                _fast[0] = True
                ok = (np.allclose(p.product(vals, B), ref @ B)
                      and np.allclose(p.T().product(vals, B), ref.T @ B)
                      and np.allclose(p.product(vals, B[:, 0]), ref @ B[:, 0])
                      and np.allclose(p.T().product(vals, B[:, 0]), ref.T @ B[:, 0]))
                _fast[0] = bool(ok)
            except Exception:
                _fast[0] = False
    return _fast[0]


class Pattern:
    __slots__ = ("idx", "shape", "nnz", "_canonical", "_lin", "_sort", "_csr", "_T", "_src",
                 "_coal", "_rep", "_tcsr", "__weakref__")

    def __init__(self, idx, shape, *, canonical=None, check=True):
        # int64 (sparse_dim, nnz), rows contiguous; the caller hands over an array nobody
        # else writes to (a fresh or private one): it is made read-only here
        idx.flags.writeable = False
        self.idx = idx
        self.shape = shape                    # tuple of ints
        self.nnz = idx.shape[1]
        self._canonical = canonical           # sorted and unique (None: not known yet)
        self._lin = None
        self._sort = None
        self._csr = None
        self._T = None
        self._src = None                      # weakref to the pattern this one transposes
        self._coal = None
        self._rep = None
        self._tcsr = None                     # transposed pattern: its source's CSR transposed
        if check:
            _check_bounds(idx, shape)

    @property
    def ndim(self):
        return len(self.shape)

    def lin(self):
        """Linear (row-major) position of every entry, int64."""
        if self._lin is None:
            if self.ndim == 1:
                self._lin = self.idx[0]
            else:
                if self.shape[0] * self.shape[1] >= 2 ** 63:
                    raise RuntimeError(f"sparse tensor of size {self.shape} is too large")
                self._lin = self.idx[0] * self.shape[1] + self.idx[1]
        return self._lin

    def is_canonical(self):
        """True when the entries are sorted row-major without duplicates (coalesced order)."""
        if self._canonical is None:
            lin = self.lin()
            self._canonical = bool(self.nnz <= 1 or np.all(lin[1:] > lin[:-1]))
        return self._canonical

    def _sorted(self):
        """(perm or None, sorted linear indices): a stable row-major sort of the entries."""
        if self._sort is None:
            lin = self.lin()
            if self.nnz <= 1 or self.is_canonical() or np.all(lin[1:] >= lin[:-1]):
                self._sort = (None, lin)
            else:
                perm = np.argsort(lin, kind="stable")
                self._sort = (perm, lin[perm])
        return self._sort

    # -- products ----------------------------------------------------------------------
    def rows_cols(self):
        """(row, col) as contiguous int64 arrays (views of idx)."""
        return self.idx[0], self.idx[1]

    def csr(self):
        """(perm or None, indices, indptr): CSR arrays of this 2-D pattern (int32 when they
        fit, so scipy does not copy or scan them on every product)."""
        if self._csr is None:
            n, m = self.shape
            row, col = self.idx
            big = max(n, m, self.nnz) > _I32_MAX
            itype = np.int64 if big else np.int32
            if self.nnz > 1 and _kernels.has_csr_build():
                # one stable counting sort on the rows in C (O(nnz + n)); its order is the
                # (row, col) sort's when each row's columns come out sorted (always, for
                # patterns built from row-major edge lists), else fall through to argsort
                perm, ind, indptr, cols_sorted = _kernels.csr_build(row, col, n, m, big)
                if perm is None or cols_sorted:
                    self._csr = (perm, ind, indptr)
                    return self._csr
            if self.nnz > 1 and not np.all(row[1:] >= row[:-1]):
                perm = self._sorted()[0]
                ind = col[perm]
            else:
                perm = None
                ind = col
            indptr = np.zeros(n + 1, dtype=itype)
            if self.nnz:
                np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
            self._csr = (perm, ind.astype(itype, copy=False), indptr)
        return self._csr

    def product(self, vals, B):
        """``matrix(vals) @ B`` as a new C-contiguous ndarray (B 1-D or 2-D, vals.dtype).

        Multi-head: vals (nnz, H) and B (m, H, F) give (n, H, F) whose head h is
        ``matrix(vals[:, h]) @ B[:, h]`` (H matrices on this one structure; per head the
        same sums, bit for bit, as the single-head product).

        Float products call scipy's compiled kernels (csr/csc_matvec[s]) directly on the
        cached structure, skipping the csr_array constructor's checks (~40 us a call, which
        dominates on small graphs); anything else goes through scipy's public API."""
        src = self._src() if self._src is not None else None
        if vals.ndim == 2:
            if (_kernels.has_csr_build() and vals.dtype == B.dtype
                    and vals.dtype.char in "fd"):
                return self._compiled_product(src, vals, B)
            H = vals.shape[1]
            out = np.empty((self.shape[0], H, B.shape[2]),
                           dtype=np.result_type(vals.dtype, B.dtype))
            for h in range(H):
                out[:, h] = self.product(np.ascontiguousarray(vals[:, h]), B[:, h])
            return out
        if (_kernels.has_csr_build() and vals.dtype == B.dtype and vals.dtype.char in "fd"
                and B.ndim in (1, 2)):
            # cgrad's own kernel: values gathered through perm inside the loop (no take),
            # rows split over the sparse threads, sums bit for bit scipy's csr/csc_matvecs
            return self._compiled_product(src, vals, B)
        perm, ind, indptr = (src if src is not None else self).csr()
        data = vals if perm is None else vals.take(perm)
        if _fast_ok() and data.dtype == B.dtype and data.dtype.char in "fd" \
                and B.ndim in (1, 2):
            n, m = self.shape
            X = np.ascontiguousarray(B)
            if B.ndim == 2:
                out = np.zeros((n, B.shape[1]), dtype=data.dtype)
                fn = _st.csc_matvecs if src is not None else _st.csr_matvecs
                fn(n, m, B.shape[1], indptr, ind, data, X.reshape(-1), out.reshape(-1))
            else:
                out = np.zeros(n, dtype=data.dtype)
                fn = _st.csc_matvec if src is not None else _st.csr_matvec
                fn(n, m, indptr, ind, data, X, out)
            return out
        return np.asarray(self.matrix(vals) @ B)

    def _compiled_product(self, src, vals, B):
        """The product by cgrad's kernels: this pattern's CSR, or for a transposed pattern a
        scatter over its source's CSR on one sparse thread (no transposed structure) or the
        gather over the transposed CSR on several; all bit for bit csr/csc_matvecs."""
        if src is None:
            perm, ind, indptr = self.csr()
            return _kernels.spmm_csr(indptr, ind, perm, vals, B, self.shape[1])
        if _kernels.get_num_threads() == 1:
            perm, ind, indptr = src.csr()
            return _kernels.spmm_csr_t(indptr, ind, perm, vals, B, self.shape[0])
        perm, ind, indptr = self._transposed_csr(src)
        return _kernels.spmm_csr(indptr, ind, perm, vals, B, self.shape[1])

    def _transposed_csr(self, src):
        """(perm, ind, indptr) of this transposed pattern as the transpose of its source's
        CSR (each row's entries by increasing source row: csc_matvecs' order), cached."""
        if self._tcsr is None:
            sperm, sind, sindptr = src.csr()
            n, m = src.shape
            self._tcsr = _kernels.csr_transpose(sindptr, sind, sperm, n, m)
        return self._tcsr

    def matrix(self, vals):
        """The scipy matrix with these indices and `vals` (in entry order): a csr_array, or
        for a transposed pattern the csc_array reading of its source's CSR arrays."""
        src = self._src() if self._src is not None else None
        if src is not None:
            perm, ind, indptr = src.csr()
            data = vals if perm is None else vals.take(perm)
            return _load_scipy().csc_array((data, ind, indptr), shape=self.shape)
        perm, ind, indptr = self.csr()
        data = vals if perm is None else vals.take(perm)
        return _load_scipy().csr_array((data, ind, indptr), shape=self.shape)

    def T(self):
        """The transposed pattern (same entry order), cached."""
        if self.ndim == 1:
            return self
        t = self._T
        if t is None:
            t = Pattern(self.idx[::-1], self.shape[::-1], check=False)
            t._src = weakref.ref(self)
            self._T = t
        return t

    # -- coalescing --------------------------------------------------------------------
    def coalesced(self):
        """(coalesced pattern, inverse or None): the sorted unique positions, and for every
        entry its position among them (None when this pattern is already canonical)."""
        if self._coal is None:
            if self.is_canonical():
                self._coal = (self, None)
            else:
                perm, slin = self._sorted()
                first = np.empty(self.nnz, dtype=bool)
                first[0] = True
                np.not_equal(slin[1:], slin[:-1], out=first[1:])
                ulin = slin[first]
                pos = np.cumsum(first, dtype=np.int64)
                pos -= 1
                if perm is None:
                    inverse = pos
                else:
                    inverse = np.empty(self.nnz, dtype=np.int64)
                    inverse[perm] = pos
                if self.ndim == 1:
                    cidx = ulin.reshape(1, -1)
                else:
                    cidx = np.empty((2, ulin.shape[0]), dtype=np.int64)
                    np.floor_divide(ulin, self.shape[1], out=cidx[0])
                    np.remainder(ulin, self.shape[1], out=cidx[1])
                cp = Pattern(cidx, self.shape, canonical=True, check=False)
                cp._lin = ulin
                self._coal = (cp, inverse)
                if cp.nnz == self.nnz:
                    self._rep = False
                else:
                    first_pos = np.flatnonzero(first)
                    self._rep = first_pos if perm is None else perm[first_pos]
        return self._coal

    def has_duplicates(self):
        """True if some position is stored more than once."""
        if self.is_canonical():
            return False
        self.coalesced()
        return self._rep is not False

    def representatives(self):
        """For every coalesced position, the first entry stored there (None without
        duplicates): entry order -> coalesced order for values that are equal on duplicates."""
        if not self.has_duplicates():
            return None
        return self._rep

    def coalesce_values(self, vals):
        """Sum the values of duplicate entries: the values of ``coalesced()[0]``."""
        cp, inverse = self.coalesced()
        if inverse is None:
            return vals
        return segment_sum_np(vals, inverse, cp.nnz)


def segment_sum_np(vals, ids, n):
    """out[s] = sum of vals[k] over ids[k] == s (float sums accumulate in float64, k
    ascending: np.bincount's sums, from the compiled kernel when it is in use)."""
    if vals.dtype.char in "fd" and (vals.ndim == 1 or (vals.ndim == 2 and (
            vals.shape[1] <= 16 or vals.dtype.char == "d"))):   # the sums np.add.at/bincount do
        acc = _kernels.segment_sum(ids, vals, n)
        if acc is not None:
            return acc.astype(vals.dtype, copy=False)
    if vals.ndim == 1 and vals.dtype.kind == "f":
        return np.bincount(ids, weights=vals, minlength=n).astype(vals.dtype, copy=False)
    out = np.zeros((n,) + vals.shape[1:], dtype=vals.dtype)
    if vals.ndim == 2 and vals.dtype.kind == "f" and vals.shape[1] <= 16:
        for j in range(vals.shape[1]):
            out[:, j] = np.bincount(ids, weights=vals[:, j], minlength=n)
        return out
    np.add.at(out, ids, vals)
    return out


def _check_bounds(idx, shape):
    if idx.shape[1] == 0:
        return
    lo = idx.min(axis=1)
    hi = idx.max(axis=1)
    for d in range(idx.shape[0]):
        if lo[d] < 0:
            raise RuntimeError(f"found negative index {int(lo[d])} for dim {d}")
        if hi[d] >= shape[d]:
            raise RuntimeError(
                f"size is inconsistent with indices: for dim {d}, size is {shape[d]} but "
                f"found index {int(hi[d])}")


# --------------------------------------------------------------------------------------
# Patterns cached per index tensor (weakly, by object; validated by content on every use)

# Note [Index cache]
# ~~~~~~~~~~~~~~~~~~
# spmm(indices, values, shape, b) is called with the same indices tensor every step of a
# training loop, and building the CSR structure (a sort, a bincount, int32 copies) costs
# more than the product itself on small graphs, so the Pattern built for an index object is
# kept and reused. The object's memory can change behind cgrad's back: a tensor made by
# cgrad.from_numpy shares the caller's array, t.numpy() hands out a writeable view, t.data
# can be reassigned, a read-only array can be a view of a writeable one, and a new object
# can get a dead one's id and address. The version counter sees only cgrad's in-place ops.
# So the cache is keyed by the object itself (a weak reference; its id only finds the
# entry) and an entry is reused only when the object's current int64 indices are equal,
# element by element, to the Pattern's own copy (np.array_equal: one vectorised pass over
# 2 x 16 bytes per entry; about 0.1 ms at 200,000 entries, against ~30 ms for the product
# and its backward at F = 64). Anything else builds a new Pattern from the current indices,
# with the bounds check: an index edited out of range raises as it would on a first call.
# The version is compared too (an in-place cgrad op always rebuilds: cheap, and rare).

_cache: dict = {}


def _forget(cache, key, ref):
    ent = cache.get(key)
    if ent is not None and ent[0] is ref:
        del cache[key]


def cached_pattern(obj, idx, shape, version, owned=False):
    """The Pattern for index object `obj` (a Tensor or an ndarray) whose current int64
    indices are `idx`, reusing the one built last time for the same object and shape when
    the version and every index are the same (Note [Index cache]). `owned`: idx is a fresh
    array that may become the Pattern's own (else the Pattern copies it)."""
    key = id(obj)
    ent = _cache.get(key)
    if (ent is not None and ent[0]() is obj and ent[1] == version and ent[2].shape == shape
            and np.array_equal(ent[2].idx, idx)):
        return ent[2]
    p = Pattern(idx if owned else idx.copy(), shape)
    try:
        # the callback binds the dict and the function: it may run at interpreter exit
        ref = weakref.ref(obj, lambda r, key=key, cache=_cache, forget=_forget:
                          forget(cache, key, r))
    except TypeError:
        return p
    _cache[key] = (ref, version, p)
    return p
