"""cgrad.distributed, DistributedDataParallel and DistributedSampler without an MPI job:
the API surface against torch.distributed's, ReduceOp's names, the sampler's index lists
against torch's DistributedSampler, and the ImportError of a machine without mpi4py. The
collectives and DDP themselves run under mpirun in tests/test_distributed_mpi.py."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import cgrad
import cgrad.distributed as dist
from cgrad.nn.parallel import DistributedDataParallel
from cgrad.utils.data import DistributedSampler
from cgrad.utils.data.distributed import DistributedSampler as DistributedSampler2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FUNCS = ["init_process_group", "is_initialized", "get_rank", "get_world_size", "new_group",
         "barrier", "destroy_process_group", "all_reduce", "broadcast", "reduce",
         "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
         "gather", "scatter", "send", "recv", "isend", "irecv", "all_to_all",
         "all_gather_object", "broadcast_object_list", "get_backend", "is_available",
         "is_mpi_available"]


def test_namespaces():
    assert cgrad.distributed is dist
    assert cgrad.nn.parallel.DistributedDataParallel is DistributedDataParallel
    assert DistributedSampler is DistributedSampler2
    assert dist.is_available()
    for name in FUNCS:
        assert callable(getattr(dist, name)), name
        assert name in dist.__all__


@pytest.mark.parametrize("name", FUNCS)
def test_parameter_names_as_torch(name):
    tdist = pytest.importorskip("torch.distributed")
    ours = list(inspect.signature(getattr(dist, name)).parameters)
    theirs = list(inspect.signature(getattr(tdist, name)).parameters)
    # torch's private trailing parameters (_ranks) aside, ours are torch's, in order
    theirs = [p for p in theirs if not p.startswith("_")]
    assert ours == theirs[:len(ours)], (ours, theirs)
    assert set(theirs) - set(ours) <= {"group_desc", "_ranks"}, set(theirs) - set(ours)


def test_ddp_and_sampler_parameter_names_as_torch():
    pytest.importorskip("torch")
    from torch.nn.parallel import DistributedDataParallel as TDDP
    from torch.utils.data.distributed import DistributedSampler as TS
    ours = list(inspect.signature(DistributedDataParallel.__init__).parameters)
    theirs = list(inspect.signature(TDDP.__init__).parameters)
    assert ours == theirs[:len(ours)]
    assert list(inspect.signature(DistributedSampler.__init__).parameters) == \
        list(inspect.signature(TS.__init__).parameters)


def test_reduce_op_names_and_values_as_torch():
    tdist = pytest.importorskip("torch.distributed")
    theirs = {k: int(v) for k, v in tdist.ReduceOp.RedOpType.__members__.items()}
    ours = {k: int(v) for k, v in dist.ReduceOp.RedOpType.__members__.items()}
    assert ours == theirs
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        assert getattr(dist.ReduceOp, name) == getattr(tdist.ReduceOp, name)
        assert getattr(dist.ReduceOp, name).name == name


def test_importing_starts_no_mpi():
    # a fresh interpreter: importing cgrad and asking whether MPI is there starts no MPI
    code = ("import sys, cgrad, cgrad.distributed as dist\n"
            "dist.is_mpi_available()\n"
            "assert 'mpi4py.MPI' not in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr


def test_uninitialised_errors_as_torch():
    tdist = pytest.importorskip("torch.distributed")
    for f in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError) as ours:
            f()
        with pytest.raises(ValueError) as theirs:
            getattr(tdist, f.__name__)()
        assert str(ours.value) == str(theirs.value)
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        DistributedDataParallel(cgrad.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="has not been initialized"):
        DistributedSampler(range(4))
    with pytest.raises(ValueError, match="Invalid backend"):
        dist.init_process_group("gloo")


def test_without_mpi4py_import_works_and_init_says_what_to_install():
    # a fresh interpreter in which `import mpi4py` fails
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import cgrad, cgrad.distributed as dist\n"
            "from cgrad.nn.parallel import DistributedDataParallel\n"
            "assert dist.is_available() and not dist.is_mpi_available()\n"
            "try:\n"
            "    dist.init_process_group('mpi')\n"
            "except ImportError as e:\n"
            "    print(e)\n"
            "else:\n"
            "    raise SystemExit('no ImportError')\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    msg = res.stdout
    for text in ("mpi4py", "openmpi-bin", "libopenmpi-dev", "pip install", "cgrad[distributed]",
                 "mpirun"):
        assert text in msg, (text, msg)


def _torch_lists(n, replicas, shuffle, seed, epoch, drop_last, perm=None, monkeypatch=None):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TS
    if perm is not None:
        monkeypatch.setattr(torch, "randperm",
                            lambda k, generator=None: torch.tensor(perm, dtype=torch.int64))
    out = []
    for r in range(replicas):
        s = TS(range(n), num_replicas=replicas, rank=r, shuffle=shuffle, seed=seed,
               drop_last=drop_last)
        s.set_epoch(epoch)
        out.append((list(s), len(s), s.num_samples, s.total_size))
    return out


def _our_lists(n, replicas, shuffle, seed, epoch, drop_last):
    out = []
    for r in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle,
                               seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        out.append((list(s), len(s), s.num_samples, s.total_size))
    return out


CASES = [(n, k, d) for n in (1, 2, 5, 7, 10, 12, 13) for k in (1, 2, 3, 4, 8)
         for d in (False, True) if not (d and n < k)]


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_sampler_index_lists_as_torch_unshuffled(n, replicas, drop_last):
    assert _our_lists(n, replicas, False, 0, 0, drop_last) == \
        _torch_lists(n, replicas, False, 0, 0, drop_last)


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_sampler_index_lists_as_torch_shuffled(n, replicas, drop_last, monkeypatch):
    # the permutation is cgrad's random stream, not torch's (Note [Random streams]); given
    # the same permutation, the padding, dropping and striding are torch's
    seed, epoch = 3, 2
    g = cgrad.Generator()
    g.manual_seed(seed + epoch)
    perm = cgrad.randperm(n, generator=g).tolist()
    assert _our_lists(n, replicas, True, seed, epoch, drop_last) == \
        _torch_lists(n, replicas, True, seed, epoch, drop_last, perm, monkeypatch)


def test_sampler_epochs_and_seeds():
    a = DistributedSampler(range(50), num_replicas=2, rank=0, seed=1)
    first = list(a)
    assert list(a) == first                       # same epoch, same order
    a.set_epoch(1)
    assert list(a) != first
    b = DistributedSampler(range(50), num_replicas=2, rank=1, seed=1)
    b.set_epoch(1)
    assert sorted(list(a) + list(b)) == list(range(50))   # the ranks partition an epoch
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval "
                                         r"\[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_sampler_with_dataloader():
    data = cgrad.utils.data.TensorDataset(cgrad.arange(10))
    parts = []
    for r in range(3):
        s = DistributedSampler(data, num_replicas=3, rank=r, shuffle=False)
        loader = cgrad.utils.data.DataLoader(data, batch_size=2, sampler=s)
        parts.append(np.concatenate([b[0].numpy() for b in loader]))
    assert [p.tolist() for p in parts] == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]


@pytest.mark.parametrize("limits", [[1 << 20, 25 << 20], [64, 1000], [1, 1], [10 ** 9]])
def test_bucket_assignment_as_torch(limits):
    torch = pytest.importorskip("torch")
    tdist = pytest.importorskip("torch.distributed")
    from cgrad.nn.parallel.distributed import _assign_buckets
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(1, 12))
        sizes = rng.integers(1, 300, k)
        dts = [(torch.float64, "<f8"), (torch.float32, "<f4")]
        pick = rng.integers(0, 2, k)
        sparse = [bool(x) for x in rng.random(k) < 0.15]
        ts = [torch.zeros(int(n), dtype=dts[d][0]) for n, d in zip(sizes, pick)]
        theirs, _ = tdist._compute_bucket_assignment_by_size(ts, limits, sparse)
        ours = _assign_buckets([t.numel() * t.element_size() for t in ts],
                               [dts[d][1] for d in pick], sparse, limits)
        assert ours == [list(b) for b in theirs]
