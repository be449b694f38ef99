"""Higher-level differentiation of functions: ``torch.autograd.functional``'s API.

``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp`` and ``hvp`` take a function of tensors
and the point where to differentiate it, with torch's signatures, defaults, output structure
(a single Tensor where torch returns one, tuples where the inputs or outputs are tuples) and
error messages (``strict=True`` errors included).

Everything is built on reverse mode (``cgrad.autograd.grad``). ``jvp`` and ``hvp`` use the
double-backward trick, as torch does: ``J v = d/du <J^T u, v>`` with a dummy ``u``, so they
work for any function whose backward is itself differentiable. The forward-mode Jacobian
strategy (``strategy="forward-mode"``, ``vectorize=True``) computes columns of the Jacobian in
the same way. ``vectorize=True`` with reverse mode gives the same result as
``vectorize=False`` (cgrad has no vmap: rows are computed one by one).

With ``create_graph=False`` (the default) the results never require grad.
"""
from __future__ import annotations

import numpy as np

from cgrad import _C

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _grad(outputs, inputs, grad_outputs=None, **kw):
    from cgrad.autograd.engine import grad
    return grad(outputs, inputs, grad_outputs, **kw)


def _zeros_like(t, requires_grad=False):
    z = _C._wrap(np.zeros_like(t._data))
    if requires_grad:
        z.requires_grad_(True)
    return z


_PRIVATE = {}


def _fns():
    """Private differentiable helpers: an alias (torch's ``view_as`` in _grad_preprocess) and
    a stack along a new leading dimension (backward: one select per input)."""
    if not _PRIVATE:
        from cgrad.autograd.function import Function

        class _Alias(Function):
            _node_name = "AliasBackward0"

            @staticmethod
            def forward(ctx, x):
                return x._data.view()

            @staticmethod
            def backward(ctx, g):
                return g

        class _Stack(Function):
            _node_name = "StackBackward0"

            @staticmethod
            def forward(ctx, *tensors):
                return np.stack([t._data for t in tensors])

            @staticmethod
            def backward(ctx, g):
                return tuple(g[i] for i in range(len(ctx.needs_input_grad)))

        _PRIVATE["alias"] = _Alias
        _PRIVATE["stack"] = _Stack
    return _PRIVATE


def _stack(tensors):
    return _fns()["stack"].apply(*tensors)


# ------------------------------------------------------------------------------------------
# utilities (torch/autograd/functional.py)
# ------------------------------------------------------------------------------------------
def _as_tuple_nocheck(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _as_tuple(inp, arg_name=None, fn_name=None):
    if arg_name is None and fn_name is None:
        return _as_tuple_nocheck(inp)
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not _is_tensor(el):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the value at index {i} has type {type(el)}.")
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the given {arg_name} has type {type(el)}.")
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(_fns()["alias"].apply(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if _is_tensor(inputs[0]):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {el_other.size()} but got "
                f"{el_v.size()}.")


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    if input_type not in ["outputs", "grad_inputs", "jacobian", "hessian"]:
        raise RuntimeError("Invalid input_type to _check_requires_grad")
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}."
                " This is not allowed in strict mode.")
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i}"
                    " is independent of the input. This is not allowed in strict mode."
                    " You should ensure that your function is thrice differentiable and that"
                    " the hessian depends on the inputs.")
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided"
                    f" function with respect to input {i} is independent of the input. This is "
                    "not allowed in strict mode. You should ensure that your function is twice"
                    " differentiable and that the jacobian depends on the inputs (this would be"
                    " violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients."
                " The outputs must be computed in a differentiable manner from the input"
                " when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = [], []
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(grad_out)
    if not new_outputs:
        return (None,) * len(inputs)
    return _grad(new_outputs, list(inputs), new_grad_outputs, allow_unused=True,
                 create_graph=create_graph, retain_graph=retain_graph)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    if stage not in ["back", "back_trick", "double_back", "double_back_trick"]:
        raise RuntimeError(f"Invalid stage argument '{stage}' to _fill_in_zeros")
    res = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        "The output of the user-provided function is independent of "
                        f"input {i}. This is not allowed in strict mode.")
                if stage == "back_trick":
                    raise RuntimeError(
                        f"The gradient with respect to the input is independent of entry {i}"
                        " in the grad_outputs when using the double backward trick to compute"
                        " forward mode gradients. This is not allowed in strict mode.")
                if stage == "double_back":
                    raise RuntimeError(
                        "The jacobian of the user-provided function is independent of "
                        f"input {i}. This is not allowed in strict mode.")
                raise RuntimeError(
                    "The hessian of the user-provided function is independent of "
                    f"entry {i} in the grad_jacobian. This is not allowed in strict "
                    "mode as it prevents from using the double backward trick to "
                    "replace forward mode AD.")
            grads_i = _zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError(
                    "The jacobian of the user-provided function is independent of "
                    f"input {i}. This is not allowed in strict mode when create_graph=True.")
            raise RuntimeError(
                "The hessian of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode when create_graph=True.")
        res += (grads_i,)
    return res


