"""Packaging: the compiled extension is required and its absence is explained."""
import os
import shutil
import subprocess
import sys

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


def test_engine_is_compiled():
    assert cgrad._C.__file__.endswith((".so", ".pyd"))


def test_example_runs():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "custom_function.py")],
                       capture_output=True, text=True, check=True)
    assert r.stdout.splitlines() == [
        "None", "None", "Input gradient: tensor([2.])",
        "tensor([2.], grad_fn=<MyFunctionBackward>)"]
