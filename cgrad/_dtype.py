"""dtypes: NumPy dtypes underneath, torch's names and defaults on top."""
from __future__ import annotations

import numpy as np

float16 = half = np.dtype("float16")
float32 = float = np.dtype("float32")
float64 = double = np.dtype("float64")
int8 = np.dtype("int8")
int16 = short = np.dtype("int16")
int32 = int = np.dtype("int32")
int64 = long = np.dtype("int64")
uint8 = np.dtype("uint8")
bool = np.dtype("bool")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

_default = [float32]


def get_default_dtype():
    """The dtype given to Python floats (float32 unless changed)."""
    return _default[0]


def set_default_dtype(d):
    """Set the dtype for Python floats: cgrad.float32 or cgrad.float64 (or float16)."""
    if d is None:
        raise TypeError("invalid dtype object: only floating-point types are supported as the "
                        "default type")
    d = np.dtype(d)
    if d.kind != "f":
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


def to_dtype(d):
    """Normalise a dtype argument (np.dtype, type, or string) to an np.dtype, or None."""
    if d is None:
        return None
    return np.dtype(d)


_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def torch_type_name(dt):
    """torch's name of a dtype in kernel error messages ('Float', 'Long', ...)."""
    return _TORCH_NAMES.get(str(dt), str(dt))


# c10's C++ names of dtypes, in torch's TensorOptions and out= dtype messages
_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def c10_name(dt):
    """torch's C++ name of a dtype in some messages ('float', 'long int', ...)."""
    return _C10_NAMES.get(str(dt), str(dt))
