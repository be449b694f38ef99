"""The layout of cgrad.nn.functional (issue 16, "one home per concept").

cgrad/nn/functional/ is a package split by family (_activation, _linear, _loss, ...); these
tests keep it that way: functional never imports cgrad.nn.modules (the modules call functional,
not the reverse), the public names of the former single file stay, and no file grows past
1,200 lines.
"""
import ast
import os
import types

import cgrad.nn.functional as F

PKG_DIR = os.path.dirname(os.path.abspath(F.__file__))
MAX_LINES = 1200

# dir(cgrad.nn.functional) without underscore names, captured from the single-file module
# before the split (b4de3dc). Some are only there through its imports (np, numbers, Function,
# ...); they are kept so that code reaching them through F still works.
OLD_PUBLIC_DIR = [
    "Function", "Mm", "T", "TensorBase", "UnsafeView", "View", "annotations", "batch_norm",
    "bilinear", "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
    "dropout", "elu", "embedding", "gelu", "huber_loss", "l1_loss", "layer_norm", "leaky_relu",
    "linear", "log_softmax", "mask_fill", "mse_loss", "nll_loss", "np", "numbers", "one_hot",
    "pad", "relu", "relu_", "selu", "sigmoid", "silu", "smooth_l1_loss", "softmax", "softplus",
    "tanh", "torch_type_name",
]
# cgrad.nn.functional.__all__ before the split, in its order.
OLD_ALL = [
    "linear", "relu", "relu_", "leaky_relu", "elu", "selu", "gelu", "silu", "sigmoid", "tanh",
    "softplus", "softmax", "log_softmax", "dropout", "cross_entropy", "nll_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "embedding", "layer_norm", "one_hot", "pad",
    "batch_norm", "bilinear",
]
# private names that code outside the package reads from cgrad.nn.functional
OLD_PRIVATE_USED = ["_TENSOR_FIRST"]


def _package_files():
    files = []
    for root, _, names in os.walk(PKG_DIR):
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    return files


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(os.path.dirname(os.path.dirname(PKG_DIR))))
    parts = rel[:-len(".py")].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(source, module, is_package=False):
    """Every module an import statement of `source` (the text of `module`) names, anywhere:
    module level, inside functions and classes; relative imports resolved; for
    `from X import a`, both X and X.a (a may be a submodule). Also the string arguments of
    importlib.import_module and __import__."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            found.append(mod)
            found += [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call):
            fn = node.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if fname in ("import_module", "__import__"):
                found += [a.value for a in node.args
                          if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return found


def _imports_of(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return _imported_modules(source, _module_name(path), path.endswith("__init__.py"))


def _is_nn_modules(mod):
    return mod == "cgrad.nn.modules" or mod.startswith("cgrad.nn.modules.")


def test_package_files_found():
    names = {os.path.basename(p) for p in _package_files()}
    assert "__init__.py" in names and len(names) > 5, names


def test_functional_never_imports_nn_modules():
    bad = [(os.path.relpath(path, PKG_DIR), mod) for path in _package_files()
           for mod in _imports_of(path) if _is_nn_modules(mod)]
    assert bad == []


def test_import_scan_sees_local_and_relative_imports():
    """The scan above would catch the forms the old forwarders used (an import inside a
    function) and relative ones."""
    src = ("import numpy as np\n"
           "def f():\n    from cgrad.nn.modules.linear import bilinear\n"
           "def g():\n    from ..modules import normalization\n"
           "def h():\n    from .. import modules\n"
           "def i():\n    import importlib\n    importlib.import_module('cgrad.nn.modules')\n")
    mods = _imported_modules(src, "cgrad.nn.functional._probe")
    assert [m for m in mods if _is_nn_modules(m)] == [
        "cgrad.nn.modules.linear", "cgrad.nn.modules.linear.bilinear",
        "cgrad.nn.modules", "cgrad.nn.modules.normalization", "cgrad.nn.modules",
        "cgrad.nn.modules"]
    assert not any(_is_nn_modules(m) for m in _imported_modules(
        "from . import _utils\nfrom cgrad.nn import init\n", "cgrad.nn.functional._x"))


def test_old_public_names_are_still_there():
    missing = [n for n in OLD_PUBLIC_DIR + OLD_PRIVATE_USED if not hasattr(F, n)]
    assert missing == []
    assert set(OLD_PUBLIC_DIR) <= set(dir(F))


def test_all_is_unchanged():
    # the old names keep their order; new functions (conv1d, conv2d, ...) come after them
    assert list(F.__all__)[:len(OLD_ALL)] == OLD_ALL
    for name in F.__all__:
        f = getattr(F, name)
        assert callable(f) and f.__module__ == "cgrad.nn.functional", name


def test_no_public_submodule():
    """The family modules are private: torch.nn.functional is one flat namespace, and a
    public submodule named like a function (linear, dropout, embedding) would shadow it."""
    public_modules = [n for n in dir(F) if not n.startswith("_")
                      and isinstance(getattr(F, n), types.ModuleType)
                      and getattr(F, n).__name__.startswith(F.__name__ + ".")]
    assert public_modules == []


def test_no_file_over_the_limit():
    long = {}
    for path in _package_files():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            long[os.path.relpath(path, PKG_DIR)] = n
    assert long == {}


def test_each_file_says_what_it_holds():
    missing = []
    for path in _package_files():
        with open(path, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read()))
        if not (doc or "").strip():
            missing.append(os.path.relpath(path, PKG_DIR))
    assert missing == []


def test_modules_reexport_what_they_used_to_define():
    """batch_norm and bilinear moved from nn/modules to functional; the module names stay."""
    from cgrad.nn.modules import linear, normalization
    assert "bilinear" in linear.__all__ and linear.bilinear is F.bilinear.__wrapped__
    assert "batch_norm" in normalization.__all__
    assert normalization.batch_norm is F.batch_norm.__wrapped__
