"""cgrad.nn.parallel: ``DistributedDataParallel`` (data parallelism over the processes of an
MPI job; Note [DDP buckets and hooks] in cgrad/nn/parallel/distributed.py)."""
from cgrad.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
