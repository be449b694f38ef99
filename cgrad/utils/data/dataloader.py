"""``DataLoader``: batches from a dataset, in the main process or in worker processes, with
``torch.utils.data.DataLoader``'s arguments, checks, messages and ``len()``.

Note [DataLoader workers]
~~~~~~~~~~~~~~~~~~~~~~~~~
With ``num_workers > 0`` an iterator starts that many processes (the default start method
of ``multiprocessing``, or ``multiprocessing_context``), each running
``cgrad/utils/data/_utils/worker.py``'s loop on its own copy of the dataset. The main
process keeps the sampler: it hands each batch's keys to the workers in turn, at most
``prefetch_factor`` tasks per worker ahead, and gives the results back in the sampler's
order (``in_order=False``: as they arrive). Tensors come back pickled. As in torch:

* seeds: each iterator draws ``base_seed`` (one int64 from ``generator``, else from the
  default generator) when it is created; worker ``i`` seeds cgrad and ``random`` with
  ``base_seed + i`` and NumPy's global generator with a state derived from both. A seeded
  program (``cgrad.manual_seed``) therefore loads the same batches on every run;
* an exception in a worker is raised again in the main process when its batch is due, as
  the same type with the message "Caught ValueError in DataLoader worker process 0." and
  the worker's traceback; the iterator can go on;
* a worker that dies (killed, crashed) makes the next wait for data raise
  ``RuntimeError("DataLoader worker (pid(s) ...) exited unexpectedly")``. torch notices
  at once through a SIGCHLD handler; cgrad installs no signal handler and checks the
  workers' liveness whenever it has waited ``_POLL`` seconds for data;
* ``timeout > 0`` bounds each wait ("DataLoader timed out after ... seconds");
* the workers exit when the iterator is exhausted or deleted (persistent workers: when the
  loader is), and by themselves when the main process is gone.

``pin_memory`` does nothing (there is no accelerator) and warns as torch does without one.
"""
from __future__ import annotations

import atexit
import itertools
import math
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from cgrad._warn import warn as _warn
from cgrad.utils.data._utils import collate as _collate
from cgrad.utils.data._utils import fetch as _fetch
from cgrad.utils.data._utils import worker as _worker
from cgrad.utils.data.dataset import Dataset, IterableDataset
from cgrad.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,
                                      SequentialSampler, _draw_seed)

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

T_co = TypeVar("T_co", covariant=True)

default_collate = _collate.default_collate
default_convert = _collate.default_convert
get_worker_info = _worker.get_worker_info

_REPLICA_HINT = ("For multiprocessing data-loading, this could be caused by not properly "
                 "configuring the IterableDataset replica at each worker. Please see the "
                 "documentation of cgrad.utils.data.IterableDataset for examples.")
_POLL = 0.2            # seconds of waiting for data between checks that the workers live
_exiting = [False]     # set at interpreter exit: iterators deleted then leave workers be
# id(iterator) -> its processes, queues and event, until its workers are shut down. An
# iterator often dies in a reference cycle (an exception's traceback holds its frames); the
# cycle collector would then run the queues' own finalizers (which stop their feeder
# threads) before the iterator's __del__, whose stop messages would never be sent. Held
# here, they stay reachable until the shutdown is done.
_live_workers: dict = {}


@atexit.register
def _set_exiting():
    _exiting[0] = True


class _DatasetKind:
    """The two kinds of dataset: map-style and iterable."""
    Map = _fetch.Map
    Iterable = _fetch.Iterable
    create_fetcher = staticmethod(_fetch.create_fetcher)


class _InfiniteConstantSampler(Sampler):
    """None forever: the sampler of an iterable dataset."""

    def __iter__(self):
        return itertools.repeat(None)


def _how_it_died(w):
    """The cause given for a dead worker w: torch's words for its signal or exit code."""
    code = w.exitcode
    if code is not None and code < 0:
        try:
            name = signal.strsignal(-code) or f"signal {-code}"
        except ValueError:
            name = f"signal {-code}"
        return RuntimeError(f"DataLoader worker (pid {w.pid}) is killed by signal: {name}. ")
    return RuntimeError(f"DataLoader worker (pid {w.pid}) exited unexpectedly with exit code "
                        f"{code}. Details are lost due to multiprocessing. Rerunning with "
                        "num_workers=0 may give better error trace.")


def _cpu_count():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
           "persistent_workers")


