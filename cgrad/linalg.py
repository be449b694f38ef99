"""cgrad.linalg: torch.linalg's functions (the ones cgrad implements), same names, signatures,
defaults, node names and errors.

>>> import cgrad
>>> A = cgrad.tensor([[3.0, 0.0], [0.0, 4.0]], requires_grad=True)
>>> cgrad.linalg.matrix_norm(A)
tensor(5., grad_fn=<LinalgVectorNormBackward0>)
>>> cgrad.linalg.svdvals(A)
tensor([4., 3.], grad_fn=<LinalgSvdBackward0>)

``inv``, ``det``, ``slogdet``, ``solve``, ``cholesky``, ``qr`` and ``eigh`` take batches of
matrices and raise ``LinAlgError`` (a RuntimeError) for singular or non positive-definite
input, as torch (cgrad/ops/decompositions.py).

Every function is differentiable, twice and more (backward is written with cgrad ops); the
singular-value based norms ('nuc', 2, -2) follow torch's ``svd_backward`` and, as in torch,
their gradients are undefined (infinite) where singular values repeat.
"""
from __future__ import annotations

from cgrad.ops.linalg import matmul
from cgrad.ops.decompositions import LinAlgError, cholesky, det, eigh, inv, qr, slogdet, solve
from cgrad.ops.norms import linalg_norm as norm
from cgrad.ops.norms import matrix_norm, vector_norm
from cgrad.ops.decompositions import svd, svdvals
from cgrad.ops.linalg import vecdot

__all__ = ["LinAlgError", "cholesky", "det", "eigh", "inv", "matmul", "matrix_norm", "norm",
           "qr", "slogdet", "solve", "svd", "svdvals", "vecdot", "vector_norm"]
