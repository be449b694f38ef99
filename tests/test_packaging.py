"""Packaging: the compiled extension is required and its absence is explained."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cgrad


def test_import_without_extension_says_how_to_build(tmp_path):
    src = os.path.dirname(cgrad.__file__)
    dst = tmp_path / "cgrad"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-S", "-c", "import cgrad"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "pip install ." in r.stderr
    assert "no pure-Python engine" in r.stderr


def _fake_clone_and_install(tmp_path):
    """A source tree without a built extension (``src``: pyproject.toml + cgrad/ without
    the .so, as a fresh clone after `pip install .`) and an installed copy with it
    (``site/cgrad``), as pip would leave them."""
    pkg = os.path.dirname(cgrad.__file__)
    src, site = tmp_path / "src", tmp_path / "site"
    shutil.copytree(pkg, src / "cgrad",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    (src / "pyproject.toml").write_text("[project]\nname = 'cgrad'\n")
    shutil.copytree(pkg, site / "cgrad", ignore=shutil.ignore_patterns("*.c", "__pycache__"))
    return src, site


def _isolated(site):
    """Command prefix and environment for a Python that sees `site` and NumPy/SciPy but no
    other cgrad: -S skips site-packages' .pth files, where an editable install of cgrad
    registers a finder that would resolve cgrad._C from its own tree."""
    import numpy
    import scipy
    deps = {os.path.dirname(os.path.dirname(m.__file__)) for m in (numpy, scipy)}
    return [sys.executable, "-S"], dict(os.environ,
                                        PYTHONPATH=os.pathsep.join([str(site), *deps]))


def test_import_trap_source_tree_shadows_installed_copy(tmp_path):
    src, site = _fake_clone_and_install(tmp_path)
    python, env = _isolated(site)
    # from the clone's root, as a user does right after `pip install .`
    r = subprocess.run([*python, "-c", "import cgrad"], cwd=src, env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith("ImportError: cannot import cgrad: you are importing the source "
                          "tree in the current directory")
    assert str(site / "cgrad") in err
    assert "run from another directory, or use `pip install -e .`" in err
    assert "Build it with `pip install .`" not in err
    # and the advice is right: from another directory the installed copy imports and works
    r = subprocess.run([*python, "-c",
                        "import cgrad; x = cgrad.ones(2, requires_grad=True); "
                        "(x * 3).sum().backward(); print(cgrad.__file__); print(x.grad)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(site / "cgrad" / "__init__.py"), "tensor([3., 3.])"]


def test_import_trap_with_source_tree_elsewhere_and_editable_finder(tmp_path):
    """The other copy is found behind an import hook too (what `pip install -e` of another
    clone registers on sys.meta_path), and a source tree that is not the current directory
    is named by its path."""
    src, site = _fake_clone_and_install(tmp_path)
    code = (
        "import importlib.util, sys\n"
        "class Finder:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name != 'cgrad':\n"
        "            return None\n"
        f"        init = {str(site / 'cgrad' / '__init__.py')!r}\n"
        "        return importlib.util.spec_from_file_location(\n"
        "            name, init, submodule_search_locations=[init.rsplit('/', 1)[0]])\n"
        "sys.meta_path.append(Finder())\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "import cgrad\n")
    python, env = _isolated(tmp_path / "nothing")
    r = subprocess.run([*python, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()[-1]
    assert f"you are importing the source tree in {src}," in err
    assert str(site / "cgrad") in err
    assert "`pip install -e .`" in err


def test_import_with_a_broken_extension_names_the_loader_error(tmp_path):
    import importlib.machinery
    src, _ = _fake_clone_and_install(tmp_path)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (src / "cgrad" / f"_C{suffix}").write_bytes(b"not a shared object")
    python, env = _isolated(tmp_path / "nothing")
    r = subprocess.run([*python, "-c", "import cgrad"], cwd=src, env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()[-1]
    assert "(cgrad._C) in" in err and "failed to load" in err
    assert "Rebuild it with `pip install .`" in err


def test_engine_is_compiled():
    assert cgrad._C.__file__.endswith((".so", ".pyd"))


def test_example_runs():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "custom_function.py")],
                       capture_output=True, text=True, check=True)
    assert r.stdout.splitlines() == [
        "None", "None", "Input gradient: tensor([2.])",
        "tensor([2.], grad_fn=<MyFunctionBackward>)"]


def test_import_does_not_load_scipy_sparse():
    """scipy.sparse is about half of `import cgrad`: it is imported on first sparse use, and
    everything sparse works from there (products, gradients, scipy conversions)."""
    code = "\n".join([
        "import sys",
        "import numpy as np",
        "import cgrad",
        "assert 'scipy.sparse' not in sys.modules, sorted(m for m in sys.modules if 'scipy' in m)",
        "x = cgrad.ones(3, requires_grad=True)",
        "(x * 2).sum().backward()",
        "assert 'scipy.sparse' not in sys.modules",
        "i = cgrad.tensor([[0, 1, 2], [2, 0, 1]])",
        "v = cgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)",
        "h = cgrad.arange(6.0).reshape(3, 2).requires_grad_()",
        "a = cgrad.sparse_coo_tensor(i, v, (3, 3))",
        "(a @ h).sum().backward()",
        "print(v.grad.tolist(), h.grad.tolist())",
        "out = cgrad.spmm(i, v.detach(), (3, 3), h.detach())",
        "print(out.tolist())",
        "m = a.detach().to_scipy()",
        "print(type(m).__module__.split('.')[:2], m.toarray().tolist())",
        "print(cgrad.sparse.from_scipy(m).to_dense().tolist())",
    ])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    dense = np.zeros((3, 3))
    dense[[0, 1, 2], [2, 0, 1]] = [1.0, 2.0, 3.0]
    h = np.arange(6.0).reshape(3, 2)
    assert r.stdout.splitlines() == [
        f"{[float(h[c].sum()) for c in [2, 0, 1]]} {dense.sum(0)[:, None].repeat(2, 1).tolist()}",
        str((dense @ h).tolist()),
        f"['scipy', 'sparse'] {dense.tolist()}",
        str(dense.tolist()),
    ]


def _ext_options(monkeypatch, **env):
    """setup.py's get_ext_options() under the given switches (read from setup.py's source:
    importing setup.py would run setup())."""
    import ast
    root = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))
    with open(os.path.join(root, "setup.py")) as f:
        tree = ast.parse(f.read())
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name in ("_flag", "get_ext_options")]
    ns = {"os": os, "sys": sys, "numpy": np}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "setup.py", "exec"), ns)
    for name in ("CGRAD_DEBUG", "CGRAD_SANITIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    opts, _ = ns["get_ext_options"]()
    return opts["extra_compile_args"], opts["extra_link_args"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="-s is the GNU linker's")
def test_release_build_has_no_debug_information(monkeypatch):
    compile_args, link_args = _ext_options(monkeypatch)
    assert compile_args[-1] != "-g" and "-g0" in compile_args and "-s" in link_args
    # and the switches keep it (-g wins over Python's CFLAGS only if it comes last)
    compile_args, link_args = _ext_options(monkeypatch, CGRAD_DEBUG="1")
    assert "-g" in compile_args and "-g0" not in compile_args and "-s" not in link_args
    compile_args, link_args = _ext_options(monkeypatch, CGRAD_SANITIZE="1")
    assert "-g" in compile_args and "-g0" not in compile_args and "-s" not in link_args
