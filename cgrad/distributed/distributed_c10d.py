"""torch.distributed's process groups and collectives, on MPI through mpi4py.

Note [Collectives on MPI]
~~~~~~~~~~~~~~~~~~~~~~~~~
One backend, ``"mpi"``: rank and world size come from ``MPI.COMM_WORLD`` (the job started by
``mpirun``); a group is an MPI communicator. A collective works in place on the tensor's
NumPy array (``Tensor._data``), as torch's do on the tensor's storage: a C-contiguous array
is handed to MPI as it is (``MPI.IN_PLACE`` where MPI has it); any other array (a transposed
or sliced view) is copied into a contiguous buffer and the result copied back when the
operation completes. Autograd is not involved (torch's collectives are not differentiable
either) and the version counter is not bumped.

``async_op=True`` starts MPI's non-blocking form (``Iallreduce``, ``Ibcast``, ...) and
returns a :class:`Work`; ``wait()`` completes it (and does the copy back or the division of
``ReduceOp.AVG``, which MPI has not: AVG is SUM, then a division by the group's size; integer
tensors are divided as torch does, rounding toward zero). Without ``async_op`` the same
request is waited on at once. MPI runs every collective of a communicator in the order the
ranks call them, so every rank must call the same collectives in the same order, as with
torch.

A rank that raises while the others wait in a collective would leave the job hanging:
:func:`init_process_group` installs a ``sys.excepthook`` that prints the traceback and calls
``MPI.COMM_WORLD.Abort(1)``, so ``mpirun`` ends every rank and exits non-zero. A rank that
hangs or never calls the collective is caught only with ``init_process_group(timeout=)``:
every wait then polls (``Testall``, backing off from 10 us to 1 ms) and raises RuntimeError
past the timeout, which the excepthook turns into an abort. Code that catches exceptions
itself must call ``MPI.COMM_WORLD.Abort`` when it gives up, or the other ranks wait.
"""
from __future__ import annotations

import datetime
import enum
import pickle
import sys
import time

import numpy as np

from cgrad.tensor import Tensor

__all__ = ["Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
           "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
           "barrier", "broadcast", "broadcast_object_list", "destroy_process_group", "gather",
           "get_backend", "get_rank", "get_world_size", "init_process_group", "irecv",
           "is_available", "is_initialized", "is_mpi_available", "isend", "new_group",
           "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send"]

_INSTALL = ("cgrad.distributed needs MPI through mpi4py: install Open MPI from the OS packages "
            "(Debian/Ubuntu: `apt-get install openmpi-bin libopenmpi-dev`) and then mpi4py "
            "(`pip install mpi4py`, or `pip install \"cgrad[distributed]\"`), and start the "
            "processes with `mpirun -n N python script.py`")


def _mpi():
    """mpi4py's MPI module, or an ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"{_INSTALL} ({e})") from e
    return MPI


def is_available() -> bool:
    """True: the package and its API are always there (the MPI backend may not be: see
    :func:`is_mpi_available`)."""
    return True


def is_mpi_available() -> bool:
    """Whether mpi4py (and so the ``"mpi"`` backend) is installed. Only the package is
    imported: ``mpi4py.MPI``, which starts MPI, is left for :func:`init_process_group`."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


