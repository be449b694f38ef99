"""torch's calling conventions and documentation for cgrad's public functions and methods.

Note [Public callables]
~~~~~~~~~~~~~~~~~~~~~~~
The functions of the op tables (cgrad/ops/*: FUNCTIONS, cgrad.functional), of
cgrad.nn.functional and the public methods of cgrad.Tensor are installed as
``cgrad._C.TensorFunction`` objects (csrc/cg_tfn.h) wrapping the Python function that
implements them. The wrapper, in C and free when no keyword is given:

* checks that the first positional argument is a Tensor for the functions torch binds in C
  that refuse anything else (cgrad._TENSOR_FIRST, Note [Tensor functions]);
* renames the NumPy-style keywords that torch's C-bound ops accept (``axis`` -> ``dim``,
  ``keepdims`` -> ``keepdim``, ``x``/``a``/``x1`` -> ``input``, ``x2`` -> ``other``, and
  ``self`` -> ``input`` for the scalar-first overloads of functions); ops that torch writes
  in Python (``split``, ``norm``, ``einsum``, most of torch.nn.functional) do not take them,
  as in torch;
* carries ``__doc__`` (torch's layout: the signature, a summary, Args), ``__signature__``,
  ``__module__`` and ``__qualname__``; being a method descriptor, it is a routine for
  ``inspect`` and ``pydoc`` (``help(cgrad)`` lists it under FUNCTIONS).

The implementations take torch's parameter names (tests/test_torch_signatures.py checks
them, and each keyword call torch accepts on the op samples, against torch's signatures).
"""
from __future__ import annotations

import inspect
import textwrap

from cgrad import _C
from cgrad import _creation

ALIASES_FUNCTION = {"x": "input", "a": "input", "x1": "input", "self": "input",
                    "x2": "other", "axis": "dim", "keepdims": "keepdim"}
ALIASES_METHOD = {"x2": "other", "axis": "dim", "keepdims": "keepdim"}

# Ops that torch implements in Python, which take no NumPy-style keywords.
PYTHON_IN_TORCH = {
    "function": {"atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_tensors",
                 "einsum", "elu", "leaky_relu", "meshgrid", "norm", "silu", "split",
                 "cartesian_prod", "cdist"} | {"unique", "unique_consecutive"},
    "method": {"norm", "split", "unflatten"} | {"unique", "unique_consecutive"},
}
# The torch.nn.functional ops that torch binds in C (the others are Python).
C_IN_TORCH_NN = {"avg_pool1d", "avg_pool2d", "bilinear", "conv1d", "conv2d", "gelu", "linear",
                 "one_hot", "relu_", "softplus", "hardtanh_", "threshold_", "prelu",
                 "hardshrink", "softshrink", "cosine_similarity",
                 "pairwise_distance", "conv_transpose1d", "conv_transpose2d",
                 "adaptive_avg_pool1d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
                 "scaled_dot_product_attention"}

