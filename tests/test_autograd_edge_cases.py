"""torch's autograd edge cases (issue 17, section 5), each checked against torch 2.13.

Every scenario is written once as a function of the library module `m` (cgrad or torch) and
returns plain values (lists, strings, exception types and messages). The test asserts the
values cgrad gives directly, so it means something without torch, then runs the same scenario
under torch (`pytest.importorskip("torch")`) and compares.
"""
from __future__ import annotations

import pytest

import cgrad


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _oracle():
    return pytest.importorskip("torch")


def vals(t):
    """A tensor's values as a flat list of floats (None stays None)."""
    if t is None:
        return None
    if isinstance(t, (tuple, list)):
        return tuple(vals(i) for i in t)
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def err(fn):
    """(exception type name, message) of what fn() raises, with the library's name taken out
    of the message (torch.FloatTensor / cgrad.FloatTensor), or ("ok", result)."""
    try:
        r = fn()
    except Exception as e:      # noqa: BLE001 - the comparison is the test
        return type(e).__name__, str(e).replace("torch.", "LIB.").replace("cgrad.", "LIB.")
    return "ok", r


def same_as_torch(scenario, got):
    torch = _oracle()
    assert scenario(torch) == got


# ----------------------------------------------------------------------------------------
# 1. hooks on AccumulateGrad nodes, and their order with tensor and post-accumulate hooks
# ----------------------------------------------------------------------------------------
def _acc_hook_order(m):
    log = []
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * m.tensor([2.0, 2.0])
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    assert acc is m.autograd.graph.get_gradient_edge(x).node
    acc.register_prehook(lambda g: log.append(("acc_pre", vals(g))))
    acc.register_hook(lambda gi, go: log.append(("acc_post", gi, vals(go))))
    x.register_hook(lambda g: log.append(("tensor", vals(g))))
    x.register_post_accumulate_grad_hook(lambda p: log.append(("post_acc", vals(p.grad))))
    acc.register_prehook(lambda g: log.append("acc_pre2"))
    x.register_hook(lambda g: log.append("tensor2"))
    y.sum().backward()
    out = [list(log), vals(x.grad)]
    # a pre hook replaces the gradient that is accumulated; the post hook sees it
    log.clear()
    x.grad = None
    h = acc.register_prehook(lambda g: (g[0] * 10,))
    (x * m.tensor([2.0, 2.0])).sum().backward()
    h.remove()
    out += [list(log), vals(x.grad)]
    return out


def test_accumulate_grad_hooks_run_in_torch_order():
    got = _acc_hook_order(cgrad)
    order = [("tensor", [2.0, 2.0]), "tensor2", ("acc_pre", ([2.0, 2.0],)), "acc_pre2",
             ("post_acc", [2.0, 2.0]), ("acc_post", (), ([2.0, 2.0],))]
    assert got[0] == order and got[1] == [2.0, 2.0]
    assert got[2][4] == ("post_acc", [20.0, 20.0]) and got[3] == [20.0, 20.0]
    assert got[2][5] == ("acc_post", (), ([20.0, 20.0],))
    same_as_torch(_acc_hook_order, got)


def _acc_hooks_pruned(m):
    out = []
    log = []

    def setup():
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * m.tensor([2.0, 2.0])
        acc = y.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda g: log.append("acc_pre"))
        acc.register_hook(lambda gi, go: log.append("acc_post"))
        x.register_hook(lambda g: log.append("tensor"))
        x.register_post_accumulate_grad_hook(lambda p: log.append("post_acc"))
        return x, y, acc

    x, y, acc = setup()
    out.append((vals(m.autograd.grad(y.sum(), x)), list(log)))    # captured: tensor hooks only
    log.clear()
    x, y, acc = setup()
    y.sum().backward(inputs=[x])
    out.append((vals(x.grad), list(log)))
    log.clear()
    x, y, acc = setup()
    (y * 3).sum().backward(inputs=[y])                          # x's node is not run
    out.append((vals(x.grad), list(log)))
    log.clear()
    # the node is held weakly by its leaf: its hooks live as long as someone holds it
    x = m.tensor([1.0], requires_grad=True)
    n = m.autograd.graph.get_gradient_edge(x).node
    n.register_prehook(lambda g: log.append("held"))
    (x * 3).sum().backward()
    del n
    (x * 3).sum().backward()
    out.append((vals(x.grad), list(log)))
    return out


def test_accumulate_grad_hooks_in_pruned_runs():
    got = _acc_hooks_pruned(cgrad)
    assert got == [(([2.0, 2.0],), ["tensor"]),
                   ([2.0, 2.0], ["tensor", "acc_pre", "post_acc", "acc_post"]),
                   (None, []),
                   ([6.0], ["held"])]
    same_as_torch(_acc_hooks_pruned, got)


_NODE_HOOK_RETURNS = {
    "pre_count": ("pre", lambda g: (g[0], g[0])),
    "pre_list": ("pre", lambda g: [g[0]]),
    "pre_tensor": ("pre", lambda g: g[0]),
    "pre_int": ("pre", lambda g: (3,)),
    "pre_size": ("pre", lambda g: (g[0].reshape(-1)[:1],)),
    "pre_dtype": ("pre", lambda g: (g[0].double(),)),
    "pre_none": ("pre", lambda g: (None,)),
    "post_count": ("post", lambda gi, go: (gi[0],)),
    "post_list": ("post", lambda gi, go: [gi[0], gi[1]]),
    "post_int": ("post", lambda gi, go: (3, None)),
    "post_dtype": ("post", lambda gi, go: (gi[0].double(), gi[1])),
    "post_scale": ("post", lambda gi, go: (gi[0] * 10, gi[1])),
    "acc_pre_count": ("acc_pre", lambda g: ()),
    "acc_pre_scale": ("acc_pre", lambda g: (g[0] * 3,)),
    "acc_post_count": ("acc_post", lambda gi, go: (go[0],)),
    "acc_post_list": ("acc_post", lambda gi, go: []),
    "acc_post_empty": ("acc_post", lambda gi, go: ()),
}


def _node_hook_return(m, case):
    where, hook = _NODE_HOOK_RETURNS[case]
    x = m.tensor([1.0, 2.0], requires_grad=True)
    w = m.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    if where == "pre":
        y.grad_fn.register_prehook(hook)
    elif where == "post":
        y.grad_fn.register_hook(hook)
    else:
        acc = y.grad_fn.next_functions[0][0]
        (acc.register_prehook if where == "acc_pre" else acc.register_hook)(hook)
    r = err(lambda: y.sum().backward())
    return r, vals(x.grad), vals(w.grad)