class DataLoader(Generic[T_co]):
    """Iterate over a dataset in batches.

    DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device='', in_order=True)

    The keys come from sampler (default: SequentialSampler, or RandomSampler with
    ``generator`` when shuffle), grouped by BatchSampler(sampler, batch_size, drop_last)
    unless batch_sampler is given; ``batch_size=None`` turns batching off. Each batch is
    ``collate_fn(samples)`` (default_collate; default_convert without batching). With
    ``num_workers > 0`` batches are loaded by worker processes (Note [DataLoader workers]).
    An IterableDataset is read as a stream (no sampler, no shuffle). ``len()`` is the
    number of batches (for an IterableDataset: estimated from its ``len()``).
    """

    _DataLoader__initialized = False

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler[list] | Iterable[list] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler="
                                 f"{batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)                  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called: int | None = None
        self._iterator: _BaseDataLoaderIter | None = None
        self.check_worker_number_rationality()

    # -- configuration ------------------------------------------------------------------------
    @property
    def multiprocessing_context(self) -> Any:
        """The multiprocessing context of the workers (None: multiprocessing's default)."""
        return self._mp_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context: Any) -> None:
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got num_workers="
                                 f"{self.num_workers}")
            if isinstance(context, str):
                valid = multiprocessing.get_all_start_methods()
                if context not in valid:
                    raise ValueError(f"multiprocessing_context option should specify a valid "
                                     f"start method in {valid!r}, but got "
                                     f"multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context "
                                f"object or a string specifying the start method, but got "
                                f"multiprocessing_context={context}")
        self._mp_context = context

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__initialized and attr in _FROZEN:
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    # -- iteration ----------------------------------------------------------------------------
    def _get_iterator(self) -> _BaseDataLoaderIter:
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self) -> _BaseDataLoaderIter:
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        if self._dataset_kind == _DatasetKind.Iterable:
            n = self._IterableDataset_len_called = len(self.dataset)   # type: ignore[arg-type]
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        """Warn when num_workers exceeds the CPUs this process may run on."""
        if not self.num_workers:
            return
        suggest = _cpu_count()
        if suggest is not None and self.num_workers <= suggest:
            return
        if suggest is None:
            advice = ("DataLoader is not able to compute a suggested max number of worker in "
                      "current system.")
        else:
            checked = "" if hasattr(os, "sched_getaffinity") else \
                " (`cpuset` is not taken into account)"
            advice = (f"Our suggested max number of worker in current system is {suggest}"
                      f"{checked}, which is smaller than what this DataLoader is going to "
                      "create.")
        _warn(f"This DataLoader will create {self.num_workers} worker processes in total. "
              f"{advice} Please be aware that excessive worker creation might get DataLoader "
              "running slow or even freeze, lower the worker number to avoid potential "
              "slowness/freeze if necessary.")