# -- documentation ---------------------------------------------------------------------------
SUMMARY = {
    "scaled_dot_product_attention": "Computes softmax(query @ key^T * scale + attn_mask) @ "
                                    "value over the last two dims, as one fused node.",
    "multi_head_attention_forward": "The forward pass of nn.MultiheadAttention on (L, N, E) "
                                    "or unbatched (L, E) inputs; returns (output, weights).",
    "abs": "Computes the absolute value of each element of input.",
    "absolute": "Alias for :func:`cgrad.abs`.",
    "add": "Adds other, scaled by alpha, to input: out = input + alpha * other.",
    "adjoint": "Returns a view of the tensor conjugated and with the last two dimensions "
               "transposed.",
    "all": "Tests whether all elements of input (along dim, when given) evaluate to True.",
    "allclose": "Whether input and other are elementwise close: |input - other| <= atol + "
                "rtol * |other|.",
    "amax": "Returns the maximum value of each slice of input along dim (gradient shared "
            "evenly between ties).",
    "amin": "Returns the minimum value of each slice of input along dim (gradient shared "
            "evenly between ties).",
    "any": "Tests whether any element of input (along dim, when given) evaluates to True.",
    "argmax": "Returns the indices of the maximum values of input (flattened, or along dim).",
    "argmin": "Returns the indices of the minimum values of input (flattened, or along dim).",
    "argwhere": "Returns a tensor with the indices of all non-zero elements of input, one row "
                "per element.",
    "atleast_1d": "Returns a 1-dimensional view of each input tensor with zero dimensions; "
                  "others are returned as they are.",
    "atleast_2d": "Returns a 2-dimensional view of each input tensor with fewer dimensions.",
    "atleast_3d": "Returns a 3-dimensional view of each input tensor with fewer dimensions.",
    "bitwise_and": "Computes the bitwise AND of input and other (integer or boolean tensors).",
    "bitwise_not": "Computes the bitwise NOT of input (integer or boolean tensors).",
    "bitwise_or": "Computes the bitwise OR of input and other (integer or boolean tensors).",
    "bitwise_xor": "Computes the bitwise XOR of input and other (integer or boolean tensors).",
    "block_diag": "Creates a block diagonal matrix from the given tensors.",
    "bmm": "Performs a batch matrix-matrix product of input (b, n, m) and mat2 (b, m, p).",
    "broadcast_tensors": "Broadcasts the given tensors to a common shape (views).",
    "cat": "Concatenates the given sequence of tensors along dim.",
    "ceil": "Returns the smallest integer greater than or equal to each element of input.",
    "chunk": "Splits input into the given number of chunks along dim (views).",
    "cholesky": "Computes the Cholesky factor of a symmetric positive-definite matrix "
                "(deprecated: use cgrad.linalg.cholesky).",
    "clamp": "Clamps all elements of input into the range [min, max].",
    "clamp_max": "Clamps all elements of input to at most max.",
    "clamp_min": "Clamps all elements of input to at least min.",
    "clip": "Alias for :func:`cgrad.clamp`.",
    "clone": "Returns a copy of input (differentiable: the gradient flows back to input).",
    "column_stack": "Creates a new tensor by horizontally stacking the tensors, 1-D tensors "
                    "as columns.",
    "concat": "Alias of :func:`cgrad.cat`.",
    "concatenate": "Alias of :func:`cgrad.cat`.",
    "cos": "Computes the cosine of each element of input.",
    "count_nonzero": "Counts the non-zero values of input (along dim, when given).",
    "cumprod": "Returns the cumulative product of the elements of input along dim.",
    "cumsum": "Returns the cumulative sum of the elements of input along dim.",
    "div": "Divides each element of input by the corresponding element of other, with an "
           "optional rounding mode.",
    "divide": "Alias for :func:`cgrad.div`.",
    "det": "Computes the determinant of a square matrix (or batch of them).",
    "dot": "Computes the dot product of two 1-D tensors.",
    "dstack": "Stacks tensors in sequence depthwise (along the third dimension).",
    "einsum": "Sums the product of the elements of the operands along the dimensions given "
              "in Einstein summation notation.",
    "elu": "Applies the Exponential Linear Unit: input where input > 0, else alpha * "
           "(exp(input) - 1).",
    "eq": "Computes input == other elementwise (a boolean tensor).",
    "equal": "True if input and other have the same size and elements, False otherwise.",
    "exp": "Computes the exponential of each element of input.",
    "exp2": "Computes 2 to the power of each element of input.",
    "expm1": "Computes exp(input) - 1, accurately for small input.",
    "fix": "Alias for :func:`cgrad.trunc`.",
    "flatten": "Flattens input by reshaping the dimensions start_dim to end_dim into one.",
    "flip": "Reverses the order of the elements of input along the given dims (a copy).",
    "floor": "Returns the largest integer less than or equal to each element of input.",
    "floor_divide": "Divides input by other and rounds the quotient down (not "
                    "differentiable).",
    "fmod": "Computes the remainder of division, with the sign of the dividend input "
            "(C's fmod).",
    "gather": "Gathers values of input along dim at the positions given by index.",
    "ge": "Computes input >= other elementwise (a boolean tensor).",
    "gelu": "Applies the Gaussian Error Linear Unit: input * Phi(input), or its tanh "
            "approximation.",
    "ger": "Alias of :func:`cgrad.outer`.",
    "greater": "Alias for :func:`cgrad.gt`.",
    "greater_equal": "Alias for :func:`cgrad.ge`.",
    "gt": "Computes input > other elementwise (a boolean tensor).",
    "hstack": "Stacks tensors in sequence horizontally (column wise).",
    "index_add": "Adds alpha times the slices of source to input at the positions given by "
                 "index along dim (out of place).",
    "index_select": "Returns the slices of input along dim at the positions given by index.",
    "isclose": "Returns a boolean tensor: whether each element of input is close to the "
               "corresponding element of other.",
    "isfinite": "Returns a boolean tensor: whether each element of input is finite.",
    "isinf": "Returns a boolean tensor: whether each element of input is +/-infinity.",
    "isnan": "Returns a boolean tensor: whether each element of input is NaN.",
    "isneginf": "Returns a boolean tensor: whether each element of input is -infinity.",
    "isposinf": "Returns a boolean tensor: whether each element of input is +infinity.",
    "le": "Computes input <= other elementwise (a boolean tensor).",
    "leaky_relu": "Applies max(0, input) + negative_slope * min(0, input) elementwise.",
    "less": "Alias for :func:`cgrad.lt`.",
    "less_equal": "Alias for :func:`cgrad.le`.",
    "log": "Computes the natural logarithm of each element of input.",
    "log10": "Computes the logarithm to the base 10 of each element of input.",
    "log1p": "Computes log(1 + input), accurately for small input.",
    "log2": "Computes the logarithm to the base 2 of each element of input.",
    "log_softmax": "Applies softmax followed by a logarithm along dim (computed stably).",
    "logical_and": "Computes the logical AND of input and other (a boolean tensor).",
    "logical_not": "Computes the logical NOT of input (a boolean tensor).",
    "logical_or": "Computes the logical OR of input and other (a boolean tensor).",
    "logical_xor": "Computes the logical XOR of input and other (a boolean tensor).",
    "logsumexp": "Returns the log of the summed exponentials of input along dim (computed "
                 "stably).",
    "lt": "Computes input < other elementwise (a boolean tensor).",
    "masked_fill": "Returns input with the elements where mask is True replaced by value.",
    "masked_select": "Returns a 1-D tensor of the elements of input where mask is True.",
    "matmul": "Matrix product of two tensors: dot, matrix-vector, matrix-matrix or "
              "broadcast batched product, by their dimensions.",
    "max": "Returns the maximum of all elements of input; with dim, a namedtuple (values, "
           "indices) along dim; with another tensor, the elementwise maximum.",
    "maximum": "Computes the elementwise maximum of input and other.",
    "mean": "Returns the mean of the elements of input (over dim, when given).",
    "meshgrid": "Creates grids of coordinates from the 1-D tensors given.",
    "min": "Returns the minimum of all elements of input; with dim, a namedtuple (values, "
           "indices) along dim; with another tensor, the elementwise minimum.",
    "minimum": "Computes the elementwise minimum of input and other.",
    "mm": "Performs a matrix multiplication of the matrices input and mat2 (input may be "
          "a sparse COO matrix).",
    "moveaxis": "Alias for :func:`cgrad.movedim`.",
    "movedim": "Moves the dimension(s) of input at source to the position(s) in "
               "destination.",
    "mul": "Multiplies input by other elementwise.",
    "multiply": "Alias for :func:`cgrad.mul`.",
    "mv": "Performs a matrix-vector product of the matrix input and the vector vec.",
    "nan_to_num": "Replaces NaN, positive infinity and negative infinity in input by the "
                  "values given (by default 0, and the largest and lowest finite values).",
    "nanmean": "Returns the mean of the elements of input that are not NaN (over dim, when "
               "given).",
    "nansum": "Returns the sum of the elements of input, treating NaN as zero.",
    "narrow": "Returns a view of input narrowed along dim to length elements from start.",
    "ne": "Computes input != other elementwise (a boolean tensor).",
    "neg": "Returns the negative of each element of input.",
    "negative": "Alias for :func:`cgrad.neg`.",
    "nonzero": "Returns the indices of the non-zero elements of input.",
    "norm": "Returns the matrix norm or vector norm of input.",
    "not_equal": "Alias for :func:`cgrad.ne`.",
    "outer": "Outer product of the 1-D tensors input and vec2.",
    "permute": "Returns a view of input with its dimensions permuted.",
    "pow": "Takes the power of each element of input with exponent.",
    "prod": "Returns the product of the elements of input (over dim, when given).",
    "ravel": "Returns a contiguous flattened tensor.",
    "reciprocal": "Returns the reciprocal of each element of input.",
    "relu": "Applies the rectified linear unit max(input, 0) elementwise.",
    "remainder": "Computes the remainder of division, with the sign of the divisor other "
                 "(Python's %).",
    "reshape": "Returns a tensor with the elements of input and the given shape (a view "
               "when possible).",
    "roll": "Rolls the tensor input along the given dimensions (a copy).",
    "round": "Rounds the elements of input to the nearest integer (half to even), or to "
             "decimals decimal places.",
    "rsqrt": "Returns the reciprocal of the square root of each element of input.",
    "scatter": "Writes the values of src (or value) into a copy of input at the positions "
               "given by index along dim.",
    "scatter_add": "Adds the values of src into a copy of input at the positions given by "
                   "index along dim.",
    "select": "Slices input along dim at the given index (a view without that dimension).",
    "selu": "Applies the Scaled Exponential Linear Unit elementwise.",
    "sgn": "Returns the sign of each element of input (for real tensors, as sign).",
    "sigmoid": "Computes the logistic sigmoid 1 / (1 + exp(-input)) of each element.",
    "sign": "Returns the sign (-1, 0 or 1) of each element of input.",
    "silu": "Applies the Sigmoid Linear Unit input * sigmoid(input) elementwise.",
    "sin": "Computes the sine of each element of input.",
    "softmax": "Applies a softmax function along dim.",
    "softplus": "Applies log(1 + exp(beta * input)) / beta elementwise (linear above the "
                "threshold).",
    "split": "Splits the tensor into chunks of split_size_or_sections elements along dim "
             "(views).",
    "split_with_sizes": "Splits input into pieces of the given sizes along dim (views).",
    "sqrt": "Computes the square root of each element of input.",
    "square": "Returns the square of each element of input.",
    "squeeze": "Returns a view of input with the dimensions of size 1 (or the given ones) "
               "removed.",
    "stack": "Concatenates a sequence of tensors along a new dimension.",
    "std": "Calculates the standard deviation over the dimensions given by dim.",
    "sub": "Subtracts other, scaled by alpha, from input: out = input - alpha * other.",
    "subtract": "Alias for :func:`cgrad.sub`.",
    "sum": "Returns the sum of the elements of input (over dim, when given).",
    "swapaxes": "Alias for :func:`cgrad.transpose`.",
    "swapdims": "Alias for :func:`cgrad.transpose`.",
    "t": "Transposes a tensor of at most 2 dimensions (0-D and 1-D tensors are returned as "
         "they are).",
    "take": "Returns the elements of input, seen as 1-D, at the given indices.",
    "take_along_dim": "Selects values from input at the 1-D indices from indices along the "
                      "given dim.",
    "tan": "Computes the tangent of each element of input.",
    "tanh": "Computes the hyperbolic tangent of each element of input.",
    "tile": "Constructs a tensor by repeating the elements of input (dims gives the "
            "repetitions per dimension).",
    "transpose": "Returns a view of input with the dimensions dim0 and dim1 swapped.",
    "true_divide": "Alias for :func:`cgrad.div` with rounding_mode=None.",
    "trunc": "Returns the truncated integer values of the elements of input.",
    "unbind": "Removes a tensor dimension: returns a tuple of all slices along dim.",
    "unflatten": "Expands a dimension of input over several dimensions of the given sizes.",
    "unsqueeze": "Returns a view of input with a dimension of size one inserted at dim.",
    "var": "Calculates the variance over the dimensions given by dim.",
    "vstack": "Stacks tensors in sequence vertically (row wise).",
    "where": "Returns a tensor of elements selected from input or other, depending on "
             "condition.",
    # cgrad.nn.functional
    "batch_norm": "Applies batch normalization over the batch dimension (with the running "
                  "statistics updated in training mode).",
    "bilinear": "Applies a bilinear transformation: y = x1^T A x2 + b.",
    "binary_cross_entropy": "Binary cross entropy between the probabilities input and the "
                            "target.",
    "binary_cross_entropy_with_logits": "Binary cross entropy between sigmoid(input) and "
                                        "the target, computed stably from the logits.",
    "cross_entropy": "Cross entropy between the logits input and the target (class indices "
                     "or class probabilities).",
    "dropout": "Zeroes elements of input with probability p during training (scaling the "
               "others by 1 / (1 - p)).",
    "embedding": "Looks up the rows of weight at the indices input.",
    "huber_loss": "Huber loss: squared error below delta, linear above.",
    "l1_loss": "Mean (or summed) absolute error between input and target.",
    "layer_norm": "Applies layer normalization over the last dimensions, given by "
                  "normalized_shape.",
    "conv1d": "Applies a 1-D convolution (cross-correlation) over an input of shape "
              "(N, C, L) or (C, L).",
    "conv2d": "Applies a 2-D convolution (cross-correlation) over an input of shape "
              "(N, C, H, W) or (C, H, W).",
    "max_pool1d": "Applies 1-D max pooling over an input of shape (N, C, L) or (C, L).",
    "max_pool2d": "Applies 2-D max pooling over an input of shape (N, C, H, W) or (C, H, W).",
    "avg_pool1d": "Applies 1-D average pooling over an input of shape (N, C, L) or (C, L).",
    "avg_pool2d": "Applies 2-D average pooling over an input of shape (N, C, H, W) or "
                  "(C, H, W).",
    "adaptive_avg_pool2d": "Applies 2-D average pooling to a fixed output size.",
    "unfold": "Extracts sliding local blocks of a batched input tensor (im2col).",
    "fold": "Combines an array of sliding local blocks into a tensor, summing overlaps "
            "(col2im).",
    "interpolate": "Resizes the spatial dims of input by size or scale_factor (modes "
                   "'nearest', 'linear', 'bilinear', 'bicubic', 'area').",
    "conv_transpose1d": "Applies a 1-D transposed convolution over an input of shape "
                        "(N, C, L) or (C, L).",
    "conv_transpose2d": "Applies a 2-D transposed convolution over an input of shape "
                        "(N, C, H, W) or (C, H, W).",
    "adaptive_avg_pool1d": "Applies 1-D average pooling to a fixed output length.",
    "adaptive_max_pool1d": "Applies 1-D max pooling to a fixed output length.",
    "adaptive_max_pool2d": "Applies 2-D max pooling to a fixed output size.",
    "lp_pool1d": "Applies 1-D power-average pooling: the p-norm of each window.",
    "lp_pool2d": "Applies 2-D power-average pooling: the p-norm of each window.",
    "max_unpool1d": "Computes a partial inverse of max_pool1d: each value put at its index, "
                    "zeros elsewhere.",
    "max_unpool2d": "Computes a partial inverse of max_pool2d: each value put at its index, "
                    "zeros elsewhere.",
    "pixel_shuffle": "Rearranges (*, C r^2, H, W) into (*, C, H r, W r).",
    "pixel_unshuffle": "Rearranges (*, C, H r, W r) into (*, C r^2, H, W).",
    "channel_shuffle": "Divides the channels into groups and interleaves them.",
    "linear": "Applies the affine transformation y = input @ weight.T + bias.",
    "mse_loss": "Mean (or summed) squared error between input and target.",
    "nll_loss": "Negative log likelihood loss of the log-probabilities input at the target "
                "classes.",
    "one_hot": "Encodes the int64 tensor of class indices as one-hot vectors (a trailing "
               "class dimension).",
    "pad": "Pads input: constant, reflect, replicate or circular padding of its last "
           "dimensions.",
    "relu_": "In-place version of :func:`relu`.",
    "smooth_l1_loss": "Smooth L1 loss: squared error below beta, linear above.",
    # Tensor methods without a function of the same name
    "backward": "Computes the gradient of this tensor with respect to the graph leaves.",
    "bool": "self.bool() is equivalent to self.to(cgrad.bool).",
    "contiguous": "Returns a C-contiguous tensor with the same data (self when it is "
                  "already).",
    "copy_": "Copies the elements of other (broadcast) into self and returns self.",
    "cpu": "Returns self (cgrad tensors live in CPU memory).",
    "cuda": "Raises what torch built without CUDA raises (cgrad runs on the CPU only).",
    "double": "self.double() is equivalent to self.to(cgrad.float64).",
    "element_size": "Returns the size in bytes of one element.",
    "expand": "Returns a view of self with singleton dimensions expanded to a larger size.",
    "expand_as": "Expands this tensor to the size of other.",
    "fill_": "Fills self with the given value.",
    "float": "self.float() is equivalent to self.to(cgrad.float32).",
    "half": "self.half() is equivalent to self.to(cgrad.float16).",
    "int": "self.int() is equivalent to self.to(cgrad.int32).",
    "is_floating_point": "Returns True if the data type of self is a floating point type.",
    "item": "Returns the value of this one-element tensor as a Python number.",
    "long": "self.long() is equivalent to self.to(cgrad.int64).",
    "normal_": "Fills self with samples from the normal distribution N(mean, std^2).",
    "repeat": "Repeats this tensor along the given dimensions (a copy).",
    "reshape_as": "Returns this tensor with the shape of other.",
    "size": "Returns the size of the tensor (a cgrad.Size), or of the dimension dim.",
    "to": "Returns a tensor with the given dtype and device (self when nothing changes and "
          "copy is False; cgrad has only the cpu device).",
    "to_sparse": "Returns a coalesced sparse COO copy of this tensor.",
    "tolist": "Returns the tensor as a (nested) list of Python numbers.",
    "type": "Returns the type name (e.g. 'cgrad.FloatTensor'), or this tensor cast to dtype.",
    "uniform_": "Fills self with numbers sampled uniformly from [from, to).",
    "view": "Returns a view of self with the given shape, or its bytes read as dtype.",
    "view_as": "Views this tensor with the shape of other.",
    "zero_": "Fills self with zeros.",
    "inverse": "Computes the inverse of a square matrix (or batch of them).",
    "logdet": "Computes the log determinant of a square matrix (nan when it is negative).",
    "qr": "Computes the QR decomposition of a matrix (deprecated: use cgrad.linalg.qr).",
    "slogdet": "Computes the sign and the log of the absolute value of the determinant.",
    # cgrad/ops/special.py
    "arccos": "Alias for :func:`cgrad.acos`.",
    "arcsin": "Alias for :func:`cgrad.asin`.",
    "arctan": "Alias for :func:`cgrad.atan`.",
    "arccosh": "Alias for :func:`cgrad.acosh`.",
    "arcsinh": "Alias for :func:`cgrad.asinh`.",
    "arctanh": "Alias for :func:`cgrad.atanh`.",
    "arctan2": "Alias for :func:`cgrad.atan2`.",
}

