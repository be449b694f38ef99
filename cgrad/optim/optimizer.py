"""cgrad.optim.Optimizer: torch.optim's base class (param groups, state, state dicts, hooks).

Subclasses update parameters in place on the raw ndarrays (``p._data``) with in-place NumPy
ufuncs, in the order of torch's single-tensor (``foreach=False``) code paths, so that the
arithmetic matches torch's operation by operation. State tensors are cgrad Tensors (so a
state dict holds Tensors as torch's does) and every in-place write bumps the written tensor's
version counter, as torch's in-place ops do.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from copy import deepcopy
from itertools import chain

import numpy as np

from cgrad._warn import warn as _warn
from cgrad import _C
from cgrad import _dtype
from cgrad.autograd.grad_mode import enable_grad
from cgrad.tensor import typename as _typename

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]

_wrap = _C._wrap
_Tensor = _C.TensorBase
_set_grad_enabled = _C._set_grad_enabled
_RemovableHandle = _C.RemovableHandle


class _RequiredParameter:
    """Singleton marking a hyperparameter every param group must specify."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_global_optimizer_pre_hooks: dict = {}
_global_optimizer_post_hooks: dict = {}


def register_optimizer_step_pre_hook(hook):
    """Register ``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``, called
    before every optimizer's step. Returns a handle with ``remove()``."""
    handle = _RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """Register ``hook(optimizer, args, kwargs) -> None``, called after every optimizer's
    step. Returns a handle with ``remove()``."""
    handle = _RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


def _get_scalar_dtype():
    """dtype of the 'step' state tensor: float64 if that is the default dtype, else float32."""
    return np.float64 if _dtype.get_default_dtype() == np.float64 else np.float32


def _step_tensor(value=0.0):
    """A fresh 0-d 'step' state tensor (torch.tensor(0.0, dtype=_get_scalar_dtype()))."""
    return _wrap(np.array(value, dtype=_get_scalar_dtype()))


# Arrays with fewer elements than this come from np.empty_like (NumPy's small-block cache makes
# them cheap); larger scratch arrays are views of per-optimizer flat buffers reused across
# steps, which saves the page faults of freshly mapped memory (several times the arithmetic for
# multi-megabyte tensors). The buffers hold at most a few times the largest parameter.
_SCRATCH_MIN = 1 << 15


# Note [Blocked updates]: an Adam update is ~13 elementwise passes over the parameter, its
# gradient and its state (SGD with momentum: 4); for a tensor larger than the last-level
# cache share each pass streams from memory. Large tensors are therefore updated block by block (_BLOCK_BYTES per array, so the
# block's ~6 arrays stay in cache across the passes; 1 MiB measured best among 128 KiB..1 MiB
# on a 784-1024-1024-10 MLP): the same ufuncs on the same elements, so the result is bitwise
# the whole-array update's (tests/test_optim_blocked.py). 10-25% faster there for Adam
# (float32 and float64, bench/optim.py).
_BLOCK_BYTES = 1 << 20


