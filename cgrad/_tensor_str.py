"""PyTorch-compatible tensor printing for cgrad.

This module formats a NumPy array exactly the way PyTorch (``torch/_tensor_str.py``,
checked against torch 2.13 CPU) prints a dense, strided CPU tensor, except that
dtypes are spelled ``cgrad.<name>`` instead of ``torch.<name>``.

It is self-contained: it depends only on NumPy and the standard library, so it can
be imported (and tested) without the rest of cgrad.

Public API
----------
``format_tensor(arr, *, default_dtype, requires_grad=False, grad_fn_name=None,
prefix="tensor(")`` returns the full repr string.

``PRINT_OPTS`` / ``set_printoptions`` / ``get_printoptions`` / ``printoptions``
mirror ``torch.set_printoptions`` and friends (precision, threshold, edgeitems,
linewidth, profile, sci_mode); the defaults are torch's defaults.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

__all__ = [
    "format_tensor",
    "PRINT_OPTS",
    "set_printoptions",
    "get_printoptions",
    "printoptions",
]


# --------------------------------------------------------------------------------------
# Print options (same names, defaults and semantics as torch)
# --------------------------------------------------------------------------------------


class _PrinterOptions:
    # A plain class rather than a dataclass, so that the module also works when it is
    # loaded by file path without being registered in sys.modules.
    __slots__ = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")

    def __init__(self):
        self.precision: int = 4
        self.threshold: float = 1000
        self.edgeitems: int = 3
        self.linewidth: int = 80
        self.sci_mode: bool | None = None

    def asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return "PrinterOptions(" + ", ".join(f"{k}={v!r}" for k, v in self.asdict().items()) + ")"


PRINT_OPTS = _PrinterOptions()


def set_printoptions(
    precision=None,
    threshold=None,
    edgeitems=None,
    linewidth=None,
    profile=None,
    sci_mode=None,
):
    """Set options for printing; same semantics as ``torch.set_printoptions``.

    Note (as in torch) that ``sci_mode`` is always reset: omitting it sets it back to
    ``None`` (automatic choice).
    """
    if profile is not None:
        if profile == "default":
            PRINT_OPTS.precision = 4
            PRINT_OPTS.threshold = 1000
            PRINT_OPTS.edgeitems = 3
            PRINT_OPTS.linewidth = 80
        elif profile == "short":
            PRINT_OPTS.precision = 2
            PRINT_OPTS.threshold = 1000
            PRINT_OPTS.edgeitems = 2
            PRINT_OPTS.linewidth = 80
        elif profile == "full":
            PRINT_OPTS.precision = 4
            PRINT_OPTS.threshold = math.inf
            PRINT_OPTS.edgeitems = 3
            PRINT_OPTS.linewidth = 80

    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Current print options as a dict usable as ``**kwargs`` to set_printoptions."""
    return PRINT_OPTS.asdict()


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager that temporarily changes the print options."""
    old_kwargs = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old_kwargs)


# --------------------------------------------------------------------------------------
# dtype helpers
# --------------------------------------------------------------------------------------


def _dtype_str(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "cgrad.bool"
    return "cgrad." + dtype.name


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in "biuf":
        raise TypeError(f"format_tensor: unsupported dtype {dtype}")


# --------------------------------------------------------------------------------------
# Element formatter (port of torch._tensor_str._Formatter)
# --------------------------------------------------------------------------------------


class _Formatter:
    """Decides int/sci mode and the common column width from (summarised) data."""

    def __init__(self, arr: np.ndarray):
        self.floating_dtype = arr.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1

        flat = arr.reshape(-1)
        precision = PRINT_OPTS.precision

        if not self.floating_dtype:
            # Python ints / bools, formatted with str() as torch does via .item().
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return

        nonzero_finite = flat[np.isfinite(flat) & (flat != 0)]
        if nonzero_finite.size == 0:
            # no valid number, do nothing
            return

        # torch computes min/max of |x| in double precision.
        nonzero_finite_abs = np.abs(nonzero_finite).astype(np.float64)
        nonzero_finite_min = float(nonzero_finite_abs.min())
        nonzero_finite_max = float(nonzero_finite_abs.max())

        self.int_mode = not bool(np.any(nonzero_finite != np.ceil(nonzero_finite)))

        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = (
                nonzero_finite_max / nonzero_finite_min > 1000.0
                or nonzero_finite_max > 1.0e8
                or nonzero_finite_min < 1.0e-4
            )
        else:
            self.sci_mode = PRINT_OPTS.sci_mode

        values = nonzero_finite.tolist()  # Python floats (exact widening to double)
        if self.sci_mode:
            fmt = f"{{:.{precision}e}}"
            extra = 0
        elif self.int_mode:
            # in int_mode for floats, all numbers are integers, and a decimal point is
            # appended to indicate floating type: add 1 to the length for it.
            fmt = "{:.0f}"
            extra = 1
        else:
            fmt = f"{{:.{precision}f}}"
            extra = 0
        width = max(len(fmt.format(v)) for v in values) + extra
        self.max_width = max(self.max_width, width)

    def width(self) -> int:
        return self.max_width

    def format(self, value) -> str:
        if self.floating_dtype:
            if self.sci_mode:
                ret = f"{{:{self.max_width}.{PRINT_OPTS.precision}e}}".format(value)
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{{:.{PRINT_OPTS.precision}f}}".format(value)
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


# --------------------------------------------------------------------------------------
# Layout (port of _vector_str / _tensor_str_with_formatter / get_summarized_data)
# --------------------------------------------------------------------------------------


def _vector_str(arr: np.ndarray, indent: int, summarize: bool, formatter: _Formatter) -> str:
    # length includes spaces and comma between elements
    element_length = formatter.width() + 2
    elements_per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))

    edgeitems = PRINT_OPTS.edgeitems
    if summarize and not edgeitems:
        data = ["..."]
    elif summarize and arr.shape[0] > 2 * edgeitems:
        data = (
            [formatter.format(v) for v in arr[:edgeitems].tolist()]
            + [" ..."]
            + [formatter.format(v) for v in arr[-edgeitems:].tolist()]
        )
    else:
        data = [formatter.format(v) for v in arr.tolist()]

    lines = [
        ", ".join(data[i : i + elements_per_line])
        for i in range(0, len(data), elements_per_line)
    ]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(
    arr: np.ndarray, indent: int, summarize: bool, formatter: _Formatter
) -> str:
    dim = arr.ndim

    if dim == 0:
        return formatter.format(arr.item())

    if dim == 1:
        return _vector_str(arr, indent, summarize, formatter)

    edgeitems = PRINT_OPTS.edgeitems
    n = arr.shape[0]
    if summarize and n > 2 * edgeitems:
        slices = (
            [
                _tensor_str_with_formatter(arr[i], indent + 1, summarize, formatter)
                for i in range(edgeitems)
            ]
            + ["..."]
            + [
                _tensor_str_with_formatter(arr[i], indent + 1, summarize, formatter)
                for i in range(n - edgeitems, n)
            ]
        )
    else:
        slices = [
            _tensor_str_with_formatter(arr[i], indent + 1, summarize, formatter)
            for i in range(n)
        ]

    tensor_str = ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices)
    return "[" + tensor_str + "]"


def _summarized_data(arr: np.ndarray) -> np.ndarray:
    """Equivalent of torch's get_summarized_data, without touching skipped elements."""
    dim = arr.ndim
    if dim == 0:
        return arr
    edgeitems = PRINT_OPTS.edgeitems
    if dim >= 2 and not edgeitems:
        return np.empty([0] * dim, dtype=arr.dtype)

    def edge_index(n: int) -> np.ndarray:
        if n > 2 * edgeitems:
            # note: with edgeitems == 0 (only reachable for 1-D) torch's
            # cat(self[:0], self[-0:]) keeps every element; so does this.
            head = np.arange(edgeitems)
            tail = np.arange(n - edgeitems, n) if edgeitems else np.arange(n)
            return np.concatenate([head, tail])
        return np.arange(n)

    return arr[np.ix_(*[edge_index(n) for n in arr.shape])]


