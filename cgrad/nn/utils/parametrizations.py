"""cgrad.nn.utils.parametrizations: torch's ``weight_norm`` and ``spectral_norm`` as
parametrizations (cgrad/nn/utils/parametrize.py), with torch's state_dict keys:

* ``weight_norm(m)``: ``weight = g * v / ||v||`` with the norm over every dim but `dim`;
  ``parametrizations.weight.original0`` is g, ``original1`` is v;
* ``spectral_norm(m)``: ``weight / sigma``, sigma the largest singular value of the weight
  seen as a matrix (`dim` first), estimated by power iteration on the buffers
  ``parametrizations.weight.0._u`` and ``_v``, one step per forward in training mode
  (15 at registration), none in eval mode.
"""
from __future__ import annotations

from cgrad._C import TensorBase
from cgrad.autograd.grad_mode import no_grad
from cgrad.nn.modules.module import Module
from cgrad.nn.utils import parametrize

__all__ = ["weight_norm", "spectral_norm"]


def _norm_except_dim(v, dim):
    if dim == -1:
        return v.norm()
    dims = [d for d in range(v.dim()) if d != dim]
    return (v * v).sum(dim=dims, keepdim=True).sqrt() if dims else v.abs()


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Weight normalisation of ``module.<name>`` (Salimans & Kingma, 2016): the tensor is
    recomputed from a magnitude ``original0`` and a direction ``original1`` at each use."""
    _weight_norm = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm, unsafe=True)
    return module


def _normalize(x, eps):
    return x / x.norm().clamp(min=eps)


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", _normalize(u, self.eps))
            self.register_buffer("_v", _normalize(v, self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            w = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(_normalize(w.mv(self._v), self.eps))
                self._v.copy_(_normalize(w.T.mv(self._u), self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return weight / weight.norm().clamp(min=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Spectral normalisation of ``module.<name>`` (Miyato et al., 2018)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, TensorBase):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
