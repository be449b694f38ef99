"""cgrad.utils.data.DataLoader with worker processes (num_workers > 0).

Few and fast (two workers at most, the default start method but for one spawn test): batches
come back in the sampler's order and equal the single-process ones, workers are seeded from
the iterator's base seed, get_worker_info and worker_init_fn work, an exception in a worker
is raised again in the main process naming the worker, a killed worker is reported, timeouts
apply, persistent workers survive epochs, and the workers exit when the iterator is
exhausted or deleted.
"""
from __future__ import annotations

import gc
import math
import os
import random
import signal
import time

import numpy as np
import pytest

import cgrad
from cgrad.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset,
                              get_worker_info)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                   # a zombie child of ours counts as exited
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _wait_gone(pids, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


class Rows(Dataset):
    """Item i: a float32 row of i's, the index, and the worker that loaded it."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return cgrad.full((3,), float(i)), i, -1 if info is None else info.id


def test_batches_in_sampler_order_equal_single_process():
    ds = Rows(23)
    cgrad.manual_seed(9)
    single = [(x.tolist(), i.tolist()) for x, i, _ in DataLoader(ds, batch_size=4,
                                                                 shuffle=True)]
    cgrad.manual_seed(9)
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)
    assert len(loader) == 6
    multi = list(loader)
    assert [(x.tolist(), i.tolist()) for x, i, _ in multi] == single
    assert [w.tolist() for _, _, w in multi] == [[0] * 4, [1] * 4] * 2 + [[0] * 4, [1] * 3]
    x, i, _ = multi[0]
    assert x.dtype == cgrad.float32 and i.dtype == cgrad.int64 and not x.requires_grad


class Seeds(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, info.num_workers, info.seed, random.random(), float(np.random.rand()),
                cgrad.rand(1).item(), cgrad.initial_seed(), type(info.dataset).__name__)


def _init(worker_id):
    info = get_worker_info()
    assert info.id == worker_id
    info.dataset.init_ids = getattr(info.dataset, "init_ids", ()) + (worker_id,)


def test_worker_seeds_info_and_init_fn():
    assert get_worker_info() is None
    cgrad.manual_seed(21)
    rows = list(DataLoader(Seeds(), batch_size=None, num_workers=2, worker_init_fn=_init))
    cgrad.manual_seed(21)
    base = cgrad.empty((), dtype=cgrad.int64).random_().item()
    assert [r[:3] for r in rows] == [[0, 2, base], [1, 2, base + 1]] * 2   # tuples: lists
    assert [r[6] for r in rows] == [base, base + 1] * 2        # cgrad seeded in the worker
    assert rows[0][7] == "Seeds"
    assert len({r[3] for r in rows}) == 4 and len({r[4] for r in rows}) == 4
    random.seed(base)                                          # Python's random: base + id
    assert rows[0][3] == random.random()
    cgrad.manual_seed(base + 1)
    assert rows[1][5] == cgrad.rand(1).item()
    cgrad.manual_seed(21)                                      # the same seed, the same draws
    assert list(DataLoader(Seeds(), batch_size=None, num_workers=2,
                           worker_init_fn=_init)) == rows


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 4:
            raise ValueError(f"bad sample {i}")
        if i == 6:
            raise KeyError("missing")
        return i


def test_worker_exception_is_reraised_naming_the_worker():
    it = iter(DataLoader(Failing(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError) as e:
        next(it)
    msg = str(e.value)
    assert msg.startswith("Caught ValueError in DataLoader worker process 0.\n"
                          "Original Traceback (most recent call last):\n")
    assert "ValueError: bad sample 4" in msg and "__getitem__" in msg
    with pytest.raises(KeyError) as e:
        next(it)
    assert str(e.value).startswith("Caught KeyError in DataLoader worker process 1.\n")
    assert "KeyError: 'missing'" in str(e.value)
    with pytest.raises(StopIteration):
        next(it)


class TwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


@pytest.mark.parametrize("exc", [lambda: ValueError("bad sample 4"), lambda: KeyError("missing"),
                                 lambda: TwoArgs(1, 2), StopIteration],
                         ids=["ValueError", "KeyError", "TwoArgs", "StopIteration"])
def test_exception_wrapper_like_torch(exc):
    """The message and type a worker's exception is raised again with, as torch's
    ExceptionWrapper (used here directly: no worker processes needed)."""
    torch = pytest.importorskip("torch")
    from cgrad.utils.data._utils.worker import ExceptionWrapper
    outs = []
    for wrapper in (ExceptionWrapper, torch._utils.ExceptionWrapper):
        try:
            raise exc
        except Exception:
            wrapped = wrapper(where="in DataLoader worker process 3")
        with pytest.raises(Exception) as e:
            wrapped.reraise()
        outs.append((type(e.value), str(e.value)))
    assert outs[0] == outs[1]


def _bad_init(worker_id):
    if worker_id == 1:
        raise RuntimeError("init failed")


def test_worker_init_fn_error_is_reraised_and_a_dropped_iterator_stops_its_workers():
    it = iter(DataLoader(list(range(4)), num_workers=2, worker_init_fn=_bad_init))
    pids = [w.pid for w in it._workers]
    with pytest.raises(RuntimeError, match="Caught RuntimeError in DataLoader worker "
                                           "process 1.(.|\n)*init failed"):
        list(it)
    del it                       # the exception's traceback holds it in a reference cycle
    start = time.monotonic()
    gc.collect()
    assert _wait_gone(pids) and time.monotonic() - start < 3


class Killer(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


def test_killed_worker_is_reported():
    it = iter(DataLoader(Killer(), num_workers=2))
    pids = [w.pid for w in it._workers]
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) (\d+)\) exited "
                                           r"unexpectedly") as e:
        for _ in range(6):
            next(it)
    assert int(e.value.args[0].split("pid(s) ")[1].split(")")[0]) == pids[1]
    assert "is killed by signal" in str(e.value.__cause__)
    del it, e
    gc.collect()
    assert _wait_gone(pids)


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(0.6)
        return i


def test_timeout():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0.2 seconds$"):
        list(DataLoader(Slow(), num_workers=1, timeout=0.2))
    assert time.monotonic() - start < 5


class Shards(IterableDataset):
    """range(10), split between the workers by get_worker_info."""

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(10))
        per = math.ceil(10 / info.num_workers)
        return iter(range(info.id * per, min(10, (info.id + 1) * per)))

    def __len__(self):
        return 10


def test_iterable_dataset_with_workers():
    expected = [[0, 1], [5, 6], [2, 3], [7, 8], [4], [9]]
    got = [b.tolist() for b in DataLoader(Shards(), batch_size=2, num_workers=2)]
    assert got == expected
    assert [b.tolist() for b in DataLoader(Shards(), batch_size=2, num_workers=2,
                                           drop_last=True)] == expected[:4]
    torch = pytest.importorskip("torch")

    class TorchShards(torch.utils.data.IterableDataset):
        __iter__ = Shards.__iter__
        __len__ = Shards.__len__

    def shard(self):
        info = torch.utils.data.get_worker_info()
        per = math.ceil(10 / info.num_workers)
        return iter(range(info.id * per, min(10, (info.id + 1) * per)))

    TorchShards.__iter__ = shard
    assert [b.tolist() for b in torch.utils.data.DataLoader(
        TorchShards(), batch_size=2, num_workers=2)] == expected


def test_persistent_workers_survive_epochs():
    loader = DataLoader(Rows(7), batch_size=3, num_workers=2, persistent_workers=True)
    first = [i.tolist() for _, i, _ in loader]
    it = loader._iterator
    pids = [w.pid for w in it._workers]
    assert first == [[0, 1, 2], [3, 4, 5], [6]] and all(_alive(p) for p in pids)
    partial = iter(loader)
    next(partial)                                   # leave an epoch half way
    assert [i.tolist() for _, i, _ in loader] == first
    assert loader._iterator is it and [w.pid for w in it._workers] == pids
    stream = DataLoader(Shards(), batch_size=4, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream] == \
        [[0, 1, 2, 3], [5, 6, 7, 8], [4], [9]]
    del loader, it, partial, stream
    gc.collect()
    assert _wait_gone(pids)


def test_workers_exit_when_exhausted_or_deleted():
    it = iter(DataLoader(Rows(6), batch_size=2, num_workers=2))
    pids = [w.pid for w in it._workers]
    assert all(_alive(p) for p in pids)
    assert len(list(it)) == 3
    assert _wait_gone(pids)
    it = iter(DataLoader(Rows(50), batch_size=1, num_workers=2, prefetch_factor=3))
    next(it)
    pids = [w.pid for w in it._workers]
    del it
    gc.collect()
    assert _wait_gone(pids)


def test_out_of_order_and_training_with_workers():
    class Uneven(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            time.sleep(0.3 if i < 2 else 0.0)
            return i

    got = [b.tolist() for b in DataLoader(Uneven(), batch_size=2, num_workers=2,
                                          in_order=False)]
    assert sorted(got) == [[0, 1], [2, 3], [4, 5]]
    g = cgrad.Generator().manual_seed(1)
    x = cgrad.randn(64, 3, generator=g)
    y = x.sum(1, keepdim=True)
    model = cgrad.nn.Linear(3, 1)
    opt = cgrad.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=2,
                        generator=g, persistent_workers=True)
    for _ in range(15):
        for xb, yb in loader:
            opt.zero_grad()
            loss = cgrad.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
    assert loss.item() < 1e-2


class Picklable(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return {"x": cgrad.ones(2) * i, "worker": get_worker_info().id}


def test_spawn_start_method():
    """Workers that import cgrad afresh and receive the dataset pickled."""
    old = os.environ.get("PYTHONPATH")
    root = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))
    os.environ["PYTHONPATH"] = root + (os.pathsep + old if old else "")
    try:
        out = list(DataLoader(Picklable(), batch_size=2, num_workers=1,
                              multiprocessing_context="spawn"))
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    assert [b["x"].tolist() for b in out] == [[[0.0, 0.0], [1.0, 1.0]], [[2.0, 2.0]]]
    assert [b["worker"].tolist() for b in out] == [[0, 0], [0]]
