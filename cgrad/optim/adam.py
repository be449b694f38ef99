"""Adam (and, with decoupled_weight_decay=True, AdamW), as torch.optim.Adam."""
from __future__ import annotations

import numpy as np

from cgrad.optim.optimizer import (Optimizer, _blocks, _check_hyper, _grad_array,
                                   _step_tensor, _use_grad_for_differentiable, _wrap,
                                   _zeros_like, _Tensor)
from cgrad.optim.sgd import _prep_grad

__all__ = ["Adam"]


def _real(a):
    """torch.view_as_real for complex arrays (the update runs on the real pairs)."""
    return a.view(a.real.dtype) if a.dtype.kind == "c" else a


def _lerp_(start, end, weight, tmp):
    """start.lerp_(end, weight) with torch's two formulas; tmp is scratch of start's shape."""
    d = np.subtract(end, start, out=tmp)
    if abs(weight) < 0.5:
        d *= weight
        start += d
    else:
        one = start.dtype.type
        d *= one(1) - one(weight)
        np.subtract(end, d, out=start)


def _addcmul_sq_(acc, g, value, tmp):
    """acc.addcmul_(g, g, value=value): acc + (value * g) * g."""
    t = np.multiply(g, value, out=tmp)
    t *= g
    acc += t
    return t


def _moments_and_step(g, m, v, vmax, tmp, denom, beta1, beta2, eps, step_size,
                      bias_correction2_sqrt):
    """Update the moments in place and return the parameter's increment (in tmp):
    -step_size * m / (sqrt(v or vmax) / bias_correction2_sqrt + eps)."""
    # v is updated before m (independent) so that its scratch serves the lerp
    v *= beta2
    _addcmul_sq_(v, g, 1 - beta2, tmp)
    _lerp_(m, g, 1 - beta1, tmp)
    if vmax is not None:
        vmax = _real(vmax)
        np.maximum(vmax, v, out=vmax)
        np.sqrt(vmax, out=denom)
    else:
        np.sqrt(v, out=denom)
    denom /= bias_correction2_sqrt
    denom += eps
    t = np.multiply(m, -step_size, out=tmp)
    t /= denom
    return t


# Note [Flat state]: for tensors of up to _FLAT_MAX elements the per-tensor update is mostly
# NumPy call overhead (~13 ufunc calls per tensor; nanoGPT-tiny has 28 tensors of 64 to
# 16K elements). So, as torch's foreach path batches its kernels over a tensor list, a param
# group's small real floating tensors of one dtype keep their state in flat buffers: 'step',
# 'exp_avg', 'exp_avg_sq' (and 'max_exp_avg_sq') are Tensors whose arrays are views of them
# (state dicts and user code see ordinary tensors). A step then copies the gradients into one
# flat array, runs the update once over it, and adds the increments tensor by tensor (also
# multiplying by 1 - lr * weight_decay first for AdamW, which reads nothing else): the same
# ufuncs on the same elements, so bitwise the per-tensor update. The flat path is taken when
# every tensor of the layout has a gradient, all its steps are equal and the state tensors
# are still the layout's views (load_state_dict, a user replacing a state entry or a skipped
# step makes it rebuild the layout, copying the values and re-pointing the existing state
# tensors at the new buffers, or fall back to the per-tensor path). foreach=False keeps the
# per-tensor path.
_FLAT_MAX = 1 << 16
_STATE_KEYS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")


