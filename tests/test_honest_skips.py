"""The end of a test run says how many tests skipped for want of torch (tests/conftest.py)."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

TESTS = '''
import pytest

def test_oracle():
    pytest.importorskip("torch")

def test_oracle_too():
    torch = pytest.importorskip("torch")
    assert torch

def test_numpy_only():
    assert 1 + 1 == 2

def test_skipped_for_another_reason():
    pytest.skip("no Graphviz")
'''


def _run(tmp_path, block_torch):
    shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "conftest.py")
    if block_torch:     # as if torch were not installed
        with open(tmp_path / "conftest.py", "a") as f:
            f.write("\nimport sys\nsys.modules['torch'] = None\n")
    (tmp_path / "test_sample.py").write_text(TESTS)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_skips_for_torch_are_counted_at_the_end(tmp_path):
    out = _run(tmp_path, block_torch=True)
    lines = out.strip().splitlines()
    assert "2 tests need torch 2.13 as an oracle and were skipped: pip install torch==2.13.0" \
        in lines
    assert "1 passed, 3 skipped" in lines[-1]


def test_no_line_when_nothing_skipped_for_torch(tmp_path):
    import pytest
    pytest.importorskip("torch")
    out = _run(tmp_path, block_torch=False)
    assert "as an oracle" not in out
