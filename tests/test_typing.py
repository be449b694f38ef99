"""Type information: the shipped stubs are current, honest, and useful under mypy --strict.

The stubs (cgrad/_C.pyi, _sparse.pyi, tensor.pyi, __init__.pyi) are generated from the
running package by .ci/gen_stubs.py; the mypy tests skip when mypy is not installed.
"""
import os
import subprocess
import sys

import pytest

import cgrad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "typing", "user_program.py")


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, MYPYPATH=ROOT)


def test_package_ships_its_type_information():
    pkg = os.path.join(ROOT, "cgrad")
    for name in ("py.typed", "_C.pyi", "_sparse.pyi", "_memory.pyi", "tensor.pyi", "__init__.pyi"):
        assert os.path.isfile(os.path.join(pkg, name)), name


def test_stubs_are_up_to_date():
    r = subprocess.run([sys.executable, os.path.join(ROOT, ".ci", "gen_stubs.py"), "--check"],
                       env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_stubs_name_every_installed_tensor_method_and_function():
    """What a type checker cannot see in the sources (installed from the op tables at import)
    is in the stubs."""
    from cgrad.ops import OP_MODULES
    with open(os.path.join(ROOT, "cgrad", "tensor.pyi")) as f:
        tensor_stub = f.read()
    with open(os.path.join(ROOT, "cgrad", "__init__.pyi")) as f:
        init_stub = f.read()
    for mod in OP_MODULES:
        for name in mod.TENSOR_METHODS:
            assert f"def {name}(" in tensor_stub or f" {name}: " in tensor_stub \
                or f"def {name}(self) -> Tensor" in tensor_stub, name
        for name in mod.FUNCTIONS:
            assert f"def {name}(" in init_stub or f"{name}: " in init_stub \
                or f" as {name}\n" in init_stub, name


def _mypy(tmp_path, *args):
    pytest.importorskip("mypy")
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), *args],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)


def test_user_program_passes_mypy_strict(tmp_path):
    r = _mypy(tmp_path, PROGRAM)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found in 1 source file" in r.stdout
    # and it runs
    r = subprocess.run([sys.executable, PROGRAM], env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3 2 (4, 3) True True"


def test_mypy_uses_the_stubs(tmp_path):
    """Mistakes are reported: the stubs are read (a missing or ignored stub types all as Any)."""
    bad = tmp_path / "bad.py"
    bad.write_text("\n".join([
        "import cgrad",
        "x = cgrad.ones(2, requires_grad=True)",
        "n: int = x.tanh()",                # installed method: returns Tensor
        "x.no_such_method()",
        "s: str = cgrad.softmax(x, 0)",     # installed function: returns Tensor
        "g: cgrad.Tensor = x.grad",         # Tensor | None
        "parts: list[cgrad.Tensor] = x.split(1)",   # a tuple
        "",
    ]))
    r = _mypy(tmp_path, str(bad))
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert 'bad.py:3: error: Incompatible types in assignment (expression has type "Tensor", ' \
        'variable has type "int")' in out
    assert 'bad.py:4: error: "Tensor" has no attribute "no_such_method"' in out
    assert 'bad.py:5: error: Incompatible types in assignment (expression has type "Tensor", ' \
        'variable has type "str")' in out
    assert 'bad.py:6: error: Incompatible types in assignment (expression has type ' \
        '"Tensor | None", variable has type "Tensor")' in out
    assert "bad.py:7: error: Incompatible types in assignment" in out
    assert "Found 5 errors in 1 file" in out


def test_stubs_match_the_compiled_modules(tmp_path):
    """mypy.stubtest compares the stubs with the runtime objects (signatures, kinds)."""
    pytest.importorskip("mypy.stubtest")
    args = [sys.executable, "-m", "mypy.stubtest", "--allowlist",
            os.path.join(ROOT, ".ci", "stubtest_allowlist.txt")]
    help_text = subprocess.run(args[:3] + ["--help"], capture_output=True, text=True).stdout
    if "--ignore-disjoint-bases" in help_text:    # PEP 800 markers: not written for Cython
        args.append("--ignore-disjoint-bases")
    r = subprocess.run(args + ["cgrad._C", "cgrad._sparse", "cgrad.tensor"], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
