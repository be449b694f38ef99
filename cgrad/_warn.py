"""cgrad's one way to warn: at the user's line.

A fixed ``stacklevel`` is right for one call path only: the same warning is reached from
``cgrad.softmax``, ``F.softmax`` and ``nn.Softmax``, from a Tensor method or an operator,
from Cython (which adds no Python frame) or from Python, at different depths. ``warn`` walks
out of cgrad's own frames and blames the first frame outside the package, which is the
line the user wrote (their script, test, or their own Function's ``backward``), including a
call at module level, where a stacklevel one too high blames ``sys:1``.

Every warning cgrad emits goes through here; tests/test_warnings.py triggers each one and
checks the file and line it names, and fails on a ``warnings.warn`` anywhere else in cgrad.
"""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message, category=UserWarning, skip=0):
    """``warnings.warn(message, category)`` attributed to the innermost frame outside cgrad,
    or ``skip`` frames further out (torch's ``_stacklevel`` arguments above their default)."""
    level = 2                   # stacklevel 2: the caller of this function
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + skip)
