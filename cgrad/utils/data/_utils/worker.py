"""The DataLoader's worker processes: the loop each one runs, ``get_worker_info``, and the
wrapper that carries a worker's exception (with its traceback as text) to the main process.

A worker (``_worker_loop``) seeds itself, runs ``worker_init_fn``, then answers messages
from its index queue until told to stop: ``(task, keys)`` -> ``(task, batch)`` on the shared
result queue (or ``(task, ExceptionWrapper)`` when fetching raised, or ``(task,
_IterableDatasetStopIteration)`` when its copy of an iterable dataset ran out);
``_ResumeIteration`` -> start a new epoch (persistent workers); ``None`` -> exit. It also exits
when the main process is gone (it checks every MP_STATUS_CHECK_INTERVAL seconds).

Seeds, as in torch: worker ``i`` seeds cgrad's default generator and Python's ``random`` with
``base_seed + i`` (``base_seed`` is drawn by the main process once per iterator) and NumPy's
global generator (``numpy.random.seed``) with a state derived from both; the NumPy state is
derived with NumPy's own ``SeedSequence``, so it is not the one torch derives.
"""
from __future__ import annotations

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from cgrad import _generator
from cgrad import _threads
from cgrad.utils.data._utils import fetch

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

MP_STATUS_CHECK_INTERVAL = 5.0      # seconds between a worker's checks that the parent lives


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What ``get_worker_info()`` tells a worker process: its ``id`` (0 .. num_workers - 1),
    ``num_workers``, the ``seed`` it was seeded with, and its own copy of the ``dataset``
    (``rng`` and ``worker_method`` as torch's: None and "multiprocessing")."""
    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its WorkerInfo (id, num_workers, seed, dataset);
    None in the main process."""
    return _worker_info


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    """A worker's copy of an iterable dataset is exhausted."""
    worker_id: int


@dataclass(frozen=True)
class _ResumeIteration:
    """Start a new epoch (persistent workers); the worker echoes it back."""
    seed: int | None = None


class KeyErrorMessage(str):
    """A KeyError's message printed as is (KeyError's str() would show its repr)."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker (its type and its traceback as text), re-raised in
    the main process by ``reraise()`` as "Caught <Type> <where>.\\nOriginal Traceback ..."."""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))   # no frames kept
        self.where = where

    def reraise(self):
        """Raise an exception of the original type with the worker's traceback as message
        (a RuntimeError when that type cannot be built from one string)."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exc


def _numpy_seed(base_seed, worker_id):
    """The state numpy.random.seed gets in worker worker_id: four 32-bit words."""
    return np.random.SeedSequence(base_seed, spawn_key=(worker_id,)).generate_state(4)


def _seed_worker(base_seed, worker_id):
    seed = base_seed + worker_id
    random.seed(seed)
    _generator.manual_seed(seed)
    np.random.seed(_numpy_seed(base_seed, worker_id))
    return seed


def _worker_loop(kind, dataset, index_queue, data_queue, done_event, auto_collation,
                 collate_fn, drop_last, base_seed, init_fn, worker_id, num_workers,
                 persistent_workers):
    """The body of worker process worker_id (module docstring)."""
    global _worker_info
    try:
        _threads.set_num_threads(1)
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = fetch.create_fetcher(kind, dataset, auto_collation, collate_fn,
                                           drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)   # the answer to the first task
        ended = False
        parent = os.getppid()
        while os.getppid() == parent:
            try:
                msg = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(msg, _ResumeIteration):
                data_queue.put((msg, None))
                ended = False
                fetcher = fetch.create_fetcher(kind, dataset, auto_collation, collate_fn,
                                               drop_last)
                continue
            if msg is None:
                break
            if done_event.is_set() or ended:
                continue                  # shutting down, or the stream ran out: no answer
            task, index = msg
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)                    # type: ignore[union-attr]
                except StopIteration:
                    if kind != fetch.Iterable:
                        data = ExceptionWrapper(where=where)
                    else:
                        data = _IterableDatasetStopIteration(worker_id)
                        ended = True
                except Exception:
                    data = ExceptionWrapper(where=where)
            data_queue.put((task, data))
            del data, index, msg
    except KeyboardInterrupt:
        pass                              # the main process sees the exit and reports it
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
