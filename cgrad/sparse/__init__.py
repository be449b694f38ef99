"""cgrad.sparse: sparse COO tensors on SciPy, with O(nnz * F) gradients.

>>> import cgrad
>>> i = cgrad.tensor([[0, 1, 1], [2, 0, 2]])
>>> v = cgrad.tensor([3.0, 4.0, 5.0], requires_grad=True)
>>> a = cgrad.sparse_coo_tensor(i, v, (2, 3))
>>> b = cgrad.ones(3, 2)
>>> (a @ b).sum().backward()
>>> v.grad
tensor([2., 2., 2.])

* ``cgrad.sparse_coo_tensor(indices, values, size)``: a sparse tensor (a cgrad.Tensor with
  ``is_sparse``; ``_indices()``, ``_values()``, ``coalesce()``, ``t()``, ``to_dense()``, ...).
* ``cgrad.matmul(sparse, dense)``, ``sparse @ dense``, ``cgrad.mm``: a sparse *leaf* gets a
  dense ``.grad`` (torch); ``cgrad.sparse.mm``: a sparse ``.grad`` on the pattern (torch).
* ``cgrad.spmm(indices, values, shape, b)``: the efficient functional form of pyGAT's
  SpecialSpmmFunction (structure cached per indices tensor; gradients to values and b).
* ``sum``, ``softmax``/``log_softmax`` (over the stored entries), ``segment_sum``,
  ``segment_max``, ``segment_gather``, ``sddmm``, ``from_scipy``/``to_scipy``.

Dtypes: values are float32 or float64 (integer and bool values can be stored and
densified); float16 is rejected (scipy.sparse has no float16). Products need equal dtypes
(RuntimeError "expected scalar type Float but found Double" otherwise, as torch).
SDDMM backend: ``backend()`` ('c' or 'numpy'), ``use_extension(flag)``,
``set_num_threads(n)``; ``CGRAD_NO_SPARSE_EXT=1`` selects NumPy at import.
"""
from __future__ import annotations

from cgrad.sparse._legacy import (BoolTensor, ByteTensor, CharTensor, DoubleTensor,
                                  FloatTensor, IntTensor, LongTensor, ShortTensor)
from cgrad.sparse._kernels import (backend, extension_available, get_num_threads,
                                   set_num_threads, use_extension)
from cgrad.sparse._ops import (SparseAddmm, SparseMatMul, Sddmm, SpMM, log_softmax, matmul,
                               sddmm, segment_gather, segment_max, segment_sum, softmax, spmm,
                               sum)
from cgrad.sparse._ops import _sparse_aware_mm
from cgrad.sparse._ops import sparse_mm as mm
from cgrad.sparse._pattern import Pattern
from cgrad.sparse._tensor import (SparseTensor, from_scipy, sparse_coo, sparse_coo_tensor,
                                  strided, to_scipy, to_sparse)

__all__ = ["SparseTensor", "sparse_coo_tensor", "from_scipy", "to_scipy", "to_sparse", "mm",
           "matmul", "spmm", "sddmm", "sum", "softmax", "log_softmax", "segment_sum",
           "segment_max", "segment_gather", "sparse_coo", "strided", "backend",
           "use_extension", "extension_available", "set_num_threads", "get_num_threads",
           "SpMM", "Sddmm", "SparseMatMul", "SparseAddmm", "Pattern", "FloatTensor",
           "DoubleTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
           "ByteTensor", "BoolTensor"]
