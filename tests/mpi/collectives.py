"""MPI worker (run by tests/test_distributed_mpi.py under mpirun): every collective of
cgrad.distributed against NumPy on the values of every rank (each rank can compute every
rank's input, so each checks its own result)."""
import numpy as np

import cgrad
import cgrad.distributed as dist

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"


def value(k, dtype=np.float64):
    return (np.arange(6, dtype=np.float64).reshape(2, 3) * (k + 1) + k - 1.5).astype(dtype)


def t(a):
    return cgrad.tensor(a)


def check(got, want):
    got = got.numpy() if isinstance(got, cgrad.Tensor) else got
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


alls = [value(k) for k in range(n)]
for op, red in [(dist.ReduceOp.SUM, lambda xs: np.sum(xs, 0)),
                (dist.ReduceOp.PRODUCT, lambda xs: np.prod(xs, 0)),
                (dist.ReduceOp.MIN, lambda xs: np.min(xs, 0)),
                (dist.ReduceOp.MAX, lambda xs: np.max(xs, 0)),
                (dist.ReduceOp.AVG, lambda xs: np.sum(xs, 0) / n)]:
    x = t(value(r))
    assert dist.all_reduce(x, op=op) is None
    check(x, red(np.stack(alls)))
    # non-contiguous tensor: a transposed view, reduced in place in its base
    base = t(value(r).T.copy())
    view = base.t()
    dist.all_reduce(view, op=op)
    check(base, red(np.stack(alls)).T)
    # async
    y = t(value(r))
    w = dist.all_reduce(y, op=op, async_op=True)
    assert w.wait() is True and w.is_completed()
    check(y, red(np.stack(alls)))
    # reduce to the last rank
    z = t(value(r))
    dist.reduce(z, dst=n - 1, op=op)
    check(z, red(np.stack(alls)) if r == n - 1 else value(r))

# integers: AVG rounds toward zero as torch
xi = t(value(r, np.int64))
dist.all_reduce(xi, op=dist.ReduceOp.AVG)
check(xi, np.trunc(np.sum([value(k, np.int64) for k in range(n)], 0) / n).astype(np.int64))
xi = t(value(r, np.int32))
dist.all_reduce(xi)
check(xi, np.sum([value(k, np.int32) for k in range(n)], 0).astype(np.int32))
xf = t(value(r, np.float32))
dist.all_reduce(xf, op=dist.ReduceOp.MAX)
check(xf, np.max([value(k, np.float32) for k in range(n)], 0))

# broadcast from the last rank, in place, and into a non-contiguous view
b = t(value(r))
dist.broadcast(b, src=n - 1)
check(b, value(n - 1))
base = t(np.zeros((3, 2)))
dist.broadcast(base.t(), src=0) if r != 0 else dist.broadcast(t(value(0).T.copy()).t(), src=0)
if r != 0:
    check(base, value(0).T)

# all_gather, all_gather_into_tensor
outs = [t(np.zeros((2, 3))) for _ in range(n)]
dist.all_gather(outs, t(value(r)))
for k in range(n):
    check(outs[k], value(k))
big = t(np.zeros((2 * n, 3)))
dist.all_gather_into_tensor(big, t(value(r)))
check(big, np.concatenate(alls))
stacked = t(np.zeros((n, 2, 3)))
w = dist.all_gather_into_tensor(stacked, t(value(r)), async_op=True)
w.wait()
check(stacked, np.stack(alls))

# reduce_scatter, reduce_scatter_tensor: rank r's output is the sum over ranks k of their
# r-th piece, piece j of rank k being value(k) * (j + 1)
out = t(np.zeros((2, 3)))
dist.reduce_scatter(out, [t(value(r) * (j + 1)) for j in range(n)])
check(out, np.sum([value(k) * (r + 1) for k in range(n)], 0))
out = t(np.zeros((2, 3)))
dist.reduce_scatter_tensor(out, t(np.concatenate([value(r) * (j + 1) for j in range(n)])),
                           op=dist.ReduceOp.MAX)
check(out, np.max([value(k) * (r + 1) for k in range(n)], 0))

# gather to rank 1 % n, scatter from rank 0
dst = 1 % n
gl = [t(np.zeros((2, 3))) for _ in range(n)] if r == dst else None
dist.gather(t(value(r)), gl, dst=dst)
if r == dst:
    for k in range(n):
        check(gl[k], value(k))
sc = t(np.zeros((2, 3)))
dist.scatter(sc, [t(value(k) * 10) for k in range(n)] if r == 0 else None, src=0)
check(sc, value(r) * 10)

# all_to_all: rank r receives value(k) + r from each rank k
outs = [t(np.zeros((2, 3))) for _ in range(n)]
dist.all_to_all(outs, [t(value(r) + j) for j in range(n)])
for k in range(n):
    check(outs[k], value(k) + r)

# send / recv around a ring, isend / irecv
right, left = (r + 1) % n, (r - 1) % n
got = t(np.zeros((2, 3)))
if r % 2 == 0:
    dist.send(t(value(r)), dst=right)
    assert dist.recv(got, src=left) == left
else:
    assert dist.recv(got, src=left) == left
    dist.send(t(value(r)), dst=right)
check(got, value(left))
got = t(np.zeros((2, 3)))
ws = [dist.isend(t(value(r) * 2), dst=right), dist.irecv(got, src=left)]
for w in ws:
    w.wait()
check(got, value(left) * 2)

# objects
objs = [None] * n
dist.all_gather_object(objs, {"rank": r, "s": "x" * r})
assert objs == [{"rank": k, "s": "x" * k} for k in range(n)], objs
lst = [r, "a"] if r == 0 else [None, None]
dist.broadcast_object_list(lst, src=0)
assert lst == [0, "a"], lst

# a subgroup of the even ranks
evens = list(range(0, n, 2))
g = dist.new_group(evens)
if r in evens:
    x = t(value(r))
    dist.all_reduce(x, group=g)
    check(x, np.sum([value(k) for k in evens], 0))
    assert dist.get_world_size(g) == len(evens) and dist.get_rank(g) == evens.index(r)
else:
    assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1

# peers: neither a global nor a group rank, or both, is an error (torch's messages)
for bad in ({}, {"src": 0, "group_src": 0}):
    try:
        dist.broadcast(t(value(r)), **bad)
    except ValueError as e:
        assert str(e) in ("Must specify global_rank or group_rank",
                          "Can't specify both group_rank and global_rank"), e
    else:
        raise AssertionError(f"no error for {bad}")

dist.barrier()
w = dist.barrier(async_op=True)
w.wait()
dist.destroy_process_group()
assert not dist.is_initialized()
print(f"OK collectives rank {r} of {n}", flush=True)
