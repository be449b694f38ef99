"""Every Python block of README.md runs as pasted (each on its own, in a fresh interpreter),
and prints what its comments say: a line ``print(...)  # expected`` must print ``expected``.
Shell blocks are not run."""
import os
import re
import subprocess
import sys

import pytest

import cgrad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))


def _python_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
        blocks.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return blocks


BLOCKS = _python_blocks()


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_readme_block_runs_as_pasted(tmp_path, line, code):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"README.md:{line}\n{r.stderr}"
    expected = [m.group(1).strip() for m in
                re.finditer(r"^print\(.*\)\s+#\s*(.*)$", code, re.M)]
    assert r.stdout.splitlines() == expected


def _bench_strings():
    """Every string literal of bench/*.py (docstrings and f-string parts included)."""
    import ast
    bench = os.path.join(ROOT, "bench")
    for name in sorted(os.listdir(bench)):
        if name.endswith(".py"):
            with open(os.path.join(bench, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield f"bench/{name}:{node.lineno}", node.value


def test_bench_output_speaks_of_targets_not_issue_numbers():
    """The benchmark prints targets and ratios; a reader has no issue tracker to look up."""
    bad = [(where, s[:60]) for where, s in _bench_strings()
           if re.search(r"\bissues?\b|issue-\d|\(missed\)", s, re.I)]
    assert not bad, bad


def test_bench_quick_says_it_is_a_smoke_test():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--help"],
                       env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "--quick               a smoke test, not a measurement" in r.stdout
    header = [s for _, s in _bench_strings() if "--quick: a smoke test, not a measurement" in s]
    assert len(header) >= 2         # the run's first line and the summary's heading
