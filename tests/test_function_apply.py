"""`Function.apply` as installed per class (csrc/cg_apply.h) and the cached forward/backward
lookups (Note [Cached methods] in cgrad/_C_function.pxi): torch's classmethod semantics, including
super().apply from an overriding subclass, redefinition after first use, and lifetime."""
from __future__ import annotations

import gc
import inspect
import weakref

import pytest

import cgrad
from cgrad.autograd import Function


def _twice(ctx, x):
    return x * 2


def fresh_double(name="F"):
    """A new Function class computing x * 2 (each test mutating a class gets its own)."""
    return type(name, (Function,), {"forward": staticmethod(_twice),
                                    "backward": staticmethod(_twice)})


Double = fresh_double("Double")


def test_apply_is_stable_and_bound_to_its_class():
    assert Double.apply is Double.apply
    assert Double.apply.__self__ is Double
    assert Double.apply.__name__ == "apply"
    assert "Double" in repr(Double.apply)
    assert callable(Double.apply)
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    assert y.grad_fn.name() == "DoubleBackward"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_apply_through_getattr_and_instances():
    x = cgrad.tensor([3.0], requires_grad=True)
    assert getattr(Double, "apply")(x).tolist() == [6.0]
    with pytest.warns(DeprecationWarning):
        inst = Double()
    assert inst.apply(x).tolist() == [6.0]


def test_keywords_and_defaults():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor=3.0, *, shift=0.0):
            ctx.factor = factor
            return x * factor + shift

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    x = cgrad.tensor([1.0], requires_grad=True)
    assert Scale.apply(x).tolist() == [3.0]
    assert Scale.apply(x, 2.0).tolist() == [2.0]
    assert Scale.apply(x, factor=4.0).tolist() == [4.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'shift'"):
        Scale.apply(x, shift=1.0)        # as torch: apply passes arguments positionally
    y = Scale.apply(x, factor=5.0)
    y.backward()
    assert x.grad.tolist() == [5.0]
    with pytest.raises(TypeError):
        Scale.apply(x, nonsense=1)


def test_split_style_gets_defaults_bound():
    seen = []

    class Split(Function):
        @staticmethod
        def forward(x, k=2.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(len(inputs))
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = cgrad.tensor([1.0], requires_grad=True)
    Split.apply(x).backward()
    Split.apply(x, k=5.0).backward()
    assert seen == [2, 2]
    assert x.grad.tolist() == [7.0]


def test_super_apply_from_an_overriding_subclass_runs_the_subclass():
    calls = []

    Base = fresh_double()

    class Child(Base):
        @staticmethod
        def forward(ctx, x):
            return x * 10

        @staticmethod
        def backward(ctx, g):
            return g * 10

        @classmethod
        def apply(cls, *args, **kwargs):
            calls.append(cls)
            return super().apply(*args, **kwargs)

    class GrandChild(Child):
        pass

    x = cgrad.tensor([1.0], requires_grad=True)
    y = Child.apply(x)
    assert y.tolist() == [10.0] and y.grad_fn.name() == "ChildBackward"
    y.backward()
    assert x.grad.tolist() == [10.0]
    # a subclass of a class with its own apply keeps using that apply (torch: inherited)
    z = GrandChild.apply(x)
    assert calls == [Child, GrandChild]
    assert z.grad_fn.name() == "GrandChildBackward"
    assert Base.apply(x).tolist() == [2.0]


def test_user_defined_apply_is_not_replaced():
    class Custom(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def apply(x):
            return "mine"

    assert Custom.apply(cgrad.tensor([1.0])) == "mine"


def test_redefining_forward_and_backward_after_use_takes_effect():
    F = fresh_double()
    x = cgrad.tensor([1.0], requires_grad=True)
    F.apply(x).backward()
    assert x.grad.tolist() == [2.0]
    F.forward = staticmethod(lambda ctx, x: x * 3)
    F.backward = staticmethod(lambda ctx, g: g * 3)
    x.grad = None
    y = F.apply(x)
    assert y.tolist() == [3.0]
    y.backward()
    assert x.grad.tolist() == [3.0]


def test_changing_a_base_class_reaches_subclasses():
    Base = fresh_double()

    class Sub(Base):
        pass

    x = cgrad.tensor([1.0], requires_grad=True)
    Sub.apply(x).backward()
    assert x.grad.tolist() == [2.0]
    Base.backward = staticmethod(lambda ctx, g: g * 7)
    x.grad = None
    Sub.apply(x).backward()
    assert x.grad.tolist() == [7.0]


def test_backward_defined_after_the_graph_was_recorded():
    F = fresh_double()
    x = cgrad.tensor([1.0], requires_grad=True)
    y = F.apply(x)
    F.backward = staticmethod(lambda ctx, g: g * 5)
    y.backward()
    assert x.grad.tolist() == [5.0]


def test_grad_fn_call_uses_backward():
    x = cgrad.tensor([1.0], requires_grad=True)
    y = Double.apply(x)
    assert y.grad_fn(cgrad.tensor([1.5])).tolist() == [3.0]


def test_function_classes_made_at_run_time_are_freed():
    def make():
        class Tmp(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2
        return Tmp

    refs = []
    x = cgrad.tensor([1.0], requires_grad=True)
    for _ in range(3):
        cls = make()
        cls.apply(x).sum().backward()
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert all(r() is None for r in refs)


def test_apply_signature_is_documented():
    assert "forward" in Double.apply.__doc__
    # torch's apply is a classmethod taking *args, **kwargs; inspect must not crash
    try:
        inspect.signature(Double.apply)
    except ValueError:
        pass


def test_builtin_nodes_have_no_instance_dict_custom_ctx_does():
    x = cgrad.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.raises(AttributeError):      # torch: 'MulBackward0' object has no attribute
        y.grad_fn.foo = 1
    y.grad_fn.metadata["k"] = 1              # metadata is the supported place, as torch
    assert y.grad_fn.metadata == {"k": 1}
    z = Double.apply(x)
    z.grad_fn.foo = 1
    assert z.grad_fn.foo == 1