@pytest.mark.parametrize("case", list(_NODE_HOOK_RETURNS))
def test_node_hook_results_are_checked_as_torch(case):
    got = _node_hook_return(cgrad, case)
    expected = {
        "pre_count": ("RuntimeError", "hook '<lambda>' has returned an incorrect number of "
                                      "values (got 2, but expected 1)"),
        "pre_list": ("TypeError", "expected tuple, but hook returned 'list'"),
        "pre_tensor": ("TypeError", "expected tuple, but hook returned 'Tensor'"),
        "pre_int": ("TypeError", "expected Variable, but hook returned 'int'"),
        "pre_size": ("RuntimeError", "hook '<lambda>' has changed the size of value"),
        "pre_dtype": ("RuntimeError", "hook '<lambda>' has changed the type of value (was "
                                      "LIB.FloatTensor got LIB.DoubleTensor)"),
        "post_count": ("RuntimeError", "hook '<lambda>' has returned an incorrect number of "
                                       "values (got 1, but expected 2)"),
        "post_list": ("TypeError", "expected tuple, but hook returned 'list'"),
        "acc_pre_count": ("RuntimeError", "hook '<lambda>' has returned an incorrect number "
                                          "of values (got 0, but expected 1)"),
        "acc_post_count": ("RuntimeError", "hook '<lambda>' has returned an incorrect number "
                                           "of values (got 1, but expected 0)"),
        "acc_post_list": ("TypeError", "expected tuple, but hook returned 'list'"),
    }
    if case in expected:
        assert got[0] == expected[case]
    elif case == "pre_none":            # no gradient flows on
        assert got == (("ok", None), None, None)
    elif case == "post_scale":
        assert got == (("ok", None), [30.0, 40.0], [1.0, 2.0])
    elif case == "acc_pre_scale":
        assert got == (("ok", None), [9.0, 12.0], [1.0, 2.0])
    same_as_torch(lambda m: _node_hook_return(m, case), got)