class _BaseDataLoaderIter:
    """One pass over a DataLoader (the single-process and multi-process iterators)."""

    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        if loader.pin_memory and loader.pin_memory_device:
            _warn(f"pin_memory_device is deprecated, the current accelerator will be used as "
                  f"the device,ignore pin_memory_device='{loader.pin_memory_device}'.")
        if loader.pin_memory:
            _warn("'pin_memory' argument is set as true but no accelerator is found, then "
                  "device pinned memory won't be used.")
        self._pin_memory = False
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter: Any = iter(self._index_sampler)
        self._base_seed = _draw_seed(loader.generator)
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self) -> Any:
        data = self._next_data()
        self._num_yielded += 1
        n = self._IterableDataset_len_called
        if n is not None and self._num_yielded > n and \
                self._dataset_kind == _DatasetKind.Iterable:
            _warn(f"Length of IterableDataset {self._dataset} was reported to be {n}(when "
                  f"accessing len(dataloader)), but {self._num_yielded} samples have been "
                  f"fetched. {_REPLICA_HINT if self._num_workers > 0 else ''}")
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Loads each batch in the main process when it is asked for."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        if self._num_workers != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires num_workers == 0")
        self._dataset_fetcher = _fetch.create_fetcher(self._dataset_kind, self._dataset,
                                                      self._auto_collation, self._collate_fn,
                                                      self._drop_last)
        self._fetch = self._dataset_fetcher.fetch

    def _next_data(self):
        return self._fetch(next(self._sampler_iter))


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loads batches in worker processes (Note [DataLoader workers])."""

    _shutdown = True          # until the workers exist: __del__ of a failed __init__

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        if self._num_workers <= 0:
            raise AssertionError("num_workers must be greater than 0 for "
                                 "MultiProcessingDataLoaderIter")
        if not self._prefetch_factor or self._prefetch_factor <= 0:
            raise AssertionError("prefetch_factor must be greater than 0 for "
                                 "MultiProcessingDataLoaderIter")
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        self._owner_pid = os.getpid()
        self._worker_init_fn = loader.worker_init_fn
        self._worker_result_queue = ctx.Queue()
        self._data_queue = self._worker_result_queue
        self._workers_done_event = ctx.Event()
        self._index_queues: list = []
        self._workers: list = []
        _live_workers[id(self)] = (self._workers, self._index_queues, self._worker_result_queue,
                                   self._workers_done_event)
        self._shutdown = False
        try:
            for i in range(self._num_workers):
                index_queue = ctx.Queue()
                index_queue.cancel_join_thread()
                w = ctx.Process(target=_worker._worker_loop, args=(
                    self._dataset_kind, self._dataset, index_queue, self._worker_result_queue,
                    self._workers_done_event, self._auto_collation, self._collate_fn,
                    self._drop_last, self._base_seed, self._worker_init_fn, i,
                    self._num_workers, self._persistent_workers))
                w.daemon = True
                w.start()
                self._index_queues.append(index_queue)
                self._workers.append(w)
        except BaseException:
            self._workers_status = [True] * len(self._workers)
            self._shutdown_workers()
            raise
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0             # the next task to send
        self._rcvd_idx = 0             # the next task to hand out
        self._task_worker: dict = {}   # task -> worker, for tasks not yet handed out
        self._early: dict = {}         # task -> data that arrived before its turn
        self._tasks_outstanding = 0    # tasks sent and not answered
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_worker._ResumeIteration())
            resumed = 0
            while resumed < self._num_workers:      # drop what the last epoch left behind
                task, _ = self._get_data()
                if isinstance(task, _worker._ResumeIteration):
                    resumed += 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    # -- receiving ----------------------------------------------------------------------------
    def _try_get_data(self, timeout):
        """(True, message) from the result queue, or (False, None) after timeout seconds;
        RuntimeError naming the workers that died."""
        try:
            return True, self._data_queue.get(timeout=timeout)
        except Exception as e:
            dead = [w for i, w in enumerate(self._workers)
                    if self._workers_status[i] and not w.is_alive()]
            for w in dead:
                self._mark_worker_as_unavailable(self._workers.index(w))
            if dead:
                pids = ", ".join(str(w.pid) for w in dead)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited "
                                   "unexpectedly") from _how_it_died(dead[0])
            if isinstance(e, queue.Empty):
                return False, None
            raise

    def _get_data(self):
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _POLL if deadline is None else max(0.0, min(_POLL,
                                                               deadline - time.monotonic()))
            ok, data = self._try_get_data(wait)
            if ok:
                return data
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_data(self):
        while True:
            # skip tasks that will not be answered (their worker's stream ran out)
            while self._rcvd_idx < self._send_idx:
                if self._rcvd_idx in self._early:
                    break
                w = self._task_worker.get(self._rcvd_idx)
                if w is not None and self._workers_status[w]:
                    break
                self._task_worker.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if self._rcvd_idx in self._early:
                return self._hand_out(self._rcvd_idx, self._early.pop(self._rcvd_idx))
            if self._shutdown or self._tasks_outstanding <= 0:
                raise AssertionError("Invalid iterator state: shutdown or no outstanding "
                                     "tasks when fetching next data")
            task, data = self._get_data()
            self._tasks_outstanding -= 1
            if self._dataset_kind == _DatasetKind.Iterable and \
                    isinstance(data, _worker._IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if task == self._rcvd_idx or not self._in_order:
                return self._hand_out(task, data)
            self._early[task] = data

    def _hand_out(self, task, data):
        w = self._task_worker.pop(task)
        if task == self._rcvd_idx:
            self._rcvd_idx += 1
        self._workers_num_tasks[w] -= 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    # -- sending ------------------------------------------------------------------------------
    def _try_put_index(self):
        max_tasks = self._prefetch_factor * self._num_workers
        if self._tasks_outstanding >= max_tasks:
            raise AssertionError("Number of outstanding tasks exceeded maximum allowed tasks")
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):        # the next worker that is still active
            w = next(self._worker_queue_idx_cycle)
            if self._workers_status[w] and (
                    self._in_order or
                    self._workers_num_tasks[w] < max_tasks // sum(self._workers_status)):
                break
        else:
            return
        self._index_queues[w].put((self._send_idx, index))
        self._task_worker[self._send_idx] = w
        self._workers_num_tasks[w] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    # -- stopping -----------------------------------------------------------------------------
    def _mark_worker_as_unavailable(self, worker_id, shutdown=False):
        """Tell worker worker_id to exit (it takes no more tasks)."""
        self._index_queues[worker_id].put(None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self):
        # not at interpreter exit, not twice, not from a forked copy of this iterator (a
        # worker of a later iterator collecting its inherited garbage)
        if _exiting[0] or self._shutdown or os.getpid() != self._owner_pid:
            return
        self._shutdown = True
        try:
            self._workers_done_event.set()
            for i in range(len(self._workers)):
                if self._persistent_workers or self._workers_status[i]:
                    self._mark_worker_as_unavailable(i, shutdown=True)
            for w in self._workers:
                w.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._worker_result_queue.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=_worker.MP_STATUS_CHECK_INTERVAL)
            _live_workers.pop(id(self), None)

    def __del__(self):
        self._shutdown_workers()
