"""DistributedDataParallel: torch.nn.parallel.DistributedDataParallel on cgrad.distributed.

Note [DDP buckets and hooks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As torch's reducer: at construction the parameters (and buffers) of rank 0 are broadcast to
every rank, and the parameters that require grad are cut into buckets in the reverse order
of registration (roughly the order backward produces their gradients), one dtype per
bucket, the first bucket capped at 1 MiB and the others at ``bucket_cap_mb`` (25 MiB by
default), by torch's ``_compute_bucket_assignment_by_size`` (``_assign_buckets``). These
are the buckets torch rebuilds after its first iteration when the gradients come in reverse
registration order; torch also starts with one bucket for the first iteration and then
rebuilds from the order it saw, which cgrad does not (the buckets stay as built). The parameters of an ``Embedding``/``EmbeddingBag`` with ``sparse=True`` have a
bucket each: their sparse gradients are all-gathered (indices and values), not densified.

Each parameter has a post-accumulate-grad hook (``Tensor.register_post_accumulate_grad_hook``)
that marks it ready. When every parameter of the next bucket in order is ready, the bucket's
gradients are copied into one flat buffer and its non-blocking all-reduce (``Iallreduce``)
starts, while backward goes on with the rest of the graph. Buckets start strictly in bucket
order on every rank, because MPI matches the collectives of a communicator by their order.
Open MPI progresses a non-blocking collective only inside MPI calls, and backward spends
most of its time in NumPy/BLAS, outside any: each hook tests the outstanding requests (a
cheap ``Testall``), and while a reduction is in flight a daemon thread calls ``Iprobe``
every 0.1 ms (``CGRAD_DDP_PROGRESS_INTERVAL``; ``CGRAD_DDP_PROGRESS=0`` turns it off; only
with MPI_THREAD_MULTIPLE, mpi4py's default) so the all-reduce advances while the main thread
computes outside the GIL. bench/ddp.py measures what each hides.

End of backward: cgrad's engine has no ``queue_callback`` (torch's hook for "backward is
over"), so the reduction is finished by the hook that makes the last bucket ready: it waits
for every bucket, divides by the world size (the sum, then the division: ``ReduceOp.AVG``),
and copies each slice back into its parameter's ``.grad`` in place. That hook is the
last accumulation into a parameter of this module; what backward does after it (gradients of
inputs) is not waited on. A backward in which some parameter gets no gradient therefore never
finishes its reduction: the next forward raises torch's "Expected to have finished
reduction in the prior iteration" error, unless ``find_unused_parameters=True``, where
forward walks the output's graph, marks the parameters it does not reach as ready at once
(zeros in their bucket) and all-reduces a used-map, so that a parameter unused on every
rank keeps its ``.grad`` untouched (None) and one used elsewhere gets the average.

``no_sync()``: forward and backward inside it do no communication (gradients accumulate
locally); the first backward outside it all-reduces the accumulated gradients.
``broadcast_buffers=True`` broadcasts rank 0's buffers before each forward (BatchNorm's
running statistics).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref

import numpy as np

from cgrad import _C
from cgrad import sparse as _sparse
from cgrad.distributed import distributed_c10d as _c10d
from cgrad.nn.modules.module import Module
from cgrad.nn.modules.sparse import Embedding, EmbeddingBag
from cgrad.tensor import Tensor

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024
_NOT_FINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `cgrad.nn.parallel.DistributedDataParallel`, and by "
    "making sure all `forward` function outputs participate in calculating loss.")


def _broadcast_coalesced(arrays, src, group):
    """Broadcast a list of NumPy arrays from src, one flat message per dtype, in place."""
    by_dtype = {}
    for a in arrays:
        by_dtype.setdefault(a.dtype.str, []).append(a)
    for key in sorted(by_dtype):
        group_arrays = by_dtype[key]
        flat = np.concatenate([a.reshape(-1) for a in group_arrays])
        group._comm.Bcast(flat, root=src)
        off = 0
        for a in group_arrays:
            a[...] = flat[off:off + a.size].reshape(a.shape)
            off += a.size


class _Progress:
    """A daemon thread that drives MPI's progress engine (an ``Iprobe`` that matches nothing)
    while a reduction is in flight, so non-blocking all-reduces advance while the main
    thread computes (in NumPy/BLAS, outside the GIL). Needs MPI_THREAD_MULTIPLE."""

    def __init__(self, comm, interval):
        self._comm = comm
        self._interval = interval
        self._active = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="cgrad-ddp-progress")
        self._thread.start()

    def _run(self):
        from mpi4py import MPI
        comm, tag = self._comm, 32767
        while not self._stop:
            self._active.wait()
            while self._active.is_set() and not self._stop:
                comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag)
                time.sleep(self._interval)

    def start(self):
        self._active.set()

    def pause(self):
        self._active.clear()

    def close(self):
        self._stop = True
        self._active.set()


def _progress_thread(group):
    """The progress thread of DDP (CGRAD_DDP_PROGRESS=0 turns it off), or None."""
    if os.environ.get("CGRAD_DDP_PROGRESS", "1") == "0" or group.size() == 1:
        return None
    from mpi4py import MPI
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        return None
    return _Progress(group._comm, float(os.environ.get("CGRAD_DDP_PROGRESS_INTERVAL", "1e-4")))


class _Bucket:
    """Parameters reduced together: dense (one flat all-reduce) or one sparse parameter."""

    def __init__(self, index, params, sparse):
        self.index = index
        self.params = params            # [(param index, Parameter)]
        self.sparse = sparse
        self.pending = len(params)
        self.work = None
        self.flat = None

    def reset(self):
        self.pending = len(self.params)
        self.work = None
        self.flat = None

    def launch(self, group, unused):
        """Start this bucket's non-blocking reduction."""
        comm = group._comm
        if self.sparse:
            (i, p), = self.params
            g = p.grad
            if g is None or i in unused:
                ind = np.zeros((p.dim(), 0), np.int64)
                val = np.zeros((0,), p._data.dtype)
            else:
                g = g.coalesce() if g.is_sparse else _sparse.to_sparse(g)
                ind = np.ascontiguousarray(g._indices()._data, np.int64)
                val = np.ascontiguousarray(g._values()._data)
            meta = comm.allgather((ind.shape[0], ind.shape[1], val.shape[1:]))
            nnz = np.array([m[1] for m in meta], np.int64)
            ndim = max(m[0] for m in meta)
            dense_tail = next((m[2] for m in meta if m[1] > 0), val.shape[1:])
            if ind.shape[1] == 0:
                ind = np.zeros((ndim, 0), np.int64)
                val = np.zeros((0,) + tuple(dense_tail), val.dtype)
            row = int(np.prod(dense_tail)) if dense_tail else 1
            all_ind = np.empty((ndim, int(nnz.sum())), np.int64)
            all_val = np.empty((int(nnz.sum()),) + tuple(dense_tail), val.dtype)
            reqs = []
            for d in range(ind.shape[0]):
                reqs.append(comm.Iallgatherv(np.ascontiguousarray(ind[d]),
                                             [all_ind[d], (nnz, None)]))
            reqs.append(comm.Iallgatherv(val.reshape(-1), [all_val.reshape(-1),
                                                           (nnz * row, None)]))
            self.flat = (all_ind, all_val)
            self.work = _c10d.Work(reqs)
            return
        parts = []
        for i, p in self.params:
            g = p.grad
            if g is None or i in unused:
                parts.append(np.zeros(p._data.size, p._data.dtype))
            elif g.is_sparse:
                raise RuntimeError(
                    f"DistributedDataParallel: parameter {i} received a sparse gradient, but "
                    f"only the weights of Embedding/EmbeddingBag(sparse=True) are reduced as "
                    f"sparse (all-gathered); the others are all-reduced dense")
            else:
                parts.append(g._data.reshape(-1))
        self.flat = np.concatenate(parts)
        from mpi4py import MPI
        self.work = _c10d.Work([comm.Iallreduce(MPI.IN_PLACE, self.flat, op=MPI.SUM)])

    def finish(self, n, global_unused):
        """Wait for the reduction, average and write the gradients back."""
        self.work.wait()
        if self.sparse:
            (i, p), = self.params
            if i in global_unused:
                return
            ind, val = self.flat
            val = val / val.dtype.type(n)
            g = _sparse.sparse_coo_tensor(ind, val, tuple(p.shape)).coalesce()
            p.grad = g
            return
        flat = self.flat
        np.divide(flat, flat.dtype.type(n), out=flat)
        off = 0
        for i, p in self.params:
            k = p._data.size
            if i not in global_unused:
                piece = flat[off:off + k].reshape(p._data.shape)
                if p.grad is None:
                    p.grad = _C._wrap(piece.copy())
                else:
                    np.copyto(p.grad._data, piece)
            off += k