# One description per parameter name; OVERRIDE gives an op's own where the name differs.
ARGS = {
    "input": "(Tensor) the input tensor.",
    "upper": "(bool) return the upper triangular factor instead of the lower one.",
    "some": "(bool) the reduced QR decomposition when True, the complete one otherwise.",
    "other": "(Tensor or Number) the second operand.",
    "alpha": "(Number) the multiplier for other.",
    "dim": "(int or tuple of ints, optional) the dimension or dimensions to reduce.",
    "keepdim": "(bool) whether the output tensor has dim retained or not.",
    "dtype": "(cgrad.dtype, optional) the desired data type of the returned tensor.",
    "exponent": "(Number or Tensor) the exponent value.",
    "min": "(Number or Tensor, optional) lower bound of the range to be clamped to.",
    "max": "(Number or Tensor, optional) upper bound of the range to be clamped to.",
    "condition": "(BoolTensor) where True, yield input, otherwise yield other.",
    "index": "(LongTensor) the indices of elements to gather or write.",
    "src": "(Tensor) the source elements to scatter.",
    "source": "(Tensor or int) the tensor containing values to add, or the dims to move.",
    "value": "(Number or Tensor) the value to fill in with.",
    "mask": "(BoolTensor) the boolean mask.",
    "tensors": "(sequence of Tensors) the tensors.",
    "tensor": "(Tensor) the second 1-D tensor.",
    "dims": "(int or tuple of ints) the dimensions.",
    "shape": "(tuple of ints) the new shape.",
    "size": "(tuple of ints) the desired size.",
    "sizes": "(tuple of ints) the sizes.",
    "repeats": "(tuple of ints) the number of times to repeat this tensor along each "
               "dimension.",
    "p": "(int, float, inf, -inf, 'fro', 'nuc', optional) the order of the norm.",
    "correction": "(int, optional) difference between the sample size and sample degrees "
                  "of freedom (Bessel's correction: 1).",
    "unbiased": "(bool, optional) deprecated: whether to use Bessel's correction.",
    "start_dim": "(int) the first dim to flatten.",
    "end_dim": "(int) the last dim to flatten.",
    "chunks": "(int) number of chunks to return.",
    "split_size_or_sections": "(int or list of ints) size of a single chunk or list of "
                              "sizes for each chunk.",
    "split_size": "(int or list of ints) size of a single chunk or list of sizes for each "
                  "chunk.",
    "split_sizes": "(list of ints) the sizes of the pieces.",
    "shifts": "(int or tuple of ints) the number of places by which the elements are "
              "shifted.",
    "dim0": "(int) the first dimension to be transposed.",
    "dim1": "(int) the second dimension to be transposed.",
    "axis0": "(int) the first dimension to be transposed.",
    "axis1": "(int) the second dimension to be transposed.",
    "destination": "(int or tuple of ints) destination positions of the dims.",
    "mat2": "(Tensor) the second matrix (or batch of matrices).",
    "vec": "(Tensor) the vector to be multiplied.",
    "vec2": "(Tensor) the second 1-D tensor.",
    "inplace": "(bool) do the operation in place (default False).",
    "negative_slope": "(float) the slope for negative inputs (default 0.01).",
    "approximate": "(str) 'none' (exact, with erf) or 'tanh' (the tanh approximation).",
    "beta": "(float) the beta value.",
    "threshold": "(float) values above this revert to a linear function.",
    "decimals": "(int) number of decimal places to round to (default 0).",
    "nan": "(Number, optional) the value to replace NaNs with (default 0).",
    "posinf": "(Number, optional) the value to replace positive infinity with (default: the "
              "largest finite value of input's dtype).",
    "neginf": "(Number, optional) the value to replace negative infinity with (default: the "
              "lowest finite value of input's dtype).",
    "rtol": "(float) relative tolerance.",
    "atol": "(float) absolute tolerance.",
    "equal_nan": "(bool) if True, two NaNs are considered equal.",
    "rounding_mode": "(str, optional) None (true division), 'trunc' or 'floor'.",
    "indices": "(LongTensor) the indices into input.",
    "start": "(int) the index where the narrowed dimension starts.",
    "length": "(int) the length of the narrowed dimension.",
    "sparse_grad": "(bool) accepted for torch compatibility (the gradient is dense).",
    "reduce": "(str, optional) the reduction to apply ('add' or 'multiply').",
    "as_tuple": "(bool) return one 1-D index tensor per dimension instead of a 2-D tensor.",
    "indexing": "(str, optional) 'ij' (matrix indexing) or 'xy' (Cartesian indexing).",
    "memory_format": "accepted for torch compatibility (there is one memory format).",
    "axis": "(int, optional) NumPy's name for dim.",
    "out": "(Tensor, optional) the output tensor.",
    "_stacklevel": "(int) the stack level of torch's implicit-dim warning.",
    "non_blocking": "accepted for torch compatibility (no effect on CPU).",
    "implicit": "accepted for torch compatibility (no effect).",
    "gradient": "(Tensor, optional) the gradient of the function being differentiated "
                "with respect to self (needed unless self is a scalar).",
    "retain_graph": "(bool, optional) if False, the graph's saved values are freed after "
                    "backward (default: create_graph).",
    "create_graph": "(bool) if True, the graph of the derivative is recorded (higher order "
                    "derivatives).",
    "inputs": "(sequence of Tensors, optional) the tensors into whose .grad the gradient is "
              "accumulated (default: all the leaves).",
    "mean": "(float) the mean of the normal distribution.",
    "std": "(float) the standard deviation of the normal distribution.",
    "sparse_dim": "(int, optional) the number of sparse dimensions.",
    "weight": "(Tensor, optional) the weights.",
    "bias": "(Tensor, optional) the bias.",
    "target": "(Tensor) the target.",
    "reduction": "(str) 'mean' (default), 'sum' or 'none'.",
    "size_average": "deprecated (use reduction).",
    "reduce_": "deprecated (use reduction).",
    "training": "(bool) apply the operation in training mode.",
    "momentum": "(float) the factor of the running statistics' update.",
    "eps": "(float) a value added to the denominator for numerical stability.",
    "running_mean": "(Tensor, optional) the running mean, updated in training mode.",
    "running_var": "(Tensor, optional) the running variance, updated in training mode.",
    "normalized_shape": "(tuple of ints) the trailing shape over which to normalize.",
    "num_groups": "(int) the number of groups the channels are split into.",
    "use_input_stats": "(bool) normalise with the input's statistics (else the running ones).",
    "lambd": "(float) the shrinkage threshold (default 0.5).",
    "min_val": "(float) the lower bound of the linear region (default -1).",
    "max_val": "(float) the upper bound of the linear region (default 1).",
    "lower": "(float) the lower bound of the random negative slope.",
    "input1": "(Tensor) the first input.",
    "input2": "(Tensor) the second input.",
    "ignore_index": "(int) a target value that is ignored (no loss, no gradient).",
    "label_smoothing": "(float) the amount of smoothing in [0, 1] (0: none).",
    "pos_weight": "(Tensor, optional) a weight of the positive examples per class.",
    "delta": "(float) the threshold at which to change between the squared and the linear "
             "loss.",
    "padding_idx": "(int, optional) the entries at this index get no gradient.",
    "max_norm": "(float, optional) looked-up rows with a larger norm are renormalized in "
                "place.",
    "norm_type": "(float) the p of the p-norm for max_norm.",
    "scale_grad_by_freq": "(bool) scale gradients by the inverse frequency of the indices.",
    "sparse": "(bool) if True, the gradient of weight is a sparse COO tensor.",
    # cgrad/nn/functional/_loss_more.py, _embedding_bag.py
    "margin": "(float) the margin of the hinge.",
    "log_target": "(bool) whether target holds log-probabilities.",
    "log_probs": "(Tensor) log-probabilities of shape (T, N, C) or (T, C).",
    "targets": "(Tensor) the target labels, padded (N, S) or concatenated 1-D.",
    "input_lengths": "(Tensor or tuple of ints) the length of each input sequence.",
    "target_lengths": "(Tensor or tuple of ints) the length of each target sequence.",
    "blank": "(int) the blank label (default 0).",
    "zero_infinity": "(bool) replace infinite losses (and their gradients) by zero.",
    "offsets": "(LongTensor, optional) the start of each bag in a 1-D input.",
    "per_sample_weights": "(Tensor, optional) a weight for each looked-up row ('sum' mode).",
    "include_last_offset": "(bool) the last offset ends the last bag.",
    "var": "(Tensor or float) the predicted variances.",
    "full": "(bool) include the constant term of the log-likelihood.",
    "log_input": "(bool) whether input holds the log of the rate.",
    "anchor": "(Tensor) the anchor examples.",
    "positive": "(Tensor) the positive examples.",
    "negative": "(Tensor) the negative examples.",
    "swap": "(bool) use the smaller of d(anchor, negative) and d(positive, negative).",
    "distance_function": "(callable, optional) the distance of two tensors (default: "
                         "pairwise distance).",
    "num_classes": "(int) the number of classes (-1: one more than the largest index).",
    "pad": "(tuple of ints) the padding sizes, from the last dimension backwards: (left, "
           "right, top, bottom, ...).",
    "mode": "(str) 'constant', 'reflect', 'replicate' or 'circular'.",
    # cgrad/ops/special.py
    "end": "(Tensor) the tensor with the ending points.",
    "values": "(Tensor) the values to use where input is zero.",
    # cgrad/ops/triangular.py, cgrad/ops/products.py, cartesian_prod/rot90/diff
    "diagonal": "(int, optional) the diagonal to consider (0: the main diagonal, > 0 above "
                "it, < 0 below it).",
    "offset": "(int, optional) which diagonal to consider (0: the main diagonal, > 0 above "
              "it, < 0 below it).",
    "dim1": "(int, optional) the first dimension with respect to which to take the "
            "diagonal.",
    "dim2": "(int, optional) the second dimension with respect to which to take the "
            "diagonal.",
    "row": "(int) the number of rows in the 2-D matrix.",
    "col": "(int) the number of columns in the 2-D matrix.",
    "layout": "(cgrad.layout, optional) only cgrad.strided is supported.",
    "device": "(str, optional) the device of the returned tensor ('cpu').",
    "pin_memory": "(bool) pinned memory is not supported (False).",
    "requires_grad": "(bool) whether autograd records operations on the returned tensor.",
    "mat1": "(Tensor) the first matrix to be matrix multiplied.",
    "mat": "(Tensor) the matrix to be matrix multiplied.",
    "vec1": "(Tensor) the first vector of the outer product.",
    "batch1": "(Tensor) the first batch of matrices to be multiplied.",
    "batch2": "(Tensor) the second batch of matrices to be multiplied.",
    "tensor1": "(Tensor) the numerator (addcdiv) or first factor (addcmul).",
    "tensor2": "(Tensor) the denominator (addcdiv) or second factor (addcmul).",
    "x1": "(Tensor) input tensor of shape (B, P, M).",
    "x2": "(Tensor) input tensor of shape (B, R, M).",
    "compute_mode": "(str) 'use_mm_for_euclid_dist_if_necessary' (a matrix product for p = 2 "
                    "when P > 25 or R > 25), 'use_mm_for_euclid_dist' (always for p = 2) or "
                    "'donot_use_mm_for_euclid_dist' (never).",
    "n": "(int) the number of times to recursively compute the difference.",
    "prepend": "(Tensor, optional) values to prepend to input along dim before computing "
               "the difference.",
    "append": "(Tensor, optional) values to append to input along dim before computing the "
              "difference.",
    # sorting, selection, statistics, scans (cgrad/ops/sorting.py, statistics.py, ...)
    "descending": "(bool, optional) controls the sorting order (ascending or descending).",
    "stable": "(bool, optional) makes the sort stable: equal elements keep their order.",
    "k": "(int) the k in 'top-k' (or the k-th smallest element).",
    "largest": "(bool, optional) return the largest elements (True) or the smallest.",
    "sorted": "(bool, optional) return the elements in sorted order.",
    "q": "(float or Tensor) a scalar or 1-D tensor of quantiles in [0, 1].",
    "interpolation": "(str) how to interpolate between the two nearest data points: "
                     "'linear', 'lower', 'higher', 'midpoint' or 'nearest'.",
    "sorted_sequence": "(Tensor) N-D or 1-D tensor, sorted along its innermost dimension.",
    "boundaries": "(Tensor) 1-D tensor, must contain a strictly increasing sequence.",
    "out_int32": "(bool, optional) int32 indices instead of int64.",
    "right": "(bool, optional) the last suitable index instead of the first one (the "
             "upper bound).",
    "side": "(str, optional) 'left' (the first suitable index) or 'right' (the last); "
            "must agree with right when both are given.",
    "sorter": "(LongTensor, optional) the indices that sort an unsorted sorted_sequence "
              "along its innermost dimension.",
    "bins": "(int or Tensor) the number of equal-width bins, or the bin edges (a 1-D "
            "increasing tensor).",
    "range": "(tuple of float, optional) the leftmost and rightmost bin edges (default: "
             "the minimum and maximum of input).",
    "density": "(bool) normalize the histogram so that it integrates to 1 over the range.",
    "weights": "(Tensor, optional) a weight for each value of input.",
    "minlength": "(int) the minimum number of bins.",
    "return_inverse": "(bool) also return the index in the output of each element of "
                      "input.",
    "return_counts": "(bool) also return the number of occurrences of each output element.",
    "stride": "(int or tuple of ints) the step between windows (default 1).",
    "padding": "(int, tuple of ints or str) implicit zero padding on both sides, or 'valid' "
               "(none) or 'same' (the output has the input's size).",
    "dilation": "(int or tuple of ints) the spacing between kernel elements (default 1).",
    "kernel_size": "(int or tuple of ints) the size of the pooling window.",
    "ceil_mode": "(bool) use ceil instead of floor to compute the output size.",
    "return_indices": "(bool) also return the flat index of each maximum in its plane.",
    "count_include_pad": "(bool) count the zero padding in the averaging divisor.",
    "divisor_override": "(int, optional) the divisor of every window's sum.",
    "output_size": "(int or tuple of ints) the target output size (None keeps the input's).",
    "groups": "(int) the number of blocked connections from input to output channels.",
    "output_padding": "(int or tuple of ints) extra size added to one side of each output "
                      "dimension (default 0).",
    "norm_type": "(float) the exponent p of the power average.",
    "indices": "(Tensor) the flat indices of the maxima, as returned by max pooling.",
    "upscale_factor": "(int) the factor by which to increase the spatial resolution.",
    "downscale_factor": "(int) the factor by which to decrease the spatial resolution.",
}
OVERRIDE = {
    ("scaled_dot_product_attention", "query"): "(Tensor) the queries, of shape (..., L, E).",
    ("scaled_dot_product_attention", "key"): "(Tensor) the keys, of shape (..., S, E).",
    ("scaled_dot_product_attention", "value"): "(Tensor) the values, of shape (..., S, Ev).",
    ("scaled_dot_product_attention", "attn_mask"): "(Tensor, optional) a bool mask (True takes "
                                                   "part) or a float mask added to the scores, "
                                                   "broadcastable to (..., L, S).",
    ("scaled_dot_product_attention", "dropout_p"): "(float) the dropout probability on the "
                                                   "attention weights.",
    ("scaled_dot_product_attention", "is_causal"): "(bool) mask the scores above the diagonal (an"
                                                   " error together with attn_mask).",
    ("scaled_dot_product_attention", "scale"): "(float, optional) the factor of the scores "
                                               "(default 1 / sqrt(E)).",
    ("scaled_dot_product_attention", "enable_gqa"): "(bool) grouped-query attention: repeat each "
                                                    "key/value head (dim -3) to the query's head "
                                                    "count.",
    ("multi_head_attention_forward", "query"): "(Tensor) the queries, (L, N, E) or (L, E).",
    ("multi_head_attention_forward", "key"): "(Tensor) the keys, (S, N, kdim) or (S, kdim).",
    ("multi_head_attention_forward", "value"): "(Tensor) the values, (S, N, vdim) or (S, vdim).",
    ("multi_head_attention_forward", "embed_dim_to_check"): "(int) the expected embedding dim of "
                                                            "query.",
    ("multi_head_attention_forward", "num_heads"): "(int) the number of heads.",
    ("multi_head_attention_forward", "in_proj_weight"): "(Tensor, optional) the packed q/k/v "
                                                        "projection weight (3E, E).",
    ("multi_head_attention_forward", "in_proj_bias"): "(Tensor, optional) the packed q/k/v "
                                                      "projection bias (3E).",
    ("multi_head_attention_forward", "bias_k"): "(Tensor, optional) a bias appended to the keys "
                                                "along the sequence.",
    ("multi_head_attention_forward", "bias_v"): "(Tensor, optional) a bias appended to the values"
                                                " along the sequence.",
    ("multi_head_attention_forward", "add_zero_attn"): "(bool) append a zero key and value.",
    ("multi_head_attention_forward", "dropout_p"): "(float) the dropout probability on the "
                                                   "attention weights.",
    ("multi_head_attention_forward", "out_proj_weight"): "(Tensor) the output projection weight "
                                                         "(E, E).",
    ("multi_head_attention_forward", "out_proj_bias"): "(Tensor, optional) the output projection "
                                                       "bias (E).",
    ("multi_head_attention_forward", "training"): "(bool) apply dropout.",
    ("multi_head_attention_forward", "key_padding_mask"): "(Tensor, optional) (N, S): keys to "
                                                          "ignore (True or -inf).",
    ("multi_head_attention_forward", "need_weights"): "(bool) also return the attention weights.",
    ("multi_head_attention_forward", "attn_mask"): "(Tensor, optional) (L, S) or (N * num_heads, "
                                                   "L, S): True or -inf masks out.",
    ("multi_head_attention_forward", "use_separate_proj_weight"): "(bool) use q/k/v_proj_weight "
                                                                  "instead of in_proj_weight.",
    ("multi_head_attention_forward", "q_proj_weight"): "(Tensor, optional) the query projection "
                                                       "weight.",
    ("multi_head_attention_forward", "k_proj_weight"): "(Tensor, optional) the key projection "
                                                       "weight.",
    ("multi_head_attention_forward", "v_proj_weight"): "(Tensor, optional) the value projection "
                                                       "weight.",
    ("multi_head_attention_forward", "static_k"): "(Tensor, optional) projected keys (N * "
                                                  "num_heads, S, E / num_heads) to use as they "
                                                  "are.",
    ("multi_head_attention_forward", "static_v"): "(Tensor, optional) projected values (N * "
                                                  "num_heads, S, E / num_heads) to use as they "
                                                  "are.",
    ("multi_head_attention_forward", "average_attn_weights"): "(bool) average the returned "
                                                              "weights over the heads.",
    ("multi_head_attention_forward", "is_causal"): "(bool) a hint that attn_mask is the causal "
                                                   "mask.",
    ("embedding_bag", "mode"): "(str) 'sum', 'mean' (default) or 'max'.",
    ("kl_div", "reduction"): "(str) 'mean' (default), 'batchmean', 'sum' or 'none'.",
    ("elu", "alpha"): "(float) the alpha value of the ELU formulation (default 1.0).",
    ("index_add", "alpha"): "(Number) the scalar multiplier for source.",
    ("index_add", "source"): "(Tensor) the tensor containing values to add.",
    ("movedim", "source"): "(int or tuple of ints) original positions of the dims to move.",
    ("moveaxis", "source"): "(int or tuple of ints) original positions of the dims to move.",
    ("dropout", "p"): "(float) the probability of an element to be zeroed (default 0.5).",
    ("max", "other"): "(Tensor, optional) the tensor to compare with (elementwise maximum).",
    ("min", "other"): "(Tensor, optional) the tensor to compare with (elementwise minimum).",
    ("max", "dim"): "(int, optional) the dimension to reduce.",
    ("min", "dim"): "(int, optional) the dimension to reduce.",
    ("argmax", "dim"): "(int, optional) the dimension to reduce (None: the flattened input).",
    ("argmin", "dim"): "(int, optional) the dimension to reduce (None: the flattened input).",
    ("cumsum", "dim"): "(int) the dimension to do the operation over.",
    ("cumprod", "dim"): "(int) the dimension to do the operation over.",
    ("softmax", "dim"): "(int) the dimension along which softmax is computed.",
    ("log_softmax", "dim"): "(int) the dimension along which log_softmax is computed.",
    ("cat", "dim"): "(int) the dimension over which the tensors are concatenated.",
    ("concat", "dim"): "(int) the dimension over which the tensors are concatenated.",
    ("concatenate", "dim"): "(int) the dimension over which the tensors are concatenated.",
    ("stack", "dim"): "(int) the dimension to insert.",
    ("unsqueeze", "dim"): "(int) the index at which to insert the singleton dimension.",
    ("squeeze", "dim"): "(int or tuple of ints, optional) the dimensions to remove (only "
                        "those of size 1 are).",
    ("select", "dim"): "(int) the dimension to slice.",
    ("select", "index"): "(int) the index to select with.",
    ("narrow", "dim"): "(int) the dimension along which to narrow.",
    ("unbind", "dim"): "(int) the dimension to remove.",
    ("unflatten", "dim"): "(int) the dimension to unflatten.",
    ("split", "dim"): "(int) the dimension along which to split.",
    ("split_with_sizes", "dim"): "(int) the dimension along which to split.",
    ("chunk", "dim"): "(int) the dimension along which to split.",
    ("gather", "dim"): "(int) the axis along which to index.",
    ("scatter", "dim"): "(int) the axis along which to index.",
    ("scatter_add", "dim"): "(int) the axis along which to index.",
    ("index_select", "dim"): "(int) the dimension in which we index.",
    ("index_add", "dim"): "(int) the dimension along which to index.",
    ("take_along_dim", "dim"): "(int, optional) the dimension to select along (None: the "
                               "flattened input).",
    ("index_select", "index"): "(IntTensor or LongTensor) the 1-D indices to select.",
    ("take", "index"): "(LongTensor) the indices into the flattened input.",
    ("where", "input"): "(Tensor or Number) the value(s) where condition is True.",
    ("where", "other"): "(Tensor or Number) the value(s) where condition is False.",
    ("masked_fill", "value"): "(Number or 0-d Tensor) the value to fill in with.",
    ("scatter", "value"): "(Number) the value to scatter (instead of src).",
    ("flatten", "dims"): "(int or tuple of ints) the dimensions.",
    ("roll", "dims"): "(int or tuple of ints, optional) the axes along which to roll (None: "
                      "the flattened tensor).",
    ("flip", "dims"): "(int or tuple of ints) the axes to flip on.",
    ("tile", "dims"): "(tuple of ints) the number of repetitions per dimension.",
    ("permute", "dims"): "(tuple of ints) the desired ordering of dimensions.",
    ("rrelu", "upper"): "(float) the upper bound of the random negative slope.",
    ("threshold", "threshold"): "(float) the value to threshold at.",
    ("threshold", "value"): "(float) the value replacing the elements not above threshold.",
    ("threshold_", "threshold"): "(float) the value to threshold at.",
    ("threshold_", "value"): "(float) the value replacing the elements not above threshold.",
    ("local_response_norm", "size"): "(int) the number of neighbouring channels summed.",
    ("local_response_norm", "alpha"): "(float) the multiplicative factor (default 1e-4).",
    ("local_response_norm", "beta"): "(float) the exponent (default 0.75).",
    ("local_response_norm", "k"): "(float) the additive factor (default 1).",
    ("softplus", "beta"): "(float) the beta value of the softplus formulation (default 1).",
    ("smooth_l1_loss", "beta"): "(float) the threshold at which to change between the L1 "
                                "and the L2 loss (default 1.0).",
    ("embedding", "input"): "(LongTensor) the indices into weight.",
    ("embedding", "weight"): "(Tensor) the embedding matrix (one row per index).",
    ("one_hot", "input"): "(LongTensor) the class values.",
    ("max_pool1d", "stride"): "(int or tuple of ints, optional) the step between windows "
                              "(default kernel_size).",
    ("max_pool2d", "stride"): "(int or tuple of ints, optional) the step between windows "
                              "(default kernel_size).",
    ("avg_pool1d", "stride"): "(int or tuple of ints, optional) the step between windows "
                              "(default kernel_size).",
    ("avg_pool2d", "stride"): "(int or tuple of ints, optional) the step between windows "
                              "(default kernel_size).",
    ("max_pool1d", "padding"): "(int or tuple of ints) implicit -inf padding on both sides.",
    ("max_pool2d", "padding"): "(int or tuple of ints) implicit -inf padding on both sides.",
    ("avg_pool1d", "padding"): "(int or tuple of ints) implicit zero padding on both sides.",
    ("avg_pool2d", "padding"): "(int or tuple of ints) implicit zero padding on both sides.",
    ("unfold", "stride"): "(int or tuple of ints) the step between blocks (default 1).",
    ("fold", "stride"): "(int or tuple of ints) the step between blocks (default 1).",
    ("unfold", "padding"): "(int or tuple of ints) implicit zero padding on both sides.",
    ("fold", "padding"): "(int or tuple of ints) implicit zero padding on both sides.",
    ("unfold", "kernel_size"): "(int or tuple of ints) the size of the sliding blocks.",
    ("fold", "kernel_size"): "(int or tuple of ints) the size of the sliding blocks.",
    ("fold", "output_size"): "(int or tuple of ints) the spatial shape of the output.",
    ("interpolate", "size"): "(int or tuple of ints, optional) the output spatial size.",
    ("interpolate", "scale_factor"): "(float or tuple of floats, optional) the multiplier of "
                                     "the spatial size.",
    ("interpolate", "mode"): "(str) the algorithm: 'nearest', 'linear', 'bilinear', "
                             "'bicubic' or 'area'.",
    ("interpolate", "align_corners"): "(bool, optional) for the interpolating modes only.",
    ("interpolate", "recompute_scale_factor"): "(bool, optional) index by the computed size "
                                               "rather than the given scale_factor.",
    ("interpolate", "antialias"): "(bool) for the interpolating modes only.",
    ("conv1d", "weight"): "(Tensor) the filters, of shape (out_channels, in_channels/groups, "
                          "kW).",
    ("conv2d", "weight"): "(Tensor) the filters, of shape (out_channels, in_channels/groups, "
                          "kH, kW).",
    ("conv_transpose1d", "weight"): "(Tensor) the filters, of shape (in_channels, "
                                    "out_channels/groups, kW).",
    ("conv_transpose2d", "weight"): "(Tensor) the filters, of shape (in_channels, "
                                    "out_channels/groups, kH, kW).",
    ("conv_transpose1d", "padding"): "(int or tuple of ints) dilation * (kernel_size - 1) - "
                                     "padding zero padding on both sides of the input.",
    ("conv_transpose2d", "padding"): "(int or tuple of ints) dilation * (kernel_size - 1) - "
                                     "padding zero padding on both sides of the input.",
    ("lp_pool1d", "stride"): "(int, optional) the step between windows (default kernel_size).",
    ("lp_pool2d", "stride"): "(int or tuple of ints, optional) the step between windows "
                             "(default kernel_size).",
    ("max_unpool1d", "stride"): "(int, optional) the pooling's stride (default kernel_size).",
    ("max_unpool2d", "stride"): "(int or tuple of ints, optional) the pooling's stride "
                                "(default kernel_size).",
    ("max_unpool1d", "padding"): "(int) the pooling's padding.",
    ("max_unpool2d", "padding"): "(int or tuple of ints) the pooling's padding.",
    ("max_unpool1d", "output_size"): "(tuple of ints, optional) the output's size.",
    ("max_unpool2d", "output_size"): "(tuple of ints, optional) the output's size.",
    ("channel_shuffle", "groups"): "(int) the number of groups to divide the channels in.",
    ("linear", "weight"): "(Tensor) the weight, of shape (out_features, in_features).",
    ("bilinear", "weight"): "(Tensor) the weight, of shape (out, in1, in2).",
    ("nll_loss", "weight"): "(Tensor, optional) a manual rescaling weight per class.",
    ("cross_entropy", "weight"): "(Tensor, optional) a manual rescaling weight per class.",
    ("binary_cross_entropy", "weight"): "(Tensor, optional) a manual rescaling weight per "
                                        "element.",
    ("binary_cross_entropy_with_logits", "weight"): "(Tensor, optional) a manual rescaling "
                                                    "weight per element.",
    ("dot", "tensor"): "(Tensor) the second 1-D tensor.",
    ("view", "dtype"): "(cgrad.dtype) the dtype to read the tensor's bytes as.",
    ("type", "dtype"): "(cgrad.dtype or str, optional) the desired type (None: return the "
                       "type name).",
    ("to", "args"): "torch's three forms: device, dtype, non_blocking, copy; or dtype, "
                    "non_blocking, copy; or a tensor (its dtype), non_blocking, copy.",
    ("uniform_", "args"): "from, to: the bounds of the range (default 0 and 1; also by "
                          "keyword).",
    ("view", "args"): "(ints or tuple of ints) the desired size (also size=), or a dtype.",
    ("reshape", "args"): "(ints or tuple of ints) the desired shape (also shape=).",
    ("expand", "args"): "(ints or tuple of ints) the desired expanded size, -1 keeping a "
                        "dimension (also size=).",
    ("permute", "args"): "(ints or tuple of ints) the desired ordering of dimensions (also "
                         "dims=).",
    ("repeat", "sizes"): "(ints or tuple of ints) the number of times to repeat this tensor "
                         "along each dimension (also repeats=).",
    ("flip", "args"): "(ints or tuple of ints) the axes to flip on (also dims=).",
    ("tile", "args"): "(ints or tuple of ints) the number of repetitions per dimension (also "
                      "dims=).",
    ("einsum", "args"): "the equation (a str), then the operands (Tensors, or one list of "
                        "them); or operands alternating with their subscript lists.",
    ("atleast_1d", "tensors"): "(Tensor or sequence of Tensors) the input tensors.",
    ("atleast_2d", "tensors"): "(Tensor or sequence of Tensors) the input tensors.",
    ("atleast_3d", "tensors"): "(Tensor or sequence of Tensors) the input tensors.",
    ("block_diag", "tensors"): "(Tensor) one or more tensors with 0, 1, or 2 dimensions.",
    ("broadcast_tensors", "tensors"): "(Tensor) any number of tensors of the same type.",
    ("meshgrid", "tensors"): "(Tensor) 0-D or 1-D tensors (or one list of them).",
    ("to", "kwargs"): "dtype, device, non_blocking, copy (a copy even when nothing "
                      "changes) and memory_format.",
    ("size", "dim"): "(int, optional) the dimension whose size to return.",
    ("fill_", "value"): "(Number or 0-d Tensor) the fill value.",
    ("masked_fill_", "value"): "(Number or 0-d Tensor) the fill value.",
    ("expand_as", "other"): "(Tensor) the tensor whose size to expand to.",
    ("view_as", "other"): "(Tensor) the tensor whose shape to view as.",
    ("reshape_as", "other"): "(Tensor) the tensor whose shape to reshape as.",
    ("copy_", "other"): "(Tensor) the source tensor.",
    ("norm", "dim"): "(int, tuple of ints, optional) the dimensions to reduce.",
    ("pow", "input"): "(Tensor or Number) the base.",
    ("one_hot", "num_classes"): "(int) the number of classes (-1: one more than the largest "
                                "index).",
    ("rot90", "k"): "(int) the number of times to rotate.",
    # cgrad/ops/special.py
    ("lerp", "weight"): "(float or Tensor) the weight for the interpolation formula.",
    ("lerp_", "weight"): "(float or Tensor) the weight for the interpolation formula.",
    ("logit", "eps"): "(float, optional) the epsilon for the input clamp bound: input is "
                      "clamped to [eps, 1 - eps] (default None: no clamping).",
    ("logit_", "eps"): "(float, optional) the epsilon for the input clamp bound.",
    ("xlogy", "input"): "(Tensor or Number) the multiplier.",
    ("xlogy", "other"): "(Tensor or Number) the argument of the logarithm.",
    ("copysign", "other"): "(Tensor or Number) the source of the signs.",
    ("float_power", "input"): "(Tensor or Number) the base value.",
    ("tril_indices", "offset"): "(int) the diagonal to consider (default 0).",
    ("triu_indices", "offset"): "(int) the diagonal to consider (default 0).",
    ("tril_indices", "dtype"): "(cgrad.dtype, optional) int64 (default) or int32.",
    ("triu_indices", "dtype"): "(cgrad.dtype, optional) int64 (default) or int32.",
    ("diag_embed", "dim1"): "(int, optional) the first dimension of the output's diagonals "
                            "(default -2).",
    ("diag_embed", "dim2"): "(int, optional) the second dimension of the output's diagonals "
                            "(default -1).",
    ("addmm", "beta"): "(Number) the multiplier for input.",
    ("addmm", "alpha"): "(Number) the multiplier for mat1 @ mat2.",
    ("addmv", "beta"): "(Number) the multiplier for input.",
    ("addmv", "alpha"): "(Number) the multiplier for mat @ vec.",
    ("addr", "beta"): "(Number) the multiplier for input.",
    ("addr", "alpha"): "(Number) the multiplier for outer(vec1, vec2).",
    ("baddbmm", "beta"): "(Number) the multiplier for input.",
    ("baddbmm", "alpha"): "(Number) the multiplier for batch1 @ batch2.",
    ("addbmm", "beta"): "(Number) the multiplier for input.",
    ("addbmm", "alpha"): "(Number) the multiplier for the sum of batch1 @ batch2.",
    ("addcmul", "value"): "(Number) the multiplier for tensor1 * tensor2.",
    ("addcdiv", "value"): "(Number) the multiplier for tensor1 / tensor2.",
    ("addmm", "mat2"): "(Tensor) the second matrix to be matrix multiplied.",
    ("cross", "other"): "(Tensor) the second input tensor.",
    ("cross", "dim"): "(int, optional) the dimension to take the cross product in (None: "
                      "the first of size 3, deprecated).",
    ("cdist", "p"): "(float) the p value of the p-norm distance, >= 0.",
    ("rot90", "dims"): "(list or tuple of two ints) the plane of the rotation.",
    ("diff", "dim"): "(int) the dimension along which to compute the difference (default "
                     "-1).",
    ("cartesian_prod", "tensors"): "(Tensor) any number of 1-D tensors.",
    ("sort", "dim"): "(int, optional) the dimension to sort along.",
    ("argsort", "dim"): "(int, optional) the dimension to sort along.",
    ("topk", "dim"): "(int, optional) the dimension to sort along.",
    ("kthvalue", "dim"): "(int, optional) the dimension to find the kth value along.",
    ("median", "dim"): "(int, optional) the dimension to reduce (None: all of input, and "
                       "only the value is returned).",
    ("nanmedian", "dim"): "(int, optional) the dimension to reduce (None: all of input, and "
                          "only the value is returned).",
    ("mode", "dim"): "(int, optional) the dimension to reduce.",
    ("quantile", "dim"): "(int, optional) the dimension to reduce (None: the flattened "
                         "input).",
    ("nanquantile", "dim"): "(int, optional) the dimension to reduce (None: the flattened "
                            "input).",
    ("cummax", "dim"): "(int) the dimension to do the operation over.",
    ("cummin", "dim"): "(int) the dimension to do the operation over.",
    ("logcumsumexp", "dim"): "(int) the dimension to do the operation over.",
    ("aminmax", "dim"): "(int, optional) the dimension to reduce (None: all of input).",
    ("unique", "dim"): "(int, optional) the dimension to operate upon (None: the flattened "
                       "input).",
    ("unique_consecutive", "dim"): "(int, optional) the dimension to apply unique (None: "
                                   "the flattened input).",
    ("unique", "sorted"): "(bool) whether to sort the unique elements in ascending order "
                          "(they always are, as on torch's CPU).",
    ("searchsorted", "input"): "(Tensor or Scalar) the value(s) to search for.",
    ("bucketize", "input"): "(Tensor or Scalar) the value(s) to bucket.",
    ("histc", "bins"): "(int) the number of histogram bins.",
    ("histc", "min"): "(Number) the lower end of the range (inclusive).",
    ("histc", "max"): "(Number) the upper end of the range (inclusive); min == max: the "
                      "range of the data.",
    ("histogram", "weight"): "(Tensor, optional) a weight for each element of input.",
}
RETURNS = {
    "multi_head_attention_forward": "(Tensor, Tensor or None)",
    "all": "Tensor", "allclose": "bool", "equal": "bool", "item": "number", "tolist": "list",
    "size": "cgrad.Size or int", "backward": "None", "is_floating_point": "bool",
    "element_size": "int", "max": "Tensor or (Tensor, LongTensor)",
    "min": "Tensor or (Tensor, LongTensor)", "split": "tuple of Tensors",
    "split_with_sizes": "tuple of Tensors", "chunk": "tuple of Tensors",
    "unbind": "tuple of Tensors", "broadcast_tensors": "tuple of Tensors",
    "meshgrid": "tuple of Tensors", "nonzero": "LongTensor or tuple of LongTensors",
    "atleast_1d": "Tensor or tuple of Tensors", "atleast_2d": "Tensor or tuple of Tensors",
    "atleast_3d": "Tensor or tuple of Tensors", "type": "str or Tensor",
    "sort": "(Tensor, LongTensor)", "argsort": "LongTensor", "topk": "(Tensor, LongTensor)",
    "kthvalue": "(Tensor, LongTensor)", "median": "Tensor or (Tensor, LongTensor)",
    "nanmedian": "Tensor or (Tensor, LongTensor)", "mode": "(Tensor, LongTensor)",
    "var_mean": "(Tensor, Tensor)", "std_mean": "(Tensor, Tensor)",
    "aminmax": "(Tensor, Tensor)", "cummax": "(Tensor, LongTensor)",
    "cummin": "(Tensor, LongTensor)", "histogram": "(Tensor, Tensor)",
    "searchsorted": "LongTensor", "bucketize": "LongTensor",
    "unique": "Tensor or tuple of Tensors", "unique_consecutive": "Tensor or tuple of Tensors",
}