class ReduceOp:
    """Reduction operators of :func:`all_reduce`, :func:`reduce` and :func:`reduce_scatter`,
    with torch's names and values (``ReduceOp.SUM``, ``ReduceOp.AVG``, ...)."""

    class RedOpType(enum.IntEnum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM


class Backend(str):
    """A backend name; only ``Backend.MPI`` (``"mpi"``) exists here."""

    MPI = "mpi"

    def __new__(cls, name):
        value = str(name).lower()
        if value != "mpi":
            raise ValueError(f"Invalid backend: '{name}'; cgrad.distributed has only the "
                             f"'mpi' backend")
        return super().__new__(cls, value)


class ProcessGroup:
    """A set of ranks running collectives together: an MPI communicator."""

    def __init__(self, comm, ranks):
        self._comm = comm
        self._ranks = list(ranks)        # global ranks, in group-rank order

    def rank(self) -> int:
        return self._comm.Get_rank()

    def size(self) -> int:
        return self._comm.Get_size()

    def __repr__(self):
        return f"ProcessGroup(backend='mpi', ranks={self._ranks})"


class GroupMember:
    """``GroupMember.WORLD``: the default group once initialised; ``NON_GROUP_MEMBER``: what
    :func:`new_group` returns on a rank outside the group."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


_state = {"timeout": None, "hook": None}


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has run (and :func:`destroy_process_group` not)."""
    return GroupMember.WORLD is not None


def _abort_excepthook(exc_type, exc, tb):
    """Print the exception, then end the whole MPI job (Note [Collectives on MPI])."""
    sys.__excepthook__(exc_type, exc, tb)
    try:
        sys.stderr.flush()
        sys.stdout.flush()
    finally:
        _mpi().COMM_WORLD.Abort(1)


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group: every process of the ``mpirun`` job.

    ``backend`` is ``"mpi"`` (or None). ``world_size`` and ``rank``, when given, must agree
    with MPI's. MPI itself has no timeout on collectives; with ``timeout`` (a
    ``datetime.timedelta``) every wait on a collective or point-to-point operation (also
    with ``async_op=False``) polls, and raises RuntimeError once the timeout has passed
    (uncaught, that aborts the job). Installs a ``sys.excepthook`` that aborts the job when
    an exception reaches the top level of a rank, so that the other
    ranks do not wait for ever (Note [Collectives on MPI]).
    """
    if backend is not None:
        Backend(backend)
    if init_method not in (None, "env://", "mpi://"):
        raise ValueError(f"init_method {init_method!r} is not supported: the 'mpi' backend "
                         f"takes ranks from the mpirun job")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{type(timeout).__name__}")
    if is_initialized():
        raise ValueError("trying to initialize the default process group twice!")
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != comm.Get_size():
        raise ValueError(f"world_size={world_size} but the MPI job has {comm.Get_size()} "
                         f"processes")
    if rank not in (-1, None) and rank != comm.Get_rank():
        raise ValueError(f"rank={rank} but this MPI process has rank {comm.Get_rank()}")
    GroupMember.WORLD = ProcessGroup(comm, range(comm.Get_size()))
    _state["timeout"] = timeout
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _abort_excepthook
        _state["hook"] = _abort_excepthook


def _group(group):
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure "
                         "to call init_process_group.")
    if group is None:
        return GroupMember.WORLD
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified: this rank is not a member")
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {type(group).__name__}")
    return group


def destroy_process_group(group=None):
    """Leave the default group (group=None) or free a group made by :func:`new_group`."""
    if group is None:
        if not is_initialized():
            raise ValueError("Default process group has not been initialized, please make "
                             "sure to call init_process_group.")
        GroupMember.WORLD = None
        if sys.excepthook is _state["hook"]:
            sys.excepthook = sys.__excepthook__
        _state["hook"] = None
        return
    g = _group(group)
    if g is not GroupMember.WORLD:
        g._comm.Free()


def get_rank(group=None) -> int:
    """This process's rank in group (default: the world); -1 outside the group."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).rank()


def get_world_size(group=None) -> int:
    """The number of processes in group (default: the world)."""
    return _group(group).size()


def get_backend(group=None) -> str:
    """``"mpi"``."""
    _group(group)
    return Backend.MPI


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None,
              sort_ranks=True):
    """A group of the given global ranks (default: all). Every rank of the world must call
    it (a communicator is made collectively); a rank outside ``ranks`` gets
    ``GroupMember.NON_GROUP_MEMBER``."""
    world = _group(None)
    if backend is not None:
        Backend(backend)
    n = world.size()
    ranks = list(range(n)) if ranks is None else [int(r) for r in ranks]
    if sort_ranks:
        ranks = sorted(ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < n for r in ranks):
        raise ValueError(f"new_group: ranks {ranks} are not distinct ranks of a world of "
                         f"size {n}")
    me = world.rank()
    MPI = _mpi()
    color = 0 if me in ranks else MPI.UNDEFINED
    key = ranks.index(me) if me in ranks else 0
    comm = world._comm.Split(color, key)
    if comm == MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(comm, ranks)


def _to_group_rank(g, rank, group_rank, what, default=None):
    """The group rank of a peer given as a global rank or a group rank (torch's rules: not
    both; neither is an error unless the operation has a default, rank 0)."""
    if group_rank is not None:
        if rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        group_rank = int(group_rank)
        if not 0 <= group_rank < g.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {g}")
        return group_rank
    if rank is None:
        if default is None:
            raise ValueError("Must specify global_rank or group_rank")
        rank = default
    rank = int(rank)
    if rank not in g._ranks:
        raise ValueError(f"Global rank {rank} is not part of group {g}")
    return g._ranks.index(rank)


