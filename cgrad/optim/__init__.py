"""cgrad.optim: torch.optim's optimizers and learning-rate schedulers.

Each optimizer follows torch's single-tensor (``foreach=False``) update rules operation by
operation, on the raw NumPy arrays, in place; the state dicts have torch's format.

>>> import cgrad
>>> w = cgrad.tensor([1.0, -2.0], requires_grad=True)
>>> opt = cgrad.optim.Adam([w], lr=0.1)
>>> for _ in range(3):
...     opt.zero_grad()
...     (w * w).sum().backward()
...     opt.step()
>>> w
tensor([ 0.7016, -1.7006], requires_grad=True)
"""
from cgrad.optim import lr_scheduler
from cgrad.optim.adadelta import Adadelta
from cgrad.optim.adagrad import Adagrad
from cgrad.optim.adam import Adam
from cgrad.optim.adamax import Adamax
from cgrad.optim.adamw import AdamW
from cgrad.optim.asgd import ASGD
from cgrad.optim.lbfgs import LBFGS
from cgrad.optim.nadam import NAdam
from cgrad.optim.optimizer import (Optimizer, register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)
from cgrad.optim.radam import RAdam
from cgrad.optim.rmsprop import RMSprop
from cgrad.optim.rprop import Rprop
from cgrad.optim.sgd import SGD
from cgrad.optim.sparse_adam import SparseAdam

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam",
           "lr_scheduler",
           "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]