def _doc_line(name, sig, method):
    params = list(sig.parameters.values())
    if method and params:
        params = params[1:]                 # self
    text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    return f"{name}{text} -> {RETURNS.get(name, 'Tensor')}"


def _args_section(name, sig, method):
    lines = []
    params = list(sig.parameters.values())
    if method and params:
        params = params[1:]
    for p in params:
        text = OVERRIDE.get((name, p.name)) or ARGS.get(p.name)
        if text is None:
            continue
        star = "*" if p.kind == p.VAR_POSITIONAL else (
            "**" if p.kind == p.VAR_KEYWORD else "")
        if text.startswith("("):
            kind, _, rest = text[1:].partition(") ")
            line = f"{star}{p.name} ({kind}): {rest}"
        else:
            line = f"{star}{p.name}: {text}"
        lines.append(textwrap.fill(line, 88, initial_indent="    ",
                                   subsequent_indent="        "))
    return ("\n\nArgs:\n" + "\n".join(lines)) if lines else ""


def make_doc(name, fn, method=False):
    """torch's layout: `name(signature) -> Tensor`, a summary, then Args (a method that is
    also a function refers to the function instead)."""
    sig = inspect.signature(fn)
    head = _doc_line(name, sig, method)
    summary = SUMMARY.get(name)
    if method and summary is None:
        base = name[:-1] if name.endswith("_") else name
        summary = (f"In-place version of :meth:`~Tensor.{base}`." if base != name
                   and base in SUMMARY else SUMMARY.get(base))
    if summary is None:
        summary = (inspect.getdoc(fn) or "").split("\n\n")[0]
    summary = textwrap.fill(summary, 88)
    if method and name in _FUNCTION_NAMES:
        return f"{head}\n\n{summary}\n\nSee :func:`cgrad.{name}`."
    return f"{head}\n\n{summary}{_args_section(name, sig, method)}"


