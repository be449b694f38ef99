"""LayerNorm, BatchNorm1d/2d and batch_norm (torch's F.batch_norm, one fused node)."""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _C
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.modules.linear import _empty
from cgrad.nn.modules.module import Module
from cgrad.nn.parameter import Parameter

__all__ = ["LayerNorm", "BatchNorm1d", "BatchNorm2d", "batch_norm"]


# ------------------------------------------------------------------------------------------
# batch_norm
# ------------------------------------------------------------------------------------------
class _Stats:
    """Receives the batch mean and biased variance from _BatchNormTrain.forward (for the
    running-statistics update, without recomputing them)."""
    __slots__ = ("mean", "var")


class _BatchNormTrain(Function):
    """Normalise with the batch statistics over every dim but 1 (biased variance).
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w, means over the
    reduced dims; d/dw = sum(g * xhat), d/db = sum(g)."""
    _node_name = "NativeBatchNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, eps, stats):
        x = input._data
        axes = (0,) + tuple(range(2, x.ndim))
        pshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = np.mean(np.square(xc), axis=axes, keepdims=True)
        rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
        stats.mean = mu.reshape(-1)
        stats.var = var.reshape(-1)
        xc *= rstd
        if ctx is not None:
            ctx.save_for_backward(input, weight, bias)
            ctx._aux = (axes, pshape, eps, mu, rstd, xc.copy() if weight is not None
                        or bias is not None else None)
        if weight is not None:
            xc *= weight._data.reshape(pshape)
        if bias is not None:
            xc += bias._data.reshape(pshape)
        return xc

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        axes, pshape, eps, mu, rstd, xhat_np = ctx._aux
        nx, nw, nb = ctx.needs_input_grad[:3]
        if not _C.is_grad_enabled():
            # first order: NumPy on the saved statistics
            ga = g._data
            n = ga.size // ga.shape[1]
            xhat = xhat_np if xhat_np is not None else (x._data - mu) * rstd
            gb_ = ga.sum(axis=axes, keepdims=True)
            gxh_ = np.sum(ga * xhat, axis=axes, keepdims=True)
            gx = gw = gbias = None
            if nx:
                scale = rstd / n
                if w is not None:
                    scale = scale * w._data.reshape(pshape)
                gx = ga * n
                gx -= gb_
                gx -= xhat * gxh_
                gx *= scale
                gx = _wrap(gx.astype(x._data.dtype, copy=False))
            if nw:
                gw = _wrap(gxh_.reshape(-1))
            if nb:
                gbias = _wrap(gb_.reshape(-1))
            return gx, gw, gbias, None, None
        # create_graph: mean and rstd as functions of x, so double backward is exact
        mu_t = x.mean(axes, keepdim=True)
        xc = x - mu_t
        rstd_t = ((xc * xc).mean(axes, keepdim=True) + eps) ** -0.5
        xhat = xc * rstd_t
        gx = gw = gbias = None
        if nx:
            gh = g * w.reshape(pshape) if w is not None else g
            gx = rstd_t * (gh - gh.mean(axes, keepdim=True)
                           - xhat * (gh * xhat).mean(axes, keepdim=True))
        if nw:
            gw = (g * xhat).sum(axes)
        if nb:
            gbias = g.sum(axes)
        return gx, gw, gbias, None, None


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: normalise over every dim but 1 (channels).

    ``training=True``: batch statistics (one ``NativeBatchNormBackward0`` node); if running
    stats are given they are updated in place: ``r = (1 - momentum) * r + momentum * s`` with
    the unbiased batch variance. ``training=False``: the running statistics are used."""
    if momentum is not None and not isinstance(momentum, (int, float, np.number)):
        from cgrad._checks import type_name
        raise TypeError(f"batch_norm(): argument 'momentum' (position 7) must be float, not "
                        f"{type_name(momentum)}")
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ValueError(f"Expected 2D or higher input (got {len(shape)}D input)")
    C = shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"{name} should contain {C} elements not {t.numel()}")
    if training:
        size = int(np.prod(shape)) // C
        if size == 1:
            from cgrad.tensor import Size
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             f"size {Size(shape)!r}")
        stats = _Stats()
        out = _BatchNormTrain.apply(input, weight, bias, float(eps), stats)
        if running_mean is not None or running_var is not None:
            mean, var = stats.mean, stats.var
            n = size
            m = momentum
            if running_mean is not None:
                rm = running_mean._data
                rm *= (1 - m)
                rm += m * mean
                running_mean._bump_version()
            if running_var is not None:
                rv = running_var._data
                rv *= (1 - m)
                rv += (m * n / (n - 1)) * var
                running_var._bump_version()
        return out
    if running_mean is None or running_var is None:
        raise RuntimeError(f"{'running_mean' if running_mean is None else 'running_var'} must "
                           "be defined in evaluation mode")
    pshape = (1, C) + (1,) * (len(shape) - 2)
    rstd = (1.0 / np.sqrt(running_var._data + eps)).astype(input.dtype, copy=False)
    xc = input - _wrap(running_mean._data.reshape(pshape))
    if weight is None:
        y = xc * _wrap(rstd.reshape(pshape))
    else:
        y = xc * (weight * _wrap(rstd)).reshape(pshape)
    if bias is not None:
        y = y + bias.reshape(pshape)
    return y


# ------------------------------------------------------------------------------------------
# modules
# ------------------------------------------------------------------------------------------
class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` dims (weight ones, bias
    zeros when ``elementwise_affine``)."""

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(_empty(self.normalized_shape, dtype, device))
            if bias:
                self.bias = Parameter(_empty(self.normalized_shape, dtype, device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class _NormBase(Module):
    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(_empty((num_features,), dtype, device))
            if bias:
                self.bias = Parameter(_empty((num_features,), dtype, device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", _empty((num_features,), dtype, device))
            self.register_buffer("running_var", _empty((num_features,), dtype, device))
            self.register_buffer("num_batches_tracked", _wrap(np.zeros((), dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked
                                   if self.num_batches_tracked is not None
                                   else _wrap(np.zeros((), dtype=np.int64)))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        eaf = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            if self.num_batches_tracked is not None:
                nbt = self.num_batches_tracked
                nbt._data[...] += 1
                nbt._bump_version()
                if self.momentum is None:
                    eaf = 1.0 / float(nbt._data)
                else:
                    eaf = self.momentum
        if self.training:
            bn_training = True
        else:
            bn_training = self.running_mean is None and self.running_var is None
        use_buffers = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if use_buffers else None,
                          self.running_var if use_buffers else None, self.weight, self.bias,
                          bn_training, eaf, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) inputs: batch statistics in training
    mode (updating running_mean/running_var with ``momentum``; ``momentum=None`` gives the
    cumulative average), running statistics in eval mode."""

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")
