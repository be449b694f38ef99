"""Matrix products of raw arrays: ``mm(a, b)``, and ``packed(b)`` for one right operand used
at every time step of a recurrent layer (W_hh).

Note [float32 GEMM]
~~~~~~~~~~~~~~~~~~~
At the shapes of training steps of small models ((512 x 64) @ (64 x 192) in nanoGPT-tiny's
Linear layers, (32 x 128) @ (128 x 512) at every LSTM time step) NumPy's OpenBLAS runs at
100-130 GFLOP/s on one core, torch's MKL at 145-170, and that difference was most of what
separated cgrad's whole training steps from torch's. cgrad._fused.sgemm (csrc/cg_gemm.c) is
an AVX-512 kernel in the BLIS scheme (an 8 x 32 FMA micro-tile, B packed in 32-column
panels, A read in place at any strides, or packed in 8-row panels when it is not row-major
and its panels are reused over 4 or more of B's; for at most 64 rows of A a row-major B is
read in place, with masked loads, since packing it would cost more than the few tiles
that reuse it save: (8 x 1000) @ (1000 x 300) 45 -> 144 GFLOP/s and (32 x 128) @ (128 x
512) 129 -> 164 alone, nanoGPT's weight gradient (64 x 512) @ (512 x 256) 84 -> 123 inside
its training step): 140-170 GFLOP/s at those shapes, and 160
on the LSTM step with W_hh packed once per layer instead of by OpenBLAS at every step.

It is used for 2-D float32 products whose columns fill at least 3/4 of the 32-column panels
they take (narrower or ragged products, pygcn's (2708 x 1433) @ (1433 x 16), nanoGPT's
65-token head, compute padding in every tile and OpenBLAS is as fast or faster), when the
CPU has AVX-512F, and when OpenBLAS would run the product on one thread anyway: M N K <=
2^18 (OpenBLAS's own bound for splitting a GEMM), or the BLAS set to one thread
(``cgrad.set_num_threads(1)``, ``OPENBLAS_NUM_THREADS=1``), since the kernel itself is
single-threaded. Everything else (float64, other CPUs, big products with a multi-threaded
BLAS, batched products) goes to ``np.matmul``. A recurrent layer packs W_hh once per call
(``packed``) when the BLAS runs on one thread. Results agree with NumPy's to float32
rounding (each element a k-ordered FMA sum in blocks of 256; not OpenBLAS's order); the
same inputs give the same bits wherever the kernel runs, packed or not, in any layout.
Linear's (out,) bias is added in the tile's store after the whole sum (``mm(a, b, bias)``):
the bits of the product followed by ``+= bias``, without that second pass over the output
(~20 us for nanoGPT-tiny's (512, 256) output). ``CGRAD_NO_FUSED_EXT=1`` at import turns the
kernel off.
"""
from __future__ import annotations

import numpy as np

from cgrad import _threads
from cgrad._fused_switch import FUSED as _ext, ON as _FUSED_ON

_ON = _FUSED_ON and _ext.sgemm_available()
_F32 = np.dtype(np.float32)
_ONE_THREAD_MNK = 1 << 18
_NR = 32                                  # the micro-tile's columns (CG_GEMM_NR)


def _kernel_for(a, b):
    """True when (a @ b) of 2-D arrays should go to cgrad._fused.sgemm (Note [float32 GEMM])."""
    if not _ON or a.dtype != _F32 or b.dtype != _F32 or a.ndim != 2 or b.ndim != 2:
        return False
    n = b.shape[1]
    if 4 * n < 3 * _NR * -(-n // _NR):      # > 1/4 of the 32-column panels is padding
        return False
    return a.shape[0] * a.shape[1] * n <= _ONE_THREAD_MNK or _threads.blas_single()


def mm(a, b, bias=None):
    """a @ b for 2-D ndarrays (a new array); with ``bias`` (an (N,) array of the product's
    dtype) a @ b + bias, added in the kernel's store when it runs (the same bits as adding
    it after the product, without a second pass over the result)."""
    if _kernel_for(a, b):
        fused = bias is not None and bias.dtype == _F32
        out = _ext.sgemm(a, b, bias=bias if fused else None)
        if out is not None:
            if bias is not None and not fused:
                out += bias
            return out
    out = np.matmul(a, b)
    if bias is not None:
        out += bias
    return out


def packed(b):
    """b (K, N) packed once for a recurrent layer's time loop in C (cgrad._fused.lstm_seq_*):
    a PackedB when the kernel takes float32 products and the BLAS runs on one thread, else
    None (the layer then loops in Python over np.matmul)."""
    if _ON and b.dtype == _F32 and b.ndim == 2 and _threads.blas_single():
        return _ext.pack_b(b)
    return None
