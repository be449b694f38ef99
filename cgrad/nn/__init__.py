"""cgrad.nn: neural-network building blocks with torch.nn's API.

Modules (Linear, Sequential, BatchNorm1d, CrossEntropyLoss, ...), :class:`Parameter`,
initialisers (``cgrad.nn.init``), the functional forms (``cgrad.nn.functional``) and
utilities (``cgrad.nn.utils.clip_grad_norm_``, ...), and ``cgrad.nn.parallel``
(``DistributedDataParallel``).
"""
from cgrad.nn import functional  # noqa: F401
from cgrad.nn import init  # noqa: F401
from cgrad.nn.parameter import Buffer, Parameter
from cgrad.nn.modules import *  # noqa: F401,F403
from cgrad.nn.modules import __all__ as _modules_all
from cgrad.nn import utils  # noqa: F401
from cgrad.nn import parallel  # noqa: F401

__all__ = ["Parameter", "Buffer", "functional", "init", "utils"] + list(_modules_all)