_FUNCTION_NAMES: set = set()
TensorFunction = type(_C._tensor_function(len, "len", __name__, False))


def _self_signature(fn):
    """fn's signature with its first parameter named self (a method's)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                     params[0].POSITIONAL_OR_KEYWORD):
        params[0] = params[0].replace(name="self")
    return sig.replace(parameters=params)


def wrap_function(fn, name, module, check=False, aliases=None, qualname=None, method=False,
                  like=None):
    """fn as a documented cgrad._C.TensorFunction (Note [Public callables]); `like`: a
    function whose signature to show instead of fn's (an in-place method's out-of-place
    form, when fn only passes its arguments on)."""
    if isinstance(fn, TensorFunction):       # already wrapped: wrap what it wraps
        fn = fn.__wrapped__
    f = _C._tensor_function(fn, name, module, check, aliases, qualname)
    shown = like if like is not None else fn
    f.__signature__ = _self_signature(shown) if method else inspect.signature(shown)
    f.__doc__ = make_doc(name, shown, method)
    return f


# -- out= -----------------------------------------------------------------------------------
# Note [out= arguments]
# ~~~~~~~~~~~~~~~~~~~~~
# The functions torch gives an ``out=`` argument (OUT_FUNCTIONS: those of cgrad.* that have
# one in torch 2.13's signatures, checked by tests/test_torch_signatures.py) take it in cgrad
# too. The implementations do not: each such TensorFunction holds, under "_out_impl", a
# Python function that computes the plain result and writes it into out
# (cgrad._creation.op_out: torch's checks, resizing, dtype rules); the C wrapper calls it
# only for a call that has an ``out`` keyword (csrc/cg_tfn.c), so other calls cost nothing
# more. Its signature (the implementation's plus a keyword-only ``out=None``) is what
# inspect and help() show. How the result's dtype may differ from out's follows torch's
# kernels: OUT_CAST (elementwise ops and the reductions of TensorIterator: torch's canCast),
# OUT_CAT (cat and its relatives: the same, a TypeError), OUT_DTYPE (sum, prod, cumsum,
# cumprod compute in out's dtype) and "exact" for the others (out's dtype must be the
# result's). Messages name the op as torch's do (OUT_NAMES: hstack's say cat).
OUT_FUNCTIONS = frozenset("""
    abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax
    any arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort asin asinh
    atan atan2 atanh baddbmm bitwise_and bitwise_not bitwise_or bitwise_xor bmm bucketize cat
    ceil cholesky clamp clamp_max clamp_min clip column_stack concat concatenate copysign cos
    cosh cross cummax cummin cumprod cumsum deg2rad diag diff div divide dot dstack eq erf erfc
    erfinv exp exp2 expm1 fix float_power floor floor_divide fmod frac gather ge ger greater
    greater_equal gt heaviside histc histogram hstack hypot index_add index_select inverse
    isneginf isposinf kthvalue le lerp less less_equal log log10 log1p log2 log_softmax
    logaddexp logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit
    logsumexp lt masked_select matmul max maximum mean median min minimum mm mode msort mul
    multiply mv nan_to_num nanmean nanmedian nanquantile nansum ne neg negative nonzero norm
    not_equal outer pow prod qr quantile rad2deg reciprocal remainder round rsqrt scatter
    scatter_add searchsorted sgn sigmoid sign sin sinc sinh slogdet softmax sort sqrt square
    stack std sub subtract sum take take_along_dim tan tanh topk tril triu true_divide trunc
    var vstack where xlogy""".split())
OUT_CAST = frozenset("""
    acos acosh add addcdiv addcmul addr arccos arccosh arcsin arcsinh arctan arctan2 arctanh
    asin asinh atan atan2 atanh bitwise_and bitwise_or bitwise_xor cholesky
    copysign cos cosh deg2rad diff div divide eq erf erfc erfinv exp exp2 expm1 floor_divide
    fmod ge ger greater greater_equal gt hypot le lerp less less_equal log log10 log1p log2
    logaddexp logaddexp2 logical_and logical_not logical_or logical_xor logit logsumexp lt max
    maximum mean min minimum mul multiply nanmean nansum ne not_equal outer pow rad2deg
    reciprocal remainder rsqrt sigmoid sin sinc sinh sqrt square std sub subtract tan tanh
    true_divide var xlogy""".split())
OUT_CAT = frozenset("cat concat concatenate stack hstack vstack dstack column_stack".split())
OUT_DTYPE = frozenset("sum prod cumsum cumprod".split())
# the name torch's out= messages give an alias or composite op (its kernel's)
OUT_NAMES = {"absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
             "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
             "clip": "clamp", "column_stack": "cat", "concat": "cat", "concatenate": "cat",
             "cross": "linalg_cross", "diff": "sub", "divide": "div", "dstack": "cat",
             "fix": "trunc", "float_power": "pow", "ger": "mul", "hstack": "cat",
             "inverse": "linalg_inv_ex", "msort": "sort", "multiply": "mul",
             "nanmean": "nansum", "negative": "neg", "norm": "linalg_vector_norm",
             "outer": "mul", "qr": "linalg_qr", "slogdet": "_linalg_slogdet", "square": "pow",
             "subtract": "sub", "take_along_dim": "gather", "true_divide": "div",
             "vstack": "cat"}


_OUT_FORMS: dict = {}


def _out_policy(name):
    return ("cast" if name in OUT_CAST else "cat" if name in OUT_CAT
            else "dtype" if name in OUT_DTYPE else "exact")


def with_out(fn, name):
    """fn taking torch's out= (Note [out= arguments]): a Python function with fn's signature
    plus a keyword-only out=None."""
    policy = _out_policy(name)
    shown = OUT_NAMES.get(name, name)

    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        return _creation.op_out(shown, fn, args, kwargs, out, policy)

    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
    params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    params += [p for p in sig.parameters.values() if p.kind == p.VAR_KEYWORD]
    call.__signature__ = sig.replace(parameters=params)
    call.__name__, call.__qualname__ = fn.__name__, fn.__qualname__
    call.__module__, call.__doc__ = fn.__module__, fn.__doc__
    call._out_of = fn
    return call


def _passes_on(fn):
    """True if fn's signature is (self, *args, **kwargs)."""
    kinds = [p.kind for p in inspect.signature(fn).parameters.values()]
    return kinds[1:] == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]