def _enable_grad():
    from cgrad.autograd.grad_mode import enable_grad
    return enable_grad()


def _set_grad_enabled(mode):
    from cgrad.autograd.grad_mode import set_grad_enabled
    return set_grad_enabled(mode)


def _grad_enabled():
    return _C.is_grad_enabled()


# ------------------------------------------------------------------------------------------
# vjp / jvp
# ------------------------------------------------------------------------------------------
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    r"""Compute the dot product between a vector ``v`` and the Jacobian of ``func`` at
    ``inputs``. Returns ``(func_output, vjp)``; ``vjp`` has the structure of ``inputs``.

        >>> import cgrad
        >>> from cgrad.autograd.functional import vjp
        >>> out, g = vjp(lambda x: (x * x).sum(), cgrad.tensor([1.0, 2.0]))
        >>> g
        tensor([2., 4.])
    """
    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns "
                "a single Tensor with a single element.")
    with _set_grad_enabled(True if create_graph else _grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        vjp_ = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    vjp_ = _grad_postprocess(vjp_, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(vjp_, is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    r"""Compute the dot product between the Jacobian of ``func`` at ``inputs`` and a vector
    ``v`` (double-backward trick). Returns ``(func_output, jvp)``; ``jvp`` has the structure
    of the outputs.

        >>> import cgrad
        >>> from cgrad.autograd.functional import jvp
        >>> out, t = jvp(lambda x: x * x, cgrad.tensor([1.0, 2.0]), cgrad.tensor([1.0, 1.0]))
        >>> t
        tensor([2., 4.])
    """
    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the input to "
                "the user-provided function is a single Tensor "
                "with a single element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        grad_outputs = tuple(_zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    if create_graph:
        with _enable_grad():
            grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
            jvp_ = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    else:
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        jvp_ = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    jvp_ = _grad_postprocess(jvp_, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(jvp_, is_outputs_tuple))


# ------------------------------------------------------------------------------------------
# jacobian / hessian
# ------------------------------------------------------------------------------------------
def _onehot(t, j):
    e = np.zeros(t._data.shape, dtype=t._data.dtype)
    e.reshape(-1)[j] = 1
    return _C._wrap(e)


def _jacfwd(func, inputs, strict=False, vectorize=False):
    """Forward-mode strategy: columns J e_k by the double-backward trick (one backward with
    create_graph, then one backward per input element)."""
    if strict:
        raise RuntimeError(
            "cgrad.autograd.functional.jacobian: `strict=True` "
            'and `strategy="forward-mode"` are not supported together (yet). '
            "Please either set `strict=False` or "
            '`strategy="reverse-mode"`.')
    if not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`.")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    with _enable_grad():
        inputs = _grad_preprocess(inputs, create_graph=False, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs")
        grad_outputs = tuple(_zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
    live = [(k, g) for k, g in enumerate(grad_inputs) if g is not None and g.requires_grad]
    jac = [[None] * len(inputs) for _ in outputs]
    for j, inp in enumerate(inputs):
        n = inp.numel()
        cols = [np.zeros((n,) + tuple(out._data.shape), dtype=out._data.dtype)
                for out in outputs]
        if j in dict(live):
            g_j = dict(live)[j]
            for k in range(n):
                res = _grad([g_j], list(grad_outputs), [_onehot(inp, k)], retain_graph=True,
                            allow_unused=True)
                for i, r in enumerate(res):
                    if r is not None:
                        cols[i][k] = r._data
        for i, out in enumerate(outputs):
            # cols[i]: (input numel, *out.shape) -> (*out.shape, *inp.shape)
            arr = np.moveaxis(cols[i], 0, -1).reshape(tuple(out._data.shape)
                                                      + tuple(inp._data.shape))
            jac[i][j] = _C._wrap(np.ascontiguousarray(arr))
    # torch returns lists here (not tuples) when the inputs are a tuple: same structure
    return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    r"""Compute the Jacobian of ``func`` at ``inputs``. ``jacobian[i][j]`` has shape
    ``outputs[i].shape + inputs[j].shape``; the tuple levels are dropped where ``func``
    returns a single Tensor or ``inputs`` is a single Tensor, as in torch.

        >>> import cgrad
        >>> from cgrad.autograd.functional import jacobian
        >>> jacobian(lambda x: x * x, cgrad.tensor([1.0, 2.0]))
        tensor([[2., 0.],
                [0., 4.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more '
            'performant. Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "cgrad.autograd.functional.jacobian: `create_graph=True` "
                'and `strategy="forward-mode"` are not supported together (yet). '
                "Please either set `create_graph=False` or "
                '`strategy="reverse-mode"`.')
        return _jacfwd(func, inputs, strict, vectorize)

    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError(
                "cgrad.autograd.functional.jacobian: `strict=True` "
                "and `vectorized=True` are not supported together. "
                "Please either set `strict=False` or "
                "`vectorize=False`.")
        jacobian_ = ()
        for i, out in enumerate(outputs):
            jac_i = tuple([] for _ in range(len(inputs)))
            for j in range(out.numel()):
                if out.requires_grad:
                    vj = _grad([out], list(inputs), [_onehot(out, j)], retain_graph=True,
                               create_graph=create_graph, allow_unused=True)
                else:
                    vj = (None,) * len(inputs)
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is "
                                f"independent of input {i}. This is not allowed in "
                                "strict mode when create_graph=True.")
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is "
                                f"independent of input {el_idx}. This is not allowed in "
                                "strict mode.")
                        jac_i_el.append(_zeros_like(inp_el))
            jacobian_ += (tuple(
                _reshape_rows(jac_i_el, out, inputs[el_idx], create_graph)
                for el_idx, jac_i_el in enumerate(jac_i)),)
        jacobian_ = _grad_postprocess(jacobian_, create_graph)
        return _tuple_postprocess(jacobian_, (is_outputs_tuple, is_inputs_tuple))


def _reshape_rows(rows, out, inp, create_graph):
    shape = tuple(out._data.shape) + tuple(inp._data.shape)
    if not rows:
        return _C._wrap(np.zeros(shape, dtype=inp._data.dtype))
    if create_graph and any(r.requires_grad for r in rows):
        return _stack(rows).reshape(shape)
    return _C._wrap(np.stack([r._data for r in rows]).reshape(shape))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    r"""Compute the Hessian of a scalar function ``func`` at ``inputs``. ``hessian[i][j]`` has
    shape ``inputs[i].shape + inputs[j].shape`` (a single Tensor when ``inputs`` is one).

        >>> import cgrad
        >>> from cgrad.autograd.functional import hessian
        >>> hessian(lambda x: (x ** 3).sum(), cgrad.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not _is_tensor(out):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element")
        return out.reshape(())

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


# ------------------------------------------------------------------------------------------
# vhp / hvp
# ------------------------------------------------------------------------------------------
def _scalar_check(outputs, is_outputs_tuple, name):
    if is_outputs_tuple or not _is_tensor(outputs[0]):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single "
            "element")


def _scalar_jacobian(func, inputs, v, create_graph, strict, name):
    """The part vhp and hvp share (as torch's): check v, run func (a scalar), and its
    gradient with create_graph=True. Call with grad mode enabled."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].numel() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function "
            "is a single Tensor with a single element.")
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(
        outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    _scalar_check(outputs, is_outputs_tuple, name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    r"""Compute the dot product between vector ``v`` and the Hessian of a scalar function
    ``func`` at ``inputs``. Returns ``(func_output, vhp)``.

        >>> import cgrad
        >>> from cgrad.autograd.functional import vhp
        >>> vhp(lambda x: (x ** 3).sum(), cgrad.tensor([1.0, 2.0]), cgrad.tensor([1.0, 1.0]))[1]
        tensor([ 6., 12.])
    """
    with _enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_jacobian(
            func, inputs, v, create_graph, strict, "vhp")
    with _set_grad_enabled(True if create_graph else _grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        vhp_ = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    vhp_ = _grad_postprocess(vhp_, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(vhp_, is_inputs_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    r"""Compute the dot product between the Hessian of a scalar function ``func`` at
    ``inputs`` and vector ``v`` (double-backward trick). Returns ``(func_output, hvp)``.

        >>> import cgrad
        >>> from cgrad.autograd.functional import hvp
        >>> hvp(lambda x: (x ** 3).sum(), cgrad.tensor([1.0, 2.0]), cgrad.tensor([1.0, 1.0]))[1]
        tensor([ 6., 12.])
    """
    with _enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_jacobian(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(_zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with _set_grad_enabled(True if create_graph else _grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        hvp_ = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    hvp_ = _grad_postprocess(hvp_, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(hvp_, is_inputs_tuple))
