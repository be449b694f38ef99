"""MPI worker: with init_process_group(timeout=1 s), rank 0's all_reduce raises when rank 1
is 5 s late, and the uncaught error aborts the job (rank 1 never gets to finish)."""
import datetime
import time

import cgrad
import cgrad.distributed as dist

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=1))
if dist.get_rank() == 1:
    time.sleep(5)
x = cgrad.ones(3)
dist.all_reduce(x)
print(f"rank {dist.get_rank()} finished the all_reduce", flush=True)
