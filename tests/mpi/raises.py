"""MPI worker: rank 1 raises while rank 0 waits in a barrier; the excepthook installed by
init_process_group must abort the job (non-zero exit) instead of leaving rank 0 hanging."""
import cgrad.distributed as dist

dist.init_process_group("mpi")
if dist.get_rank() == 1:
    raise ValueError("rank 1 fails on purpose")
dist.barrier()
print("rank 0 passed the barrier: the job did not abort", flush=True)