def _blocks(arrays):
    """(flat views of arrays, [slices]) splitting real, C-contiguous, same-shape arrays of
    at least two blocks into blocks of _BLOCK_BYTES; None to update them whole."""
    pa = arrays[0]
    if pa.dtype.kind != "f" or pa.nbytes < 2 * _BLOCK_BYTES:
        return None
    flats = []
    for a in arrays:
        if a is None:
            flats.append(None)
            continue
        if not a.flags.c_contiguous or a.dtype != pa.dtype or a.shape != pa.shape:
            return None
        flats.append(a.reshape(-1))
    n = pa.size
    step = _BLOCK_BYTES // pa.itemsize
    return flats, [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _zeros_like(p):
    return _wrap(np.zeros_like(p._data))


def _grad_array(p, name):
    """The dense ndarray of p.grad (None if there is no gradient)."""
    g = p.grad
    if g is None:
        return None
    if g.is_sparse:
        if name is not None:
            raise RuntimeError(name)
        g = g.to_dense()
    return g._data


def _use_grad_for_differentiable(func):
    """Run ``step`` with grad mode set to the optimizer's ``differentiable`` default (False:
    the update records no graph), restoring the caller's mode afterwards."""
    @functools.wraps(func)
    def _use_grad(self, *args, **kwargs):
        prev = _set_grad_enabled(bool(self.defaults.get("differentiable", False)))
        try:
            return func(self, *args, **kwargs)
        finally:
            _set_grad_enabled(prev)
    return _use_grad


def _hook_step(func):
    """Wrap a subclass's ``step`` so that the step pre/post hooks run around it."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        if _global_optimizer_pre_hooks or self._optimizer_step_pre_hooks:
            args = (self,) + args
            for pre_hook in chain(list(_global_optimizer_pre_hooks.values()),
                                  list(self._optimizer_step_pre_hooks.values())):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    if isinstance(result, tuple) and len(result) == 2:
                        args, kwargs = result
                    else:
                        raise RuntimeError(
                            f"{func} must return None or a tuple of (new_args, new_kwargs), "
                            f"but got {result}.")
            out = func(*args, **kwargs)
        else:
            out = func(self, *args, **kwargs)
            args = (self,) + args
        if self._optimizer_step_post_hooks or _global_optimizer_post_hooks:
            for post_hook in chain(list(self._optimizer_step_post_hooks.values()),
                                   list(_global_optimizer_post_hooks.values())):
                post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True
    return wrapper


def _prepend(hooks, key):
    items = list(hooks.items())
    hooks.clear()
    hooks[key] = dict(items)[key]
    for k, v in items:
        if k != key:
            hooks[k] = v


def _check_hyper(name, value):
    """Hyperparameters must be numbers (or 1-element tensors, read as floats)."""
    if isinstance(value, _Tensor):
        if value._data.size != 1:
            raise ValueError(f"Tensor {name} must be 1-element")


class Optimizer:
    r"""Base class for all optimizers.

    Args:
        params (iterable): an iterable of Tensors, of ``(name, Tensor)`` pairs, or of dicts
            (parameter groups). Specifies what Tensors should be optimized.
        defaults (dict): default values of the optimization options (used when a parameter
            group doesn't specify them).

    >>> import cgrad
    >>> w = cgrad.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = cgrad.optim.SGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([0.8000, 1.6000], requires_grad=True)
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "hooked", False):
            cls.step = _hook_step(step)

    def __init__(self, params, defaults):
        if defaults.get("differentiable"):
            # Documented refusal: a differentiable step would record the update in the graph.
            raise NotImplementedError("cgrad.optim does not support differentiable=True")
        self.defaults = defaults
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._optimizer_state_dict_pre_hooks = {}
        self._optimizer_state_dict_post_hooks = {}
        self._optimizer_load_state_dict_pre_hooks = {}
        self._optimizer_load_state_dict_post_hooks = {}

        if isinstance(params, _Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))

        self.state = defaultdict(dict)
        self.param_groups = []

        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)
        if defaults.get("fused") and defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    # -- pickling and printing ---------------------------------------------------------
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    # Keys a subclass's param groups gained after older pickles were written, with the values
    # torch's __setstate__ fills in, and whether its state["step"] is stored as a tensor.
    _group_defaults = {}
    _step_is_tensor = False

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, {})
        self.defaults.setdefault("differentiable", False)
        for group in self.param_groups:
            for key, value in self._group_defaults.items():
                group.setdefault(key, value)
        if self._step_is_tensor:
            self._step_tensors_to_tensor()

    def __repr__(self):
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        format_string += ")"
        return format_string

    # -- hooks -------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)`` before step."""
        handle = _RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None`` after step."""
        handle = _RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def _register(self, hooks, hook, prepend):
        handle = _RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            _prepend(hooks, handle.id)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer) -> None`` before :meth:`state_dict`."""
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict) -> state_dict or None`` after :meth:`state_dict`."""
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict) -> state_dict or None`` before loading."""
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer) -> None`` after loading."""
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # -- state dicts -------------------------------------------------------------------
    def state_dict(self):
        """The optimizer state as a dict, in torch's format::

            {'state': {0: {'step': tensor(3.), 'exp_avg': tensor(...), ...}, ...},
             'param_groups': [{'lr': 0.01, ..., 'params': [0, 1]}, ...]}

        Parameters are replaced by their index in the order of the groups; the state tensors
        are the optimizer's own (not copies), as in torch.
        """
        for pre_hook in list(self._optimizer_state_dict_pre_hooks.values()):
            pre_hook(self)

        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, _Tensor) else k): v
                        for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}

        for post_hook in list(self._optimizer_state_dict_post_hooks.values()):
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups,
                                                 key=None):
        # Floating-point state follows the parameter's dtype; 'step' is kept as is unless the
        # group is fused or capturable (then float32), as in torch.
        fused = capturable = False
        for pg in param_groups:
            if param_id in pg["params"]:
                fused = pg.get("fused", False)
                capturable = pg.get("capturable", False)
                break
        if key == "step":
            if capturable or fused:
                return value.to(dtype=np.float32)
            return value
        if param._data.dtype.kind in "fc":
            return value.to(dtype=param._data.dtype)
        return value

    def load_state_dict(self, state_dict):
        """Load an optimizer state returned by :meth:`state_dict` (of an optimizer with the
        same number of groups and of parameters per group)."""
        state_dict = state_dict.copy()
        for pre_hook in list(self._optimizer_load_state_dict_pre_hooks.values()):
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result

        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")

        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def _cast(param, value, param_id=None, param_groups=None, key=None):
            if isinstance(value, _Tensor):
                return Optimizer._process_value_according_to_param_policy(
                    param, value, param_id, param_groups, key)
            if isinstance(value, dict):
                return {k: _cast(param, v, param_id=param_id, param_groups=param_groups, key=k)
                        for k, v in value.items()}
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
                return type(value)(_cast(param, v, param_id=param_id,
                                         param_groups=param_groups) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast(param, v, param_id=k,
                                     param_groups=state_dict["param_groups"])
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})

        for post_hook in list(self._optimizer_load_state_dict_post_hooks.values()):
            post_hook(self)

    # -- the optimizer API -------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized tensors: to None (default) or, with
        ``set_to_none=False``, to zeros in place (detached)."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if g.grad_fn is not None:
                            g.detach_()
                        else:
                            g.requires_grad_(False)
                        g.zero_()

    def step(self, closure=None):
        """Perform a single optimization step (re-evaluating the loss with ``closure`` if
        given) and return the closure's loss."""
        raise NotImplementedError

    def add_param_group(self, param_group):
        """Add a parameter group (a dict with ``'params'`` and optional hyperparameters);
        missing hyperparameters take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")

        params = param_group["params"]
        if isinstance(params, _Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead.")
        else:
            param_group["params"] = list(params)

        tensors = []
        names = []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) == len(tensors):
                param_group["param_names"] = names
            else:
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")

        for param in tensors:
            if not isinstance(param, _Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                "is " + _typename(param))
            if not self.defaults.get("differentiable", None) and not (
                    param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        if len(tensors) != len(set(tensors)):
            _warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error (as in torch)")

        param_set = set()
        for group in self.param_groups:
            param_set.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                current = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {current} to the optimizer")
        if not param_set.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")

        self.param_groups.append(param_group)

    # -- helpers for subclasses --------------------------------------------------------
    def _scratch(self, slot, like):
        """A scratch array with like's shape and dtype, valid until the next request for the
        same slot (slots 0, 1, 2 serve one parameter's update)."""
        n = like.size
        if n < _SCRATCH_MIN:
            return np.empty_like(like)
        bufs = self.__dict__.get("_scratch_bufs")
        if bufs is None:
            bufs = self._scratch_bufs = {}
        key = (slot, like.dtype)
        buf = bufs.get(key)
        if buf is None or buf.size < n:
            buf = bufs[key] = np.empty(n, like.dtype)
        return buf[:n].reshape(like.shape)

    def _run_closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def _step_tensors_to_tensor(self, fused_or_capturable=False):
        """__setstate__ helper: a 'step' saved as a number becomes a 0-d tensor."""
        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, None)
                if p_state and "step" in p_state and not isinstance(p_state["step"], _Tensor):
                    p_state["step"] = _step_tensor(float(p_state["step"]))