def install_functions(namespace, names, tensor_first, module, python_in_torch=(),
                      c_in_torch=None):
    """Replace namespace[name] for each name by its documented wrapper. Aliases are renamed
    for the ops torch binds in C: all but `python_in_torch`, or only `c_in_torch`."""
    for name in names:
        fn = namespace[name]
        c_bound = name in c_in_torch if c_in_torch is not None else name not in python_in_torch
        if isinstance(fn, TensorFunction):
            fn = fn.__dict__.get("_out_impl", fn.__wrapped__)
        fn = getattr(fn, "_out_of", fn)
        outer = None
        if name in OUT_FUNCTIONS and "out" not in inspect.signature(fn).parameters:
            key = (fn, OUT_NAMES.get(name, name), _out_policy(name))
            outer = _OUT_FORMS.get(key)         # aliases (arccos, acos) share one
            if outer is None:
                outer = _OUT_FORMS[key] = with_out(fn, name)
        aliases = None
        if c_bound:
            # an alias of a parameter the function lacks never shadows one it has (torch's
            # cosine_similarity takes x1 and x2, not input and other)
            own = set(inspect.signature(fn).parameters)
            aliases = {k: v for k, v in ALIASES_FUNCTION.items()
                       if not (k in own and v not in own)}
        f = wrap_function(fn, name, module, name in tensor_first, aliases, like=outer)
        if outer is not None:
            f._out_impl = outer        # called for out= (Note [out= arguments])
            f.__wrapped__ = outer
        namespace[name] = f


