"""cgrad.nn.utils: gradient clipping, parameter/vector conversion, parametrizations."""
from cgrad.nn.utils import clip_grad, convert_parameters  # noqa: F401
from cgrad.nn.utils import parametrizations, parametrize, rnn  # noqa: F401
from cgrad.nn.utils._hook_norms import (remove_spectral_norm, remove_weight_norm, spectral_norm,
                                        weight_norm)
from cgrad.nn.utils.clip_grad import (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                                      get_total_norm)
from cgrad.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm"]
