"""The message for an ``import cgrad`` whose compiled extension (cgrad._C) does not load.

The common case is the import trap: after ``pip install .`` in a clone, ``python`` started
in the clone's root imports the source folder ``./cgrad`` (sys.path[0] is the current
directory), whose extension was built into the installed copy, not in place. Telling that
user to run ``pip install .`` again would send them round in circles, so this module looks
for another cgrad with a built extension (on sys.path, or behind an import hook such as an
editable install's finder) and, if there is one, says which copy is being imported and how
to get the other. Imports nothing from cgrad: it runs while cgrad is half imported.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys

__all__ = ["message"]


def _real(path):
    return os.path.normcase(os.path.realpath(path))


def _has_built_extension(pkg_dir):
    """True if the folder holds a compiled ``_C`` module for this interpreter."""
    try:
        names = os.listdir(pkg_dir)
    except OSError:
        return False
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return any(name.startswith("_C.") and name[2:] in suffixes for name in names)


def _other_built_copies(here):
    """Folders of other cgrad packages, with a built extension, that Python could import:
    the sys.path entries first (a regular install), then the import hooks (``pip install -e``
    elsewhere registers a finder on sys.meta_path)."""
    found = []

    def add(pkg_dir):
        if (os.path.isfile(os.path.join(pkg_dir, "__init__.py")) and _real(pkg_dir) != here
                and _has_built_extension(pkg_dir)
                and _real(pkg_dir) not in map(_real, found)):
            found.append(os.path.abspath(pkg_dir))

    for entry in sys.path:
        if isinstance(entry, str):
            add(os.path.join(entry or os.curdir, "cgrad"))
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec("cgrad", None)
        except Exception:    # a third-party hook that fails on us says nothing about cgrad
            continue
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            add(loc)
    return found


def message(error, package_dir):
    """The ImportError text for a failed ``from cgrad import _C`` in ``package_dir``."""
    here = _real(package_dir)
    if _has_built_extension(here):     # built, but does not load: the loader's error says why
        return (
            f"cgrad's compiled extension (cgrad._C) in {here} failed to load ({error}). "
            "Rebuild it with `pip install .` (or `pip install -e .` for development) from the "
            "project's root; it needs a C compiler, Cython>=3 and NumPy's headers. cgrad has "
            "no pure-Python engine.")
    # not built: Python's own error ("partially initialized module ... circular import")
    # would mislead, so it is not repeated
    others = _other_built_copies(here)
    if others:
        root = os.path.dirname(here)
        is_source = any(os.path.isfile(os.path.join(root, f))
                        for f in ("pyproject.toml", "setup.py"))
        what = "the source tree" if is_source else "a copy of cgrad"
        if root == _real(os.getcwd()):
            where = f"{what} in the current directory ({root})"
        else:
            where = f"{what} in {root}"
        return (
            f"cannot import cgrad: you are importing {where}, whose compiled extension "
            f"(cgrad._C) is not built, while an installed cgrad with its extension is at "
            f"{others[0]}. Python imports the folder `cgrad` of the current directory (or of "
            f"PYTHONPATH) before installed packages: run from another directory, or use "
            f"`pip install -e .` in the source tree so that it is the installed copy.")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return (
        f"cgrad's compiled extension (cgrad._C) is not built: there is no _C{suffix} in "
        f"{here}. Build it with `pip install .` (or `pip install -e .` for development) from "
        "the project's root; it needs a C compiler, Cython>=3 and NumPy's headers. cgrad has "
        "no pure-Python engine.")