def install_methods(cls):
    """Replace each public method defined on cls (a plain function) by its documented
    wrapper, which renames NumPy-style keywords unless torch's method is Python."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        aliases = None if name in PYTHON_IN_TORCH["method"] else ALIASES_METHOD
        like = None
        if name.endswith("_") and _passes_on(fn) and name[:-1] in vars(cls):
            like = inspect.unwrap(vars(cls)[name[:-1]])
        setattr(cls, name, wrap_function(fn, name, "cgrad", False, aliases,
                                         f"{cls.__name__}.{name}", method=True, like=like))


def adopt_functions(namespace, module):
    """Give module as __module__ to the plain Python functions the namespace re-exports under
    their own name (cgrad.tensor, cgrad.zeros, ...), so that help(module) lists them (pydoc
    lists a module's own functions) and they pickle as module.name."""
    for name, value in list(namespace.items()):
        if (not name.startswith("_") and inspect.isfunction(value)
                and value.__qualname__ == name and value.__module__.startswith(module + ".")):
            value.__module__ = module


def function_names():
    """The names of the functions installed from the op tables as cgrad.<name>."""
    from cgrad import functional
    from cgrad.ops import OP_MODULES
    names = set(functional.__all__) | {"mm"}
    for mod in OP_MODULES:
        names |= {k for k, v in mod.FUNCTIONS.items() if callable(v)}
    _FUNCTION_NAMES.update(names)
    return sorted(names)