# ---------------------------------------------------------------------------------------------
# buffers and work handles


def _check_tensor(t, name="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"cgrad.Tensor but got {type(t)} instead.")
    if t.is_sparse:
        raise RuntimeError(f"cgrad.distributed: {name} must be a dense (strided) tensor")
    return t


def _buf(t):
    """(contiguous array to hand MPI, the tensor's array to copy back into or None)."""
    a = t._data
    if a.flags.c_contiguous:
        return a, None
    return np.ascontiguousarray(a), a


_MPI_OPS = {}


def _mpi_op(op):
    MPI = _mpi()
    if not _MPI_OPS:
        _MPI_OPS.update({ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM,
                         ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
                         ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
                         ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR})
    try:
        return _MPI_OPS[ReduceOp.RedOpType(op)]
    except (ValueError, KeyError):
        raise ValueError(f"cgrad.distributed: reduce op {op!r} is not supported by the "
                         f"'mpi' backend") from None


def _divide(a, n):
    """a /= n in place as torch's AVG: integers round toward zero."""
    if a.dtype.kind in "iu":
        np.copyto(a, np.trunc(a / n).astype(a.dtype))
    elif a.dtype.kind == "b":
        raise RuntimeError("cgrad.distributed: ReduceOp.AVG on a bool tensor")
    else:
        np.divide(a, a.dtype.type(n), out=a)


class Work:
    """The handle of a collective started with ``async_op=True``: ``wait()`` blocks until it
    is done (and finishes it: copies back, divides for AVG); ``is_completed()`` asks
    without blocking."""

    def __init__(self, requests, finish=None, result=None):
        self._requests = list(requests)
        self._finish = finish
        self._done = False
        self._result = result

    def _complete(self):
        if not self._done:
            self._done = True
            if self._finish is not None:
                self._finish()

    def wait(self, timeout=None) -> bool:
        """Block until the operation is complete; returns True. With a timeout (a
        ``timedelta``; default: the ``timeout`` given to :func:`init_process_group`, else
        none) raise RuntimeError when it has not completed in time."""
        if not self._done:
            if timeout is None:
                timeout = _state["timeout"]
            if timeout is None:
                _mpi().Request.Waitall(self._requests)
            else:
                self._wait_until(time.monotonic() + timeout.total_seconds(), timeout)
            self._complete()
        return True

    def _wait_until(self, deadline, timeout):
        Testall = _mpi().Request.Testall
        pause = 1e-5
        while not Testall(self._requests):
            if time.monotonic() > deadline:
                raise RuntimeError(f"cgrad.distributed: a collective did not complete within "
                                   f"the timeout ({timeout}); another rank may have failed "
                                   f"or not called it")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def is_completed(self) -> bool:
        """Whether the operation has completed (testing MPI without blocking)."""
        if not self._done and _mpi().Request.Testall(self._requests):
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self):
        """The output tensors of the operation, once waited on."""
        self.wait()
        return self._result

    def get_future(self):
        raise RuntimeError("cgrad.distributed: Work.get_future is not supported on the 'mpi' "
                           "backend")


def _run(requests, finish, async_op, result=None):
    w = Work(requests, finish, result)
    if async_op:
        return w
    w.wait()
    return None


def _finisher(*steps):
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def finish():
        for s in steps:
            s()
    return finish


def _copy_back(buf, dest):
    if dest is None:
        return None
    return lambda: np.copyto(dest, buf)