# a custom backward that returns None for an input: that leaf's .grad stays None, and every
# hook on the way still runs, seeing None (torch runs the nodes with an undefined gradient)
def _none_grad_hooks(m):
    class NoneGrad(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return None, g

    log = []
    b = m.tensor([3.0, 4.0], requires_grad=True)
    a = m.tensor([1.0, 2.0], requires_grad=True)
    a.register_hook(lambda g: log.append(("hook", vals(g))))
    a.register_post_accumulate_grad_hook(lambda p: log.append(("post_acc", vals(p.grad))))
    acc = m.autograd.graph.get_gradient_edge(a).node
    acc.register_prehook(lambda g: log.append(("acc_pre", vals(g))))
    acc.register_hook(lambda gi, go: log.append(("acc_post", gi, vals(go))))
    NoneGrad.apply(a, b).sum().backward()
    out = [vals(a.grad), vals(b.grad), list(log)]
    log.clear()
    c = a * m.tensor([1.0, 1.0])
    c.register_hook(lambda g: log.append(("c_hook", vals(g))))
    c.retain_grad()
    c.grad_fn.register_prehook(lambda g: log.append(("c_pre", vals(g))))
    c.grad_fn.register_hook(lambda gi, go: log.append(("c_post", vals(gi), vals(go))))
    NoneGrad.apply(c, b).sum().backward()
    out += [vals(a.grad), vals(c.grad), list(log)]
    log.clear()
    out.append((vals(m.autograd.grad(NoneGrad.apply(a, b).sum(), [a, b], allow_unused=True)),
                list(log)))
    # a hook may not turn the missing gradient into one
    a2 = m.tensor([1.0, 2.0], requires_grad=True)
    a2.register_hook(lambda g: m.ones(2))
    out.append(err(lambda: NoneGrad.apply(a2, b).sum().backward()))
    # an output that got no gradient: its hooks see None
    x = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y1, y2 = (x * m.ones(4)).split(2)
    y2.register_hook(lambda g: log.append(("y2", vals(g))))
    y1.sum().backward()
    out.append(log[-1])
    return out


def test_hooks_see_none_when_a_backward_returns_none():
    got = _none_grad_hooks(cgrad)
    assert got[0] is None and got[1] == [1.0, 1.0]
    assert got[2] == [("hook", None), ("acc_pre", (None,)), ("post_acc", None),
                      ("acc_post", (), (None,))]
    assert got[3] is None and got[4] is None
    assert got[5] == [("c_hook", None), ("c_pre", (None,)), ("c_post", (None, None), (None,)),
                      ("hook", None), ("acc_pre", (None,)), ("post_acc", None),
                      ("acc_post", (), (None,))]
    assert got[6] == ((None, [1.0, 1.0]), [("hook", None)])
    assert got[7] == ("RuntimeError", "can't replace a None gradient with a non-None value")
    assert got[8] == ("y2", None)
    same_as_torch(_none_grad_hooks, got)


def _custom_post_hook_args(m):
    # a custom Function's post hook sees one grad_input per tensor argument and the
    # gradients that arrived (not the zeros materialized for backward)
    class Two(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            return a * k, b * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2, None, g2 * 3

    log = []
    x = m.tensor([1.0, 2.0], requires_grad=True)
    w = m.tensor([1.0, 2.0], requires_grad=True)
    p, q = Two.apply(x, 2.0, w)
    p.grad_fn.register_prehook(lambda go: log.append(("pre", vals(go))))
    p.grad_fn.register_hook(lambda gi, go: log.append(("post", vals(gi), vals(go))))
    p.sum().backward()
    p, q = Two.apply(x, 2.0, w)
    p.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
    p.sum().backward()
    return log, vals(x.grad), vals(w.grad)


def test_custom_function_post_hook_arguments():
    got = _custom_post_hook_args(cgrad)
    assert got[0] == [("pre", ([1.0, 1.0], None)),
                      ("post", ([2.0, 2.0], [0.0, 0.0]), ([1.0, 1.0], None))]
    assert got[1] == [22.0, 22.0] and got[2] == [0.0, 0.0]
    same_as_torch(_custom_post_hook_args, got)


# ----------------------------------------------------------------------------------------
# 9. anomaly mode: the forward-trace warning never replaces the error
# ----------------------------------------------------------------------------------------
def _anomaly(m):
    import warnings

    class NaNGrad(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    class Fails(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("inner")

    x = m.tensor([1.0, 2.0], requires_grad=True)
    out = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with m.autograd.detect_anomaly():
            y, z = NaNGrad.apply(x), Fails.apply(x)
            s = m.sqrt(m.tensor([0.0, -1.0], requires_grad=True))
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                out.append(err(lambda: y.sum().backward()))
                out.append(err(lambda: z.sum().backward()))
                out.append(err(lambda: s.sum().backward()))
            # without the error filter the same errors come with the forward traceback
            out.append(err(lambda: NaNGrad.apply(x).sum().backward()))
            out.append(err(lambda: Fails.apply(x).sum().backward()))
    out.append([str(i.message).split(".")[0] for i in w])
    return out


def test_anomaly_warning_does_not_replace_the_error():
    got = _anomaly(cgrad)
    nan = ("RuntimeError", "Function 'NaNGradBackward' returned nan values in its 0th output.")
    assert got[0] == nan and got[3] == nan
    assert got[1] == ("ValueError", "inner") and got[4] == ("ValueError", "inner")
    assert got[2] == ("RuntimeError",
                      "Function 'SqrtBackward0' returned nan values in its 0th output.")
    assert got[5] == ["Anomaly Detection has been enabled", "Error detected in NaNGradBackward",
                      "Error detected in FailsBackward"]
    same_as_torch(_anomaly, got)


# ----------------------------------------------------------------------------------------
# 3. GradientEdge inputs and outputs of autograd.grad / backward
# ----------------------------------------------------------------------------------------
def _gradient_edges(m):
    ge = m.autograd.graph.get_gradient_edge
    GradientEdge = m.autograd.graph.GradientEdge
    out = []
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = (y * y).sum()
    ey, ex = ge(y), ge(x)
    out.append((GradientEdge._fields, ey.output_nr, ex.output_nr, type(ex.node).__name__,
                ey.node is y.grad_fn, ey.ownership_token is None, isinstance(ey, tuple)))
    grad = m.autograd.grad
    out.append(vals(grad(z, ey, retain_graph=True)))
    out.append(vals(grad(z, ex, retain_graph=True)))
    out.append(vals(grad(z, [ex, y], retain_graph=True)))
    out.append(vals(grad(z, {"y": ey}, retain_graph=True)["y"]))
    out.append(vals(grad(ge(z), x, retain_graph=True)))                 # an edge as output
    out.append(vals(grad(ge(y), ex, grad_outputs=m.ones(2), retain_graph=True)))
    out.append(err(lambda: grad(ge(y), x, retain_graph=True)))
    out.append(err(lambda: grad(ge(y), x, grad_outputs=m.ones(3), retain_graph=True)))
    out.append(err(lambda: grad(ge(z), x, grad_outputs=m.ones(1, 1), is_grads_batched=True,
                                retain_graph=True)))
    out.append(err(lambda: grad(z, [(y.grad_fn, 0)], retain_graph=True)))
    out.append(err(lambda: grad(z, GradientEdge(None, 0), retain_graph=True)))
    # an edge taken before an in-place op: the gradient w.r.t. the value it had then
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    ey = ge(y)
    y.mul_(2)
    z = (y * y).sum()
    out.append(vals(grad(z, [ey, ge(y), y], retain_graph=True)))
    # materialize_grads: zeros for an unused tensor, an error for an unused edge
    w = m.tensor([1.0, 2.0], requires_grad=True)
    out.append(vals(grad(z, [w, x], materialize_grads=True, retain_graph=True)))
    out.append(err(lambda: grad(z, [ge(w), x], materialize_grads=True, retain_graph=True)))
    out.append(vals(grad(z, [ge(w), x], allow_unused=True, retain_graph=True)))
    out.append(err(lambda: grad(z, [ge(w), x], retain_graph=True)))
    # backward: edges as roots and as inputs
    x.grad = None
    z.backward(inputs=[ge(x)], retain_graph=True)
    out.append(vals(x.grad))
    x.grad = None
    m.autograd.backward(ge(z), retain_graph=True)
    out.append(vals(x.grad))
    x.grad = None
    m.autograd.backward(ge(z), grad_tensors=m.tensor(2.0), retain_graph=True)
    out.append(vals(x.grad))
    x.grad = None
    m.autograd.backward(z, inputs=[ge(y)], retain_graph=True)     # no retain_grad for an edge
    out.append((vals(x.grad), y.retains_grad))
    return out


def test_gradient_edges_in_grad_and_backward():
    got = _gradient_edges(cgrad)
    assert got[0] == (("node", "output_nr", "ownership_token"), 0, 0, "AccumulateGrad", True,
                      True, True)
    assert got[1] == ([6.0, 12.0],) and got[2] == ([18.0, 36.0],)
    assert got[3] == ([18.0, 36.0], [6.0, 12.0]) and got[4] == [6.0, 12.0]
    assert got[5] == ([18.0, 36.0],) and got[6] == ([3.0, 3.0],)
    assert got[7] == ("RuntimeError", "grad can be implicitly created only for scalar outputs")
    assert got[8][0] == "RuntimeError" and "Mismatch in shape" in got[8][1]
    assert got[9] == ("RuntimeError", "Batched grads are not supported with GradientEdge")
    assert got[10] == ("RuntimeError",
                       "all inputs have to be Tensors or GradientEdges, but got tuple")
    assert got[11] == ("RuntimeError", "GradientEdge's first object must be an "
                                       "autograd.graph.Node but got NoneType")
    assert got[12] == ([24.0, 48.0], [12.0, 24.0], [12.0, 24.0])
    assert got[13] == ([0.0, 0.0], [72.0, 144.0])
    assert got[14] == ("RuntimeError",
                       "materialize_grads cannot be used when the given input is a GradientEdge")
    assert got[15] == (None, [72.0, 144.0])
    assert got[16][1].startswith("The differentiated Tensor at index 0 appears to not have")
    assert got[17:20] == [[72.0, 144.0], [72.0, 144.0], [144.0, 288.0]]
    assert got[20] == (None, False)
    same_as_torch(_gradient_edges, got)


def _grad_runs_input_hooks(m):
    # autograd.grad(c, inputs=b) runs b's tensor hooks (b a non-leaf) and returns what they
    # return; when b's node also runs on the way to another input, b's result is captured
    # before its hooks
    log = []
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.register_hook(lambda g: log.append(vals(g)) or g * 10)
    c = (b * b).sum()
    ge = m.autograd.graph.get_gradient_edge
    out = []
    for inputs in (b, ge(b), a, [a, b]):
        out.append((vals(m.autograd.grad(c, inputs=inputs, retain_graph=True)), list(log)))
        log.clear()
    return out


def test_grad_with_respect_to_a_non_leaf_runs_its_hooks():
    got = _grad_runs_input_hooks(cgrad)
    assert got == [(([40.0, 80.0],), [[4.0, 8.0]]), (([40.0, 80.0],), [[4.0, 8.0]]),
                   (([80.0, 160.0],), [[4.0, 8.0]]),
                   (([80.0, 160.0], [4.0, 8.0]), [[4.0, 8.0]])]
    same_as_torch(_grad_runs_input_hooks, got)


def test_gradient_edge_output_nr_out_of_range_raises():
    # torch 2.13 crashes (segfault) here; cgrad raises
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = (y * y).sum()
    edge = cgrad.autograd.graph.GradientEdge(y.grad_fn, 5)
    with pytest.raises(IndexError, match="output_nr 5 is out of range"):
        cgrad.autograd.grad(z, edge)


# ----------------------------------------------------------------------------------------
# 4. custom Functions: the same tensor returned twice; None gradients
# ----------------------------------------------------------------------------------------
def _same_output_twice(m):
    seen = []

    class Twice(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            x = a * 2
            return x, x

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((vals(g1), vals(g2)))
            return g1 * 2 + g2 * 3

    class InputTwice(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a, a

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + g2

    class Three(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            x = a * 2
            return x, a * 3, x

        @staticmethod
        def backward(ctx, g1, g2, g3):
            seen.append((vals(g1), vals(g2), vals(g3)))
            return g1 + g2 + g3

    out = []
    a = m.tensor([1.0, 2.0], requires_grad=True)
    p, q = Twice.apply(a)
    out.append((p is q, p.grad_fn is q.grad_fn, p.output_nr, q.output_nr))
    (p.sum() + 10 * q.sum()).backward()        # both land in output 1
    out.append(vals(a.grad))
    with m.no_grad():
        p, q = Twice.apply(a)
    out.append((p is q, p.requires_grad))
    p, q = InputTwice.apply(a)                 # an input returned as is twice: two views
    out.append((p is q, p is a, p.output_nr, q.output_nr))
    a.grad = None
    p, q, r = Three.apply(a)
    out.append((p is r, p.output_nr, q.output_nr))
    (p.sum() + q.sum()).backward()
    out.append(vals(a.grad))
    out.append(seen)
    return out


def test_forward_returning_the_same_tensor_twice():
    got = _same_output_twice(cgrad)
    assert got[0] == (True, True, 1, 1) and got[1] == [33.0, 33.0]
    assert got[2] == (True, False) and got[3] == (False, False, 0, 1)
    assert got[4] == (True, 2, 1) and got[5] == [2.0, 2.0]
    assert got[6] == [([0.0, 0.0], [11.0, 11.0]), ([0.0, 0.0], [1.0, 1.0], [1.0, 1.0])]
    same_as_torch(_same_output_twice, got)


def _none_gradient_leaves_grad_none(m):
    class NoneGrad(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return None, g

    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = m.tensor([3.0, 4.0], requires_grad=True)
    NoneGrad.apply(a, b).sum().backward()
    out = [vals(a.grad), vals(b.grad)]
    NoneGrad.apply(a * 1, b).sum().backward()          # through a built-in node too
    out += [vals(a.grad), vals(b.grad)]
    grad = m.autograd.grad
    out.append(vals(grad(NoneGrad.apply(a, b).sum(), [a, b], allow_unused=True)))
    out.append(err(lambda: grad(NoneGrad.apply(a, b).sum(), [a, b]))[0])
    out.append(vals(grad(NoneGrad.apply(a, b).sum(), [a, b], materialize_grads=True)))
    (NoneGrad.apply(a, b).sum() + a.sum() * 0).backward()      # another path: zeros
    out.append(vals(a.grad))
    return out


def test_backward_returning_none_leaves_grad_none():
    got = _none_gradient_leaves_grad_none(cgrad)
    assert got == [None, [1.0, 1.0], None, [2.0, 2.0], (None, [1.0, 1.0]), "RuntimeError",
                   ([0.0, 0.0], [1.0, 1.0]), [0.0, 0.0]]
    same_as_torch(_none_gradient_leaves_grad_none, got)


# ----------------------------------------------------------------------------------------
# 5. pow(0, 0); built-in ops save only what their backward needs
# ----------------------------------------------------------------------------------------
def _pow_at_zero(m):
    out = []
    for base in ([0.0, 0.0, 2.0, -1.0], [0.0]):
        n = len(base)
        b = m.tensor(base, requires_grad=True)
        e = m.tensor([0.0] * n, requires_grad=True)
        (b ** e).sum().backward()
        out.append((vals(b.grad), vals(e.grad)))
        for f in (lambda: b ** 0.0, lambda: b ** 0, lambda: m.pow(b, m.tensor(0.0))):
            b.grad = None
            f().sum().backward()
            out.append(vals(b.grad))
        for f in (lambda: 0.0 ** e, lambda: m.tensor(0.0) ** e, lambda: m.pow(0.0, e + 1),
                  lambda: m.pow(m.zeros(n), e - 1)):
            e.grad = None
            f().sum().backward()
            out.append(vals(e.grad))
        b.grad = e.grad = None
        m.pow(b, e + 1).sum().backward()
        out.append((vals(b.grad), vals(e.grad)))
    return out


def test_pow_zero_to_the_zero_has_zero_gradient():
    got = _pow_at_zero(cgrad)
    assert got[0][0] == [0.0, 0.0, 0.0, 0.0]
    assert got[0][1][:2] == [0.0, 0.0] and abs(got[0][1][2] - 0.6931472) < 1e-6
    assert got[1:4] == [[0.0] * 4] * 3
    assert got[4:7] == [[0.0] * 4] * 3 and got[7] == [-float("inf")] * 4
    assert got[8][0] == [1.0] * 4
    assert got[9] == ([0.0], [0.0]) and got[10:17] == [[0.0]] * 6 + [[-float("inf")]]
    torch = _oracle()
    assert repr(_pow_at_zero(torch)) == repr(got)      # repr: nan == nan


_BINARY = {
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "sub": lambda m, a, b: a - b,
    "add": lambda m, a, b: a + b,
    "pow": lambda m, a, b: a ** b,
    "matmul": lambda m, a, b: a @ b,
    "mm": lambda m, a, b: m.mm(a, b),
    "bmm": lambda m, a, b: m.bmm(a[None], b[None]),
    "mv": lambda m, a, b: m.mv(a, b[0]),
    "dot": lambda m, a, b: m.dot(a.reshape(-1), b.reshape(-1)),
    "outer": lambda m, a, b: m.outer(a.reshape(-1), b.reshape(-1)),
    "einsum": lambda m, a, b: m.einsum("ij,jk->ik", a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "clamp_min": lambda m, a, b: m.clamp(a, min=b),
    "add_alpha": lambda m, a, b: m.add(a, b, alpha=2),
    "where": lambda m, a, b: m.where(b > 1, a, b),
    "index_add": lambda m, a, b: a.index_add(0, m.tensor([1, 0]), b),
    "square_mul": lambda m, a, b: a.square() * b,
    "neg_mul": lambda m, a, b: -a * b,
    "mul_scalar": lambda m, a, b: a * 3.0 + b,
    "pow_scalar": lambda m, a, b: a ** 3.0 + b,
    "rpow_scalar": lambda m, a, b: 3.0 ** a + b,
}

# (requires grad, modified in place): 'ok' when backward works after the in-place op, 'ERR'
# when it raises torch's "modified by an inplace operation" (torch 2.13's results)
_SAVES_CASES = [("a", "a"), ("a", "b"), ("b", "a"), ("b", "b"), ("ab", "a"), ("ab", "b")]
_SAVES_TORCH = {
    "mul": "ok ERR ERR ok ERR ERR", "div": "ok ERR ERR ERR ERR ERR",
    "sub": "ok ok ok ok ok ok", "add": "ok ok ok ok ok ok",
    "pow": "ERR ERR ERR ERR ERR ERR", "matmul": "ok ERR ERR ok ERR ERR",
    "mm": "ok ERR ERR ok ERR ERR", "bmm": "ok ERR ERR ok ERR ERR", "mv": "ok ERR ERR ok ERR ERR",
    "dot": "ok ERR ERR ok ERR ERR", "outer": "ok ERR ERR ok ERR ERR",
    "einsum": "ok ERR ERR ok ERR ERR", "maximum": "ERR ERR ERR ERR ERR ERR",
    "minimum": "ERR ERR ERR ERR ERR ERR", "fmod": "ok ok ERR ERR ERR ERR",
    "remainder": "ok ok ERR ERR ERR ERR", "div_floor": "ok ERR ERR ERR ERR ERR",
    "div_trunc": "ok ERR ERR ERR ERR ERR", "clamp_min": "ERR ERR ERR ERR ERR ERR",
    "add_alpha": "ok ok ok ok ok ok", "where": "ok ok ok ok ok ok",
    "index_add": "ok ok ok ERR ok ERR", "square_mul": "ERR ERR ok ok ERR ERR",
    "neg_mul": "ok ERR ok ok ok ERR", "mul_scalar": "ok ok ok ok ok ok",
    "pow_scalar": "ERR ok ok ok ERR ok", "rpow_scalar": "ERR ok ok ok ERR ok",
}


def _saves(m, name):
    res = []
    for req, mod in _SAVES_CASES:
        a = m.tensor([[1.5, 2.0], [3.0, 4.0]], requires_grad="a" in req)
        b = m.tensor([[2.0, 0.5], [1.25, 3.0]], requires_grad="b" in req)
        z = _BINARY[name](m, a, b)
        with m.no_grad():
            (a if mod == "a" else b).add_(1)
        r = err(lambda: z.sum().backward())
        if r[0] == "ok":
            res.append("ok")
        else:
            assert r[0] == "RuntimeError" and "modified by an inplace operation" in r[1], r
            res.append("ERR")
    return " ".join(res)


@pytest.mark.parametrize("name", list(_BINARY))
def test_ops_save_only_what_backward_needs(name):
    got = _saves(cgrad, name)
    assert got == _SAVES_TORCH[name]
    same_as_torch(lambda m: _saves(m, name), got)


# NumPy's floating-point RuntimeWarnings (divide by zero, invalid value, overflow) never reach
# the user: torch computes inf and nan silently, in forward and in backward, whatever NumPy's
# error settings (Note [Quiet floating point] in cgrad/_C_module.pxi)
_FP_CASES = {
    "log(0)": lambda m, x: m.log(x * 0),
    "log(-x)": lambda m, x: m.log(-x),
    "x / 0": lambda m, x: x / m.zeros(2),
    "0 / 0": lambda m, x: (x * 0) / m.zeros(2),
    "1 / (x * 0)": lambda m, x: 1.0 / (x * 0),
    "x / 0.0": lambda m, x: x / 0.0,
    "sqrt(-x)": lambda m, x: m.sqrt(-x),
    "sqrt(0)": lambda m, x: m.sqrt(x * 0),
    "rsqrt(0)": lambda m, x: m.rsqrt(x * 0),
    "0 ** -1": lambda m, x: (x * 0) ** -1.0,
    "(-x) ** 0.5": lambda m, x: (-x) ** 0.5,
    "0 ** (0 - 1)": lambda m, x: (x * 0) ** (x * 0 - 1),
    "0.0 ** -x": lambda m, x: 0.0 ** (-x),
    "exp(1000 x)": lambda m, x: m.exp(x * 1000),
    "reciprocal(0)": lambda m, x: m.reciprocal(x * 0),
    "log2(0)": lambda m, x: m.log2(x * 0),
    "log1p(-1)": lambda m, x: m.log1p(-x / x),
    "inf * 0": lambda m, x: (x * float("inf")) * 0,
    "inf - inf": lambda m, x: x * float("inf") - x * float("inf"),
    "mean(empty)": lambda m, x: x[:0].mean(),
    "logsumexp(-inf)": lambda m, x: m.logsumexp(x * float("-inf"), 0),
    "x ** 1e10": lambda m, x: x ** 1e10,
    "float32 overflow": lambda m, x: x * 1e38 * 10,
    "nanmean(nan)": lambda m, x: m.nanmean(x * float("nan")),
    "bce(0)": lambda m, x: m.nn.functional.binary_cross_entropy(x * 0, x / x),
    "cross_entropy(inf)": lambda m, x: m.nn.functional.cross_entropy(
        m.stack([x * float("inf"), x]), m.tensor([0, 1])),
}


def _fp_silent(m, name):
    import numpy as np
    import warnings
    x = m.tensor([1.0, 2.0], requires_grad=True)
    with np.errstate(all="warn"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = _FP_CASES[name](m, x)
        y.sum().backward()
    return [str(i.message) for i in w], repr(vals(y)), repr(vals(x.grad))


@pytest.mark.parametrize("name", list(_FP_CASES))
def test_no_numpy_floating_point_warnings(name):
    got = _fp_silent(cgrad, name)
    assert got[0] == []
    same_as_torch(lambda m: _fp_silent(m, name), got)


def test_numpy_error_settings_do_not_reach_cgrad_ops():
    import numpy as np
    x = cgrad.tensor([0.0, 1.0], requires_grad=True)
    with np.errstate(all="raise"):
        y = cgrad.log(x) + 1.0 / x + x.exp() * 1e38
        y.sum().backward()
    g = vals(x.grad)
    assert g[0] != g[0] and abs(g[1] / 2.718281828e38 - 1) < 1e-6        # inf - inf = nan
    # the user's own NumPy code keeps its settings, also inside a custom backward
    seen = []

    class UserMaths(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(np.geterr()["divide"])
            return g

    with np.errstate(divide="raise"):
        UserMaths.apply(x).sum().backward()
        assert np.geterr()["divide"] == "raise"
    assert seen == ["raise"]


# ----------------------------------------------------------------------------------------
# 6. grad-mode decorators; numpy() under no_grad
# ----------------------------------------------------------------------------------------
def _grad_mode_decorators(m, name):
    import asyncio
    import inspect
    import warnings
    cm = getattr(m, name)
    state = lambda: (m.is_grad_enabled(), m.is_inference_mode_enabled())  # noqa: E731
    out = []

    @cm
    def bare():
        return state()

    @cm()
    def called():
        return state()

    out.append((bare(), called(), bare.__name__, called.__name__))
    with m.no_grad():
        out.append((bare(), called()))

    @cm
    def gen(n):
        for i in range(n):
            got = yield (i, state())
            if got is not None:
                out.append(("sent", got, state()))
        return "done"

    g = gen(3)
    out.append((inspect.isgeneratorfunction(gen), state(), next(g), state(),
                g.send("hello"), state()))
    out.append(list(g))

    @cm()
    def gen2():
        try:
            yield state()
            yield state()
        except ValueError as e:
            out.append(("caught", str(e), state()))
            yield "after-throw"
        finally:
            out.append(("finally", state()))

    g = gen2()
    out.append((next(g), state()))
    out.append((g.throw(ValueError("boom")), state()))
    g.close()
    out.append(("closed", state()))
    g = gen2()
    next(g)
    g.close()
    out.append(("closed early", state()))

    def gen3():
        yield 1

    out.append(err(lambda: cm()(gen3)().throw(KeyError("k"))))

    @cm
    async def coro():
        await asyncio.sleep(0)
        return state()

    # as torch: the wrapper is a plain function, and the coroutine's body runs in the
    # caller's mode (only creating the coroutine is inside)
    out.append((inspect.iscoroutinefunction(coro), asyncio.run(coro())))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")

        @cm
        class Model:
            def __init__(self):
                self.state = state()

    out.append((inspect.isclass(Model), Model().state, [(i.category.__name__,
                                                         str(i.message)[:40]) for i in w]))
    return out


@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_grad_mode_decorators(name):
    got = _grad_mode_decorators(cgrad, name)
    inside = {"no_grad": (False, False), "enable_grad": (True, False),
              "inference_mode": (False, True)}[name]
    outside = (True, False)
    assert got[0] == (inside, inside, "bare", "called") and got[1] == (inside, inside)
    assert got[2] == ("sent", "hello", inside)
    assert got[3] == (True, outside, (0, inside), outside, (1, inside), outside)
    assert got[4] == [(2, inside)] and got[5] == (inside, outside)
    assert got[6] == ("caught", "boom", inside) and got[7] == ("after-throw", outside)
    assert got[8] == ("finally", inside) and got[9] == ("closed", outside)
    assert got[10] == ("finally", inside) and got[11] == ("closed early", outside)
    assert got[12] == ("KeyError", "'k'")
    assert got[13] == (False, outside)
    assert got[14] == (False, inside, [("FutureWarning",
                                        "Decorating classes is deprecated and wil")])
    same_as_torch(lambda m: _grad_mode_decorators(m, name), got)


def _numpy_under_no_grad(m):
    import numpy as np
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    out = [err(lambda: x.numpy()), err(lambda: np.asarray(y))]
    with m.no_grad():
        out += [x.numpy().tolist(), y.numpy().tolist(), np.asarray(x).tolist()]
    with m.inference_mode():
        out.append(x.numpy().tolist())
    with m.enable_grad():
        out.append(err(lambda: y.numpy()))
    return out


def test_numpy_of_a_tensor_requiring_grad_is_allowed_under_no_grad():
    got = _numpy_under_no_grad(cgrad)
    refused = ("RuntimeError", "Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
    assert got == [refused, refused, [1.0, 2.0], [2.0, 4.0], [1.0, 2.0], [1.0, 2.0], refused]
    same_as_torch(_numpy_under_no_grad, got)


# ----------------------------------------------------------------------------------------
# 7. .data =, detach_() on a view, post-accumulate hooks' result, a second backward through
#    an indexed assignment, saved_variables, increment_version, module backward hooks
# ----------------------------------------------------------------------------------------
def _set_data(m):
    import numpy as np
    out = []

    def setdata(t, v):
        t.data = v
        return (vals(t) if "float" in str(t.dtype) else t.tolist(), str(t.dtype).split(".")[-1],
                tuple(t.shape), t.requires_grad, t._version)

    x = m.tensor([1.0, 2.0], requires_grad=True)
    for v in (m.tensor([5.0, 6.0]), m.tensor([5.0, 6.0, 7.0]),
              m.tensor([5.0, 6.0], dtype=m.float64), m.tensor([5, 6]), [1.0, 2.0], 3.0, None,
              np.zeros(2)):
        out.append(err(lambda: setdata(x, v)))
    out.append(err(lambda: setdata(m.tensor([1, 2]), m.tensor([1.5, 2.5]))))
    out.append(err(lambda: setdata(m.tensor([1.0, 2.0]), m.tensor([1, 2]))))
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = a * m.tensor([2.0, 2.0])
    out.append(err(lambda: setdata(b, m.tensor([7.0, 8.0]))))      # a non-leaf: history kept
    b.sum().backward()
    out.append(vals(a.grad))
    base = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    view = base[:2]
    out.append(err(lambda: setdata(view, m.tensor([9.0, 9.0]))))
    out.append(vals(base))
    return out


def test_set_data_checks():
    got = _set_data(cgrad)
    assert got[0] == ("ok", ([5.0, 6.0], "float32", (2,), True, 0))
    assert got[1] == ("ok", ([5.0, 6.0, 7.0], "float32", (3,), True, 0))
    assert got[2] == ("ok", ([5.0, 6.0], "float64", (2,), True, 0))
    assert got[3] == ("RuntimeError", "data set to a tensor that requires gradients must be "
                                      "floating point or complex dtype")
    assert got[4] == ("TypeError", "Variable data has to be a tensor, but got list")
    assert got[5] == ("TypeError", "Variable data has to be a tensor, but got float")
    assert got[6] == ("TypeError", "Variable data has to be a tensor, but got NoneType")
    assert got[7] == ("TypeError", "Variable data has to be a tensor, but got numpy.ndarray")
    assert got[8] == ("ok", ([1.5, 2.5], "float32", (2,), False, 0))
    assert got[9] == ("ok", ([1, 2], "int64", (2,), False, 0))
    assert got[10] == ("ok", ([7.0, 8.0], "float32", (2,), True, 0))
    assert got[11] == [2.0, 2.0]
    assert got[12] == ("ok", ([9.0, 9.0], "float32", (2,), True, 0))
    assert got[13] == [1.0, 2.0, 3.0]
    same_as_torch(_set_data, got)


def _detach_and_post_acc(m):
    out = []
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    for f in (lambda: y[:2].detach_(), lambda: y.view(3).detach_(),
              lambda: x.detach()[:2].detach_(), lambda: m.tensor([1.0, 2.0])[:1].detach_()):
        out.append(err(f))
    z = y.detach_()
    out.append((z is y, y.requires_grad, y.grad_fn is None, y.is_leaf))
    for ret in (lambda p: p.grad * 2, lambda p: 5):
        p = m.tensor([1.0], requires_grad=True)
        p.register_post_accumulate_grad_hook(ret)
        out.append(err(lambda: (p * 2).sum().backward()))
        out.append(vals(p.grad))                       # accumulated before the hook ran
    return out


def test_detach_on_a_view_and_post_accumulate_hook_results():
    got = _detach_and_post_acc(cgrad)
    view = ("RuntimeError", "Can't detach views in-place. Use detach() instead. If you are using "
            "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as "
            "True, gradients are views of DDP buckets, and hence detach_() cannot be called on "
            "these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
            "function in torch/optim/optimizer.py as the solution.")
    assert got[:4] == [view] * 4
    assert got[4] == (True, False, True, True)
    assert got[5] == ("RuntimeError", "Tensor post accumulate grad hooks should return None.")
    assert got[6] == [2.0]
    assert got[7] == ("TypeError", "expected Variable, but hook returned 'int'")
    assert got[8] == [2.0]
    same_as_torch(_detach_and_post_acc, got)


def _indexed_assignment_twice(m):
    out = []
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y[0] = 5
    y.sum().backward()
    out.append(err(lambda: y.sum().backward()))
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y[0] = 5
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    out.append(vals(x.grad))
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y[0] = x[1] * 3
    (y * y).sum().backward()
    out.append(err(lambda: (y * y).sum().backward()))
    return out


def test_second_backward_through_an_indexed_assignment():
    got = _indexed_assignment_twice(cgrad)
    assert got[0][0] == "RuntimeError" and "Specify retain_graph=True" in got[0][1]
    assert got[1] == [0.0, 4.0, 4.0]
    assert got[2][0] == "RuntimeError" and "Specify retain_graph=True" in got[2][1]
    same_as_torch(_indexed_assignment_twice, got)


def _saved_variables_and_versions(m):
    import warnings
    out = []

    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sv = ctx.saved_variables
            out.append((type(sv).__name__, len(sv), [(i.category.__name__, str(i.message))
                                                     for i in w]))
            return g * 2

    a = m.tensor([1.0], requires_grad=True)
    F.apply(a).backward()
    out.append(vals(a.grad))
    t = m.tensor([1.0, 2.0])
    v0 = t._version
    inc = m.autograd.graph.increment_version
    inc(t)
    out.append(t._version - v0)
    inc([t, t])
    out.append(t._version - v0)
    out.append(err(lambda: inc((t,))))
    out.append(err(lambda: inc(3)))
    out.append(err(lambda: inc([t, 3])))
    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = b * b
    inc(b)                          # as an in-place change behind autograd's back
    r = err(lambda: c.sum().backward())
    out.append((r[0], r[1].split(":")[0]))
    return out


def test_saved_variables_and_increment_version():
    got = _saved_variables_and_versions(cgrad)
    assert got[0] == ("tuple", 1, [("DeprecationWarning",
                                    "'saved_variables' is deprecated; use 'saved_tensors'")])
    assert got[1] == [2.0] and got[2] == 1 and got[3] == 3 and got[4] == ("ok", None)
    assert got[5] == ("RuntimeError", "increment_version expect a Iterable[Tensor] as input")
    assert got[6] == ("RuntimeError",
                      "increment_version expects each element of the iterable to be a tensor")
    assert got[7] == ("RuntimeError", "one of the variables needed for gradient computation has "
                                      "been modified by an inplace operation")
    same_as_torch(_saved_variables_and_versions, got)


def _module_backward_hooks(m):
    import warnings
    nn = m.nn
    out = []
    log = []
    lin = nn.Linear(2, 2)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[1.0, 2.0], [3.0, 4.0]]))
        lin.bias.copy_(m.tensor([0.5, -0.5]))
    hs = [lin.register_full_backward_pre_hook(
              lambda mod, go: log.append(("pre1", type(mod).__name__, vals(go)))),
          lin.register_full_backward_hook(
              lambda mod, gi, go: log.append(("hook1", type(gi).__name__, vals(gi), vals(go)))),
          lin.register_full_backward_pre_hook(lambda mod, go: log.append("pre2")),
          lin.register_full_backward_hook(lambda mod, gi, go: log.append("hook2"))]
    x = m.tensor([[1.0, -1.0]], requires_grad=True)
    out_t = lin(x)
    out.append(type(out_t.grad_fn).__name__)
    out_t.sum().backward()
    out.append((list(log), vals(x.grad)))
    log.clear()
    with warnings.catch_warnings(record=True) as w:         # no input requires grad
        warnings.simplefilter("always")
        lin(m.tensor([[1.0, -1.0]])).sum().backward()
    out.append((list(log), [str(i.message)[:45] for i in w]))
    log.clear()
    for h in hs:
        h.remove()
    # replacing gradients: the pre hook's reach the module, the hook's reach the input
    lin.weight.grad = None
    h = lin.register_full_backward_pre_hook(lambda mod, go: (go[0] * 10,))
    x = m.tensor([[1.0, -1.0]], requires_grad=True)
    lin(x).sum().backward()
    out.append((vals(x.grad), vals(lin.weight.grad)))
    h.remove()
    lin.weight.grad = None
    h = lin.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 100,))
    x = m.tensor([[1.0, -1.0]], requires_grad=True)
    lin(x).sum().backward()
    out.append((vals(x.grad), vals(lin.weight.grad)))
    h.remove()
    for reg, ret in ((lin.register_full_backward_hook, lambda mod, gi, go: (gi[0], gi[0])),
                     (lin.register_full_backward_pre_hook, lambda mod, go: (go[0], go[0]))):
        h = reg(ret)
        out.append(err(lambda: lin(x).sum().backward()))
        h.remove()
    # order with several hooks and prepend
    hs = [lin.register_full_backward_hook(lambda mod, gi, go: log.append("A")),
          lin.register_full_backward_hook(lambda mod, gi, go: log.append("B"), prepend=True),
          lin.register_full_backward_pre_hook(lambda mod, go: log.append("pA")),
          lin.register_full_backward_pre_hook(lambda mod, go: log.append("pB"), prepend=True)]
    lin(x).sum().backward()
    out.append(list(log))
    log.clear()
    for h in hs:
        h.remove()

    # several inputs (one not requiring grad), several outputs, a keyword argument
    class Two(nn.Module):
        def forward(self, a, b, k=2):
            return a * b * k, a + b

    two = Two()
    two.register_full_backward_hook(lambda mod, gi, go: log.append(("two", vals(gi), vals(go))))
    two.register_full_backward_pre_hook(lambda mod, go: log.append(("two_pre", vals(go))))
    a = m.tensor([1.0, 2.0], requires_grad=True)
    bb = m.tensor([3.0, 4.0])
    o1, o2 = two(a, bb)
    o1.sum().backward()
    o1, o2 = two(a, bb, k=3)
    (o1.sum() + o2.sum()).backward()
    out.append((list(log), vals(a.grad)))
    log.clear()

    # nested modules: the outer pre hook first, the outer hook last
    class Scale(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, t):
            return t * self.k

    s2, s3 = Scale(2.0), Scale(3.0)
    seq = nn.Sequential(s2, s3)
    for name, mod in (("s2", s2), ("s3", s3), ("seq", seq)):
        mod.register_full_backward_hook(lambda md, gi, go, n=name: log.append((n, vals(gi))))
        mod.register_full_backward_pre_hook(lambda md, go, n=name: log.append((n + "_pre",
                                                                                vals(go))))
    seq(m.tensor([1.0, 2.0], requires_grad=True)).sum().backward()
    out.append(list(log))
    return out


def test_module_full_backward_hooks():
    got = _module_backward_hooks(cgrad)
    assert got[0] == "BackwardHookFunctionBackward"
    assert got[1] == ([("pre1", "Linear", ([1.0, 1.0],)), "pre2",
                       ("hook1", "tuple", ([4.0, 6.0],), ([1.0, 1.0],)), "hook2"], [4.0, 6.0])
    assert got[2] == ([("pre1", "Linear", ([1.0, 1.0],)), "pre2",
                       ("hook1", "tuple", (None,), ([1.0, 1.0],)), "hook2"],
                      ["Full backward hook is firing when gradients a"])
    assert got[3] == ([40.0, 60.0], [10.0, -10.0, 10.0, -10.0])
    assert got[4] == ([400.0, 600.0], [1.0, -1.0, 1.0, -1.0])
    assert got[5] == ("RuntimeError",
                      "Backward hook returned an invalid number of grad_input, got 2, but "
                      "expected 1")
    assert got[6] == ("RuntimeError",
                      "Backward pre hook returned an invalid number of grad_output, got 2, but "
                      "expected 1")
    assert got[7] == ["pB", "pA", "B", "A"]
    assert got[8] == ([("two_pre", ([1.0, 1.0], None)),
                       ("two", ([6.0, 8.0], [0.0, 0.0]), ([1.0, 1.0], None)),
                       ("two_pre", ([1.0, 1.0], [1.0, 1.0])),
                       ("two", ([10.0, 13.0], [0.0, 0.0]), ([1.0, 1.0], [1.0, 1.0]))],
                      [16.0, 21.0])
    assert got[9] == [("seq_pre", ([1.0, 1.0],)), ("s3_pre", ([1.0, 1.0],)),
                      ("s3", ([3.0, 3.0],)), ("s2_pre", ([3.0, 3.0],)), ("s2", ([6.0, 6.0],)),
                      ("seq", ([6.0, 6.0],))]
    same_as_torch(_module_backward_hooks, got)


# ----------------------------------------------------------------------------------------
# 8. saved_tensors_hooks: the state is restored when forward or backward raises inside
# ----------------------------------------------------------------------------------------
def _saved_hooks_state(m):
    graph = m.autograd.graph
    log = []
    out = []

    def pack(t):
        log.append("p")
        return t

    def unpack(t):
        log.append("u")
        return t

    x = m.tensor([1.0, 2.0], requires_grad=True)

    def after():            # a product saves two tensors: packed only if hooks are left on
        log.clear()
        x * x
        return list(log)

    try:
        with graph.saved_tensors_hooks(pack, unpack):
            x * x
            raise ValueError("forward")
    except ValueError:
        pass
    out.append(after())

    class Fails(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            raise KeyError("backward")

    try:
        with graph.saved_tensors_hooks(pack, unpack):
            Fails.apply(x).sum().backward()
    except KeyError:
        pass
    out.append(after())
    with graph.saved_tensors_hooks(pack, lambda t: 1 / 0):
        y = x * x
    out.append(err(lambda: y.sum().backward())[0])
    out.append(after())
    try:
        with graph.save_on_cpu():
            raise ValueError("save_on_cpu")
    except ValueError:
        pass
    out.append(after())
    try:
        with graph.saved_tensors_hooks(pack, unpack):
            with graph.saved_tensors_hooks(pack, unpack):
                raise ValueError("nested")
    except ValueError:
        pass
    out.append(after())
    try:
        with graph.disable_saved_tensors_hooks("no hooks please"):
            raise ValueError("disabled")
    except ValueError:
        pass
    with graph.saved_tensors_hooks(pack, unpack):
        out.append(after())
    with graph.disable_saved_tensors_hooks("no hooks please"):
        out.append(err(lambda: graph.saved_tensors_hooks(pack, unpack).__enter__()))
    with graph.saved_tensors_hooks(pack, unpack):          # entering disable while active
        out.append(err(lambda: graph.disable_saved_tensors_hooks("m").__enter__()))
    with graph.saved_tensors_hooks(pack, unpack):          # ... left nothing disabled
        out.append(after())
    out.append(after())
    return out


def test_saved_tensors_hooks_state_is_restored_on_errors():
    got = _saved_hooks_state(cgrad)
    assert got[0] == [] and got[1] == [] and got[2] == "ZeroDivisionError"
    assert got[3:6] == [[], [], []]
    assert got[6] == ["p", "p"]
    assert got[7] == ("RuntimeError", "no hooks please") and got[8] == ("RuntimeError", "m")
    assert got[9] == ["p", "p"] and got[10] == []
    same_as_torch(_saved_hooks_state, got)


# ----------------------------------------------------------------------------------------
# 2. retain_grad() and tensor hooks across in-place ops
# ----------------------------------------------------------------------------------------
def _hooks_and_inplace(m):
    log = []
    out = []
    w3 = m.tensor([1.0, 10.0, 100.0])
    # a hook on a view, registered before an in-place op on the view
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    v = b[:2]
    v.register_hook(lambda g: log.append(("v", vals(g))))
    v.mul_(3)
    v.register_hook(lambda g: log.append(("v after", vals(g))))
    (b * w3).sum().backward()
    out.append((list(log), vals(x.grad)))
    log.clear()
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    v = b[:2]
    v.register_hook(lambda g: log.append(("v", vals(g))))
    v.mul_(3)
    v.register_hook(lambda g: log.append(("v after", vals(g))))
    (v * w3[:2]).sum().backward()
    out.append((list(log), vals(x.grad)))
    log.clear()
    # hooks on the base, before and after an in-place op through a view
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    b.register_hook(lambda g: log.append(("b", vals(g))))
    b[:2].mul_(3)
    b.register_hook(lambda g: log.append(("b after", vals(g))))
    (b * w3).sum().backward()
    out.append((list(log), vals(x.grad)))
    log.clear()
    # retain_grad() on a non-leaf later modified in place: .grad is w.r.t. the new value
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * w3).sum().backward()
    out.append((vals(y.grad), vals(x.grad), y.retains_grad))
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y[:2].mul_(3)
    (y * w3).sum().backward()
    out.append((vals(y.grad), vals(x.grad)))
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    v = y[1:]
    v.retain_grad()
    v.add_(1)
    (y * w3).sum().backward()
    out.append((vals(v.grad), vals(x.grad)))
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    v = b[:2]
    v.retain_grad()
    v.mul_(3)
    (v * w3[:2]).sum().backward()
    out.append((vals(v.grad), vals(x.grad), v.retains_grad))
    # a hook registered before vs after an in-place op on the tensor itself
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: log.append(("before", vals(g))))
    y.mul_(5)
    y.register_hook(lambda g: log.append(("after", vals(g))))
    (y * w3[:2]).sum().backward()
    out.append((list(log), vals(x.grad)))
    log.clear()
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 100)
    y.mul_(5)
    y.register_hook(lambda g: g + 1)
    (y * w3[:2]).sum().backward()
    out.append(vals(x.grad))
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    y.add_(1)
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    out.append((vals(y.grad), vals(x.grad)))
    return out


def test_retain_grad_and_hooks_follow_inplace_ops():
    got = _hooks_and_inplace(cgrad)
    assert got[0] == ([], [3.0, 30.0, 100.0])
    assert got[1] == ([("v after", [1.0, 10.0])], [3.0, 30.0, 0.0])
    assert got[2] == ([("b after", [1.0, 10.0, 100.0]), ("b", [3.0, 30.0, 100.0])],
                      [3.0, 30.0, 100.0])
    assert got[3] == ([1.0, 10.0, 100.0], [6.0, 60.0, 600.0], True)
    assert got[4] == ([1.0, 10.0, 100.0], [6.0, 60.0, 200.0])
    assert got[5] == (None, [2.0, 20.0, 200.0])
    assert got[6] == ([1.0, 10.0], [3.0, 30.0, 0.0], True)
    assert got[7] == ([("after", [1.0, 10.0]), ("before", [5.0, 50.0])], [10.0, 100.0])
    assert got[8] == [2000.0, 11000.0]
    assert got[9] == ([3.0, 3.0], [12.0, 12.0])
    same_as_torch(_hooks_and_inplace, got)
