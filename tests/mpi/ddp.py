"""MPI worker (run by tests/test_distributed_mpi.py under mpirun): DistributedDataParallel
against one process. Every rank also trains the reference (the whole batch, one process)
itself, so each checks its own parameters."""
import numpy as np

import cgrad
import cgrad.distributed as dist
import cgrad.nn as nn
from cgrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
SHARD = 6
rng = np.random.default_rng(1234)
X = rng.standard_normal((20, SHARD * n, 5))
Y = rng.standard_normal((20, SHARD * n, 3))
mine = slice(r * SHARD, (r + 1) * SHARD)


def mlp(seed):
    cgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3)).double()


def train(model, xs, ys, steps=20):
    opt = cgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        opt.zero_grad()
        loss = ((model(cgrad.tensor(xs[s])) - cgrad.tensor(ys[s])) ** 2).mean()
        loss.backward()
        opt.step()
    return model


def close(a, b, tol=1e-12):
    a = a.detach().numpy() if isinstance(a, cgrad.Tensor) else a
    b = b.detach().numpy() if isinstance(b, cgrad.Tensor) else b
    err = np.max(np.abs(a - b)) if a.size else 0.0
    assert err <= tol, err


# 1. 20 steps on equal shards == one process on the whole batch (float64, 1e-12); the
# ranks start from different weights (seed = rank): construction broadcasts rank 0's.
ref = train(mlp(0), X, Y)
for cap in (None, 0.0005):          # default buckets; about one parameter a bucket
    ddp = DDP(mlp(r), bucket_cap_mb=cap)
    # reverse order of registration, cut at bucket_cap_mb (torch's first bucket: 1 MiB)
    want = [[5, 4, 3, 2, 1, 0]] if cap is None else [[5, 4, 3], [2], [1, 0]]
    assert ddp.bucket_sizes() == want, ddp.bucket_sizes()
    train(ddp, X[:, mine], Y[:, mine])
    for p, q in zip(ddp.module.parameters(), ref.parameters()):
        close(p, q)
assert all(k.startswith("module.") for k in ddp.state_dict()), list(ddp.state_dict())
assert list(ddp.state_dict()) == ["module." + k for k in ddp.module.state_dict()]

# 2. no_sync: two micro-batches accumulated, one all-reduce at the second backward
ref = mlp(0)
for k in (0, 1):
    ((ref(cgrad.tensor(X[k])) - cgrad.tensor(Y[k])) ** 2).mean().backward()
ddp = DDP(mlp(0))
with ddp.no_sync():
    ((ddp(cgrad.tensor(X[0, mine])) - cgrad.tensor(Y[0, mine])) ** 2).mean().backward()
local = [p.grad.numpy().copy() for p in ddp.parameters()]
((ddp(cgrad.tensor(X[1, mine])) - cgrad.tensor(Y[1, mine])) ** 2).mean().backward()
for p, q in zip(ddp.module.parameters(), ref.parameters()):
    close(p.grad, q.grad)
# inside no_sync the gradients were the local ones (not averaged)
solo = mlp(0)
((solo(cgrad.tensor(X[0, mine])) - cgrad.tensor(Y[0, mine])) ** 2).mean().backward()
for g, q in zip(local, solo.parameters()):
    close(g, q.grad)


# 3. unused parameters
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        cgrad.manual_seed(0)
        self.a = nn.Linear(4, 2).double()
        self.never = nn.Linear(4, 2).double()     # used on no rank
        self.some = nn.Linear(4, 2).double()      # used on rank 0 only

    def forward(self, x, use_some):
        y = self.a(x)
        return y + self.some(x) if use_some else y


xb = cgrad.tensor(np.arange(12.0).reshape(3, 4) / 10 + r)
ddp = DDP(Branchy(), find_unused_parameters=True, bucket_cap_mb=1e-5)
for it in range(2):
    ddp.zero_grad(set_to_none=True)
    ddp(xb, r == 0).sum().backward()
    assert ddp.module.never.weight.grad is None and ddp.module.never.bias.grad is None
    # "some" gets rank 0's gradient divided by the world size on every rank
    want = np.tile((np.arange(12.0).reshape(3, 4) / 10).sum(0), (2, 1)) / n
    close(ddp.module.some.weight.grad, want)
    xs = [np.arange(12.0).reshape(3, 4) / 10 + k for k in range(n)]
    close(ddp.module.a.weight.grad, np.tile(np.mean([x.sum(0) for x in xs], 0), (2, 1)))
# without find_unused_parameters the next forward says the reduction did not finish
ddp = DDP(Branchy())
ddp(xb, False).sum().backward()
try:
    ddp(xb, False)
except RuntimeError as e:
    assert "Expected to have finished reduction in the prior iteration" in str(e), e
else:
    raise AssertionError("no error for an unfinished reduction")

# 4. broadcast_buffers: rank 0's BatchNorm statistics before every forward
bn = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
ddp = DDP(bn)
ddp.module[1].running_mean.fill_(float(r))
ddp.eval()
ddp(cgrad.randn(5, 3, dtype=cgrad.float64))
close(ddp.module[1].running_mean, np.zeros(4))
ddp.train()
ddp(cgrad.tensor(np.full((5, 3), float(r)))).sum().backward()


# 5. sparse gradients (Embedding(sparse=True)): all-gathered, averaged, kept sparse
class Emb(nn.Module):
    def __init__(self):
        super().__init__()
        cgrad.manual_seed(0)
        self.emb = nn.Embedding(10, 3, sparse=True).double()
        self.lin = nn.Linear(3, 1).double()

    def forward(self, i):
        return self.lin(self.emb(i)).sum()


idx = [np.array([k % 10, (3 * k + 1) % 10, 7]) for k in range(n)]
ddp = DDP(Emb())
ddp(cgrad.tensor(idx[r])).backward()
g = ddp.module.emb.weight.grad
assert g.is_sparse, g
ref = Emb()
ref.emb.sparse = False
sum(ref(cgrad.tensor(i)) for i in idx).backward()
close(g.to_dense(), ref.emb.weight.grad / n)
close(ddp.module.lin.weight.grad, ref.lin.weight.grad / n)

dist.destroy_process_group()
print(f"OK ddp rank {r} of {n}", flush=True)