def _tensor_str(arr: np.ndarray, indent: int) -> str:
    if arr.size == 0:
        return "[]"
    summarize = arr.size > PRINT_OPTS.threshold
    formatter = _Formatter(_summarized_data(arr) if summarize else arr)
    return _tensor_str_with_formatter(arr, indent, summarize, formatter)


def _add_suffixes(tensor_str: str, suffixes: list[str], indent: int, force_newline: bool) -> str:
    tensor_strs = [tensor_str]
    # (sic) torch's formula: +1 and rfind == -1 when there is no newline.
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        suffix_len = len(suffix)
        if force_newline or last_line_len + suffix_len + 2 > PRINT_OPTS.linewidth:
            tensor_strs.append(",\n" + " " * indent + suffix)
            last_line_len = indent + suffix_len
            force_newline = False
        else:
            tensor_strs.append(", " + suffix)
            last_line_len += suffix_len + 2
    tensor_strs.append(")")
    return "".join(tensor_strs)


# --------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------


def format_tensor(
    arr: np.ndarray,
    *,
    default_dtype: np.dtype,
    requires_grad: bool = False,
    grad_fn_name: str | None = None,
    prefix: str = "tensor(",
) -> str:
    """Return the repr of a tensor holding ``arr``, exactly as torch prints it.

    Args:
        arr: the tensor's data (bool, signed/unsigned int or float NumPy array, any
            shape including 0-d and empty shapes).
        default_dtype: cgrad's current default floating dtype (float32 normally).
            A floating array whose dtype differs from it gets a ``dtype=`` suffix.
        requires_grad: whether the tensor requires grad (leaf). Shown as
            ``requires_grad=True`` unless ``grad_fn_name`` is given.
        grad_fn_name: class name of the tensor's grad_fn, shown as ``grad_fn=<name>``.
        prefix: opening text, ``"tensor("`` by default; continuation lines are
            indented by ``len(prefix)``.
    """
    arr = np.asarray(arr)
    _check_dtype(arr.dtype)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    default_dtype = np.dtype(default_dtype)

    indent = len(prefix)
    suffixes: list[str] = []

    has_default_dtype = arr.dtype in (default_dtype, np.dtype(np.int64), np.dtype(np.bool_))

    if arr.size == 0:
        # Explicitly print the shape if it is not (0,), to match NumPy behavior
        if arr.ndim != 1:
            suffixes.append("size=" + str(tuple(int(s) for s in arr.shape)))
        # In an empty tensor there are no elements to infer the dtype from, so torch
        # shows it whenever it is not the default float dtype (even int64 / bool).
        if arr.dtype != default_dtype:
            suffixes.append("dtype=" + _dtype_str(arr.dtype))
        tensor_str = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(int(s) for s in arr.shape)))
        if not has_default_dtype:
            suffixes.append("dtype=" + _dtype_str(arr.dtype))
        tensor_str = _tensor_str(arr, indent)

    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")

    return _add_suffixes(prefix + tensor_str, suffixes, indent, force_newline=False)
