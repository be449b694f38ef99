"""L-BFGS (optionally with a strong-Wolfe line search), as torch.optim.LBFGS."""
from __future__ import annotations

import numpy as np

from cgrad.autograd.grad_mode import enable_grad
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _Tensor,
                                   _use_grad_for_differentiable, _wrap)

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to bounds (the
    interval's midpoint when the cubic has no real minimiser)."""
    if bounds is None:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    else:
        lo, hi = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if disc >= 0:
        d2 = np.sqrt(disc)
        if x1 <= x2:
            xm = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            xm = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(xm, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Line search along d from the point x (loss f, gradient g, slope gtd) for a step t
    satisfying the strong Wolfe conditions: bracketing, then zooming by cubic interpolation.
    Returns (loss, gradient, t, number of evaluations)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = evaluate(x, t, d)
    evals = 1
    gtd_new = np.dot(g_new, d)

    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    it = 0
    br = br_f = br_g = br_gtd = None
    while it < max_ls:
        if f_new > (f + c1 * t * gtd) or (it > 1 and f_new >= f_prev):
            br, br_f = [t_prev, t], [f_prev, f_new]
            br_g, br_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            br, br_f = [t_prev, t], [f_prev, f_new]
            br_g, br_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # extrapolate
        t_old = t
        t = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                       bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t_old, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = np.dot(g_new, d)
        it += 1

    if it == max_ls:
        br, br_f, br_g = [0, t], [f, f_new], [g, g_new]

    # zoom
    insuf_progress = False
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        top, bot = max(br), min(br)
        eps = 0.1 * (top - bot)
        if min(top - t, t - bot) < eps:
            if insuf_progress or t >= top or t <= bot:
                t = top - eps if abs(t - top) < abs(t - bot) else bot + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = np.dot(g_new, d)
        it += 1
        if f_new > (f + c1 * t * gtd) or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high] = br[low], br_f[low]
                br_g[high], br_gtd[high] = br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return br_f[low], br_g[low], br[low], evals


# state values: arrays are kept as cgrad tensors (as torch keeps tensors), NumPy scalars as
# 0-d tensors; the step works on the arrays
def _out(v):
    if isinstance(v, list):
        return [_out(x) for x in v]
    if isinstance(v, (np.ndarray, np.generic)):
        return _wrap(np.array(v))
    return v


def _in(v):
    if isinstance(v, list):
        return [_in(x) for x in v]
    if isinstance(v, _Tensor):
        a = v._data
        return a[()] if a.ndim == 0 else a.copy()
    return v


class LBFGS(Optimizer):
    r"""Implements L-BFGS, with torch's algorithm (after minFunc).

    Each :meth:`step` (which needs a ``closure`` re-evaluating the loss and its gradients)
    runs up to ``max_iter`` iterations: the search direction comes from the two-loop
    recursion over the last ``history_size`` curvature pairs; the step is ``lr`` (on the very
    first iteration ``min(1, 1 / |g|_1) * lr``) or, with ``line_search_fn="strong_wolfe"``,
    found by a strong-Wolfe line search. It stops early when the gradient's largest entry is
    at most ``tolerance_grad``, or when the step or the loss change by at most
    ``tolerance_change``, or after ``max_eval`` evaluations.

    Only one parameter group is supported. The state lives under the first parameter, with
    torch's keys (``func_evals``, ``n_iter``, ``d``, ``t``, ``old_dirs``, ``old_stps``,
    ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``).

    Args:
        params: tensors, ``(name, tensor)`` pairs or one parameter-group dict.
        lr (float): learning rate (default: 1).
        max_iter (int): maximal iterations per step (default: 20).
        max_eval (int): maximal function evaluations per step (default: max_iter * 5 // 4).
        tolerance_grad (float): first-order optimality tolerance (default: 1e-7).
        tolerance_change (float): tolerance on the change of the loss or of the parameters
            (default: 1e-9).
        history_size (int): number of curvature pairs kept (default: 100).
        line_search_fn (str): ``None`` or ``"strong_wolfe"`` (default: None).
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def __setstate__(self, state):
        super().__setstate__(state)
        self._params = self.param_groups[0]["params"]

    @staticmethod
    def _real_flat(a):
        return (a.view(a.real.dtype) if a.dtype.kind == "c" else a).reshape(-1)

    def _flat_grad(self):
        views = []
        for p in self._params:
            g = p.grad
            if g is None:
                views.append(np.zeros(p._data.size * (2 if p._data.dtype.kind == "c" else 1),
                                      p._data.real.dtype))
                continue
            if g.is_sparse:
                g = g.to_dense()
            views.append(self._real_flat(g._data))
        return np.concatenate(views)

    def _add_grad(self, t, d):
        off = 0
        for p in self._params:
            a = p._data.view(p._data.real.dtype) if p._data.dtype.kind == "c" else p._data
            n = a.size
            a += t * d[off:off + n].reshape(a.shape)
            off += n
            p._bump_version()

    def _clone_params(self):
        return [p._data.copy() for p in self._params]

    def _set_params(self, xs):
        for p, x in zip(self._params, xs):
            p._data[...] = x
            p._bump_version()

    def _evaluate_at(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        g = self._flat_grad()
        self._set_params(x)
        return loss, g

    @_use_grad_for_differentiable
    def step(self, closure):
        """Perform one L-BFGS step (up to ``max_iter`` iterations) with ``closure``, which
        re-evaluates the model and returns the loss; returns the first loss."""
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter = group["max_iter"]
        max_eval = group["max_eval"]
        tol_grad = group["tolerance_grad"]
        tol_change = group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        history_size = group["history_size"]

        def run_closure():
            with enable_grad():
                return closure()

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = run_closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss

        d = _in(state.get("d"))
        t = _in(state.get("t"))
        old_dirs = _in(state.get("old_dirs"))
        old_stps = _in(state.get("old_stps"))
        ro = _in(state.get("ro"))
        H_diag = _in(state.get("H_diag"))
        prev_flat_grad = _in(state.get("prev_flat_grad"))
        prev_loss = _in(state.get("prev_loss"))

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # search direction
            if state["n_iter"] == 1:
                d = np.negative(flat_grad)
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = np.dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / np.dot(y, y)
                k = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = _in(state["al"])
                q = np.negative(flat_grad)
                for i in range(k - 1, -1, -1):
                    al[i] = np.dot(old_stps[i], q) * ro[i]
                    q += -al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(k):
                    be_i = np.dot(old_dirs[i], r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
                state["al"] = _out(al)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:
                prev_flat_grad[...] = flat_grad
            prev_loss = loss

            # step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = np.dot(flat_grad, d)
            if gtd > -tol_change:
                break

            ls_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_params()

                def evaluate(x, t, d):
                    return self._evaluate_at(run_closure, x, t, d)

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    evaluate, x_init, t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(run_closure())
                    flat_grad = self._flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1

            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            if opt_cond:
                break
            if np.abs(d * t).max() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        state["d"] = _out(d)
        state["t"] = _out(t)
        state["old_dirs"] = _out(old_dirs)
        state["old_stps"] = _out(old_stps)
        state["ro"] = _out(ro)
        state["H_diag"] = _out(H_diag)
        state["prev_flat_grad"] = _out(prev_flat_grad)
        state["prev_loss"] = _out(prev_loss)
        return orig_loss