# ---------------------------------------------------------------------------------------------
# collectives


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group, in place on every rank."""
    _check_tensor(tensor)
    g = _group(group)
    mop = _mpi_op(op)
    MPI = _mpi()
    buf, dest = _buf(tensor)
    req = g._comm.Iallreduce(MPI.IN_PLACE, buf, op=mop)
    avg = (lambda: _divide(buf, g.size())) if op == ReduceOp.AVG else None
    return _run([req], _finisher(avg, _copy_back(buf, dest)), async_op, [tensor])


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``tensor`` of rank ``src`` into ``tensor`` on every other rank."""
    _check_tensor(tensor)
    g = _group(group)
    root = _to_group_rank(g, src, group_src, "src")
    buf, dest = _buf(tensor)
    req = g._comm.Ibcast(buf, root=root)
    return _run([req], _copy_back(buf, dest), async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` across the group into ``tensor`` of rank ``dst`` (the others keep
    theirs)."""
    _check_tensor(tensor)
    g = _group(group)
    root = _to_group_rank(g, dst, group_dst, "dst")
    mop = _mpi_op(op)
    MPI = _mpi()
    buf, dest = _buf(tensor)
    if g.rank() == root:
        req = g._comm.Ireduce(MPI.IN_PLACE, buf, op=mop, root=root)
        avg = (lambda: _divide(buf, g.size())) if op == ReduceOp.AVG else None
        finish = _finisher(avg, _copy_back(buf, dest))
    else:
        req = g._comm.Ireduce(buf, None, op=mop, root=root)
        finish = None
    return _run([req], finish, async_op, [tensor])


def _same_spec(ts, ref, what):
    for t in ts:
        _check_tensor(t, what)
        if t._data.dtype != ref._data.dtype:
            raise TypeError(f"{what}: tensors must all have dtype {ref.dtype}, got {t.dtype}")
        if t._data.size != ref._data.size:
            raise ValueError(f"{what}: tensors must have {ref._data.size} elements, got "
                             f"{t._data.size}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[i]`` gets rank i's ``tensor`` on every rank."""
    _check_tensor(tensor)
    g = _group(group)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != g.size():
        raise ValueError(f"all_gather: tensor_list must be a list of {g.size()} tensors")
    _same_spec(tensor_list, tensor, "tensor_list")
    send = np.ascontiguousarray(tensor._data)
    recv = np.empty((g.size(),) + send.shape, send.dtype)
    req = g._comm.Iallgather(send, recv)

    def finish():
        for t, part in zip(tensor_list, recv):
            np.copyto(t._data, part.reshape(t._data.shape))
    return _run([req], finish, async_op, list(tensor_list))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world size x input elements, stacked or concatenated along dim 0)
    gets every rank's ``input_tensor`` in rank order."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    g = _group(group)
    if output_tensor._data.size != input_tensor._data.size * g.size():
        raise ValueError(f"all_gather_into_tensor: output tensor size must be equal to "
                         f"world_size times input tensor size ({g.size()} x "
                         f"{input_tensor._data.size})")
    if output_tensor._data.dtype != input_tensor._data.dtype:
        raise TypeError("all_gather_into_tensor: input and output must have the same dtype")
    send = np.ascontiguousarray(input_tensor._data)
    buf, dest = _buf(output_tensor)
    req = g._comm.Iallgather(send, buf)
    return _run([req], _copy_back(buf, dest), async_op, [output_tensor])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank i gets the reduction over ranks of their ``input_list[i]``."""
    _check_tensor(output, "output")
    g = _group(group)
    if not isinstance(input_list, (list, tuple)) or len(input_list) != g.size():
        raise ValueError(f"reduce_scatter: input_list must be a list of {g.size()} tensors")
    _same_spec(input_list, output, "input_list")
    send = np.concatenate([np.ascontiguousarray(t._data).reshape(-1) for t in input_list])
    return _reduce_scatter(output, send, op, g, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank i's ``output`` gets the reduction over ranks of the i-th chunk of ``input``."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    g = _group(group)
    if input._data.size != output._data.size * g.size():
        raise ValueError("reduce_scatter_tensor: input tensor must be world_size times the "
                         "size of the output tensor")
    return _reduce_scatter(output, np.ascontiguousarray(input._data).reshape(-1), op, g,
                           async_op)


def _reduce_scatter(output, send, op, g, async_op):
    mop = _mpi_op(op)
    buf, dest = _buf(output)
    req = g._comm.Ireduce_scatter_block(send, buf, op=mop)
    avg = (lambda: _divide(buf, g.size())) if op == ReduceOp.AVG else None
    return _run([req], _finisher(avg, _copy_back(buf, dest)), async_op, [output])


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``gather_list[i]`` gets rank i's ``tensor``; the other ranks pass no
    list."""
    _check_tensor(tensor)
    g = _group(group)
    root = _to_group_rank(g, dst, group_dst, "dst", default=0)
    send = np.ascontiguousarray(tensor._data)
    if g.rank() == root:
        if not isinstance(gather_list, (list, tuple)) or len(gather_list) != g.size():
            raise ValueError(f"gather: the destination rank needs gather_list, a list of "
                             f"{g.size()} tensors")
        _same_spec(gather_list, tensor, "gather_list")
        recv = np.empty((g.size(),) + send.shape, send.dtype)
        req = g._comm.Igather(send, recv, root=root)

        def finish():
            for t, part in zip(gather_list, recv):
                np.copyto(t._data, part.reshape(t._data.shape))
        return _run([req], finish, async_op, list(gather_list))
    if gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    req = g._comm.Igather(send, None, root=root)
    return _run([req], None, async_op, [])


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Rank i's ``tensor`` gets rank ``src``'s ``scatter_list[i]``."""
    _check_tensor(tensor)
    g = _group(group)
    root = _to_group_rank(g, src, group_src, "src", default=0)
    buf, dest = _buf(tensor)
    if g.rank() == root:
        if not isinstance(scatter_list, (list, tuple)) or len(scatter_list) != g.size():
            raise ValueError(f"scatter: the source rank needs scatter_list, a list of "
                             f"{g.size()} tensors")
        _same_spec(scatter_list, tensor, "scatter_list")
        send = np.stack([np.ascontiguousarray(t._data).reshape(-1) for t in scatter_list])
    else:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                             "ranks.")
        send = None
    req = g._comm.Iscatter(send, buf, root=root)
    return _run([req], _copy_back(buf, dest), async_op, [tensor])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank i's ``output_tensor_list[j]`` gets rank j's ``input_tensor_list[i]`` (all
    tensors of one shape)."""
    g = _group(group)
    n = g.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists must hold {n} tensors")
    ref = _check_tensor(input_tensor_list[0], "input_tensor_list")
    _same_spec(input_tensor_list, ref, "input_tensor_list")
    _same_spec(output_tensor_list, ref, "output_tensor_list")
    send = np.stack([np.ascontiguousarray(t._data).reshape(-1) for t in input_tensor_list])
    recv = np.empty_like(send)
    req = g._comm.Ialltoall(send, recv)

    def finish():
        for t, part in zip(output_tensor_list, recv):
            np.copyto(t._data, part.reshape(t._data.shape))
    return _run([req], finish, async_op, list(output_tensor_list))


def _peer(g, rank, group_rank, what):
    return _to_group_rank(g, rank, group_rank, what)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Start sending ``tensor`` to rank ``dst``; returns a :class:`Work`."""
    _check_tensor(tensor)
    g = _group(group)
    peer = _peer(g, dst, group_dst, "dst")
    buf = np.ascontiguousarray(tensor._data)
    return Work([g._comm.Isend(buf, dest=peer, tag=tag)], None, [tensor])


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Start receiving into ``tensor`` from rank ``src``; returns a :class:`Work`."""
    _check_tensor(tensor)
    g = _group(group)
    peer = _peer(g, src, group_src, "src")
    buf, dest = _buf(tensor)
    return Work([g._comm.Irecv(buf, source=peer, tag=tag)], _copy_back(buf, dest), [tensor])


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` (blocks until the buffer may be reused)."""
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src``; returns the sender's rank."""
    irecv(tensor, src, group, tag, group_src).wait()
    return int(src) if src is not None else _group(group)._ranks[int(group_src)]


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Wait until every rank of the group has reached the barrier."""
    g = _group(group)
    w = Work([g._comm.Ibarrier()])
    if async_op:
        return w
    w.wait(timeout)
    return None


def all_gather_object(object_list, obj, group=None):
    """``object_list[i]`` gets rank i's picklable ``obj`` on every rank."""
    g = _group(group)
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list must have {g.size()} entries")
    got = g._comm.allgather(pickle.dumps(obj))
    for i, b in enumerate(got):
        object_list[i] = pickle.loads(b)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replace the entries of ``object_list`` on every rank with rank ``src``'s (the lists
    must have the same length)."""
    g = _group(group)
    root = _to_group_rank(g, src, group_src, "src", default=0)
    got = g._comm.bcast(pickle.dumps(list(object_list)) if g.rank() == root else None,
                        root=root)
    objs = pickle.loads(got)
    if len(objs) != len(object_list):
        raise ValueError("broadcast_object_list: object_list must have the same length on "
                         "every rank")
    object_list[:] = objs