class _FlatLayout:
    """The flat state of one param group's small tensors (Note [Flat state])."""
    __slots__ = ("group", "params", "amsgrad", "dtype", "bufs", "tensors", "views", "steps",
                 "step_tensors", "step_views", "g", "p", "tmp", "denom", "incs")

    def __init__(self, group, params, states, amsgrad):
        self.group, self.params, self.amsgrad = group, params, amsgrad
        dt = self.dtype = params[0]._data.dtype
        sizes = [p._data.size for p in params]
        offs = np.concatenate(([0], np.cumsum(sizes))).tolist()
        n = offs[-1]
        keys = _STATE_KEYS if amsgrad else _STATE_KEYS[:2]
        fresh = len(states[0]) == 0
        sdt = (_step_tensor()._data.dtype if fresh else states[0]["step"]._data.dtype)
        self.steps = np.zeros(len(params), dtype=sdt)
        self.bufs, self.tensors, self.views = {}, {}, {}
        for k in keys:
            buf = self.bufs[k] = np.zeros(n, dtype=dt)
            self.views[k] = [buf[a:b].reshape(p._data.shape)
                             for a, b, p in zip(offs, offs[1:], params)]
            self.tensors[k] = []
        self.step_views = [self.steps[i:i + 1].reshape(()) for i in range(len(params))]
        self.step_tensors = []
        for i, st in enumerate(states):
            if fresh:
                st["step"] = _wrap(self.step_views[i])
                for k in keys:
                    st[k] = _wrap(self.views[k][i])
            else:     # existing tensors keep their identity and point at the buffers
                self.step_views[i][...] = st["step"]._data
                st["step"]._data = self.step_views[i]
                for k in keys:
                    self.views[k][i][...] = st[k]._data
                    st[k]._data = self.views[k][i]
            self.step_tensors.append(st["step"])
            for k in keys:
                self.tensors[k].append(st[k])
        self.g = np.empty(n, dtype=dt)
        self.p = np.empty(n, dtype=dt)
        self.tmp = np.empty(n, dtype=dt)
        self.denom = np.empty(n, dtype=dt)
        self.incs = [self.tmp[a:b].reshape(p._data.shape)
                     for a, b, p in zip(offs, offs[1:], params)]

    def owns(self, group, params, states, amsgrad):
        """Is this layout the group's current one, with the state still its views?"""
        if (self.group is not group or self.amsgrad != amsgrad
                or len(self.params) != len(params)):
            return False
        keys = _STATE_KEYS if amsgrad else _STATE_KEYS[:2]
        for i, (p, q, st) in enumerate(zip(self.params, params, states)):
            if (p is not q or p._data.dtype != self.dtype
                    or p._data.shape != self.incs[i].shape):
                return False
            t = st.get("step")
            if t is not self.step_tensors[i] or t._data is not self.step_views[i]:
                return False
            for k in keys:
                t = st.get(k)
                if t is not self.tensors[k][i] or t._data is not self.views[k][i]:
                    return False
        return True


def _can_flatten(params, states, amsgrad):
    """Can these tensors' states move into a new flat layout (fresh, or complete and
    consistent: same dtypes and shapes, equal steps)?"""
    dt = params[0]._data.dtype
    if any(p._data.dtype != dt for p in params):
        return False
    if all(len(st) == 0 for st in states):
        return True
    keys = ("step",) + (_STATE_KEYS if amsgrad else _STATE_KEYS[:2])
    step0 = None
    for p, st in zip(params, states):
        if set(st) != set(keys):
            return False
        for k in keys[1:]:
            a = st[k]
            if (not isinstance(a, _Tensor) or a._data.dtype != dt
                    or a._data.shape != p._data.shape or a._base is not None):
                return False
        s = st["step"]
        if not isinstance(s, _Tensor) or s._data.shape != () or s._base is not None:
            return False
        if step0 is None:
            step0 = s
        elif s._data != step0._data or s._data.dtype != step0._data.dtype:
            return False
    return True


def _check_betas(lr, betas, eps, weight_decay):
    _check_hyper("lr", lr)
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
            or (isinstance(betas[0], _Tensor) and isinstance(betas[1], _Tensor))):
        raise ValueError("betas must be either both floats or both Tensors")
    for i in (0, 1):
        if isinstance(betas[i], _Tensor) and betas[i]._data.size != 1:
            raise ValueError(f"Tensor betas[{i}] must be 1-element")


