"""The classic custom Function: y = 2x, with its backward written by hand.

Run: python examples/custom_function.py
"""
import cgrad


class MyFunction(cgrad.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        output = input * 2
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        grad_input = grad_output * 2
        return grad_input


def main():
    x = cgrad.tensor([1.0], requires_grad=True)
    y = MyFunction.apply(x)
    print(x.grad)
    print(y.backward())
    print("Input gradient:", x.grad)
    print(y)


if __name__ == "__main__":
    main()
