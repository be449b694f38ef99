"""Anomaly detection (torch.autograd.anomaly_mode): NaN checks on every backward's results
and the forward traceback of the node whose backward failed.

Process-wide, as torch's. When off, the engine pays one C flag test per node.
"""
from __future__ import annotations

import functools

from cgrad._warn import warn as _warn
from cgrad import _C

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled():
    return _C._anomaly_state()[0]


def is_anomaly_check_nan_enabled():
    return _C._anomaly_state()[1]


class detect_anomaly:
    """Context manager and decorator enabling anomaly detection for the autograd engine.

    In forward, each recorded node keeps the traceback of the call that created it; in
    backward, an error raised by a node's backward is preceded by a warning showing that
    traceback, and (check_nan=True) a NaN in any gradient a backward returns raises
    ``RuntimeError: Function 'XBackward0' returned nan values in its 0th output.``
    """

    def __init__(self, check_nan=True):
        self.prev, self.prev_check_nan = _C._anomaly_state()
        self.check_nan = check_nan
        _warn("Anomaly Detection has been enabled. This mode will increase the "
              "runtime and should only be enabled for debugging.")

    def __enter__(self):
        _C._set_anomaly(True, self.check_nan)

    def __exit__(self, *args):
        _C._set_anomaly(self.prev, self.prev_check_nan)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off; usable as a function or a context manager."""

    def __init__(self, mode, check_nan=True):
        for name, v in (("enabled", mode), ("check_nan", check_nan)):
            if not isinstance(v, bool):
                raise TypeError(f"set_anomaly_enabled(): argument '{name}' (position "
                                f"{1 if name == 'enabled' else 2}) must be bool, not "
                                f"{type(v).__name__}")
        self.prev, self.prev_check_nan = _C._anomaly_state()
        _C._set_anomaly(bool(mode), bool(check_nan))

    def __enter__(self):
        pass

    def __exit__(self, *args):
        _C._set_anomaly(self.prev, self.prev_check_nan)
