"""A small typed user program: tests/test_typing.py runs `mypy --strict` on it.

It uses what cgrad's stubs type (cgrad/__init__.pyi, cgrad/tensor.pyi, cgrad/_C.pyi): the
cgrad.* functions, Tensor methods and operators (including those installed from the op
tables at import), gradients, and a custom Function.
"""
from __future__ import annotations

import numpy as np

import cgrad
from cgrad.autograd.function import Function, FunctionCtx


class Cube(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: cgrad.Tensor) -> cgrad.Tensor:
        ctx.save_for_backward(x)
        ctx.power = 3
        return x ** 3

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: cgrad.Tensor) -> cgrad.Tensor:
        x, = ctx.saved_tensors
        power: int = ctx.power          # ctx attributes are Any: name the type to keep it
        return grad_output * power * x ** 2


def loss_of(w: cgrad.Tensor, x: cgrad.Tensor) -> cgrad.Tensor:
    h = cgrad.matmul(x, w).tanh().softmax(dim=-1)     # softmax, tanh: installed methods
    y: cgrad.Tensor = Cube.apply(h)
    return (y.sum(dim=1) - 1.0).square().mean() + w.abs().sum() * 1e-3


def step(w: cgrad.Tensor, x: cgrad.Tensor, lr: float) -> float:
    loss = loss_of(w, x)
    loss.backward()
    grad = w.grad
    assert grad is not None
    with cgrad.no_grad():
        w -= lr * grad
    w.grad = None
    return float(loss.item())


@cgrad.no_grad
def evaluate(w: cgrad.Tensor, x: cgrad.Tensor) -> float:
    return float(loss_of(w, x).item())


@cgrad.inference_mode()
def predict(w: cgrad.Tensor, x: cgrad.Tensor) -> cgrad.Tensor:
    return cgrad.matmul(x, w)


def main() -> None:
    cgrad.manual_seed(0)
    w = cgrad.randn(4, 3, dtype=cgrad.float64).requires_grad_()
    x = cgrad.from_numpy(np.linspace(-1.0, 1.0, 20).reshape(5, 4))
    losses = [step(w, x, 0.1) for _ in range(3)]
    assert evaluate(w, x) < losses[0] and not predict(w, x).requires_grad
    parts: tuple[cgrad.Tensor, ...] = cgrad.split(w.detach(), 2)
    shape: cgrad.Size = w.shape
    print(len(losses), len(parts), tuple(shape), w.is_leaf, w.grad_fn is None)
    assert devices_and_generators() == "cpu True True True float64"


def devices_and_generators() -> str:
    """Devices, generators and the torch idioms around them."""
    dev: cgrad.device = cgrad.device("cuda" if cgrad.cuda.is_available() else "cpu")
    g: cgrad.Generator = cgrad.Generator().manual_seed(1)
    x = cgrad.rand(2, 3, generator=g, device=dev).to(dev, cgrad.float64)
    same: bool = x.device == dev and x.device.type == "cpu" and x.device.index is None
    seed: int = cgrad.initial_seed() + g.initial_seed()
    n: int = cgrad.get_num_threads()
    return f"{dev} {same} {seed > 0} {n > 0} {x.new_zeros(2).dtype}"


if __name__ == "__main__":
    main()
