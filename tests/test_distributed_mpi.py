"""cgrad.distributed and DistributedDataParallel across processes: each test starts an MPI
job (``mpirun --oversubscribe -n 2`` or ``-n 4``, traffic on the loopback interface only)
running a worker script of tests/mpi/, bounded by a timeout. Skipped, saying why, when
``mpirun`` or mpi4py is missing (.ci/run installs Open MPI and mpi4py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI_DIR = os.path.join(ROOT, "tests", "mpi")
TIMEOUT = 90

pytestmark = [
    pytest.mark.skipif(shutil.which("mpirun") is None,
                       reason="mpirun not found: install Open MPI (apt-get install openmpi-bin "
                              "libopenmpi-dev) to run the MPI tests"),
]


def _need_mpi4py():
    pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install mpi4py (or "
                                         "\"cgrad[distributed]\") to run the MPI tests")


def _mpirun(n, script, *args, timeout=TIMEOUT):
    _need_mpi4py()
    env = dict(os.environ)
    env.update(PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", OMPI_MCA_rmaps_base_oversubscribe="1",
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = ["mpirun", "--oversubscribe", "-n", str(n), sys.executable,
           os.path.join(MPI_DIR, script), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(res, n, what):
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    for r in range(n):
        assert f"OK {what} rank {r} of {n}" in res.stdout, out[-4000:]


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_against_numpy(n):
    _ok(_mpirun(n, "collectives.py"), n, "collectives")


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_equals_one_process(n):
    # 20 steps on equal shards == the whole batch (float64, 1e-12), no_sync, unused
    # parameters, broadcast buffers, sparse gradients, state_dict keys
    _ok(_mpirun(n, "ddp.py"), n, "ddp")


def test_a_rank_that_raises_ends_the_job():
    try:
        res = _mpirun(2, "raises.py", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the job hung after rank 1 raised")
    assert res.returncode != 0
    assert "rank 1 fails on purpose" in res.stderr
    assert "passed the barrier" not in res.stdout


def test_example_runs_under_mpirun():
    res = _mpirun(2, os.path.join(ROOT, "examples", "ddp_train.py"), "--epochs", "2")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert "final loss" in res.stdout


def test_a_collective_past_the_timeout_raises_and_ends_the_job():
    try:
        res = _mpirun(2, "timeout.py", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the job hung past init_process_group's timeout")
    assert res.returncode != 0
    assert "did not complete within the timeout (0:00:01)" in res.stderr, res.stderr[-3000:]
    assert "finished the all_reduce" not in res.stdout