class Adam(Optimizer):
    r"""Implements Adam, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)          (decoupled_weight_decay, i.e. AdamW)
        g = g + weight_decay * p                 (otherwise, if weight_decay != 0)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                    (amsgrad; v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (a 0-d float32 tensor), ``exp_avg``, ``exp_avg_sq`` and,
    with amsgrad, ``max_exp_avg_sq``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        amsgrad (bool): use the AMSGrad variant (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        foreach (bool, optional): ``False`` updates tensor by tensor; otherwise (default,
            also with ``fused=True``) a group's small tensors are updated together over flat
            state buffers (Note [Flat state]). Both give bitwise the same results.
        capturable, differentiable, fused: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_betas(lr, betas, eps, weight_decay)
        betas = tuple(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable,
                    "fused": fused, "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    _group_defaults = {"amsgrad": False, "maximize": False, "foreach": None,
                       "capturable": False, "differentiable": False,
                       "decoupled_weight_decay": False, "fused": None}
    _step_is_tensor = True

    _sparse_msg = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def _adam_update(self, pa, g, m, v, vmax, lr, beta1, beta2, eps, weight_decay, maximize,
                     decoupled, step_size, bias_correction2_sqrt):
        """One parameter's update in place on arrays of one shape (or one block of them)."""
        if weight_decay != 0 and decoupled:
            pa *= 1 - lr * weight_decay
            g, _ = _prep_grad(self, pa, g, maximize, 0.0)
        else:
            g, _ = _prep_grad(self, pa, g, maximize, weight_decay)
        tmp = _real(self._scratch(1, pa))
        denom = _real(self._scratch(2, pa))
        pa, g, m, v = _real(pa), _real(g), _real(m), _real(v)

        pa += _moments_and_step(g, m, v, vmax, tmp, denom, beta1, beta2, eps, step_size,
                                bias_correction2_sqrt)

    def _flat_step(self, group, params, grads, lr, beta1, beta2, eps, weight_decay, amsgrad,
                   maximize, decoupled):
        """Update the group's small tensors together (Note [Flat state]); returns the set of
        their indices in params, or None when the per-tensor path must do everything."""
        small = [i for i, p in enumerate(params)
                 if p._data.dtype.kind == "f" and 0 < p._data.size <= _FLAT_MAX]
        if len(small) < 2 or any(grads[i] is None for i in small):
            return None
        sp = [params[i] for i in small]
        if len({id(p) for p in sp}) != len(sp):      # duplicates: sequential updates
            return None
        all_state = self.state
        states = [all_state[p] for p in sp]
        layouts = self.__dict__.get("_flat_layouts")
        if layouts is None:
            layouts = self._flat_layouts = {}
        lay = layouts.get(id(group))
        if lay is None or not lay.owns(group, sp, states, amsgrad):
            if not _can_flatten(sp, states, amsgrad):
                return None
            lay = layouts[id(group)] = _FlatLayout(group, sp, states, amsgrad)
        steps = lay.steps
        if steps.min() != steps.max():
            return None
        steps += 1
        step = float(steps[0])
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2 ** 0.5

        g = np.concatenate([grads[i].reshape(-1) for i in small], out=lay.g)
        if weight_decay != 0 and not decoupled:
            np.concatenate([p._data.reshape(-1) for p in sp], out=lay.p)
            g, _ = _prep_grad(self, lay.p, g, maximize, weight_decay)
        else:
            g, _ = _prep_grad(self, g, g, maximize, 0.0)
        bufs = lay.bufs
        _moments_and_step(g, bufs["exp_avg"], bufs["exp_avg_sq"], bufs.get("max_exp_avg_sq"),
                          lay.tmp, lay.denom, beta1, beta2, eps, step_size,
                          bias_correction2_sqrt)
        decay = 1 - lr * weight_decay if weight_decay != 0 and decoupled else None
        for p, inc in zip(sp, lay.incs):
            pa = p._data
            if decay is not None:
                pa *= decay
            pa += inc
            p._bump_version()
        for t in lay.step_tensors:
            t._bump_version()
        for ts in lay.tensors.values():
            for t in ts:
                t._bump_version()
        return set(small)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        all_state = self.state
        msg = self._sparse_msg
        for group in self.param_groups:
            beta1, beta2 = (float(b) for b in group["betas"])
            lr = float(group["lr"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            amsgrad = group["amsgrad"]
            maximize = group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            params = group["params"]
            grads = [_grad_array(p, msg) for p in params]    # sparse ones raise first
            flat = None
            if group.get("foreach") is not False:
                flat = self._flat_step(group, params, grads, lr, beta1, beta2, eps,
                                       weight_decay, amsgrad, maximize, decoupled)
            for i, p in enumerate(params):
                g = grads[i]
                if g is None or (flat is not None and i in flat):
                    continue
                state = all_state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = _zeros_like(p)
                step_t = state["step"]
                m_t = state["exp_avg"]
                v_t = state["exp_avg_sq"]
                pa = p._data

                step_t._data += 1
                step = float(step_t._data)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                vmax_t = state["max_exp_avg_sq"] if amsgrad else None
                arrays = (pa, g, m_t._data, v_t._data,
                          None if vmax_t is None else vmax_t._data)
                hyper = (lr, beta1, beta2, eps, weight_decay, maximize, decoupled,
                         step_size, bias_correction2_sqrt)
                blocks = _blocks(arrays)
                if blocks is None:
                    self._adam_update(*arrays, *hyper)
                else:
                    flats, slices = blocks
                    for b in slices:
                        self._adam_update(*(None if a is None else a[b] for a in flats), *hyper)
                if vmax_t is not None:
                    vmax_t._bump_version()
                step_t._bump_version()
                m_t._bump_version()
                v_t._bump_version()
                p._bump_version()
        return loss