class DistributedDataParallel(Module):
    """Data parallelism over processes: each rank runs ``module`` on its shard of the batch
    and backward averages the gradients over the ranks (Note [DDP buckets and hooks]).

    Call it as the module; ``.module`` is the wrapped module and ``state_dict()`` keys carry
    the ``module.`` prefix, as torch's. ``device_ids``/``output_device`` must be None (CPU);
    ``dim``, ``check_reduction``, ``gradient_as_bucket_view`` and ``static_graph`` are
    accepted and change nothing (the gradients are copied out of the buckets; the buckets
    are never rebuilt). ``comm_wait_seconds``: what the last backward waited at its end for
    its reductions, the communication backward did not hide.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, init_sync=True, process_group=None,
                 bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if device_ids not in (None, []) or output_device is not None:
            raise ValueError("DistributedDataParallel: device_ids and output_device must be "
                             "None for a CPU module")
        if not any(True for _ in module.parameters()) or not any(
                p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        group = _c10d._group(process_group)
        object.__setattr__(self, "process_group", group)
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_backward_grad_sync = True
        self.static_graph = bool(static_graph)
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        self._world = group.size()
        params, seen = [], set()
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        object.__setattr__(self, "_params", params)
        sparse_ids = {id(m.weight) for m in module.modules()
                      if isinstance(m, (Embedding, EmbeddingBag)) and m.sparse}
        if init_sync and self._world > 1:
            _broadcast_coalesced([p._data for p in module.parameters()]
                                 + [b._data for b in module.buffers()], 0, group)
        object.__setattr__(self, "_buckets", self._make_buckets(params, sparse_ids))
        self._bucket_of = {}
        for b in self._buckets:
            for i, _ in b.params:
                self._bucket_of[i] = b
        self._prepared = False
        self._started = False             # a hook of this backward has run
        self._next_bucket = 0
        self._unused = set()
        self._used_work = None
        self._used_map = None
        # what the last backward waited at its end for the reductions (not hidden by it)
        self.comm_wait_seconds = 0.0
        object.__setattr__(self, "_progress_thread", _progress_thread(group))
        if self._progress_thread is not None:
            weakref.finalize(self, self._progress_thread.close)
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(i))
                       for i, p in enumerate(params)]

    def _make_buckets(self, params, sparse_ids):
        order = list(reversed(range(len(params))))
        groups = _assign_buckets([params[i]._data.nbytes for i in order],
                                 [params[i]._data.dtype.str for i in order],
                                 [id(params[i]) in sparse_ids for i in order],
                                 [min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap),
                                  self.bucket_bytes_cap])
        return [_Bucket(k, [(order[j], params[order[j]]) for j in g], id(params[order[g[0]]])
                        in sparse_ids) for k, g in enumerate(groups)]

    # -- the reducer -------------------------------------------------------------------
    def _hook(self, i):
        def hook(param):
            if self._prepared:
                self._started = True
                self._mark_ready(i)
        return hook

    def _mark_ready(self, i):
        b = self._bucket_of[i]
        b.pending -= 1
        if b.pending < 0:
            raise RuntimeError(
                "Expected to mark a variable ready only once. This error is caused by a "
                "parameter receiving its gradient twice in one backward (a module reused, or "
                "a second backward without a forward) while DistributedDataParallel reduces "
                "gradients.")
        self._progress()
        while self._next_bucket < len(self._buckets) and \
                self._buckets[self._next_bucket].pending == 0:
            self._buckets[self._next_bucket].launch(self.process_group, self._unused)
            self._next_bucket += 1
            if self._progress_thread is not None:
                self._progress_thread.start()
        if self._next_bucket == len(self._buckets):
            self._finalize()

    def _progress(self):
        reqs = [r for b in self._buckets[:self._next_bucket] if b.work is not None
                for r in b.work._requests]
        if reqs:
            from mpi4py import MPI
            MPI.Request.Testall(reqs)

    def _finalize(self):
        t0 = time.perf_counter()
        for b in self._buckets:
            b.work.wait()
        if self._used_work is not None:
            self._used_work.wait()
        self.comm_wait_seconds = time.perf_counter() - t0
        if self._progress_thread is not None:
            self._progress_thread.pause()
        global_unused = set()
        if self._used_work is not None:
            global_unused = {i for i, c in enumerate(self._used_map) if c == 0}
        for b in self._buckets:
            b.finish(self._world, global_unused)
        for b in self._buckets:
            b.reset()
        self._prepared = False
        self._started = False
        self._next_bucket = 0
        self._unused = set()
        self._used_work = None

    def _abandon(self):
        """A forward whose backward never ran: finish what it started (every rank does the
        same) and forget it."""
        for b in self._buckets[:self._next_bucket]:
            b.work.wait()
        if self._used_work is not None:
            self._used_work.wait()
        for b in self._buckets:
            b.reset()
        self._prepared = False
        self._next_bucket = 0
        self._unused = set()
        self._used_work = None

    def _prepare_for_backward(self, output):
        self._prepared = True
        self._started = False
        self._next_bucket = 0
        if not self.find_unused_parameters:
            return
        used = _reached_leaves(output)
        unused = {i for i, p in enumerate(self._params) if id(p) not in used}
        self._used_map = np.array([0 if i in unused else 1 for i in range(len(self._params))],
                                  np.int64)
        from mpi4py import MPI
        self._used_work = _c10d.Work([self.process_group._comm.Iallreduce(
            MPI.IN_PLACE, self._used_map, op=MPI.SUM)])
        self._unused = unused
        for i in sorted(unused):
            self._mark_ready(i)

    # -- the module --------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self._prepared:
            if self._started:
                raise RuntimeError(_NOT_FINISHED)
            self._abandon()
        if self.broadcast_buffers and self._world > 1:
            bufs = [b._data for b in self.module.buffers()]
            if bufs:
                _broadcast_coalesced(bufs, 0, self.process_group)
        out = self.module(*inputs, **kwargs)
        if _C.is_grad_enabled() and self.require_backward_grad_sync:
            self._prepare_for_backward(out)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Inside: no gradient communication; gradients accumulate locally and the first
        backward after the block all-reduces them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def bucket_sizes(self):
        """The parameters (their indices in ``module.parameters()`` order) of each bucket,
        in the order the buckets are reduced."""
        return [[i for i, _ in b.params] for b in self._buckets]


def _assign_buckets(nbytes, dtypes, sparse, limits):
    """torch's ``_compute_bucket_assignment_by_size``: the tensors (positions in the given
    order) cut into buckets of one dtype, each closed when it reaches its limit (the first
    bucket of a dtype limits[0], later ones the next limits, the last repeating); a sparse
    tensor alone; buckets ordered by their first tensor."""
    out, open_, limit_of = [], {}, {}
    for i, (n, dt, sp) in enumerate(zip(nbytes, dtypes, sparse)):
        if sp:
            out.append([i])
            continue
        b = open_.setdefault(dt, [[], 0])
        b[0].append(i)
        b[1] += n
        k = limit_of.setdefault(dt, 0)
        if b[1] >= limits[k]:
            out.append(b[0])
            del open_[dt]
            limit_of[dt] = min(k + 1, len(limits) - 1)
    out.extend(b[0] for b in open_.values() if b[0])
    out.sort(key=min)
    return out


def _reached_leaves(output):
    """ids of the leaves the graph of output's tensors reaches (AccumulateGrad.variable)."""
    roots, stack = [], [output]
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            if o.grad_fn is not None:
                roots.append(o.grad_fn)
            elif o.requires_grad:
                roots.append(("leaf", o))
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    used, seen = set(), set()
    while roots:
        fn = roots.pop()
        if isinstance(fn, tuple):
            used.add(id(fn[1]))
            continue
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        var = getattr(fn, "variable", None)
        if var is not None:
            used.add(id(var))
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                roots.append(nxt)
    return used
